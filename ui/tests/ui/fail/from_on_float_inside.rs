use portcullis::prelude::*;

/// Tip, maybe.
#[tool]
fn tip(#[from(user, trusted)] share: Option<f32>) -> Result<bool, ToolError> {
    Ok(share.is_some())
}

fn main() {}
