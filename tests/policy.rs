//! Custom policies (the tool's own, typed; the registry's, over JSON) and intent checks: the
//! rest of the authorize gate.

use std::time::Duration;

use portcullis::prelude::*;
use portcullis::{
    BoxFuture, Decision, Gate, Outcome, Policy, PolicyError, PolicyRequest, ReadOnlyRequests,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Environment {
    Development,
    Production,
}

/// The deletion rules of the reference scenario that need the arguments: user 1 is the
/// super-admin and is never deleted; in production, ids below 100 of users and orders are
/// protected, and a deletion needs `confirm_force` and a note.
async fn deletion_rules(
    ctx: &CallContext,
    args: &DeleteRecordArgs,
) -> Result<Decision, PolicyError> {
    let protected_table = matches!(args.table_name.as_str(), "users" | "orders");
    if args.table_name == "users" && args.record_id == 1 {
        return Ok(Decision::deny(
            "super_admin_protected",
            "user 1 is the super-admin and is never deleted",
        ));
    }
    if ctx.environment() == Some("production") {
        if protected_table && args.record_id < 100 {
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

/// Delete one record from a table.
#[tool(risk = "high", roles = ["admin", "developer"], irreversible = "no backup in this test", policy = deletion_rules)]
fn delete_record(
    #[validate(length(min = 3, max = 50))] table_name: String,
    #[validate(range(min = 1))] record_id: u64,
    #[environment] environment: Environment,
    #[serde(default)] confirm_force: bool,
    #[validate(length(max = 200))] admin_note: Option<String>,
) -> Result<u64, ToolError> {
    let _ = (table_name, environment, confirm_force, admin_note);
    Ok(record_id)
}

/// Critical tables need the admin role everywhere, whichever tool touches them.
fn critical_tables_need_admin(request: &PolicyRequest<'_>) -> Result<Decision, PolicyError> {
    let table = request
        .arguments
        .get("table_name")
        .and_then(|table| table.as_str());
    let critical = matches!(table, Some("system_config" | "users" | "orders"));
    Ok(if critical && !request.ctx.has_role("admin") {
        Decision::deny(
            "critical_table_needs_admin",
            "only an admin may touch a critical table",
        )
    } else {
        Decision::Allow
    })
}

fn registry() -> Registry {
    Registry::builder()
        .tool(DeleteRecord)
        .policy(critical_tables_need_admin)
        .intent_check(ReadOnlyRequests::default())
        .build()
        .unwrap()
}

/// A caller whose user asked for a deletion (the intent check refuses a deletion nobody asked
/// for).
fn caller(role: &str, environment: &str) -> CallContext {
    CallContext::new("u")
        .with_roles([role])
        .with_environment(environment)
        .with_request("Delete the record, it was created by mistake.")
}

async fn delete(ctx: &CallContext, arguments: serde_json::Value) -> Outcome {
    registry()
        .dispatch(
            ctx,
            &ToolCall::new("1", "delete_record", arguments.to_string()),
        )
        .await
}

fn refusal(outcome: &Outcome) -> (Option<RejectionCode>, Option<&str>) {
    let rejection = outcome.rejection();
    (
        rejection.map(Rejection::code),
        rejection.and_then(Rejection::reason),
    )
}

#[tokio::test]
async fn the_tools_own_policy_sees_typed_arguments() {
    let admin = caller("admin", "production");
    let outcome = delete(
        &admin,
        json!({"table_name": "orders", "record_id": 1, "environment": "production",
                                        "confirm_force": true, "admin_note": "x"}),
    )
    .await;
    assert_eq!(
        refusal(&outcome),
        (Some(RejectionCode::PolicyDenied), Some("protected_id"))
    );
    assert_eq!(outcome.rejection().unwrap().gate(), Gate::Authorize);
    assert!(!outcome.rejection().unwrap().retryable());

    let outcome = delete(
        &admin,
        json!({"table_name": "users", "record_id": 10, "environment": "production"}),
    )
    .await;
    assert_eq!(
        refusal(&outcome),
        (Some(RejectionCode::PolicyDenied), Some("protected_id"))
    );

    let outcome = delete(
        &admin,
        json!({"table_name": "users", "record_id": 123, "environment": "production"}),
    )
    .await;
    assert_eq!(
        refusal(&outcome),
        (
            Some(RejectionCode::PolicyDenied),
            Some("production_needs_confirmation")
        )
    );

    let outcome = delete(
        &caller("admin", "development"),
        json!({"table_name": "users", "record_id": 1, "environment": "development"}),
    )
    .await;
    assert_eq!(
        refusal(&outcome),
        (
            Some(RejectionCode::PolicyDenied),
            Some("super_admin_protected")
        )
    );

    let outcome = delete(&admin, json!({"table_name": "users", "record_id": 123, "environment": "production",
                                        "confirm_force": true, "admin_note": "GDPR erasure request #4411"})).await;
    assert_eq!(outcome.output(), Some(&json!(123)));
}

#[tokio::test]
async fn registry_policies_see_the_arguments_as_json() {
    let developer = caller("developer", "development");
    let outcome = delete(
        &developer,
        json!({"table_name": "system_config", "record_id": 5, "environment": "development"}),
    )
    .await;
    assert_eq!(
        refusal(&outcome),
        (
            Some(RejectionCode::PolicyDenied),
            Some("critical_table_needs_admin")
        )
    );
    let outcome = delete(
        &developer,
        json!({"table_name": "test_data", "record_id": 999, "environment": "development"}),
    )
    .await;
    assert_eq!(outcome.output(), Some(&json!(999)));
    // The same call as a parsed value is judged alike.
    let outcome = registry()
        .dispatch(
            &developer,
            &ToolCall::new(
                "2",
                "delete_record",
                json!({"table_name": "orders", "record_id": 5, "environment": "development"}),
            ),
        )
        .await;
    assert_eq!(
        refusal(&outcome),
        (
            Some(RejectionCode::PolicyDenied),
            Some("critical_table_needs_admin")
        )
    );
}

#[tokio::test]
async fn the_users_request_must_ask_for_what_the_call_does() {
    let lookup =
        caller("admin", "development").with_request("请帮我查找一下用户ID为123的订单信息。");
    let outcome = delete(
        &lookup,
        json!({"table_name": "orders", "record_id": 123, "environment": "development"}),
    )
    .await;
    assert_eq!(
        refusal(&outcome),
        (
            Some(RejectionCode::IntentMismatch),
            Some("read_only_request")
        )
    );

    let erase = caller("admin", "development").with_request("删除我的测试账户数据。");
    let outcome = delete(
        &erase,
        json!({"table_name": "test_accounts", "record_id": 42, "environment": "development"}),
    )
    .await;
    assert_eq!(outcome.output(), Some(&json!(42)));
}

/// A policy that asks a slow service before it decides.
struct AskTheLedger;

impl Policy for AskTheLedger {
    fn evaluate<'a>(
        &'a self,
        request: PolicyRequest<'a>,
    ) -> BoxFuture<'a, Result<Decision, PolicyError>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            match request
                .arguments
                .get("record_id")
                .and_then(|id| id.as_u64())
            {
                Some(13) => Err(PolicyError::new("the ledger service timed out")),
                Some(666) => panic!("the ledger client hit a bug"),
                _ => Ok(Decision::Allow),
            }
        })
    }
}

