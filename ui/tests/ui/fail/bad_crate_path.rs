use portcullis::prelude::*;

/// Greet someone.
#[tool(crate = "not a path")]
fn greet(name: String) -> Result<String, ToolError> {
    Ok(format!("hello {name}"))
}

fn main() {}
