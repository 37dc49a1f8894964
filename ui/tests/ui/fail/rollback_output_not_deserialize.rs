use portcullis::prelude::*;
use serde::Serialize;

#[derive(Serialize)]
struct Removed {
    id: u64,
}

/// Remove one record.
#[tool(risk = "high", rollback = restore_record)]
fn remove_record(id: u64) -> Result<Removed, ToolError> {
    Ok(Removed { id })
}

async fn restore_record(_: &CallContext, _: &RemoveRecordArgs, _: &Removed) -> Result<(), ToolError> {
    Ok(())
}

fn main() {}
