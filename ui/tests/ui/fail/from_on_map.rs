use std::collections::HashMap;

use portcullis::prelude::*;

/// Pay several recipients.
#[tool]
fn pay_many(#[from(user)] amounts: HashMap<String, u64>) -> Result<usize, ToolError> {
    Ok(amounts.len())
}

fn main() {}
