use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
enum Plan {
    Basic,
    Pro,
}

/// Subscribe to a plan.
#[tool]
fn subscribe(plan: Plan) -> Result<String, ToolError> {
    let _ = plan;
    Ok("subscribed".to_owned())
}

fn main() {}
