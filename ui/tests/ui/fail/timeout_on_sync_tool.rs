use portcullis::prelude::*;

/// Build a report.
#[tool(timeout_ms = 5000)]
fn build_report(days: u32) -> Result<String, ToolError> {
    Ok(format!("{days} days"))
}

fn main() {}
