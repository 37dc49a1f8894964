use portcullis::prelude::*;

struct Database;

impl Database {
    /// Delete one record.
    #[tool]
    fn delete_record(&self, record_id: u64) -> Result<u64, ToolError> {
        Ok(record_id)
    }
}

fn main() {}
