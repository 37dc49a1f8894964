use portcullis::prelude::*;

/// Greet the caller.
#[tool]
fn greet(#[sensitive] ctx: &CallContext) -> Result<String, ToolError> {
    Ok(format!("hello {}", ctx.actor()))
}

fn main() {}
