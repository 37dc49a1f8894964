use portcullis::prelude::*;

/// Delete one record.
#[tool]
fn delete_record(record_id: u64) -> u64 {
    record_id
}

fn main() {}
