//! The durable stores behind registries: pending calls survive a restart, and a ticket, a
//! call, a budget and the audit chain are each decided once by several registries sharing one
//! database, each with its own connection, as separate workers would. Every scenario runs on
//! SQLite and on PostgreSQL.

mod common;

use std::sync::Mutex;

use common::Backend;
use portcullis::prelude::*;
use portcullis::{ApprovalDecision, RegistryBuilder, Reviewer, record_decision};
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

/// A worker: its own connection to the shared database.
async fn worker(backend: &Backend) -> Registry {
    let store = backend.open().await;
    Registry::builder()
        .tool(PaySupplier)
        .tool(Transfer)
        .approval_store(store.clone())
        .accept_unsigned_decisions()
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

on_both!(
    a_pending_call_survives_a_restart_and_runs_once,
    a_decision_recorded_elsewhere_runs_once,
    two_workers_decide_one_ticket_once,
    a_call_sent_to_several_workers_runs_once,
    several_workers_write_one_verifiable_audit_chain,
    workers_share_one_budget,
    a_policy_reads_what_a_task_spent_on_every_worker,
    recover_compensates_a_crashed_workers_transaction_once,
    a_store_that_fails_refuses_and_nothing_runs,
    opening_an_existing_store_creates_nothing,
    a_call_whose_worker_stopped_is_never_run_again,
    a_decided_call_whose_worker_stopped_before_it_ran_runs_once_elsewhere,
    an_unknown_outcome_is_settled_once,
);

/// A worker takes a decided payout to run and stops before running it (its lease is all that
/// is left of it): while the lease holds, no worker runs it; once it ran out, another worker
/// runs it, once, and the dead worker's lease no longer holds it.
async fn a_decided_call_whose_worker_stopped_before_it_ran_runs_once_elsewhere(backend: Backend) {
    use portcullis::{ApprovalStore, Lease};
    use std::time::Duration;

    let supplier = format!("leased-{}", backend.tag());
    let ctx = CallContext::new("agent").with_task_id("t-lease");
    let registry = worker(&backend).await;
    let ticket = registry
        .dispatch(&ctx, &payout(&supplier))
        .await
        .ticket()
        .unwrap()
        .id
        .clone();
    let store = backend.open().await;
    record_decision(&store, &ticket, approve()).await.unwrap();

    let dying = backend.open().await;
    let lease = Lease::new(Duration::from_millis(300));
    let leased = ApprovalStore::lease(&dying, &ticket, &lease).await.unwrap();
    assert!(leased.is_some(), "the dying worker took the call");
    let second = Lease::new(Duration::from_secs(60));
    assert!(
        ApprovalStore::lease(&store, &ticket, &second)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        registry.run_decided().await.unwrap().is_empty(),
        "the lease holds"
    );
    assert_eq!(payouts_to(&supplier), 0);

    tokio::time::sleep(Duration::from_millis(400)).await;
    let ran = registry.run_decided().await.unwrap();
    assert_eq!(ran.len(), 1);
    assert_eq!(
        ran[0].1.output(),
        Some(&json!(format!("paid 900 to {supplier}")))
    );
    assert_eq!(payouts_to(&supplier), 1);
    assert!(
        !ApprovalStore::remove(&dying, &ticket, &lease.id)
            .await
            .unwrap()
    );
    assert!(registry.run_decided().await.unwrap().is_empty());
    let repeated = registry.dispatch(&ctx, &payout(&supplier)).await;
    assert_eq!(repeated, ran[0].1);
    assert_eq!(payouts_to(&supplier), 1);
}

async fn a_pending_call_survives_a_restart_and_runs_once(backend: Backend) {
    let supplier = format!("acme-{}", backend.tag());
    let ctx = CallContext::new("agent")
        .with_tenant("acme")
        .with_task_id("t1");
    let ticket = {
        let before = worker(&backend).await;
        let pending = before.dispatch(&ctx, &payout(&supplier)).await;
        pending.ticket().unwrap().clone()
    };
    let after = worker(&backend).await;
    assert_eq!(after.pending_tickets().await.unwrap(), vec![ticket.clone()]);
    let resent = after.dispatch(&ctx, &payout(&supplier)).await;
    assert_eq!(
        resent.ticket().map(|t| &t.id),
        Some(&ticket.id),
        "the same ticket"
    );
    let outcome = after.resume(&ticket.id, approve()).await;
    assert_eq!(
        outcome.output(),
        Some(&json!(format!("paid 900 to {supplier}")))
    );
    let again = worker(&backend)
        .await
        .dispatch(&ctx, &payout(&supplier))
        .await;
    assert_eq!(
        again, outcome,
        "a repeat after another restart reads the outcome"
    );
    assert_eq!(payouts_to(&supplier), 1);
}

/// A reviewer decides in another process (as the command line does), held to the approver
/// rules; a worker that starts later runs the call once, and a second decision is refused.
async fn a_decision_recorded_elsewhere_runs_once(backend: Backend) {
    let supplier = format!("initech-{}", backend.tag());
    let ctx = CallContext::new("agent").with_task_id("t4");
    let pending = worker(&backend)
        .await
        .dispatch(&ctx, &payout(&supplier))
        .await;
    let ticket = pending.ticket().unwrap().id.clone();

    let store = backend.open().await;
    let clerk = ApprovalDecision::Approve {
        reviewer: Reviewer::new("carl").with_roles(["clerk"]),
    };
    let refused = record_decision(&store, &ticket, clerk).await.unwrap_err();
    assert_eq!(refused.code(), RejectionCode::ReviewerNotAllowed);
    let own = ApprovalDecision::Approve {
        reviewer: Reviewer::new("agent").with_roles(["finance"]),
    };
    let refused = record_decision(&store, &ticket, own).await.unwrap_err();
    assert_eq!(refused.code(), RejectionCode::SelfApproval);
    let decided = record_decision(&store, &ticket, approve()).await.unwrap();
    assert_eq!(decided.decision, Some(approve().into()));
    let again = record_decision(&store, &ticket, approve())
        .await
        .unwrap_err();
    assert_eq!(again.code(), RejectionCode::TicketDecided);
    assert!(
        worker(&backend)
            .await
            .pending_tickets()
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        payouts_to(&supplier),
        0,
        "nothing runs before a worker takes it"
    );

    let workers = [worker(&backend).await, worker(&backend).await];
    let (first, second) = tokio::join!(workers[0].run_decided(), workers[1].run_decided());
    let ran: Vec<_> = first.unwrap().into_iter().chain(second.unwrap()).collect();
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert_eq!(ran[0].0, ticket);
    assert!(ran[0].1.is_completed());
    assert_eq!(payouts_to(&supplier), 1);
    let resent = worker(&backend)
        .await
        .dispatch(&ctx, &payout(&supplier))
        .await;
    assert_eq!(resent, ran[0].1);
}

async fn two_workers_decide_one_ticket_once(backend: Backend) {
    let supplier = format!("globex-{}", backend.tag());
    let ctx = CallContext::new("agent").with_task_id("t2");
    let pending = worker(&backend)
        .await
        .dispatch(&ctx, &payout(&supplier))
        .await;
    let ticket = pending.ticket().unwrap().id.clone();
    let mut decisions = Vec::new();
    for _ in 0..2 {
        let (registry, ticket) = (worker(&backend).await, ticket.clone());
        decisions.push(tokio::spawn(async move {
            registry.resume(&ticket, approve()).await
        }));
    }
    let mut completed = 0;
    for decision in decisions {
        match decision.await.unwrap() {
            Outcome::Completed(_) => completed += 1,
            other => assert!(
                matches!(
                    other.code(),
                    Some(RejectionCode::TicketDecided | RejectionCode::TicketNotPending)
                ),
                "{other:?}"
            ),
        }
    }
    assert_eq!(completed, 1);
    assert_eq!(payouts_to(&supplier), 1);
}

async fn a_call_sent_to_several_workers_runs_once(backend: Backend) {
    let amount = if backend.tag() == "sqlite" {
        5_000
    } else {
        5_001
    };
    let ctx = CallContext::new("agent").with_task_id("t3");
    let send = ToolCall::new("w1", "transfer", json!({"amount_cents": amount}));
    let mut dispatches = Vec::new();
    for _ in 0..8 {
        let (registry, ctx, send) = (worker(&backend).await, ctx.clone(), send.clone());
        dispatches.push(tokio::spawn(
            async move { registry.dispatch(&ctx, &send).await },
        ));
    }
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
        .filter(|moved| **moved == amount)
        .count();
    assert_eq!(runs, 1);
    let other_arguments = ToolCall::new("w1", "transfer", json!({"amount_cents": 6_000}));
    let reused = worker(&backend)
        .await
        .dispatch(&ctx, &other_arguments)
        .await;
    assert_eq!(reused.code(), Some(RejectionCode::CallIdReused));
}

fn audit_key() -> portcullis::audit::AuditKey {
    portcullis::audit::AuditKey::new(b"the operator's secret, 32 bytes+".to_vec()).unwrap()
}

/// An audited worker: its own connection, writing to the shared log.
async fn audited_worker(backend: &Backend) -> Registry {
    Registry::builder()
        .tool(Transfer)
        .audit(backend.open().await)
        .audit_key(audit_key())
        .build()
        .unwrap()
}

async fn several_workers_write_one_verifiable_audit_chain(backend: Backend) {
    use portcullis::audit::{ChainBreak, VerifyError, verify, verify_to};

    let mut registries = Vec::new();
    for _ in 0..4 {
        registries.push(audited_worker(&backend).await);
    }
    let dispatches: Vec<_> = registries
        .into_iter()
        .enumerate()
        .flat_map(|(worker, registry)| {
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
    let store = backend.open().await;
    let records = store.audit_records(0, None).await.unwrap();
    assert_eq!(
        records.len(),
        64,
        "an about-to-run and an outcome record per call"
    );
    let checkpoint = verify(&records, Some(&audit_key())).unwrap();
    assert_eq!(checkpoint.length, 64);
    // The store's own verify, a page at a time, reaches the same checkpoint.
    assert_eq!(
        store.verify_audit(Some(&audit_key()), None).await.unwrap(),
        checkpoint
    );
    assert_eq!(
        store.audit_records(60, Some(2)).await.unwrap(),
        records[60..62]
    );

    // A cut tail verifies alone and fails against the checkpoint; an altered record fails.
    backend
        .tamper("DELETE FROM audit_records WHERE sequence >= 62")
        .await;
    let cut = store.audit_records(0, None).await.unwrap();
    assert!(verify(&cut, Some(&audit_key())).is_ok());
    assert_eq!(
        verify_to(&cut, Some(&audit_key()), &checkpoint),
        Err(ChainBreak::CutShort {
            expected_length: 64,
            found_length: 62
        })
    );
    assert!(matches!(
        store
            .verify_audit(Some(&audit_key()), Some(&checkpoint))
            .await,
        Err(VerifyError::Broken(ChainBreak::CutShort {
            expected_length: 64,
            found_length: 62
        }))
    ));
    backend
        .tamper("UPDATE audit_records SET record = replace(record, '\"agent1\"', '\"agent9\"')")
        .await;
    let altered = store.audit_records(0, None).await.unwrap();
    let Err(ChainBreak::Altered { position }) = verify(&altered, Some(&audit_key())) else {
        panic!("the altered record is found");
    };
    assert!(matches!(
        store.verify_audit(Some(&audit_key()), None).await,
        Err(VerifyError::Broken(ChainBreak::Altered { position: found })) if found == position
    ));
}

/// Look a supplier up.
#[tool(read_only, cost = 2)]
fn find_supplier(name: String) -> Result<String, ToolError> {
    Ok(name)
}

async fn budgeted_worker(backend: &Backend) -> Registry {
    let store = backend.open().await;
    Registry::builder()
        .tool(FindSupplier)
        .budget(portcullis::BudgetLimits {
            max_calls_per_task: Some(3),
            max_cost_per_task: Some(5),
            ..portcullis::BudgetLimits::default()
        })
        .budget_store(store)
        .refusal_limit(Some(portcullis::RefusalLimit::whole_task(40)))
        .build()
        .unwrap()
}

/// 16 tasks, each sending 6 calls spread over 4 workers: every task gets exactly what its
/// budget allows (two calls of cost 2 under a cost of 5), never more, and its refusals are
/// counted across the workers.
async fn workers_share_one_budget(backend: Backend) {
    let mut workers = Vec::new();
    for _ in 0..4 {
        workers.push(budgeted_worker(&backend).await);
    }
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
    let stopped = budgeted_worker(&backend).await;
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

/// A policy over what the task spent: a task spends at most 4 (two lookups).
struct SpendingCap;

impl portcullis::Policy for SpendingCap {
    fn evaluate<'a>(
        &'a self,
        request: portcullis::PolicyRequest<'a>,
    ) -> portcullis::BoxFuture<'a, Result<portcullis::Decision, portcullis::PolicyError>> {
        let spent = request.usage.map(|usage| (usage.calls, usage.cost));
        Box::pin(async move {
            match spent {
                Some((_, cost)) if cost < 4 => Ok(portcullis::Decision::Allow),
                Some((calls, cost)) => Ok(portcullis::Decision::deny(
                    "spending_cap",
                    format!("the task spent {cost} in {calls} calls"),
                )),
                None => Err(portcullis::PolicyError::new("no usage")),
            }
        })
    }

    fn reads_budget(&self) -> bool {
        true
    }
}

/// A policy that reads what a task spent sees the calls every worker counted, with no budget
/// limit set: the registry counts every task for it.
async fn a_policy_reads_what_a_task_spent_on_every_worker(backend: Backend) {
    let mut workers = Vec::new();
    for _ in 0..2 {
        let store = backend.open().await;
        let worker = Registry::builder()
            .tool(FindSupplier)
            .policy(SpendingCap)
            .budget_store(store)
            .build()
            .unwrap();
        workers.push(worker);
    }
    let ctx = CallContext::new("agent").with_task_id(format!("spending-{}", backend.tag()));
    let call =
        |index: usize| ToolCall::new(format!("s{index}"), "find_supplier", json!({"name": "x"}));
    let first = workers[0].dispatch(&ctx, &call(0)).await;
    let second = workers[1].dispatch(&ctx, &call(1)).await;
    assert!(
        first.is_completed() && second.is_completed(),
        "{first:?} {second:?}"
    );
    let third = workers[0].dispatch(&ctx, &call(2)).await;
    let refusal = third.rejection().unwrap();
    assert_eq!(refusal.code(), RejectionCode::PolicyDenied);
    assert_eq!(refusal.reason(), Some("spending_cap"));
    assert_eq!(refusal.message(), "the task spent 4 in 2 calls");
    let other_task = ctx
        .clone()
        .with_task_id(format!("spending-other-{}", backend.tag()));
    assert!(
        workers[1]
            .dispatch(&other_task, &call(3))
            .await
            .is_completed()
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

async fn transacting_worker(backend: &Backend, lease: std::time::Duration) -> Registry {
    Registry::builder()
        .tool(Charge)
        .transaction_store(backend.open().await, lease)
        .build()
        .unwrap()
}

/// A worker stops in the middle of a transaction (its memory is gone, nothing ran its
/// compensations); another worker's `recover` compensates each step once, last first.
async fn recover_compensates_a_crashed_workers_transaction_once(backend: Backend) {
    use std::time::Duration;

    // Each backend charges amounts of its own: the ledger is shared by the tests.
    let base = if backend.tag() == "sqlite" { 0 } else { 1_000 };
    let crashed = transacting_worker(&backend, Duration::ZERO).await;
    let ctx = CallContext::new("agent").with_task_id("checkout");
    let mut transaction = crashed.transaction(&ctx);
    for (id, amount) in [("c1", base + 101), ("c2", base + 202)] {
        let step = ToolCall::new(id, "charge", json!({"amount_cents": amount}));
        assert!(transaction.dispatch(&step).await.is_completed());
    }
    // The worker dies: no commit, no abort, no drop.
    std::mem::forget(transaction);

    // A transaction still held by a live worker is not taken.
    let live = transacting_worker(&backend, Duration::from_secs(600)).await;
    let mut held = live.transaction(&ctx);
    let step = ToolCall::new("c3", "charge", json!({"amount_cents": base + 303}));
    assert!(held.dispatch(&step).await.is_completed());
    let mut finished = live.transaction(&ctx);
    let step = ToolCall::new("c4", "charge", json!({"amount_cents": base + 404}));
    assert!(finished.dispatch(&step).await.is_completed());
    finished.commit().await;

    let recovered = transacting_worker(&backend, Duration::from_secs(600))
        .await
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
        .map(|amount| amount.signum() * (amount.abs() - base))
        .filter(|amount| [101, 202, 303, 404].contains(&amount.abs()))
        .collect();
    assert_eq!(ledger, [101, 202, 303, 404, -202, -101]);
    held.abort().await;
}

/// The database loses its tables under running workers: each gate that needs the store refuses
/// with its own code, and no tool runs (the store fails closed).
async fn a_store_that_fails_refuses_and_nothing_runs(backend: Backend) {
    let supplier = format!("umbrella-{}", backend.tag());
    let amount = if backend.tag() == "sqlite" {
        7_000
    } else {
        7_001
    };
    let with = |configure: fn(RegistryBuilder, portcullis_stores::Store) -> RegistryBuilder| {
        let backend = backend.clone();
        async move {
            let store = backend.open().await;
            configure(Registry::builder().tool(PaySupplier).tool(Transfer), store)
                .build()
                .unwrap()
        }
    };
    let claims = with(|builder, store| builder.repeat_store(store)).await;
    let budget = with(|builder, store| {
        builder
            .budget(portcullis::BudgetLimits {
                max_calls_per_task: Some(100),
                ..portcullis::BudgetLimits::default()
            })
            .budget_store(store)
    })
    .await;
    let audit = with(|builder, store| builder.audit(store)).await;
    let spending = with(|builder, store| builder.policy(SpendingCap).budget_store(store)).await;
    let approvals =
        with(|builder, store| builder.approval_store(store).accept_unsigned_decisions()).await;
    let pending = approvals
        .dispatch(&CallContext::new("agent"), &payout(&supplier))
        .await;
    let ticket = pending.ticket().unwrap().id.clone();

    backend
        .tamper(if backend.tag() == "sqlite" {
            "DROP TABLE claims; DROP TABLE budget_tasks; DROP TABLE audit_records;
             DROP TABLE pending_calls;"
        } else {
            "DROP SCHEMA portcullis CASCADE;"
        })
        .await;

    let ctx = CallContext::new("agent").with_task_id("t5");
    let send = |id: &str| ToolCall::new(id, "transfer", json!({"amount_cents": amount}));
    let refused = [
        (&claims, "c1", RejectionCode::ClaimsUnavailable),
        (&budget, "c2", RejectionCode::BudgetUnavailable),
        (&audit, "c3", RejectionCode::AuditUnavailable),
        (&spending, "c4", RejectionCode::BudgetUnavailable),
    ];
    for (registry, id, code) in refused {
        assert_eq!(registry.dispatch(&ctx, &send(id)).await.code(), Some(code));
    }
    let another = approvals
        .dispatch(
            &CallContext::new("agent"),
            &payout(&format!("{supplier}-2")),
        )
        .await;
    assert_eq!(another.code(), Some(RejectionCode::ApprovalsUnavailable));
    let decided = approvals.resume(&ticket, approve()).await;
    assert_eq!(decided.code(), Some(RejectionCode::ApprovalsUnavailable));
    assert_eq!(
        approvals.pending_tickets().await.unwrap_err().code(),
        RejectionCode::ApprovalsUnavailable
    );
    assert_eq!(
        approvals.run_decided().await.unwrap_err().code(),
        RejectionCode::ApprovalsUnavailable
    );
    let moved = MOVED
        .lock()
        .unwrap()
        .iter()
        .filter(|moved| **moved == amount)
        .count();
    assert_eq!(moved, 0, "no transfer ran");
    assert_eq!(payouts_to(&supplier), 0, "no payout ran");
}

/// `open_existing` refuses a database that holds no store, and creates nothing in it; once a
/// worker created the store, it opens.
async fn opening_an_existing_store_creates_nothing(backend: Backend) {
    use portcullis_stores::{OpenError, Store};

    if backend.tag() == "sqlite" {
        std::fs::write(&backend.location, b"").unwrap();
    }
    let refused = Store::open_existing(&backend.location).await.err().unwrap();
    assert!(
        matches!(refused, OpenError::NotMigrated { found: 0, .. }),
        "{refused}"
    );
    assert!(refused.to_string().contains("holds no portcullis store"));
    let again = Store::open_existing(&backend.location).await.err().unwrap();
    assert!(
        matches!(again, OpenError::NotMigrated { found: 0, .. }),
        "still none"
    );
    drop(backend.open().await);
    assert!(Store::open_existing(&backend.location).await.is_ok());
}

/// The wires started, one entry per start; each backend wires references of its own.
static WIRES_STARTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Wire funds to a bank; this one never hears back.
#[tool(risk = "medium")]
async fn wire_funds(reference: String) -> Result<String, ToolError> {
    WIRES_STARTED.lock().unwrap().push(reference);
    std::future::pending::<()>().await;
    Ok("wired".to_owned())
}

/// A registry of `wire_funds` on the backend's store, with a claim lease of `lease`.
async fn wiring(backend: &Backend, lease: std::time::Duration) -> Registry {
    Registry::builder()
        .tool(WireFunds)
        .repeat_store(backend.open().await)
        .claim_lease(lease)
        .build()
        .unwrap()
}

/// How many times the wire of `reference` started.
fn wires_started(reference: &str) -> usize {
    WIRES_STARTED
        .lock()
        .unwrap()
        .iter()
        .filter(|started| *started == reference)
        .count()
}

/// Sends `send` to a worker that stops in the middle of it (its dispatch is dropped once the
/// wire started, as a killed process would leave it).
async fn stop_in_the_middle(
    backend: &Backend,
    ctx: &CallContext,
    send: &ToolCall,
    reference: &str,
) {
    use std::time::Duration;

    let stopping = wiring(backend, Duration::from_secs(600)).await;
    let running = {
        let (ctx, send) = (ctx.clone(), send.clone());
        tokio::spawn(async move { stopping.dispatch(&ctx, &send).await })
    };
    while wires_started(reference) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    running.abort();
    let _ = running.await;
}

/// A worker stops in the middle of a call: within the claim's lease a repeat is told the call
/// is running; after it, that the outcome is unknown. The call never starts a second time.
async fn a_call_whose_worker_stopped_is_never_run_again(backend: Backend) {
    use std::time::Duration;

    let reference = format!("wire-{}", backend.tag());
    let ctx = CallContext::new("agent").with_task_id("t6");
    let send = ToolCall::new("w1", "wire_funds", json!({ "reference": reference }));
    stop_in_the_middle(&backend, &ctx, &send, &reference).await;

    let patient = wiring(&backend, Duration::from_secs(600)).await;
    let repeat = patient.dispatch(&ctx, &send).await;
    assert_eq!(repeat.code(), Some(RejectionCode::CallInProgress));
    tokio::time::sleep(Duration::from_millis(80)).await;
    let brief = wiring(&backend, Duration::from_millis(50)).await;
    let repeat = brief.dispatch(&ctx, &send).await;
    assert_eq!(repeat.code(), Some(RejectionCode::OutcomeUnknown));
    assert!(!repeat.rejection().unwrap().retryable());
    assert_eq!(wires_started(&reference), 1, "started once, never again");
}

/// An operator settles the claim of a call whose outcome is unknown: only such a claim (one
/// within its lease is refused), once (of two operators at once, one wins), and repeats of
/// the call then get the settled outcome. The call never starts again.
async fn an_unknown_outcome_is_settled_once(backend: Backend) {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    let reference = format!("settle-{}", backend.tag());
    let ctx = CallContext::new("agent").with_task_id("t7");
    let send = ToolCall::new("s1", "wire_funds", json!({ "reference": reference }));
    stop_in_the_middle(&backend, &ctx, &send, &reference).await;

    let store = backend.open().await;
    let claim = store
        .open_claims()
        .await
        .unwrap()
        .into_iter()
        .find(|claim| claim.key.task == "t7" && claim.key.call_id == "s1")
        .expect("the stopped call's claim is open");
    let key = claim.key;
    assert_eq!(
        store.find_claim(&key.claim_id()).await.unwrap(),
        Some(key.clone())
    );
    assert_eq!(store.find_claim("0000000000000000").await.unwrap(), None);

    let wired = Outcome::Completed(json!({"transfer": "tr_1"}));
    // Claimed after the lease's start: its worker may still report.
    let within = store.settle_abandoned(&key, &wired, 0).await.unwrap_err();
    assert_eq!(within.code(), RejectionCode::ClaimNotAbandoned);

    tokio::time::sleep(Duration::from_millis(20)).await;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let failed = Outcome::Rejected(Rejection::new(RejectionCode::ToolFailed, "bounced"));
    let operators: Vec<_> = [wired.clone(), failed.clone()]
        .into_iter()
        .map(|outcome| {
            let (backend, key) = (backend.clone(), key.clone());
            tokio::spawn(async move {
                let store = backend.open().await;
                let settled = store.settle_abandoned(&key, &outcome, now).await;
                (outcome, settled)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for operator in operators {
        let (outcome, settled) = operator.await.unwrap();
        match settled {
            Ok(()) => winners.push(outcome),
            Err(refusal) => assert_eq!(refusal.code(), RejectionCode::ClaimSettled),
        }
    }
    assert_eq!(winners.len(), 1, "one operator settles it");

    let brief = wiring(&backend, Duration::from_millis(10)).await;
    let repeat = brief.dispatch(&ctx, &send).await;
    assert_eq!(repeat, winners[0], "a repeat gets the settled outcome");
    let again = store.settle_abandoned(&key, &wired, now).await.unwrap_err();
    assert_eq!(again.code(), RejectionCode::ClaimSettled);
    assert!(
        !store
            .open_claims()
            .await
            .unwrap()
            .iter()
            .any(|claim| claim.key == key),
        "a settled claim is not open"
    );
    assert_eq!(
        store.find_claim(&key.claim_id()).await.unwrap(),
        Some(key),
        "found, settled"
    );
    assert_eq!(wires_started(&reference), 1, "started once, never again");
}

/// The entries posted, one per run; the outage test posts amounts of its own.
static POSTED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// The database the next posting of 7001 cuts off, as a database that dies mid-call.
static OUTAGE: Mutex<Option<String>> = Mutex::new(None);

/// Lets connections to `database` in, or throws every one out and lets none in, from the
/// server's maintenance database: the store's own connections die, as they do when the server
/// is killed, and new ones are refused until it is back.
async fn reachable(database: &str, reachable: bool) {
    use portcullis_stores::{PostgresTls, postgres_client};

    let url = std::env::var("PORTCULLIS_POSTGRES_URL").unwrap();
    let client = postgres_client(&url, &PostgresTls::default())
        .await
        .unwrap();
    client
        .batch_execute(&format!(
            "ALTER DATABASE {database} WITH ALLOW_CONNECTIONS {reachable}"
        ))
        .await
        .unwrap();
    if !reachable {
        client
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                &[&database],
            )
            .await
            .unwrap();
    }
}

/// Post an entry to the ledger.
#[tool(risk = "medium")]
async fn post_entry(amount_cents: u64) -> Result<u64, ToolError> {
    POSTED.lock().unwrap().push(amount_cents);
    if amount_cents == 7001 {
        let database = OUTAGE.lock().unwrap().clone();
        if let Some(database) = database {
            reachable(&database, false).await;
        }
    }
    Ok(amount_cents)
}

/// The store's PostgreSQL dies while a call runs, and comes back: the call completed, and its
/// outcome record is stored once the database is back, before anything else; the calls sent
/// meanwhile are refused and run nothing; every call that ran has its `about_to_run` and its
/// outcome record, and none ran twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_run_has_its_outcome_on_record_when_the_database_dies_mid_call() {
    use std::time::{Duration, Instant};

    let Some(backend) = Backend::postgres("outage").await else {
        return;
    };
    let database = "portcullis_outage";
    *OUTAGE.lock().unwrap() = Some(database.to_owned());
    let store = backend.open().await;
    let registry = Registry::builder()
        .tool(PostEntry)
        .repeat_store(store.clone())
        .audit(store)
        .build()
        .unwrap();
    let ctx = CallContext::new("agent").with_task_id("t-outage");
    let post = |amount: u64| {
        ToolCall::new(
            format!("c{amount}"),
            "post_entry",
            json!({"amount_cents": amount}),
        )
    };

    for amount in [7000, 7001] {
        let outcome = registry.dispatch(&ctx, &post(amount)).await;
        assert!(outcome.is_completed(), "{amount}: {outcome:?}");
    }
    // The database is gone: calls are refused, and run nothing.
    for amount in [7002, 7003] {
        let outcome = registry.dispatch(&ctx, &post(amount)).await;
        assert!(outcome.rejection().is_some(), "{amount}: {outcome:?}");
    }
    assert!(registry.flush_audit().await.is_err());
    reachable(database, true).await;
    let started = Instant::now();
    while registry.flush_audit().await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the store came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for amount in [7004, 7005] {
        let outcome = registry.dispatch(&ctx, &post(amount)).await;
        assert!(outcome.is_completed(), "{amount}: {outcome:?}");
    }

    let posted: Vec<u64> = POSTED.lock().unwrap().clone();
    assert_eq!(
        posted,
        [7000, 7001, 7004, 7005],
        "each ran once, none while down"
    );
    let records = backend.open().await.audit_records(0, None).await.unwrap();
    portcullis::audit::verify(&records, None).unwrap();
    for amount in posted {
        let call_id = format!("c{amount}");
        let decisions: Vec<&str> = records
            .iter()
            .filter(|record| record.call_id == call_id)
            .map(|record| record.decision.as_str())
            .collect();
        assert_eq!(decisions, ["about_to_run", "completed"], "{call_id}");
    }
}
