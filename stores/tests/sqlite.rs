//! The SQLite store behind a registry: pending calls survive a restart, and a ticket or a
//! call is decided once by several registries sharing one file, each with its own connection,
//! as separate worker processes would.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use portcullis::prelude::*;
use portcullis::{ApprovalDecision, Reviewer};
use portcullis_stores::SqliteStore;
use serde_json::json;

/// The suppliers paid, one entry per payout; each test pays a supplier of its own.
static PAID: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn payouts_to(supplier: &str) -> usize {
    PAID.lock()
        .unwrap()
        .iter()
        .filter(|paid| *paid == supplier)
        .count()
}

/// Pay a supplier.
#[tool(
    risk = "critical",
    irreversible = "payouts settle at once",
    approver = "finance"
)]
fn pay_supplier(supplier: String, amount_cents: u64) -> Result<String, ToolError> {
    PAID.lock().unwrap().push(supplier.clone());
    Ok(format!("paid {amount_cents} to {supplier}"))
}

static TRANSFERS: AtomicUsize = AtomicUsize::new(0);

/// Move money between two of the company's accounts.
#[tool(risk = "medium")]
async fn transfer(amount_cents: u64) -> Result<u64, ToolError> {
    TRANSFERS.fetch_add(1, Ordering::SeqCst);
    tokio::task::yield_now().await;
    Ok(amount_cents)
}

fn database(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("portcullis-sqlite-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("state.db")
}

/// A worker: its own connection to the shared file.
fn worker(path: &PathBuf) -> Registry {
    let store = SqliteStore::open(path).unwrap();
    Registry::builder()
        .tool(PaySupplier)
        .tool(Transfer)
        .approval_store(store.clone())
        .repeat_store(store)
        .build()
        .unwrap()
}

fn payout(supplier: &str) -> ToolCall {
    ToolCall::new(
        "p1",
        "pay_supplier",
        json!({"supplier": supplier, "amount_cents": 900}),
    )
}

fn approve() -> ApprovalDecision {
    ApprovalDecision::Approve {
        reviewer: Reviewer::new("rita").with_roles(["finance"]),
    }
}

#[tokio::test]
async fn a_pending_call_survives_a_restart_and_runs_once() {
    let path = database("restart");
    let ctx = CallContext::new("agent")
        .with_tenant("acme")
        .with_task_id("t1");
    let ticket = {
        let before = worker(&path);
        let pending = before.dispatch(&ctx, &payout("acme")).await;
        pending.ticket().unwrap().clone()
    };
    let after = worker(&path);
    assert_eq!(after.pending_tickets().await, vec![ticket.clone()]);
    let resent = after.dispatch(&ctx, &payout("acme")).await;
    assert_eq!(
        resent.ticket().map(|t| &t.id),
        Some(&ticket.id),
        "the same ticket"
    );
    let outcome = after.resume(&ticket.id, approve()).await;
    assert_eq!(outcome.output(), Some(&json!("paid 900 to acme")));
    let again = worker(&path).dispatch(&ctx, &payout("acme")).await;
    assert_eq!(
        again, outcome,
        "a repeat after another restart reads the outcome"
    );
    assert_eq!(payouts_to("acme"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_workers_decide_one_ticket_once() {
    let path = database("two-workers");
    let ctx = CallContext::new("agent").with_task_id("t2");
    let pending = worker(&path).dispatch(&ctx, &payout("globex")).await;
    let ticket = pending.ticket().unwrap().id.clone();
    let decisions: Vec<_> = (0..2)
        .map(|_| {
            let (registry, ticket) = (worker(&path), ticket.clone());
            tokio::spawn(async move { registry.resume(&ticket, approve()).await })
        })
        .collect();
    let mut completed = 0;
    for decision in decisions {
        match decision.await.unwrap() {
            Outcome::Completed(_) => completed += 1,
            other => assert_eq!(other.code(), Some(RejectionCode::TicketNotPending)),
        }
    }
    assert_eq!(completed, 1);
    assert_eq!(payouts_to("globex"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_sent_to_several_workers_runs_once() {
    let path = database("claims");
    let ctx = CallContext::new("agent").with_task_id("t3");
    let send = ToolCall::new("w1", "transfer", json!({"amount_cents": 5}));
    let dispatches: Vec<_> = (0..8)
        .map(|_| {
            let (registry, ctx, send) = (worker(&path), ctx.clone(), send.clone());
            tokio::spawn(async move { registry.dispatch(&ctx, &send).await })
        })
        .collect();
    for dispatch in dispatches {
        let outcome = dispatch.await.unwrap();
        assert!(
            outcome.is_completed() || outcome.code() == Some(RejectionCode::CallInProgress),
            "{outcome:?}"
        );
    }
    assert_eq!(TRANSFERS.load(Ordering::SeqCst), 1);
    let other_arguments = ToolCall::new("w1", "transfer", json!({"amount_cents": 6}));
    let reused = worker(&path).dispatch(&ctx, &other_arguments).await;
    assert_eq!(reused.code(), Some(RejectionCode::CallIdReused));
}
