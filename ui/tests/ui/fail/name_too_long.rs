use portcullis::prelude::*;

/// Delete one record.
#[tool(name = "delete_one_record_from_the_table_that_the_caller_names_in_its_arguments")]
fn delete_record(record_id: u64) -> Result<u64, ToolError> {
    Ok(record_id)
}

fn main() {}
