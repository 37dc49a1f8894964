use portcullis::prelude::*;

/// Change the password.
#[tool(after_untrusted = "warn")]
fn change_password() -> Result<(), ToolError> {
    Ok(())
}

fn main() {}
