//! Every decision is audited, refusals included, and the chain shows tampering.

use portcullis::audit::{
    ChainBreak, JsonLinesAuditSink, MemoryAuditSink, REDACTED, TracingAuditSink, verify,
};
use portcullis::prelude::*;
use portcullis::{BudgetLimits, Decision, PolicyRequest};
use serde_json::json;

/// Log a user in.
#[tool(risk = "medium", cost = 2)]
fn login(user: String, #[sensitive] password: String) -> Result<bool, ToolError> {
    Ok(!user.is_empty() && password.len() > 3)
}

fn registry(sink: impl portcullis::audit::AuditSink) -> Registry {
    Registry::builder()
        .tool(Login)
        .policy(|request: &PolicyRequest<'_>| {
            Ok(if request.arguments["user"] == "root" {
                Decision::deny("no_root_login", "root may not log in through the agent")
            } else {
                Decision::Allow
            })
        })
        .budget(BudgetLimits {
            max_calls_per_task: Some(10),
            ..BudgetLimits::default()
        })
        .audit(sink)
        .build()
        .unwrap()
}

#[tokio::test]
async fn every_decision_is_recorded_with_secrets_redacted() {
    let sink = MemoryAuditSink::default();
    let registry = registry(sink.clone());
    let ctx = CallContext::new("alice")
        .with_tenant("t_1")
        .with_task_id("task-7");
    let calls = [
        ToolCall::new("1", "login", json!({"user": "bob", "password": "hunter22"})),
        ToolCall::new("2", "logn", json!({})),
        ToolCall::new(
            "3",
            "login",
            r#"{"user":"bob","user":"root","password":"x"}"#,
        ),
        ToolCall::new(
            "4",
            "login",
            json!({"user": "root", "password": "toor-toor"}),
        ),
    ];
    for call in &calls {
        registry.dispatch(&ctx, call).await;
    }
    let all = sink.records();
    assert!(verify(&all, None).is_ok());
    // The login changes state: it was recorded as about to run before it ran.
    assert_eq!(all[0].decision, "about_to_run");
    assert_eq!(all[0].arguments, all[1].arguments);
    assert_eq!(
        (all[0].budget_calls, all[0].budget_cost),
        (0, 0),
        "the outcome's record counts the budget, once"
    );
    let records: Vec<_> = all
        .into_iter()
        .filter(|record| record.decision != "about_to_run")
        .collect();
    assert_eq!(records.len(), 4);

    let completed = &records[0];
    assert_eq!(completed.decision, "completed");
    assert_eq!(
        completed.arguments,
        json!({"user": "bob", "password": REDACTED})
    );
    assert_eq!((completed.budget_calls, completed.budget_cost), (1, 2));
    assert_eq!(
        (
            completed.actor.as_str(),
            completed.tenant.as_deref(),
            completed.task_id.as_str()
        ),
        ("alice", Some("t_1"), "task-7")
    );
    assert_eq!(completed.summary, "true");

    assert_eq!(records[1].code.as_deref(), Some("unknown_tool"));
    assert_eq!(records[1].gate.as_deref(), Some("resolve"));
    assert_eq!(records[2].code.as_deref(), Some("duplicate_key"));
    let denied = &records[3];
    assert_eq!(
        (denied.code.as_deref(), denied.reason.as_deref()),
        (Some("policy_denied"), Some("no_root_login"))
    );
    assert_eq!(denied.arguments["password"], REDACTED);
    assert_eq!(denied.budget_calls, 0, "a refused call is not counted");
    assert!(
        records
            .iter()
            .all(|record| !record.arguments.to_string().contains("toor"))
    );
}

#[tokio::test]
async fn a_file_log_detects_tampering() {
    let dir = std::env::temp_dir().join(format!("portcullis-audit-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("audit.jsonl");
    let _ = std::fs::remove_file(&path);
    let registry = registry(JsonLinesAuditSink::open(&path, false).unwrap());
    let ctx = CallContext::new("alice");
    for user in ["ann", "ben", "cat"] {
        let call = ToolCall::new(user, "login", json!({"user": user, "password": "secret"}));
        registry.dispatch(&ctx, &call).await;
    }
    let records = portcullis::audit::read_json_lines(&path).unwrap();
    assert!(verify(&records, None).is_ok());

    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let position = lines
        .iter()
        .position(|line| line.contains("\"ben\""))
        .unwrap();
    let edited = lines[position].replace("\"ben\"", "\"bea\"");
    lines[position] = &edited;
    std::fs::write(&path, lines.join("\n")).unwrap();
    let records = portcullis::audit::read_json_lines(&path).unwrap();
    assert_eq!(
        verify(&records, None),
        Err(ChainBreak::Altered { position })
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn the_tracing_sink_accepts_records() {
    let registry = registry(TracingAuditSink::default());
    let outcome = registry
        .dispatch(
            &CallContext::new("a"),
            &ToolCall::new("1", "login", json!({"user": "u", "password": "pass"})),
        )
        .await;
    assert!(outcome.is_completed());
}

/// The balance the tests' account holds.
static BALANCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1_000);

/// The account's state, before and after a withdrawal.
async fn account_state(_ctx: &CallContext, args: &WithdrawArgs) -> serde_json::Value {
    json!({"account": args.account, "balance": BALANCE.load(std::sync::atomic::Ordering::SeqCst)})
}

/// Withdraw money.
#[tool(risk = "medium", snapshot = account_state)]
fn withdraw(account: String, amount: u64) -> Result<u64, ToolError> {
    let _ = account;
    Ok(BALANCE.fetch_sub(amount, std::sync::atomic::Ordering::SeqCst) - amount)
}

#[tokio::test]
async fn snapshots_show_the_state_before_and_after() {
    let sink = MemoryAuditSink::default();
    let registry = Registry::builder()
        .tool(Withdraw)
        .audit(sink.clone())
        .build()
        .unwrap();
    assert_eq!(Withdraw.contract().snapshot(), Some("account_state"));
    let outcome = registry
        .dispatch(
            &CallContext::new("a"),
            &ToolCall::new("1", "withdraw", json!({"account": "acc-1", "amount": 250})),
        )
        .await;
    assert_eq!(outcome.output(), Some(&json!(750)));
    // A refused call never ran, and has no snapshot.
    registry
        .dispatch(
            &CallContext::new("a"),
            &ToolCall::new("2", "withdraw", json!({"account": "acc-1"})),
        )
        .await;
    let all = sink.records();
    assert!(verify(&all, None).is_ok());
    let records: Vec<_> = all
        .into_iter()
        .filter(|record| record.decision != "about_to_run")
        .collect();
    assert_eq!(
        records[0].snapshot_before,
        Some(json!({"account": "acc-1", "balance": 1000}))
    );
    assert_eq!(
        records[0].snapshot_after,
        Some(json!({"account": "acc-1", "balance": 750}))
    );
    assert_eq!(
        (
            records[1].snapshot_before.as_ref(),
            records[1].snapshot_after.as_ref()
        ),
        (None, None)
    );
}
