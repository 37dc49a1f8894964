use portcullis::prelude::*;

/// Only small ids may go.
fn small_ids_only(args: &DeleteRecordArgs) -> bool {
    args.record_id < 100
}

/// Delete one record.
#[tool(policy = small_ids_only)]
fn delete_record(record_id: u64) -> Result<u64, ToolError> {
    Ok(record_id)
}

fn main() {}
