use portcullis::prelude::*;

/// Add two numbers.
#[tool]
fn add((a, b): (u32, u32)) -> Result<u32, ToolError> {
    Ok(a + b)
}

fn main() {}
