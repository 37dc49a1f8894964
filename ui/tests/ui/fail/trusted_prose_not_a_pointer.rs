use portcullis::prelude::*;

/// Read the user's notes.
#[tool(read_only, trusted_prose = ["notes"])]
fn read_notes() -> Result<Vec<String>, ToolError> {
    Ok(Vec::new())
}

fn main() {}
