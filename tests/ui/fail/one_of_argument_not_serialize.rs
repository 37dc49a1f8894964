use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
enum Plan {
    Basic,
    Pro,
}

fn offered_plans(_ctx: &CallContext) -> Vec<&'static str> {
    vec!["Basic"]
}

/// Subscribe to a plan.
#[tool]
fn subscribe(#[one_of(offered_plans)] plan: Plan) -> Result<String, ToolError> {
    let _ = plan;
    Ok("subscribed".to_owned())
}

fn main() {}
