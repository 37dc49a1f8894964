use portcullis::prelude::*;

/// Move stock between two bins.
#[tool]
fn move_stock(amount: u32, #[serde(rename = "amount")] quantity: u32) -> Result<u32, ToolError> {
    Ok(amount + quantity)
}

fn main() {}
