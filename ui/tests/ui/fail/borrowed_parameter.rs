use portcullis::prelude::*;

/// Greet someone.
#[tool]
fn greet(name: &str) -> Result<String, ToolError> {
    Ok(format!("hello {name}"))
}

fn main() {}
