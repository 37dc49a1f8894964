use portcullis::prelude::*;

/// Greet the caller.
#[tool]
fn greet<'a>(ctx: &'a CallContext) -> Result<String, ToolError> {
    Ok(format!("hello {}", ctx.actor()))
}

fn main() {}
