use portcullis::prelude::*;

/// Neither `Deserialize` nor `JsonSchema`.
struct RecordId(u64);

/// Delete one record.
#[tool]
fn delete_record(record_id: RecordId) -> Result<u64, ToolError> {
    Ok(record_id.0)
}

fn main() {}
