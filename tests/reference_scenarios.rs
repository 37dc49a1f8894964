//! The reference scenarios: `delete_database_record` under the deletion policy, the intent
//! check, and tenant-scoped invoices with a per-task budget. Every case asserts the exact
//! outcome and code.

use std::sync::LazyLock;

use portcullis::prelude::*;
use portcullis::{
    ApprovalDecision, Decision, Outcome, PolicyError, PolicyRequest, ReadOnlyRequests,
};
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

static TABLE_NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new("^[a-z_]+$").unwrap());

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Environment {
    Development,
    Staging,
    Test,
    Production,
}

/// The deletion rules that read the arguments: user 1 is never deleted; in production, ids
/// below 100 of users and orders are protected, and a deletion needs `confirm_force` and an
/// `admin_note`.
async fn deletion_policy(
    ctx: &CallContext,
    args: &DeleteDatabaseRecordArgs,
) -> Result<Decision, PolicyError> {
    if args.table_name == "users" && args.record_id == 1 {
        return Ok(Decision::deny(
            "super_admin",
            "user 1 is the super-admin and is never deleted",
        ));
    }
    if ctx.environment() == Some("production") {
        if !ctx.has_role("admin") {
            return Ok(Decision::deny(
                "production_needs_admin",
                "only an admin deletes in production",
            ));
        }
        if matches!(args.table_name.as_str(), "users" | "orders") && args.record_id < 100 {
            return Ok(Decision::deny(
                "protected_id",
                "ids below 100 of users and orders are protected in production",
            ));
        }
        if !args.confirm_force || args.admin_note.is_none() {
            return Ok(Decision::deny(
                "production_needs_confirmation",
                "a deletion in production needs confirm_force and an admin_note",
            ));
        }
    }
    Ok(Decision::Allow)
}

/// Deletions in production wait for a human.
fn approval_in_production(ctx: &CallContext, _args: &DeleteDatabaseRecordArgs) -> bool {
    ctx.environment() == Some("production")
}

/// Critical tables need the admin role everywhere.
fn critical_tables(request: &PolicyRequest<'_>) -> Result<Decision, PolicyError> {
    let table = request.arguments.get("table_name").and_then(Value::as_str);
    Ok(match table {
        Some("system_config" | "users" | "orders") if !request.ctx.has_role("admin") => {
            Decision::deny(
                "critical_table_needs_admin",
                "only an admin touches a critical table",
            )
        }
        _ => Decision::Allow,
    })
}

