use portcullis::prelude::*;

/// Pay a supplier.
#[tool(risk = "critical", irreversible = "payouts settle at once", approver = " ")]
fn pay_supplier(amount_cents: u64) -> Result<u64, ToolError> {
    Ok(amount_cents)
}

fn main() {}
