//! A registry that runs dry: every gate decides as in production, no tool runs, and what a run
//! would have spent (its claim, its budget) stays spent, so that a red-team run meets the same
//! gates in the same state as production would; and one isolated from the application's
//! stores and approver, so that such a run spends nothing real.

use std::sync::atomic::{AtomicUsize, Ordering};

use portcullis::audit::MemoryAuditSink;
use portcullis::prelude::*;
use portcullis::{
    AutoApprove, Gate, InMemoryApprovalStore, InMemoryBudgetStore, InMemoryRepeatStore,
};
use serde_json::json;

/// How many times a transfer's body ran.
static TRANSFERS: AtomicUsize = AtomicUsize::new(0);

/// Move money between two of the caller's accounts.
#[tool(
    risk = "medium",
    irreversible = "transfers settle at once",
    max_calls_per_task = 2
)]
fn transfer(
    #[validate(length(min = 3, max = 20))] to_account: String,
    #[validate(range(min = 1, max = 100_000))] cents: u64,
) -> Result<String, ToolError> {
    TRANSFERS.fetch_add(1, Ordering::SeqCst);
    Ok(format!("{cents} cents to {to_account}"))
}

/// Close an account for good.
#[tool(
    risk = "high",
    irreversible = "a closed account cannot be opened again"
)]
fn close_account(#[validate(length(min = 3, max = 20))] account: String) -> Result<(), ToolError> {
    TRANSFERS.fetch_add(1, Ordering::SeqCst);
    let _ = account;
    Ok(())
}

fn call(id: &str, to: &str, cents: u64) -> ToolCall {
    ToolCall::new(id, "transfer", json!({"to_account": to, "cents": cents}))
}

#[tokio::test]
async fn every_gate_decides_and_no_tool_runs() {
    let audit = MemoryAuditSink::default();
    let registry = Registry::builder()
        .tool(Transfer)
        .tool(CloseAccount)
        .approval_for_high_risk(true)
        .audit(audit.clone())
        .dry_run()
        .build()
        .unwrap();
    let ctx = CallContext::new("ann").with_task_id("task-1");

    // A call that passes every gate is refused by the execute gate, and its body never runs.
    let outcome = registry.dispatch(&ctx, &call("c1", "savings", 500)).await;
    let rejection = outcome.rejection().expect("refused");
    assert_eq!(rejection.code(), RejectionCode::DryRun);
    assert_eq!(rejection.gate(), Gate::Execute);
    assert!(!rejection.retryable());

    // The gates before it decide as in production.
    let too_much = registry
        .dispatch(&ctx, &call("c2", "savings", 100_001))
        .await;
    assert_eq!(too_much.code(), Some(RejectionCode::ConstraintViolation));

    // The call counts as one that ran: a repeat gets its outcome, a reused id with other
    // arguments is refused, and the budget it spent stays spent.
    let repeated = registry.dispatch(&ctx, &call("c1", "savings", 500)).await;
    assert_eq!(repeated.code(), Some(RejectionCode::DryRun));
    let reused = registry.dispatch(&ctx, &call("c1", "savings", 900)).await;
    assert_eq!(reused.code(), Some(RejectionCode::CallIdReused));
    let second = registry.dispatch(&ctx, &call("c3", "savings", 700)).await;
    assert_eq!(second.code(), Some(RejectionCode::DryRun));
    let third = registry.dispatch(&ctx, &call("c4", "savings", 800)).await;
    assert_eq!(third.code(), Some(RejectionCode::BudgetCallsExceeded));

    // A call that needs a human waits as in production.
    let close = ToolCall::new("c5", "close_account", json!({"account": "checking"}));
    assert!(matches!(
        registry.dispatch(&ctx, &close).await,
        Outcome::Pending(_)
    ));

    assert_eq!(TRANSFERS.load(Ordering::SeqCst), 0, "no tool ran");

    // Nothing is on record as about to run; each dry call, and the repeat of the first, is on
    // record as refused by the execute gate.
    let records = audit.records();
    assert!(
        records
            .iter()
            .all(|record| record.decision != "about_to_run"),
        "{records:#?}"
    );
    let dry: Vec<_> = records
        .iter()
        .filter(|record| record.code.as_deref() == Some("dry_run"))
        .map(|record| (record.call_id.as_str(), record.gate.as_deref()))
        .collect();
    assert_eq!(
        dry,
        [
            ("c1", Some("execute")),
            ("c1", Some("execute")),
            ("c3", Some("execute"))
        ],
        "{records:#?}"
    );
}

#[tokio::test]
async fn an_isolated_registry_leaves_the_applications_stores_and_approver_alone() {
    let audit = MemoryAuditSink::default();
    let budgets = InMemoryBudgetStore::default();
    let claims = InMemoryRepeatStore::default();
    let approvals = InMemoryApprovalStore::default();
    let production = || {
        Registry::builder()
            .tool(Transfer)
            .tool(CloseAccount)
            .approval_for_high_risk(true)
            .approver(AutoApprove)
            .audit(audit.clone())
            .budget_store(budgets.clone())
            .repeat_store(claims.clone())
            .approval_store(approvals.clone())
            .accept_unsigned_decisions()
    };
    let kept = MemoryAuditSink::default();
    let isolated = production()
        .isolated()
        .dry_run()
        .audit(kept.clone())
        .build()
        .unwrap();
    let ctx = CallContext::new("ann").with_task_id("task-2");
    for id in ["c1", "c2"] {
        let outcome = isolated.dispatch(&ctx, &call(id, "savings", 500)).await;
        assert_eq!(outcome.code(), Some(RejectionCode::DryRun));
    }
    let close = ToolCall::new("c3", "close_account", json!({"account": "checking"}));
    assert!(
        matches!(isolated.dispatch(&ctx, &close).await, Outcome::Pending(_)),
        "the approver is not asked: the call waits"
    );
    assert_eq!(kept.records().len(), 3);

    // The application's stores saw nothing: its registry finds no claim of `c1`, no ticket,
    // and the task's two transfers still to spend.
    assert!(audit.records().is_empty());
    let production = production().dry_run().build().unwrap();
    assert!(production.pending_tickets().await.unwrap().is_empty());
    for id in ["c1", "c4"] {
        let outcome = production.dispatch(&ctx, &call(id, "savings", 600)).await;
        assert_eq!(outcome.code(), Some(RejectionCode::DryRun), "{id}");
    }
}
