use portcullis::prelude::*;

/// Send money.
#[tool]
fn send_money(
    #[from(user)]
    #[from(user, trusted)]
    recipient: String,
) -> Result<String, ToolError> {
    Ok(recipient)
}

fn main() {}
