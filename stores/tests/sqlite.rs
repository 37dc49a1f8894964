//! The SQLite store behind a registry: pending calls survive a restart, and a ticket or a
//! call is decided once by several registries sharing one file, each with its own connection,
//! as separate worker processes would.

use std::path::PathBuf;
use std::sync::Mutex;

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

/// The amounts transferred, one entry per run; each test moves amounts of its own.
static MOVED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// Move money between two of the company's accounts.
#[tool(risk = "medium")]
async fn transfer(amount_cents: u64) -> Result<u64, ToolError> {
    MOVED.lock().unwrap().push(amount_cents);
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
    let send = ToolCall::new("w1", "transfer", json!({"amount_cents": 5_000}));
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
    let runs = MOVED
        .lock()
        .unwrap()
        .iter()
        .filter(|moved| **moved == 5_000)
        .count();
    assert_eq!(runs, 1);
    let other_arguments = ToolCall::new("w1", "transfer", json!({"amount_cents": 6_000}));
    let reused = worker(&path).dispatch(&ctx, &other_arguments).await;
    assert_eq!(reused.code(), Some(RejectionCode::CallIdReused));
}

fn audit_key() -> portcullis::audit::AuditKey {
    portcullis::audit::AuditKey::new(b"the operator's secret, 32 bytes+".to_vec()).unwrap()
}

/// An audited worker: its own connection, writing to the shared log.
fn audited_worker(path: &PathBuf) -> Registry {
    Registry::builder()
        .tool(Transfer)
        .audit(SqliteStore::open(path).unwrap())
        .audit_key(audit_key())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_workers_write_one_verifiable_audit_chain() {
    use portcullis::audit::{ChainBreak, verify, verify_to};

    let path = database("audit");
    let dispatches: Vec<_> = (0..4)
        .flat_map(|worker| {
            let registry = audited_worker(&path);
            (0..8).map(move |index| {
                let registry = registry.clone();
                tokio::spawn(async move {
                    let ctx = CallContext::new(format!("agent{worker}"));
                    let call = ToolCall::new(
                        format!("c{index}"),
                        "transfer",
                        json!({"amount_cents": index}),
                    );
                    registry.dispatch(&ctx, &call).await
                })
            })
        })
        .collect();
    for dispatch in dispatches {
        assert!(dispatch.await.unwrap().is_completed());
    }
    let store = SqliteStore::open(&path).unwrap();
    let records = store.audit_records(0, None).unwrap();
    assert_eq!(
        records.len(),
        64,
        "an about-to-run and an outcome record per call"
    );
    let checkpoint = verify(&records, Some(&audit_key())).unwrap();
    assert_eq!(checkpoint.length, 64);
    assert_eq!(store.audit_records(60, Some(2)).unwrap(), records[60..62]);

    // A cut tail verifies alone and fails against the checkpoint; an altered record fails.
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection
        .execute("DELETE FROM audit_records WHERE sequence >= 62", [])
        .unwrap();
    let cut = store.audit_records(0, None).unwrap();
    assert!(verify(&cut, Some(&audit_key())).is_ok());
    assert_eq!(
        verify_to(&cut, Some(&audit_key()), &checkpoint),
        Err(ChainBreak::CutShort {
            expected_length: 64,
            found_length: 62
        })
    );
    connection
        .execute(
            "UPDATE audit_records SET record = replace(record, '\"agent1\"', '\"agent9\"')",
            [],
        )
        .unwrap();
    let altered = store.audit_records(0, None).unwrap();
    assert!(matches!(
        verify(&altered, Some(&audit_key())),
        Err(ChainBreak::Altered { .. })
    ));
}

/// Look a supplier up.
#[tool(read_only, cost = 2)]
fn find_supplier(name: String) -> Result<String, ToolError> {
    Ok(name)
}

fn budgeted_worker(path: &PathBuf) -> Registry {
    let store = SqliteStore::open(path).unwrap();
    Registry::builder()
        .tool(FindSupplier)
        .budget(portcullis::BudgetLimits {
            max_calls_per_task: Some(3),
            max_cost_per_task: Some(5),
            ..portcullis::BudgetLimits::default()
        })
        .budget_store(store)
        .refusal_limit(Some(40))
        .build()
        .unwrap()
}

/// 16 tasks, each sending 6 calls spread over 4 workers: every task gets exactly what its
/// budget allows (two calls of cost 2 under a cost of 5), never more, and its refusals are
/// counted across the workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_share_one_budget() {
    let path = database("budget");
    let workers: Vec<Registry> = (0..4).map(|_| budgeted_worker(&path)).collect();
    let dispatches: Vec<_> = (0..16)
        .flat_map(|task| {
            let workers = workers.clone();
            (0..6).map(move |index| {
                let registry = workers[index % 4].clone();
                tokio::spawn(async move {
                    let ctx = CallContext::new("agent").with_task_id(format!("task{task}"));
                    let call = ToolCall::new(
                        format!("c{index}"),
                        "find_supplier",
                        json!({"name": format!("s{index}")}),
                    );
                    (task, registry.dispatch(&ctx, &call).await)
                })
            })
        })
        .collect();
    let mut completed = [0; 16];
    for dispatch in dispatches {
        let (task, outcome) = dispatch.await.unwrap();
        match outcome.code() {
            None => completed[task] += 1,
            Some(code) => assert_eq!(code, RejectionCode::BudgetCostExceeded),
        }
    }
    assert_eq!(completed, [2; 16]);
    let stopped = budgeted_worker(&path);
    for index in 0..36 {
        let ctx = CallContext::new("agent").with_task_id("task0");
        let call = ToolCall::new(
            format!("more{index}"),
            "find_supplier",
            json!({"name": "x"}),
        );
        stopped.dispatch(&ctx, &call).await;
    }
    let ctx = CallContext::new("agent").with_task_id("task0");
    let call = ToolCall::new("last", "find_supplier", json!({"name": "x"}));
    let outcome = workers[1].dispatch(&ctx, &call).await;
    assert_eq!(
        outcome.code(),
        Some(RejectionCode::TooManyRefusals),
        "4 refusals before, 36 after: 40 across the workers"
    );
}

