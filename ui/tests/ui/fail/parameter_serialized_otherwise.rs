use portcullis::prelude::*;

/// Transfer money.
#[tool]
fn transfer(
    #[serde(skip_serializing)] amount_cents: u64,
    #[serde(rename(deserialize = "to", serialize = "recipient"))] to: String,
) -> Result<String, ToolError> {
    Ok(format!("{amount_cents} to {to}"))
}

fn main() {}
