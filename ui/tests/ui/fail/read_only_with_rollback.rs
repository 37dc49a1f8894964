use portcullis::prelude::*;

/// Read one record.
#[tool(read_only, rollback = forget_read)]
fn read_record(record_id: u64) -> Result<u64, ToolError> {
    Ok(record_id)
}

async fn forget_read(_ctx: &CallContext, _args: &ReadRecordArgs, _output: &u64) -> Result<(), ToolError> {
    Ok(())
}

fn main() {}
