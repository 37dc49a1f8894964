use portcullis::prelude::*;

/// The doc comment does not rescue an empty `description`.
#[tool(description = "  ")]
fn delete_record(record_id: u64) -> Result<u64, ToolError> {
    Ok(record_id)
}

fn main() {}
