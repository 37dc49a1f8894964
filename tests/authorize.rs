//! The authorize gate: roles, environments and tenants, and least privilege in the tool list.

use portcullis::prelude::*;
use portcullis::{Gate, Outcome};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A tenant id, as a newtype.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct TenantId(String);

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
pub enum Currency {
    #[serde(rename = "CNY")]
    Cny,
    #[serde(rename = "USD")]
    Usd,
}

/// Create an invoice for one of the caller's own customers.
#[tool(
    risk = "high",
    role = "billing_admin",
    irreversible = "invoices are numbered and sent"
)]
fn create_invoice(
    /// The tenant the invoice belongs to.
    #[tenant]
    tenant_id: TenantId,
    currency: Currency,
    /// Amount in cents.
    #[validate(range(min = 1, max = 5_000_000))]
    amount_cents: u64,
) -> Result<String, ToolError> {
    Ok(format!("{:?} {amount_cents} {currency:?}", tenant_id.0))
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Environment {
    Development,
    Staging,
    Production,
}

/// Flush the cache of the environment the agent works in.
#[tool(environments = ["staging", "production"], role = "ops", idempotent)]
fn flush_cache(
    #[environment] environment: Environment,
    #[serde(rename = "tenant")]
    #[tenant]
    tenant_name: String,
) -> Result<bool, ToolError> {
    let _ = (environment, tenant_name);
    Ok(true)
}

/// Read the public status page.
#[tool(read_only)]
fn status() -> Result<&'static str, ToolError> {
    Ok("green")
}

fn registry() -> Registry {
    Registry::builder()
        .tool(CreateInvoice)
        .tool(FlushCache)
        .tool(Status)
        .build()
        .unwrap()
}

fn billing(tenant: &str) -> CallContext {
    CallContext::new("bo")
        .with_roles(["billing_admin"])
        .with_tenant(tenant)
}

async fn dispatch(ctx: &CallContext, name: &str, arguments: Value) -> Outcome {
    registry()
        .dispatch(ctx, &ToolCall::new("call_1", name, arguments))
        .await
}

fn code_and_path(outcome: &Outcome) -> (Option<RejectionCode>, Option<&str>) {
    (
        outcome.code(),
        outcome.rejection().and_then(Rejection::path),
    )
}

#[tokio::test]
async fn a_tenant_scoped_call_passes_for_the_callers_own_tenant() {
    let invoice = json!({"tenant_id": "t_001", "currency": "CNY", "amount_cents": 1200});
    let outcome = dispatch(&billing("t_001"), "create_invoice", invoice.clone()).await;
    assert_eq!(outcome.output(), Some(&json!("\"t_001\" 1200 Cny")));
}

#[tokio::test]
async fn another_tenant_is_refused_even_with_the_right_role() {
    let invoice = json!({"tenant_id": "t_999", "currency": "USD", "amount_cents": 1200});
    let outcome = dispatch(&billing("t_001"), "create_invoice", invoice).await;
    assert_eq!(
        code_and_path(&outcome),
        (Some(RejectionCode::TenantMismatch), Some("/tenant_id"))
    );
    assert_eq!(outcome.rejection().unwrap().gate(), Gate::Authorize);
}

#[tokio::test]
async fn a_caller_without_a_tenant_cannot_use_a_tenant_scoped_tool() {
    let invoice = json!({"tenant_id": "t_001", "currency": "USD", "amount_cents": 1200});
    let ctx = CallContext::new("bo").with_roles(["billing_admin"]);
    let outcome = dispatch(&ctx, "create_invoice", invoice).await;
    assert_eq!(outcome.code(), Some(RejectionCode::TenantMismatch));
    assert!(!outcome.rejection().unwrap().retryable());
}

#[tokio::test]
async fn roles_are_checked_before_the_arguments_are_read() {
    // Malformed arguments: a caller without the role learns nothing about them, nor that the
    // tool exists.
    let ctx = CallContext::new("eve")
        .with_roles(["viewer"])
        .with_tenant("t_001");
    let outcome = dispatch(&ctx, "create_invoice", json!({"nonsense": true})).await;
    let rejection = outcome.rejection().unwrap();
    assert_eq!(rejection.code(), RejectionCode::UnknownTool);
    assert!(
        !rejection.message().contains("billing_admin"),
        "{rejection}"
    );
}

#[tokio::test]
async fn a_privilege_claim_in_the_arguments_grants_nothing() {
    let ctx = CallContext::new("eve")
        .with_roles(["viewer"])
        .with_tenant("t_001");
    let claim = json!({"tenant_id": "t_001", "currency": "USD", "amount_cents": 1, "role": "billing_admin"});
    let outcome = dispatch(&ctx, "create_invoice", claim).await;
    assert_eq!(outcome.code(), Some(RejectionCode::UnknownTool));
}

#[tokio::test]
async fn environments_limit_where_a_tool_runs_and_what_it_names() {
    let ops = |environment: &str| {
        CallContext::new("olga")
            .with_roles(["ops"])
            .with_tenant("acme")
            .with_environment(environment)
    };
    let call = |environment: &str| json!({"environment": environment, "tenant": "acme"});

    let outcome = dispatch(&ops("production"), "flush_cache", call("production")).await;
    assert_eq!(outcome.output(), Some(&json!(true)));

    // Runs in production but names development.
    let outcome = dispatch(&ops("production"), "flush_cache", call("development")).await;
    assert_eq!(
        code_and_path(&outcome),
        (
            Some(RejectionCode::EnvironmentMismatch),
            Some("/environment")
        )
    );
    assert!(outcome.rejection().unwrap().retryable());

    // Runs where the tool may not run at all.
    let outcome = dispatch(&ops("development"), "flush_cache", call("development")).await;
    assert_eq!(
        code_and_path(&outcome),
        (Some(RejectionCode::EnvironmentMismatch), None)
    );
    assert!(!outcome.rejection().unwrap().retryable());

    // A renamed tenant argument is checked under its wire name.
    let other_tenant = json!({"environment": "staging", "tenant": "globex"});
    let outcome = dispatch(&ops("staging"), "flush_cache", other_tenant).await;
    assert_eq!(
        code_and_path(&outcome),
        (Some(RejectionCode::TenantMismatch), Some("/tenant"))
    );
}

#[tokio::test]
async fn the_tool_list_shows_only_what_the_caller_may_use() {
    let names = |ctx: &CallContext| -> Vec<String> {
        registry()
            .export_json_schema(ctx)
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&CallContext::new("anon")), ["status"]);
    assert_eq!(names(&billing("t_001")), ["create_invoice", "status"]);
    let both = CallContext::new("root").with_roles(["ops", "billing_admin"]);
    assert_eq!(names(&both), ["create_invoice", "flush_cache", "status"]);
}

#[tokio::test]
async fn hints_never_point_at_a_tool_the_caller_may_not_use() {
    let outcome = dispatch(&CallContext::new("anon"), "create_invoices", json!({})).await;
    let rejection = outcome.rejection().unwrap();
    assert_eq!(rejection.code(), RejectionCode::UnknownTool);
    assert_eq!(rejection.hint(), Some("the available tools are status"));
}

#[test]
fn the_contract_records_the_scope() {
    let invoice = CreateInvoice.contract();
    assert_eq!(invoice.tenant_argument(), Some("tenant_id"));
    assert_eq!(invoice.environment_argument(), None);
    let flush = FlushCache.contract();
    assert_eq!(flush.environments(), ["staging", "production"]);
    assert_eq!(flush.environment_argument(), Some("environment"));
    assert_eq!(flush.tenant_argument(), Some("tenant"));
}
