use portcullis::prelude::*;

/// Greet the caller.
#[tool]
fn greet(ctx: &mut CallContext) -> Result<String, ToolError> {
    Ok(format!("hello {}", ctx.actor()))
}

fn main() {}
