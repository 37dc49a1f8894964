use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use validator::Validate;

/// Send money to a recipient the model names one way and the canonical arguments another.
#[tool]
fn send_money_renamed(
    #[from(user)]
    #[serde(rename(deserialize = "to"))]
    recipient: String,
) -> Result<String, ToolError> {
    Ok(recipient)
}

/// Send money.
#[tool]
fn send_money(#[from] recipient: String, #[from("user")] amount: u64, #[from(user, user)] note: String) -> Result<String, ToolError> {
    Ok(format!("{amount} to {recipient}: {note}"))
}

#[derive(Deserialize, Serialize, JsonSchema, Validate)]
struct Transfer {
    recipient: String,
}

/// Transfer money.
#[tool]
fn transfer(#[from(user)] #[args] transfer: Transfer) -> Result<String, ToolError> {
    Ok(transfer.recipient)
}

fn main() {}
