use portcullis::prelude::*;

/// Send money.
#[tool(on_untrusted = "ask")]
fn send_money(#[from(user)] recipient: String) -> Result<String, ToolError> {
    Ok(recipient)
}

fn main() {}
