use portcullis::prelude::*;

/// Close the account.
#[tool]
fn close_account(#[from(user)] confirmed: bool) -> Result<bool, ToolError> {
    Ok(confirmed)
}

fn main() {}
