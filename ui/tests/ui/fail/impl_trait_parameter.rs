use portcullis::prelude::*;

/// Greet someone.
#[tool]
fn greet(name: impl Into<String>) -> Result<String, ToolError> {
    Ok(format!("hello {}", name.into()))
}

fn main() {}
