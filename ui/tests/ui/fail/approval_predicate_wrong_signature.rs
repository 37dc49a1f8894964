use portcullis::prelude::*;

/// Delete one record.
#[tool(approval = needs_approval)]
fn delete_record(record_id: u64) -> Result<u64, ToolError> {
    Ok(record_id)
}

/// Takes only the arguments, not the context.
fn needs_approval(args: &DeleteRecordArgs) -> bool {
    args.record_id > 100
}

fn main() {}
