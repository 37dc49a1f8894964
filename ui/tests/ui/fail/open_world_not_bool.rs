use portcullis::prelude::*;

/// List the tables.
#[tool(open_world = "no")]
fn list_tables() -> Result<Vec<String>, ToolError> {
    Ok(Vec::new())
}

fn main() {}
