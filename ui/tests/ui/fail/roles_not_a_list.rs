use portcullis::prelude::*;

/// Delete one record.
#[tool(roles = "admin")]
fn delete_record(record_id: u64) -> Result<u64, ToolError> {
    Ok(record_id)
}

fn main() {}
