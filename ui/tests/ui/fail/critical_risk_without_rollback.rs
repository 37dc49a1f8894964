use portcullis::prelude::*;

/// Move money between two accounts.
#[tool(risk = "critical", approval = "required")]
fn transfer_funds(amount_cents: u64) -> Result<u64, ToolError> {
    Ok(amount_cents)
}

fn main() {}
