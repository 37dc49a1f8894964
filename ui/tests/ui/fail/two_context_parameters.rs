use portcullis::prelude::*;

/// Delete one record.
#[tool]
fn delete_record(ctx: &CallContext, record_id: u64, again: &CallContext) -> Result<u64, ToolError> {
    let _ = (ctx, again);
    Ok(record_id)
}

fn main() {}