#[tokio::test]
async fn a_policy_that_fails_or_panics_denies() {
    let registry = Registry::builder()
        .tool(DeleteRecord)
        .policy(AskTheLedger)
        // A closure decides when the gate asks for its future: its panic comes before any poll.
        .policy(|request: &PolicyRequest<'_>| {
            assert_ne!(request.arguments["record_id"], 999, "a closure that fails");
            Ok(Decision::Allow)
        })
        .build()
        .unwrap();
    let ctx = caller("admin", "development");
    let call = |id: u64| {
        ToolCall::new(
            id.to_string(),
            "delete_record",
            json!({"table_name": "logs", "record_id": id, "environment": "development"}),
        )
    };

    let outcome = registry.dispatch(&ctx, &call(7)).await;
    assert_eq!(
        outcome.output(),
        Some(&json!(7)),
        "an asynchronous policy that allows"
    );

    let outcome = registry.dispatch(&ctx, &call(13)).await;
    assert_eq!(
        refusal(&outcome),
        (Some(RejectionCode::PolicyDenied), Some("policy_error"))
    );
    assert!(
        !outcome
            .rejection()
            .unwrap()
            .to_model_message()
            .contains("ledger"),
        "no internals to the model"
    );

    let outcome = registry.dispatch(&ctx, &call(666)).await;
    assert_eq!(
        refusal(&outcome),
        (Some(RejectionCode::PolicyDenied), Some("policy_panicked"))
    );

    let outcome = registry.dispatch(&ctx, &call(999)).await;
    assert_eq!(
        refusal(&outcome),
        (Some(RejectionCode::PolicyDenied), Some("policy_panicked")),
        "not the tool's panic: the tool did not run"
    );

    let outcome = registry.dispatch(&ctx, &call(8)).await;
    assert!(
        outcome.is_completed(),
        "the registry carries on after a panicking policy"
    );
}

#[tokio::test]
async fn policies_run_only_after_the_other_gates() {
    // A call the decode gate refuses never reaches a policy that would panic on it.
    let registry = Registry::builder()
        .tool(DeleteRecord)
        .policy(AskTheLedger)
        .build()
        .unwrap();
    let outcome = registry
        .dispatch(
            &caller("admin", "development"),
            &ToolCall::new("1", "delete_record", json!({"record_id": 666})),
        )
        .await;
    assert_eq!(outcome.code(), Some(RejectionCode::MissingArgument));
    // Nor does a call in the wrong environment.
    let outcome = registry
        .dispatch(
            &caller("admin", "production"),
            &ToolCall::new(
                "1",
                "delete_record",
                json!({"table_name": "logs", "record_id": 666, "environment": "development"}),
            ),
        )
        .await;
    assert_eq!(outcome.code(), Some(RejectionCode::EnvironmentMismatch));
}

#[test]
fn the_contract_names_the_policy() {
    assert_eq!(DeleteRecord.contract().policy(), Some("deletion_rules"));
}
