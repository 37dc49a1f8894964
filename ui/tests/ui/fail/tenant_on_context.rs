use portcullis::prelude::*;

/// Show the caller's tenant.
#[tool]
fn whoami(#[tenant] ctx: &CallContext) -> Result<String, ToolError> {
    Ok(ctx.tenant().unwrap_or_default().to_owned())
}

fn main() {}
