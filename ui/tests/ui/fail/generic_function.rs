use portcullis::prelude::*;

/// Echo a value back.
#[tool]
fn echo<T: serde::Serialize>(value: T) -> Result<T, ToolError> {
    Ok(value)
}

fn main() {}
