use portcullis::prelude::*;

/// The state of a record.
fn record_state(id: &u64) -> serde_json::Value {
    serde_json::json!({ "id": id })
}

/// Delete one record.
#[tool(snapshot = record_state)]
fn delete_record(record_id: u64) -> Result<u64, ToolError> {
    Ok(record_id)
}

fn main() {}
