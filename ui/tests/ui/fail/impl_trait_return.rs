use portcullis::prelude::*;

/// Count the records.
#[tool]
fn count_records() -> impl serde::Serialize {
    3
}

fn main() {}
