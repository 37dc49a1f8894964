use portcullis::prelude::*;

/// Pay an amount.
#[tool]
fn pay(#[from(user)] amount: f64) -> Result<f64, ToolError> {
    Ok(amount)
}

fn main() {}
