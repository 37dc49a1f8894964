use portcullis::prelude::*;

/// Move a customer between tenants.
#[tool]
fn move_customer(#[tenant] from: String, #[tenant] to: String) -> Result<String, ToolError> {
    Ok(format!("{from} -> {to}"))
}

fn main() {}
