use portcullis::prelude::*;

/// Flush the cache.
#[tool(environments = [])]
fn flush_cache() -> Result<bool, ToolError> {
    Ok(true)
}

fn main() {}
