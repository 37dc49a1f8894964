use portcullis::prelude::*;

/// Reset a sandbox.
#[tool]
fn reset_sandbox(#[tenant] #[environment] sandbox: String) -> Result<String, ToolError> {
    Ok(sandbox)
}

fn main() {}
