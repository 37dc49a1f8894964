use portcullis::prelude::*;

/// Send money.
#[tool(on_untrusted = "approve")]
fn send_money(recipient: String, amount_cents: u64) -> Result<String, ToolError> {
    Ok(format!("{amount_cents} to {recipient}"))
}

fn main() {}
