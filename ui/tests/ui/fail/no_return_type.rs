use portcullis::prelude::*;

/// Delete one record.
#[tool]
fn delete_record(record_id: u64) {
    let _ = record_id;
}

fn main() {}
