use portcullis::prelude::*;

/// List the tables.
#[tool(idempotent = true)]
fn list_tables() -> Result<Vec<String>, ToolError> {
    Ok(Vec::new())
}

fn main() {}
