use portcullis::prelude::*;

/// Show the audit trail.
#[tool(read_only, irreversible = "the trail is shown")]
fn show_audit_trail() -> Result<Vec<String>, ToolError> {
    Ok(Vec::new())
}

fn main() {}
