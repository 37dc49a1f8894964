use portcullis::prelude::*;

/// Look an account up.
#[tool]
fn look_up(#[from(user, entities)] account: u64) -> Result<u64, ToolError> {
    Ok(account)
}

fn main() {}
