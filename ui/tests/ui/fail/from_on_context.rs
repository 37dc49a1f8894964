use portcullis::prelude::*;

/// Greet the caller.
#[tool]
fn greet(#[from(user)] ctx: &CallContext) -> Result<String, ToolError> {
    Ok(ctx.actor().to_owned())
}

fn main() {}
