use portcullis::prelude::*;

/// Delete one record.
#[tool(risk = "high", rollback = restore_record)]
fn delete_record(record_id: u64) -> Result<u64, ToolError> {
    Ok(record_id)
}

/// Takes the record id where the tool's arguments belong.
async fn restore_record(_ctx: &CallContext, _record_id: &u64, _output: &u64) -> Result<(), ToolError> {
    Ok(())
}

fn main() {}
