use portcullis::prelude::*;

/// Send a newsletter to every subscriber.
#[tool(risk = "medium", caller_confirms, approval = "never")]
fn send_newsletter(subject: String) -> Result<String, ToolError> {
    Ok(subject)
}

fn main() {}
