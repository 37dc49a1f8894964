use portcullis::prelude::*;

/// Delete one record.
#[tool]
fn delete_record(#[serde(alias = "id")] record_id: u64) -> Result<u64, ToolError> {
    Ok(record_id)
}

fn main() {}
