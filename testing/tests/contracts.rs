//! The kit against tools with a tenant, an environment and roles: who calls, and from where,
//! is attacked as well as what is sent.

use portcullis::prelude::*;
use portcullis_testing::red_team;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Environment {
    Development,
    Staging,
    Production,
}

/// Pay a supplier of the caller's tenant.
#[tool(
    risk = "high",
    role = "payments",
    irreversible = "payments settle at once"
)]
fn pay_supplier(
    #[tenant] tenant_id: String,
    #[validate(length(min = 2, max = 40))] supplier: String,
    #[validate(range(min = 1, max = 1_000_000))] amount_cents: u64,
    #[validate(length(max = 140))] memo: Option<String>,
) -> Result<String, ToolError> {
    let _ = memo;
    Ok(format!("{amount_cents} to {supplier} of {tenant_id}"))
}

/// Flush the cache of the environment the agent works in.
#[tool(environments = ["staging", "production"], role = "ops", idempotent)]
fn flush_cache(
    #[environment] environment: Environment,
    #[tenant] tenant: String,
) -> Result<bool, ToolError> {
    let _ = (environment, tenant);
    Ok(true)
}

#[tokio::test]
async fn who_calls_and_from_where_is_attacked_too() {
    let payer = CallContext::new("pam")
        .with_roles(["payments", "ops"])
        .with_tenant("t_001")
        .with_environment("staging");
    let report = red_team(Registry::builder().tool(PaySupplier).tool(FlushCache))
        .caller("payer", payer)
        .run()
        .await;
    report.assert_all_refused();
    let expected: Vec<_> = report
        .findings()
        .iter()
        .map(|finding| (finding.tool.as_str(), finding.expected.to_string()))
        .collect();
    for wanted in [
        ("pay_supplier", "tenant_mismatch"),
        ("pay_supplier", "unknown_tool"),
        ("pay_supplier", "call_id_reused"),
        ("flush_cache", "environment_mismatch"),
        ("flush_cache", "tenant_mismatch"),
    ] {
        let wanted = (wanted.0, wanted.1.to_owned());
        assert!(expected.contains(&wanted), "{wanted:?} in {report}");
    }
}