/// The amounts charged and refunded, one entry per run; this test's amounts are its own.
static CHARGES: Mutex<Vec<i64>> = Mutex::new(Vec::new());

/// Charge a card.
#[tool(risk = "high", rollback = refund)]
fn charge(amount_cents: i64) -> Result<i64, ToolError> {
    CHARGES.lock().unwrap().push(amount_cents);
    Ok(amount_cents)
}

async fn refund(_: &CallContext, args: &ChargeArgs, _: &i64) -> Result<(), ToolError> {
    CHARGES.lock().unwrap().push(-args.amount_cents);
    Ok(())
}

fn transacting_worker(path: &PathBuf, lease: std::time::Duration) -> Registry {
    Registry::builder()
        .tool(Charge)
        .transaction_store(SqliteStore::open(path).unwrap(), lease)
        .build()
        .unwrap()
}

/// A worker stops in the middle of a transaction (its memory is gone, nothing ran its
/// compensations); another worker's `recover` compensates each step once, last first.
#[tokio::test]
async fn recover_compensates_a_crashed_workers_transaction_once() {
    use std::time::Duration;

    let path = database("recover");
    let crashed = transacting_worker(&path, Duration::ZERO);
    let ctx = CallContext::new("agent").with_task_id("checkout");
    let mut transaction = crashed.transaction(&ctx);
    for (id, amount) in [("c1", 101), ("c2", 202)] {
        let step = ToolCall::new(id, "charge", json!({"amount_cents": amount}));
        assert!(transaction.dispatch(&step).await.is_completed());
    }
    // The worker dies: no commit, no abort, no drop.
    std::mem::forget(transaction);

    // A transaction still held by a live worker is not taken.
    let live = transacting_worker(&path, Duration::from_secs(600));
    let mut held = live.transaction(&ctx);
    let step = ToolCall::new("c3", "charge", json!({"amount_cents": 303}));
    assert!(held.dispatch(&step).await.is_completed());
    let mut finished = live.transaction(&ctx);
    let step = ToolCall::new("c4", "charge", json!({"amount_cents": 404}));
    assert!(finished.dispatch(&step).await.is_completed());
    finished.commit().await;

    let recovered = transacting_worker(&path, Duration::from_secs(600))
        .recover()
        .await;
    assert_eq!(recovered.len(), 1);
    let calls: Vec<&str> = recovered[0].1.iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(calls, ["c2", "c1"], "last first");
    assert!(
        recovered[0]
            .1
            .iter()
            .all(|c| c.result == portcullis::CompensationResult::Compensated)
    );
    assert!(live.recover().await.is_empty(), "compensated once");
    let ledger: Vec<i64> = CHARGES
        .lock()
        .unwrap()
        .iter()
        .copied()
        .filter(|amount| [101, 202, 303, 404].contains(&amount.abs()))
        .collect();
    assert_eq!(ledger, [101, 202, 303, 404, -202, -101]);
    held.abort().await;
}
