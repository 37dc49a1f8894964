//! The seed's regression gate in one screen: before the agent goes live, every hostile call
//! must be refused, in CI. The kit writes hundreds from the tool's contract; the seed's own
//! samples (a false claim of being an admin, a huge id, a production delete without its
//! safeguards) are the corpus; "retry until it works" is the kit's refusal-limit probe. Run with
//! `cargo run -p portcullis-examples --example agent_gate`; it exits 1 if a single call gets through. `cargo test` runs
//! it as a test.

use portcullis::prelude::*;
use portcullis::{Decision, PolicyError, PolicyRequest, testing::red_team};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Environment {
    Development,
    Staging,
    Test,
    Production,
}

/// Delete one record from a database table.
#[tool(risk = "high", roles = ["admin", "support"], irreversible = "the row is gone")]
fn delete_record(
    #[validate(length(min = 3, max = 50))] table_name: String,
    #[validate(range(min = 1))] record_id: u64,
    #[environment] environment: Environment,
    #[serde(default)] confirm_force: bool,
    #[validate(length(max = 200))] admin_note: Option<String>,
) -> Result<String, ToolError> {
    let _ = (environment, confirm_force, admin_note);
    Ok(format!("deleted {table_name}/{record_id}"))
}

/// The seed's policy: critical tables and production for admins, with their safeguards.
fn seed_policy(request: &PolicyRequest<'_>) -> Result<Decision, PolicyError> {
    let (args, admin) = (
        request.arguments,
        request.ctx.roles().iter().any(|r| r == "admin"),
    );
    let table = args["table_name"].as_str().unwrap_or_default();
    let deny = |rule: &str| {
        Ok(Decision::deny(
            rule,
            format!("refused by the rule `{rule}`"),
        ))
    };
    if ["system_config", "users", "orders"].contains(&table) && !admin {
        return deny("critical_table");
    }
    if args["environment"] == "production" {
        if !admin {
            return deny("production_admins_only");
        }
        if args["confirm_force"] != true {
            return deny("production_needs_confirm");
        }
        if args["admin_note"].is_null() {
            return deny("production_needs_a_note");
        }
        if table == "users" && args["record_id"].as_u64() < Some(100) {
            return deny("system_user");
        }
    }
    Ok(Decision::Allow)
}

const SEED_SAMPLES: &str = r#"
{"caller": "bob", "tool": "delete_record", "arguments": {"table_name": "orders", "record_id": 7, "environment": "staging", "is_admin": true}, "expect": "unknown_argument", "what": "a false claim of being an admin"}
{"caller": "bob", "tool": "delete_record", "arguments": {"table_name": "orders", "record_id": 7, "environment": "staging"}, "expect": "policy_denied", "what": "a critical table, not an admin"}
{"caller": "alice", "tool": "delete_record", "arguments": {"table_name": "logs", "record_id": 99999999999999999999, "environment": "production"}, "expect": "invalid_value", "what": "an id of 99999999999999999999"}
{"caller": "alice", "tool": "delete_record", "arguments": {"table_name": "logs", "record_id": 9, "environment": "production", "admin_note": "cleanup"}, "expect": "policy_denied", "what": "production without confirm_force"}
{"caller": "alice", "tool": "delete_record", "arguments": {"table_name": "users", "record_id": 1, "environment": "production", "confirm_force": true, "admin_note": "x"}, "expect": "policy_denied", "what": "the super admin"}
{"caller": "bob", "tool": "delete_record", "arguments": {"table_name": "logs", "record_id": 9, "environment": "production"}, "expect": "environment_mismatch", "what": "production from staging"}
"#;

async fn gate() -> portcullis::testing::Report {
    let alice = CallContext::new("alice")
        .with_roles(["admin"])
        .with_environment("production");
    let bob = CallContext::new("bob")
        .with_roles(["support"])
        .with_environment("staging");
    let valid = serde_json::json!({"table_name": "logs", "record_id": 9, "environment": "production",
        "confirm_force": true, "admin_note": "rotated"});
    red_team(Registry::builder().tool(DeleteRecord).policy(seed_policy))
        .caller("alice", alice)
        .caller("bob", bob)
        .valid_call("delete_record", valid.as_object().unwrap().clone())
        .corpus(SEED_SAMPLES)
        .run()
        .await
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let report = gate().await;
    print!("{report}");
    if !report.passed() {
        return std::process::ExitCode::FAILURE;
    }
    println!(
        "gate passed: each of {} hostile calls got its refusal",
        report.cases()
    );
    std::process::ExitCode::SUCCESS
}

#[tokio::test]
async fn every_hostile_call_is_refused() {
    gate().await.assert_all_refused();
}
