//! A type of the user's named like a standard one is a parameter when its path says whose it
//! is; its own constraints are checked as any other type's.
use portcullis::prelude::*;
use validator::Validate;

mod names {
    /// A name of at least two characters.
    #[derive(Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema, validator::Validate)]
    pub struct String {
        #[validate(length(min = 2))]
        pub text: std::string::String,
    }
}

/// Greet someone.
#[tool]
fn greet(name: names::String) -> Result<std::string::String, ToolError> {
    Ok(format!("hello {}", name.text))
}

fn main() {
    let short = names::String { text: "a".into() };
    assert!(short.validate().is_err());
    let _ = Greet;
}