/// Delete one record from a database table.
#[tool(
    risk = "high",
    roles = ["admin", "developer"],
    irreversible = "deleted rows are not backed up",
    policy = deletion_policy,
    approval = approval_in_production
)]
fn delete_database_record(
    #[validate(length(min = 3, max = 50), regex(path = *TABLE_NAME))] table_name: String,
    #[validate(range(min = 1))] record_id: u64,
    #[environment] environment: Environment,
    #[serde(default)] confirm_force: bool,
    #[validate(length(max = 200))] admin_note: Option<String>,
) -> Result<Value, ToolError> {
    let _ = (environment, confirm_force, admin_note);
    Ok(json!({"deleted": format!("{table_name}/{record_id}")}))
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
pub enum Currency {
    #[serde(rename = "CNY")]
    Cny,
    #[serde(rename = "USD")]
    Usd,
}

/// Create an invoice for one of the caller's customers.
#[tool(risk = "medium", role = "billing_admin", max_calls_per_task = 1)]
fn create_invoice(
    #[tenant] tenant_id: String,
    customer: String,
    currency: Currency,
    #[validate(range(min = 1, max = 5_000_000))] amount_cents: u64,
) -> Result<Value, ToolError> {
    Ok(
        json!({"invoice": format!("{tenant_id}/{customer}"), "amount_cents": amount_cents, "currency": currency}),
    )
}

fn registry() -> Registry {
    Registry::builder()
        .tool(DeleteDatabaseRecord)
        .tool(CreateInvoice)
        .policy(critical_tables)
        .intent_check(ReadOnlyRequests::default())
        .build()
        .unwrap()
}

/// A person at work; the intent check reads what they asked for (here a task that neither
/// only reads nor names an action: the rule does not judge it).
fn person(role: &str, environment: &str) -> CallContext {
    CallContext::new(format!("{role}-1"))
        .with_roles([role])
        .with_environment(environment)
        .with_request("Carry out the task in ticket OPS-17.")
}

fn delete(table: &str, id: u64, environment: &str) -> Value {
    json!({"table_name": table, "record_id": id, "environment": environment})
}

async fn run(ctx: &CallContext, tool: &str, arguments: Value) -> Outcome {
    registry()
        .dispatch(ctx, &ToolCall::new("call", tool, arguments.to_string()))
        .await
}

fn code(outcome: &Outcome) -> Option<RejectionCode> {
    outcome.code()
}

fn reason(outcome: &Outcome) -> Option<&str> {
    outcome.rejection().and_then(Rejection::reason)
}

#[tokio::test]
async fn admin_in_production_waits_for_approval_then_deletes() {
    let registry = registry();
    let admin = person("admin", "production");
    let mut arguments = delete("users", 123, "production");
    arguments["confirm_force"] = json!(true);
    arguments["admin_note"] = json!("GDPR erasure request #4411");
    let outcome = registry
        .dispatch(
            &admin,
            &ToolCall::new("call", "delete_database_record", arguments),
        )
        .await;
    let ticket = outcome.ticket().expect("pending").clone();
    let outcome = registry
        .resume(
            &ticket.id,
            ApprovalDecision::Approve {
                reviewer: "dba".into(),
            },
        )
        .await;
    assert_eq!(outcome.output(), Some(&json!({"deleted": "users/123"})));
}

#[tokio::test]
async fn developer_in_development_deletes_test_data_without_approval() {
    let outcome = run(
        &person("developer", "development"),
        "delete_database_record",
        delete("test_data", 999, "development"),
    )
    .await;
    assert_eq!(outcome.output(), Some(&json!({"deleted": "test_data/999"})));
}

#[tokio::test]
async fn plain_user_in_production_is_refused() {
    let outcome = run(
        &person("user", "production"),
        "delete_database_record",
        delete("user_profiles", 500, "production"),
    )
    .await;
    // Refused as a tool that does not exist: a user cannot learn which admin tools there are.
    assert_eq!(code(&outcome), Some(RejectionCode::UnknownTool));
}

#[tokio::test]
async fn protected_ids_and_missing_confirmation_in_production() {
    let admin = person("admin", "production");
    let mut orders = delete("orders", 1, "production");
    orders["confirm_force"] = json!(true);
    orders["admin_note"] = json!("cleanup");
    let outcome = run(&admin, "delete_database_record", orders).await;
    assert_eq!(
        (code(&outcome), reason(&outcome)),
        (Some(RejectionCode::PolicyDenied), Some("protected_id"))
    );

    let outcome = run(
        &admin,
        "delete_database_record",
        delete("users", 10, "production"),
    )
    .await;
    assert_eq!(
        (code(&outcome), reason(&outcome)),
        (Some(RejectionCode::PolicyDenied), Some("protected_id"))
    );
    let outcome = run(
        &admin,
        "delete_database_record",
        delete("users", 150, "production"),
    )
    .await;
    assert_eq!(
        (code(&outcome), reason(&outcome)),
        (
            Some(RejectionCode::PolicyDenied),
            Some("production_needs_confirmation")
        )
    );
}

#[tokio::test]
async fn a_production_caller_cannot_target_development() {
    let outcome = run(
        &person("admin", "production"),
        "delete_database_record",
        delete("test_data", 5, "development"),
    )
    .await;
    assert_eq!(code(&outcome), Some(RejectionCode::EnvironmentMismatch));
    assert_eq!(outcome.rejection().unwrap().path(), Some("/environment"));
}

#[tokio::test]
async fn user_one_and_critical_tables() {
    let outcome = run(
        &person("admin", "development"),
        "delete_database_record",
        delete("users", 1, "development"),
    )
    .await;
    assert_eq!(
        (code(&outcome), reason(&outcome)),
        (Some(RejectionCode::PolicyDenied), Some("super_admin"))
    );
    let outcome = run(
        &person("developer", "development"),
        "delete_database_record",
        delete("system_config", 7, "development"),
    )
    .await;
    assert_eq!(
        (code(&outcome), reason(&outcome)),
        (
            Some(RejectionCode::PolicyDenied),
            Some("critical_table_needs_admin")
        )
    );
}

#[tokio::test]
async fn the_request_must_ask_for_a_deletion() {
    let lookup =
        person("admin", "development").with_request("请帮我查找一下用户ID为123的订单信息。");
    let outcome = run(
        &lookup,
        "delete_database_record",
        delete("test_data", 123, "development"),
    )
    .await;
    assert_eq!(
        (code(&outcome), reason(&outcome)),
        (
            Some(RejectionCode::IntentMismatch),
            Some("read_only_request")
        )
    );

    let erase = person("admin", "development").with_request("删除我的测试账户数据。");
    let outcome = run(
        &erase,
        "delete_database_record",
        delete("test_accounts", 42, "development"),
    )
    .await;
    assert_eq!(
        outcome.output(),
        Some(&json!({"deleted": "test_accounts/42"}))
    );
}

#[tokio::test]
async fn invoices_are_tenant_scoped_and_limited_to_one_per_task() {
    let registry = registry();
    let billing = CallContext::new("bo")
        .with_roles(["billing_admin"])
        .with_tenant("t_001")
        .with_task_id("invoice-task")
        .with_request("Invoice acme for the consulting hours.");
    // Each a new call, with an id of its own.
    let invoice = |tenant: &str, amount: u64| {
        ToolCall::new(
            format!("invoice-{tenant}-{amount}"),
            "create_invoice",
            json!({"tenant_id": tenant, "customer": "acme", "currency": "CNY", "amount_cents": amount}),
        )
    };
    let outcome = registry
        .dispatch(&billing, &invoice("t_001", 99_999_999))
        .await;
    assert_eq!(code(&outcome), Some(RejectionCode::ConstraintViolation));
    let outcome = registry.dispatch(&billing, &invoice("t_999", 1200)).await;
    assert_eq!(code(&outcome), Some(RejectionCode::TenantMismatch));
    let outcome = registry.dispatch(&billing, &invoice("t_001", 1200)).await;
    assert_eq!(outcome.output().unwrap()["invoice"], "t_001/acme");
    let outcome = registry.dispatch(&billing, &invoice("t_001", 1300)).await;
    assert_eq!(code(&outcome), Some(RejectionCode::BudgetCallsExceeded));
}
