use portcullis::prelude::*;

/// Wire money out.
#[tool(risk = "critical", irreversible = "wires settle at once", approval = "never")]
fn wire_money(amount_cents: u64) -> Result<u64, ToolError> {
    Ok(amount_cents)
}

fn main() {}
