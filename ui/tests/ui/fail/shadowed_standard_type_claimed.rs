use portcullis::prelude::*;

/// A type of the user's that bears a standard type's name, and claims to be it.
#[derive(Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct String {
    text: std::string::String,
}

impl portcullis::__private::StandardType<std::string::String> for String {}

/// Greet someone.
#[tool]
fn greet(name: String) -> Result<u64, ToolError> {
    let _ = name;
    Ok(1)
}

fn main() {}
