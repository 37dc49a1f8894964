use portcullis::prelude::*;

/// Delete one record.
#[tool(name = "delete record")]
fn delete_record(record_id: u64) -> Result<u64, ToolError> {
    Ok(record_id)
}

fn main() {}
