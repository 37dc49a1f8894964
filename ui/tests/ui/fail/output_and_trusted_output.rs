use portcullis::prelude::*;

/// Read the transactions.
#[tool(read_only, output = "trusted", trusted_output = ["/*/recipient"])]
fn read_transactions() -> Result<Vec<String>, ToolError> {
    Ok(Vec::new())
}

fn main() {}
