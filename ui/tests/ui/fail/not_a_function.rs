use portcullis::prelude::*;

/// Delete one record.
#[tool]
struct DeleteRecord {
    record_id: u64,
}

fn main() {}
