use portcullis::prelude::*;

/// Delete one record.
#[tool(risk = "high", rollback = restore_record)]
fn delete_record(record_id: u64) -> Result<u64, ToolError> {
    Ok(record_id)
}

fn restore_record(
    _ctx: &CallContext,
    _args: &DeleteRecordArgs,
    _output: &u64,
) -> Result<(), ToolError> {
    Ok(())
}

fn main() {}
