use portcullis::prelude::*;

/// A type of the user's that bears a standard type's name.
#[derive(Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct String {
    text: std::string::String,
}

/// Greet someone.
#[tool]
fn greet(name: String, nickname: Option<String>) -> Result<u64, ToolError> {
    let _ = (name, nickname);
    Ok(1)
}

fn main() {}
