use portcullis::prelude::*;

/// Read the transactions.
#[tool(read_only, trusted_output = ["/*/id", "recipient"])]
fn read_transactions() -> Result<Vec<String>, ToolError> {
    Ok(Vec::new())
}

fn main() {}
