use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct TenantId(String);

/// Show a tenant's plan.
#[tool]
fn show_plan(#[tenant] tenant: TenantId) -> Result<String, ToolError> {
    Ok(tenant.0)
}

fn main() {}
