use portcullis::prelude::*;

/// Read the inbox.
#[tool(read_only, output = "maybe")]
fn read_inbox() -> Result<Vec<String>, ToolError> {
    Ok(Vec::new())
}

fn main() {}
