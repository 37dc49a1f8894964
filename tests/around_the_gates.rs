//! Nothing around the gates: repeats, approvals and the audit log cannot be replayed, forged or
//! cut. One test per road an attacker found around the gates, each asserting the exact outcome.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portcullis::audit::{
    AuditKey, AuditRecord, AuditSink, ChainBreak, Checkpoint, JsonLinesAuditSink, MemoryAuditSink,
    Unchained, read_json_lines, verify, verify_to,
};
use portcullis::prelude::*;
use portcullis::{
    ApprovalDecision, BoxFuture, BudgetCapacity, BudgetLimits, InMemoryApprovalStore,
    InMemoryBudgetStore, PendingLimits, RefusalLimit, Reviewer, Transaction,
};
use serde_json::{Value, json};

fn call(id: &str, tool: &str, arguments: Value) -> ToolCall {
    ToolCall::new(id, tool, arguments)
}

fn key() -> AuditKey {
    AuditKey::new(b"the operator's secret, 32 bytes+".to_vec()).unwrap()
}

fn approve(reviewer: Reviewer) -> ApprovalDecision {
    ApprovalDecision::Approve { reviewer }
}

// ---------------------------------------------------------------------------------------------
// Repeats

static PAYROLL_RUNS: AtomicUsize = AtomicUsize::new(0);

/// The payroll report of the month.
#[tool(role = "admin")]
fn payroll_report(month: String) -> Result<String, ToolError> {
    let run = PAYROLL_RUNS.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(format!("payroll of {month}, run {run}"))
}

/// A viewer who reuses an admin's call id in the admin's task gets nothing of the admin's:
/// the tool is unknown to it. Another admin reusing the id makes a call of its own.
#[tokio::test]
async fn a_call_id_does_not_cross_callers() {
    let registry = Registry::builder().tool(PayrollReport).build().unwrap();
    let report = || call("1", "payroll_report", json!({"month": "2026-10"}));
    let alice = CallContext::new("alice")
        .with_roles(["admin"])
        .with_task_id("task");
    let first = registry.dispatch(&alice, &report()).await;
    let secret = first.output().unwrap().clone();

    let viewer = CallContext::new("vic")
        .with_roles(["viewer"])
        .with_task_id("task");
    let replayed = registry.dispatch(&viewer, &report()).await;
    assert_eq!(replayed.code(), Some(RejectionCode::UnknownTool));
    assert!(
        !replayed
            .rejection()
            .unwrap()
            .to_string()
            .contains("payroll of")
    );

    let bob = CallContext::new("bob")
        .with_roles(["admin"])
        .with_task_id("task");
    let own = registry.dispatch(&bob, &report()).await;
    assert!(own.is_completed());
    assert_ne!(own.output(), Some(&secret), "bob's call ran for bob");
    assert_eq!(
        registry.dispatch(&alice, &report()).await.output(),
        Some(&secret)
    );
}

/// The same id with other arguments is refused, not answered with the first call's outcome.
#[tokio::test]
async fn a_call_id_reused_for_other_arguments_is_refused() {
    let registry = Registry::builder().tool(PayrollReport).build().unwrap();
    let alice = CallContext::new("alice").with_roles(["admin"]);
    let october = call("7", "payroll_report", json!({"month": "2026-10"}));
    assert!(registry.dispatch(&alice, &october).await.is_completed());
    let november = call("7", "payroll_report", json!({"month": "2026-11"}));
    let outcome = registry.dispatch(&alice, &november).await;
    assert_eq!(outcome.code(), Some(RejectionCode::CallIdReused));
    // The same arguments in another spelling are the same call.
    let spelled = ToolCall::new("7", "payroll_report", r#"{ "month" : "2026-10" }"#);
    assert!(registry.dispatch(&alice, &spelled).await.is_completed());
}

static CHARGED: Mutex<Vec<u64>> = Mutex::new(Vec::new());
static REFUNDED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// Charge a card.
#[tool(risk = "high", rollback = refund_charge)]
fn charge(amount_cents: u64) -> Result<u64, ToolError> {
    CHARGED.lock().unwrap().push(amount_cents);
    Ok(amount_cents)
}

async fn refund_charge(_: &CallContext, args: &ChargeArgs, _: &u64) -> Result<(), ToolError> {
    REFUNDED.lock().unwrap().push(args.amount_cents);
    Ok(())
}

/// A second transaction of the task that sends a call id the first completed gets its
/// outcome, and does not make it a step of its own: aborting both refunds once.
#[tokio::test]
async fn a_second_transaction_does_not_adopt_a_step() {
    let registry = Registry::builder().tool(Charge).build().unwrap();
    let ctx = CallContext::new("agent").with_task_id("checkout");
    let pay = call("c1", "charge", json!({"amount_cents": 4_200}));
    let mut first: Transaction = registry.transaction(&ctx);
    assert!(first.dispatch(&pay).await.is_completed());
    let mut second = registry.transaction(&ctx);
    assert_eq!(second.dispatch(&pay).await.output(), Some(&json!(4_200)));
    assert!(
        second.abort().await.is_empty(),
        "nothing of its own to undo"
    );
    assert_eq!(first.abort().await.len(), 1);
    assert_eq!(CHARGED.lock().unwrap().as_slice(), [4_200]);
    assert_eq!(REFUNDED.lock().unwrap().as_slice(), [4_200]);
}

static SLOW_RUNS: AtomicUsize = AtomicUsize::new(0);

/// Send a wire transfer, slowly.
#[tool(risk = "medium")]
async fn wire_transfer(amount_cents: u64) -> Result<u64, ToolError> {
    SLOW_RUNS.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(amount_cents)
}

/// 16 concurrent dispatches of one call id: the tool runs once; the others are told the call
/// is in progress, and a later repeat reads its outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_duplicates_run_once() {
    let sink = MemoryAuditSink::default();
    let registry = Registry::builder()
        .tool(WireTransfer)
        .audit(sink.clone())
        .build()
        .unwrap();
    let ctx = CallContext::new("agent");
    let send = call("w1", "wire_transfer", json!({"amount_cents": 100}));
    let dispatches: Vec<_> = (0..16)
        .map(|_| {
            let (registry, ctx, send) = (registry.clone(), ctx.clone(), send.clone());
            tokio::spawn(async move { registry.dispatch(&ctx, &send).await })
        })
        .collect();
    let mut completed = 0;
    for dispatch in dispatches {
        match dispatch.await.unwrap() {
            Outcome::Completed(output) => {
                assert_eq!(output, json!(100));
                completed += 1;
            }
            other => assert_eq!(other.code(), Some(RejectionCode::CallInProgress)),
        }
    }
    assert_eq!(SLOW_RUNS.load(Ordering::SeqCst), 1);
    assert!(completed >= 1);
    assert_eq!(
        registry.dispatch(&ctx, &send).await.output(),
        Some(&json!(100))
    );
    assert_eq!(SLOW_RUNS.load(Ordering::SeqCst), 1);
}

// ---------------------------------------------------------------------------------------------
// Approvals

static PAYOUTS: AtomicUsize = AtomicUsize::new(0);

/// Pay a supplier.
#[tool(
    risk = "critical",
    irreversible = "payouts settle at once",
    approver = "finance",
    max_calls_per_task = 1
)]
fn pay_supplier(
    supplier: String,
    amount_cents: u64,
    #[sensitive] pin: String,
) -> Result<String, ToolError> {
    let _ = pin;
    PAYOUTS.fetch_add(1, Ordering::SeqCst);
    Ok(format!("paid {amount_cents} to {supplier}"))
}

fn payout(id: &str, amount: u64) -> ToolCall {
    call(
        id,
        "pay_supplier",
        json!({"supplier": "acme", "amount_cents": amount, "pin": "9876"}),
    )
}

fn finance() -> Reviewer {
    Reviewer::new("rita").with_roles(["finance"])
}

/// Resending a pending call returns its ticket: one ticket, one run.
#[tokio::test]
async fn a_resent_pending_call_has_one_ticket_and_runs_once() {
    let before = PAYOUTS.load(Ordering::SeqCst);
    let registry = Registry::builder().tool(PaySupplier).build().unwrap();
    let ctx = CallContext::new("agent");
    let first = registry.dispatch(&ctx, &payout("p1", 500)).await;
    let again = registry.dispatch(&ctx, &payout("p1", 500)).await;
    let ticket = first.ticket().unwrap().clone();
    assert_eq!(again.ticket().map(|t| &t.id), Some(&ticket.id));
    assert_eq!(registry.pending_tickets().await.unwrap().len(), 1);
    assert!(
        registry
            .resume(&ticket.id, approve(finance()))
            .await
            .is_completed()
    );
    let second = registry.resume(&ticket.id, approve(finance())).await;
    assert_eq!(second.code(), Some(RejectionCode::TicketNotPending));
    let resent = registry.dispatch(&ctx, &payout("p1", 500)).await;
    assert_eq!(resent.output(), Some(&json!("paid 500 to acme")));
    assert_eq!(PAYOUTS.load(Ordering::SeqCst) - before, 1);
}

/// 10,000 pending calls against `max_calls_per_task = 1`: one waits, the others are refused by
/// the budget when they would begin to wait. A rejected ticket gives its reservation back.
#[tokio::test]
async fn pending_calls_are_counted_by_the_budget() {
    let registry = Registry::builder()
        .tool(PaySupplier)
        .refusal_limit(None)
        .build()
        .unwrap();
    let ctx = CallContext::new("agent");
    let mut codes = std::collections::BTreeMap::new();
    for index in 0..10_000 {
        let outcome = registry
            .dispatch(&ctx, &payout(&format!("p{index}"), 1))
            .await;
        let code = outcome.code().map_or("pending", |code| code.as_str());
        *codes.entry(code).or_insert(0) += 1;
    }
    assert_eq!(
        codes,
        [("budget_calls_exceeded", 9_999), ("pending", 1)].into()
    );
    let tickets = registry.pending_tickets().await.unwrap();
    assert_eq!(tickets.len(), 1);
    let reject = ApprovalDecision::Reject {
        reviewer: finance(),
        message: "not this supplier".into(),
    };
    assert_eq!(
        registry.resume(&tickets[0].id, reject).await.code(),
        Some(RejectionCode::ApprovalRejected)
    );
    let next = registry.dispatch(&ctx, &payout("p_next", 1)).await;
    assert!(next.ticket().is_some(), "the reservation was given back");
}

/// Send a newsletter.
#[tool(risk = "medium", approval = "required")]
fn send_newsletter(subject: String) -> Result<String, ToolError> {
    Ok(subject)
}

/// Without a budget, the pending calls of a task and of an actor are capped.
#[tokio::test]
async fn pending_calls_are_capped() {
    let registry = Registry::builder()
        .tool(SendNewsletter)
        .pending_limits(PendingLimits {
            per_task: 3,
            per_actor: 4,
        })
        .build()
        .unwrap();
    let send = |id: usize| {
        call(
            &format!("n{id}"),
            "send_newsletter",
            json!({"subject": "hi"}),
        )
    };
    let ctx = CallContext::new("agent").with_task_id("a");
    for id in 0..3 {
        assert!(registry.dispatch(&ctx, &send(id)).await.ticket().is_some());
    }
    let over = registry.dispatch(&ctx, &send(3)).await;
    assert_eq!(over.code(), Some(RejectionCode::TooManyPending));
    let other_task = CallContext::new("agent").with_task_id("b");
    assert!(
        registry
            .dispatch(&other_task, &send(4))
            .await
            .ticket()
            .is_some()
    );
    let over = registry.dispatch(&other_task, &send(5)).await;
    assert_eq!(over.code(), Some(RejectionCode::TooManyPending));
}

/// The hostile tenant against the default in-memory stores of claims and approvals: one caller
/// leaves calls waiting for a reviewer, task after task, as fast as it can. Past its share (a
/// hundredth of the 10,000 open claims the repeat store holds) its next call is refused with its
/// own share's code, nothing claimed; another caller, and the same actor in another tenant,
/// still get their tickets, and a call of its own that is decided gives a place back.
#[tokio::test]
async fn one_caller_leaving_calls_waiting_is_held_to_its_share() {
    let registry = Registry::builder().tool(SendNewsletter).build().unwrap();
    let send = |id: usize| {
        call(
            &format!("n{id}"),
            "send_newsletter",
            json!({"subject": "hi"}),
        )
    };
    let mallory = |task: usize| {
        CallContext::new("mallory")
            .with_tenant("acme")
            .with_task_id(format!("m{task}"))
    };
    let mut tickets = Vec::new();
    for task in 0..100 {
        let waiting = registry.dispatch(&mallory(task), &send(task)).await;
        tickets.push(waiting.ticket().expect("waits").clone());
    }
    for task in 100..200 {
        let over = registry.dispatch(&mallory(task), &send(task)).await;
        let rejection = over.rejection().expect("refused");
        assert_eq!(rejection.code(), RejectionCode::ClaimShareFull, "{task}");
        assert!(rejection.retryable());
    }
    let alice = CallContext::new("alice").with_tenant("acme");
    assert!(registry.dispatch(&alice, &send(1)).await.ticket().is_some());
    let elsewhere = CallContext::new("mallory").with_tenant("globex");
    assert!(
        registry
            .dispatch(&elsewhere, &send(1))
            .await
            .ticket()
            .is_some()
    );
    let reject = ApprovalDecision::Reject {
        reviewer: Reviewer::new("rita"),
        message: "not today".into(),
    };
    assert_eq!(
        registry.resume(&tickets[0].id, reject).await.code(),
        Some(RejectionCode::ApprovalRejected)
    );
    assert!(
        registry
            .dispatch(&mallory(200), &send(200))
            .await
            .ticket()
            .is_some()
    );
}

/// Ticket ids are 128 random bits: a guess finds nothing.
#[tokio::test]
async fn a_guessed_ticket_id_finds_nothing() {
    let registry = Registry::builder().tool(SendNewsletter).build().unwrap();
    let ctx = CallContext::new("agent");
    let a = registry
        .dispatch(&ctx, &call("1", "send_newsletter", json!({"subject": "a"})))
        .await;
    let b = registry
        .dispatch(&ctx, &call("2", "send_newsletter", json!({"subject": "b"})))
        .await;
    let (a, b) = (&a.ticket().unwrap().id, &b.ticket().unwrap().id);
    let hex = |id: &str| id.strip_prefix("ticket_").map(str::len);
    assert_eq!((hex(a), hex(b)), (Some(32), Some(32)));
    assert_ne!(a[7..15], b[7..15], "no shared prefix to guess from");
    for guess in [
        "ticket_1",
        "ticket_00000000000000000000000000000000",
        &a.replace('a', "b"),
    ] {
        if guess == a {
            continue;
        }
        let outcome = registry.resume(guess, approve(Reviewer::new("rita"))).await;
        assert_eq!(
            outcome.code(),
            Some(RejectionCode::TicketNotPending),
            "{guess}"
        );
    }
}

/// The actor cannot approve its own call; the ticket stays for a reviewer who may.
#[tokio::test]
async fn an_actor_cannot_approve_its_own_call() {
    let registry = Registry::builder().tool(SendNewsletter).build().unwrap();
    let ctx = CallContext::new("mallory");
    let pending = registry
        .dispatch(&ctx, &call("1", "send_newsletter", json!({"subject": "x"})))
        .await;
    let ticket = pending.ticket().unwrap().id.clone();
    let own = registry
        .resume(&ticket, approve(Reviewer::new("mallory")))
        .await;
    assert_eq!(own.code(), Some(RejectionCode::SelfApproval));
    let tenant_reviewer = Reviewer::new("tina").with_tenant("acme");
    let other = registry.resume(&ticket, approve(tenant_reviewer)).await;
    assert_eq!(
        other.code(),
        Some(RejectionCode::ReviewerNotAllowed),
        "a tenant's reviewer decides only that tenant's tickets"
    );
    assert_eq!(registry.pending_tickets().await.unwrap().len(), 1);
    assert!(
        registry
            .resume(&ticket, approve(Reviewer::new("rita")))
            .await
            .is_completed()
    );

    let allowing = Registry::builder()
        .tool(SendNewsletter)
        .allow_self_approval(true)
        .build()
        .unwrap();
    let pending = allowing
        .dispatch(&ctx, &call("1", "send_newsletter", json!({"subject": "x"})))
        .await;
    let ticket = &pending.ticket().unwrap().id;
    assert!(
        allowing
            .resume(ticket, approve(Reviewer::new("mallory")))
            .await
            .is_completed()
    );
}

/// A reviewer without the approver role may neither decide nor read the ticket; one with it
/// sees the real arguments, which the model and the audit never see.
#[tokio::test]
async fn only_an_authorized_reviewer_decides_and_sees_the_arguments() {
    let sink = MemoryAuditSink::default();
    let registry = Registry::builder()
        .tool(PaySupplier)
        .audit(sink.clone())
        .build()
        .unwrap();
    let ctx = CallContext::new("agent").with_tenant("acme_corp");
    let pending = registry.dispatch(&ctx, &payout("p1", 700)).await;
    let ticket = pending.ticket().unwrap().clone();
    assert_eq!(ticket.arguments["pin"], "[redacted]");
    assert_eq!(ticket.approvers, ["finance"]);

    let intern = Reviewer::new("ivan").with_roles(["support"]);
    let refused = registry.resume(&ticket.id, approve(intern.clone())).await;
    assert_eq!(refused.code(), Some(RejectionCode::ReviewerNotAllowed));
    let reject = ApprovalDecision::Reject {
        reviewer: intern.clone(),
        message: "no".into(),
    };
    assert_eq!(
        registry.resume(&ticket.id, reject).await.code(),
        Some(RejectionCode::ReviewerNotAllowed),
        "nor can it destroy the ticket"
    );
    let error = registry.review(&ticket.id, &intern).await.unwrap_err();
    assert_eq!(error.code(), RejectionCode::ReviewerNotAllowed);
    let other_tenant = finance().with_tenant("globex");
    let error = registry
        .review(&ticket.id, &other_tenant)
        .await
        .unwrap_err();
    assert_eq!(error.code(), RejectionCode::ReviewerNotAllowed);

    let (shown, arguments) = registry.review(&ticket.id, &finance()).await.unwrap();
    assert_eq!(shown.id, ticket.id);
    assert_eq!(arguments["pin"], "9876");
    assert!(
        registry
            .resume(&ticket.id, approve(finance()))
            .await
            .is_completed()
    );
    let records = sink.records();
    // What the records say of the call (their hashes and ids may hold any digits by chance).
    let said: Vec<String> = records
        .iter()
        .map(|record| {
            format!(
                "{} {} {:?} {:?}",
                record.arguments, record.summary, record.original_arguments, record.resolution
            )
        })
        .collect();
    let said = said.join("\n");
    assert!(!said.contains("9876"), "{said}");
    assert!(said.contains("refused to ivan"));
    assert!(said.contains("approved by rita"));
}

mod changed {
    use super::*;

    /// Pay a supplier: the same tool, now costing more.
    #[tool(
        risk = "critical",
        irreversible = "payouts settle at once",
        approver = "finance",
        max_calls_per_task = 1,
        cost = 5
    )]
    pub fn pay_supplier(
        supplier: String,
        amount_cents: u64,
        #[sensitive] pin: String,
    ) -> Result<String, ToolError> {
        let _ = pin;
        Ok(format!("paid {amount_cents} to {supplier}"))
    }
}

/// A ticket opened under one contract does not run under another, and expired tickets are
/// swept and audited.
#[tokio::test]
async fn tickets_bind_their_contract_and_expire() {
    let store = InMemoryApprovalStore::default();
    let before = Registry::builder()
        .tool(PaySupplier)
        .approval_store(store.clone())
        .accept_unsigned_decisions()
        .build()
        .unwrap();
    let ctx = CallContext::new("agent");
    let pending = before.dispatch(&ctx, &payout("p1", 1)).await;
    let ticket = pending.ticket().unwrap().id.clone();
    let after = Registry::builder()
        .tool(changed::PaySupplier)
        .approval_store(store)
        .accept_unsigned_decisions()
        .build()
        .unwrap();
    let outcome = after.resume(&ticket, approve(finance())).await;
    assert_eq!(outcome.code(), Some(RejectionCode::ContractChanged));

    let sink = MemoryAuditSink::default();
    let hasty = Registry::builder()
        .tool(SendNewsletter)
        .approval_lifetime(Duration::ZERO)
        .audit(sink.clone())
        .build()
        .unwrap();
    let newsletter = call("n1", "send_newsletter", json!({"subject": "late"}));
    assert!(hasty.dispatch(&ctx, &newsletter).await.ticket().is_some());
    let expired = hasty.expire_tickets().await;
    assert_eq!(expired.len(), 1);
    assert!(hasty.pending_tickets().await.unwrap().is_empty());
    let record = sink.records().pop().unwrap();
    assert_eq!(record.code.as_deref(), Some("approval_expired"));
    assert_eq!(record.resolution.as_deref(), Some("expired"));
    let resent = hasty.dispatch(&ctx, &newsletter).await;
    assert_eq!(resent.code(), Some(RejectionCode::ApprovalExpired));
}

// ---------------------------------------------------------------------------------------------
// The audit log

static ERASED: AtomicUsize = AtomicUsize::new(0);

/// Erase a customer's data.
#[tool(risk = "medium")]
fn erase_customer(customer_id: u64) -> Result<u64, ToolError> {
    ERASED.fetch_add(1, Ordering::SeqCst);
    Ok(customer_id)
}

/// Look a customer up.
#[tool(read_only)]
fn find_customer(customer_id: u64) -> Result<u64, ToolError> {
    Ok(customer_id)
}

static PURGED: AtomicUsize = AtomicUsize::new(0);

/// Purge old backups.
#[tool(risk = "medium")]
fn purge_backups(older_than_days: u32) -> Result<u32, ToolError> {
    PURGED.fetch_add(1, Ordering::SeqCst);
    Ok(older_than_days)
}

/// A sink whose disk is full.
struct FullDisk;

impl AuditSink for FullDisk {
    fn append(&self, _: Unchained) -> BoxFuture<'_, std::io::Result<()>> {
        Box::pin(std::future::ready(Err(std::io::Error::other(
            "no space left on device",
        ))))
    }
}

/// With a failing sink, a call that must be audited first does not run; a read-only call
/// still does.
#[tokio::test]
async fn no_record_no_effect() {
    let registry = Registry::builder()
        .tool(PurgeBackups)
        .tool(FindCustomer)
        .audit(FullDisk)
        .build()
        .unwrap();
    let ctx = CallContext::new("agent");
    let purge = call("p1", "purge_backups", json!({"older_than_days": 30}));
    let outcome = registry.dispatch(&ctx, &purge).await;
    assert_eq!(outcome.code(), Some(RejectionCode::AuditUnavailable));
    assert_eq!(PURGED.load(Ordering::SeqCst), 0);
    // Nothing ran, so the call id is free: once the disk has room, the same call runs.
    assert_eq!(
        registry.dispatch(&ctx, &purge).await.code(),
        Some(RejectionCode::AuditUnavailable)
    );
    let find = call("f1", "find_customer", json!({"customer_id": 7}));
    assert!(registry.dispatch(&ctx, &find).await.is_completed());
}

/// A sink that fails while its switch is on.
#[derive(Clone, Default)]
struct Flaky {
    failing: Arc<std::sync::atomic::AtomicBool>,
    records: MemoryAuditSink,
}

impl AuditSink for Flaky {
    fn append(&self, entry: Unchained) -> BoxFuture<'_, std::io::Result<()>> {
        if self.failing.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(Err(std::io::Error::other(
                "the log's disk is away",
            ))));
        }
        self.records.append(entry)
    }
}

/// An approved call that cannot be recorded first does not run, and waits again under its
/// ticket, decided, until `run_decided` finds the audit back.
#[tokio::test]
async fn an_approved_call_waits_for_its_audit() {
    let sink = Flaky::default();
    let registry = Registry::builder()
        .tool(PaySupplier)
        .audit(sink.clone())
        .build()
        .unwrap();
    let ctx = CallContext::new("agent");
    let pending = registry.dispatch(&ctx, &payout("p1", 300)).await;
    let ticket = pending.ticket().unwrap().id.clone();
    sink.failing.store(true, Ordering::SeqCst);
    let outcome = registry.resume(&ticket, approve(finance())).await;
    assert_eq!(outcome.code(), Some(RejectionCode::AuditUnavailable));
    let resent = registry.dispatch(&ctx, &payout("p1", 300)).await;
    assert_eq!(
        resent.ticket().map(|t| &t.id),
        Some(&ticket),
        "still waiting"
    );
    // The approval holds: another decision is refused, and the call runs once the audit can
    // record it.
    let reject = ApprovalDecision::Reject {
        reviewer: finance(),
        message: "changed my mind".into(),
    };
    let again = registry.resume(&ticket, reject).await;
    assert_eq!(again.code(), Some(RejectionCode::TicketDecided));
    let retried = registry.run_decided().await.unwrap();
    assert_eq!(retried[0].1.code(), Some(RejectionCode::AuditUnavailable));
    sink.failing.store(false, Ordering::SeqCst);
    let ran = registry.run_decided().await.unwrap();
    assert_eq!(ran.len(), 1);
    assert_eq!(ran[0].0, ticket);
    let outcome = ran[0].1.clone();
    assert_eq!(outcome.output(), Some(&json!("paid 300 to acme")));
    assert!(registry.run_decided().await.unwrap().is_empty());
    assert!(verify(&sink.records.records(), None).is_ok());
    let resent = registry.dispatch(&ctx, &payout("p1", 300)).await;
    assert_eq!(resent, outcome);
}

/// A fresh directory for one test's audit log (removed when the test ends, passed or
/// failed), and the log's path in it.
fn temp_log(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("portcullis-{name}-"))
        .tempdir()
        .unwrap();
    let path = dir.path().join("audit.jsonl");
    (dir, path)
}

fn audited(path: &std::path::Path) -> Registry {
    Registry::builder()
        .tool(EraseCustomer)
        .tool(FindCustomer)
        .audit(JsonLinesAuditSink::open(path, true).unwrap())
        .audit_key(key())
        .build()
        .unwrap()
}

/// Two registries append to one log in turn, each continuing the other's chain; the whole
/// log verifies under the key, the write-ahead records included.
#[tokio::test]
async fn a_log_appended_by_two_registries_verifies() {
    let (_dir, path) = temp_log("two-writers");
    let (first, second) = (audited(&path), audited(&path));
    let ctx = CallContext::new("agent");
    for index in 0..6u64 {
        let registry = if index % 2 == 0 { &first } else { &second };
        let find = call(
            &format!("f{index}"),
            "find_customer",
            json!({"customer_id": index}),
        );
        assert!(registry.dispatch(&ctx, &find).await.is_completed());
    }
    let erase = call("e", "erase_customer", json!({"customer_id": 1}));
    assert!(first.dispatch(&ctx, &erase).await.is_completed());
    drop((first, second));
    let reopened = audited(&path);
    let find = call("last", "find_customer", json!({"customer_id": 9}));
    assert!(reopened.dispatch(&ctx, &find).await.is_completed());

    let records = read_json_lines(&path).unwrap();
    let decisions: Vec<&str> = records.iter().map(|r| r.decision.as_str()).collect();
    assert_eq!(decisions.len(), 9);
    assert_eq!(&decisions[6..8], ["about_to_run", "completed"]);
    let checkpoint = verify(&records, Some(&key())).unwrap();
    assert_eq!(checkpoint, Checkpoint::after(&records[8]));
}

/// A cut tail verifies alone, and fails against a checkpoint kept elsewhere; a chain rewritten
/// without the key fails under it.
#[tokio::test]
async fn a_cut_or_rewritten_log_fails_verification() {
    let (_dir, path) = temp_log("cut");
    let registry = audited(&path);
    let ctx = CallContext::new("agent");
    for index in 0..4u64 {
        let find = call(
            &format!("f{index}"),
            "find_customer",
            json!({"customer_id": index}),
        );
        registry.dispatch(&ctx, &find).await;
    }
    let records = read_json_lines(&path).unwrap();
    let checkpoint = verify(&records, Some(&key())).unwrap();

    let cut = &records[..2];
    assert!(verify(cut, Some(&key())).is_ok());
    assert_eq!(
        verify_to(cut, Some(&key()), &checkpoint),
        Err(ChainBreak::CutShort {
            expected_length: 4,
            found_length: 2
        })
    );

    // The forger edits a record and re-links every record after it, as one can without the
    // key: the plain-hash chain it builds holds together, the keyed one does not.
    let forged: Vec<AuditRecord> = {
        let sink = MemoryAuditSink::default();
        let forger = Registry::builder()
            .tool(FindCustomer)
            .audit(sink.clone())
            .build()
            .unwrap();
        for index in 0..4u64 {
            let customer = if index == 1 { 999 } else { index };
            let find = call(
                &format!("f{index}"),
                "find_customer",
                json!({"customer_id": customer}),
            );
            forger.dispatch(&ctx, &find).await;
        }
        sink.records()
    };
    assert!(verify(&forged, None).is_ok());
    assert_eq!(
        verify(&forged, Some(&key())),
        Err(ChainBreak::Altered { position: 0 })
    );
    assert_eq!(
        verify_to(&records, Some(&key()), &checkpoint),
        Ok(checkpoint)
    );
}

// ---------------------------------------------------------------------------------------------
// Probing

/// A tool the caller may not use is refused exactly as one that does not exist.
#[tokio::test]
async fn the_existence_of_a_tool_cannot_be_probed() {
    let registry = Registry::builder()
        .tool(PayrollReport)
        .tool(FindCustomer)
        .build()
        .unwrap();
    let viewer = CallContext::new("vic");
    let hidden = registry
        .dispatch(&viewer, &call("1", "payroll_report", json!({"month": "x"})))
        .await;
    let missing = registry
        .dispatch(
            &viewer,
            &call("2", "payroll_reports", json!({"month": "x"})),
        )
        .await;
    let (hidden, missing) = (hidden.rejection().unwrap(), missing.rejection().unwrap());
    assert_eq!(hidden.code(), RejectionCode::UnknownTool);
    assert_eq!(missing.code(), RejectionCode::UnknownTool);
    assert_eq!(hidden.hint(), missing.hint());
    assert_eq!(hidden.hint(), Some("the available tools are find_customer"));
    assert_eq!(
        hidden.message().replace("payroll_report", "X"),
        missing.message().replace("payroll_reports", "X")
    );

    let telling = Registry::builder()
        .tool(PayrollReport)
        .reveal_denied_tools(true)
        .build()
        .unwrap();
    let told = telling
        .dispatch(&viewer, &call("1", "payroll_report", json!({"month": "x"})))
        .await;
    assert_eq!(told.code(), Some(RejectionCode::RoleDenied));
}

/// A clock for an in-memory budget store, moved by hand: milliseconds since it was made.
fn hand_clock() -> (InMemoryBudgetStore, Arc<AtomicU64>) {
    let start = Instant::now();
    let elapsed_ms = Arc::new(AtomicU64::new(0));
    let hand = Arc::clone(&elapsed_ms);
    let store = InMemoryBudgetStore::with_clock(move || {
        start + Duration::from_millis(hand.load(Ordering::SeqCst))
    });
    (store, elapsed_ms)
}

/// Sends `count` calls that decode refuses in `ctx`'s task.
async fn refused_calls(registry: &Registry, ctx: &CallContext, count: usize, round: &str) {
    for index in 0..count {
        let bad = call(
            &format!("{round}{index}"),
            "find_customer",
            json!({"customer_id": "x"}),
        );
        assert_eq!(
            registry.dispatch(ctx, &bad).await.code(),
            Some(RejectionCode::InvalidType)
        );
    }
}

/// A model that keeps sending refused calls is stopped; a task of its own starts afresh. Once
/// its refusals are older than the window, the task may call again, and an endless retrier is
/// stopped again after as many refusals: it is held to 5 refusals every 10 minutes.
#[tokio::test]
async fn an_endless_retrier_is_stopped_for_as_long_as_its_refusals_are_recent() {
    let (store, clock) = hand_clock();
    let registry = Registry::builder()
        .tool(FindCustomer)
        .budget_store(store)
        .refusal_limit(Some(RefusalLimit {
            refusals: 5,
            per: Duration::from_secs(600),
        }))
        .build()
        .unwrap();
    let ctx = CallContext::new("agent").with_task_id("loop");
    refused_calls(&registry, &ctx, 5, "b").await;
    let good = call("g", "find_customer", json!({"customer_id": 1}));
    let stopped = registry.dispatch(&ctx, &good).await;
    assert_eq!(stopped.code(), Some(RejectionCode::TooManyRefusals));
    assert!(!stopped.rejection().unwrap().retryable());
    let fresh = CallContext::new("agent").with_task_id("next");
    assert!(registry.dispatch(&fresh, &good).await.is_completed());

    // Calls while stopped do not count: the stop ends when the 5 refusals are old.
    clock.store(599_999, Ordering::SeqCst);
    let still = call("g2", "find_customer", json!({"customer_id": 1}));
    let still = registry.dispatch(&ctx, &still).await;
    assert_eq!(still.code(), Some(RejectionCode::TooManyRefusals));
    clock.store(600_000, Ordering::SeqCst);
    let later = call("g3", "find_customer", json!({"customer_id": 1}));
    assert!(registry.dispatch(&ctx, &later).await.is_completed());

    // The retrier that goes on is stopped again.
    refused_calls(&registry, &ctx, 5, "c").await;
    let again = call("g4", "find_customer", json!({"customer_id": 1}));
    assert_eq!(
        registry.dispatch(&ctx, &again).await.code(),
        Some(RejectionCode::TooManyRefusals)
    );
}

/// A refusal limit over the task's whole life stops the task for good.
#[tokio::test]
async fn a_whole_task_refusal_limit_never_lets_go() {
    let (store, clock) = hand_clock();
    let registry = Registry::builder()
        .tool(FindCustomer)
        .budget_store(store)
        .refusal_limit(Some(RefusalLimit::whole_task(3)))
        .build()
        .unwrap();
    let ctx = CallContext::new("agent").with_task_id("loop");
    refused_calls(&registry, &ctx, 3, "b").await;
    clock.store(365 * 24 * 3600 * 1000, Ordering::SeqCst);
    let good = call("g", "find_customer", json!({"customer_id": 1}));
    assert_eq!(
        registry.dispatch(&ctx, &good).await.code(),
        Some(RejectionCode::TooManyRefusals)
    );
}

// ---------------------------------------------------------------------------------------------
// All together

static ORDERS: AtomicUsize = AtomicUsize::new(0);

/// Place an order.
#[tool(risk = "medium", cost = 2)]
fn place_order(item: String) -> Result<String, ToolError> {
    ORDERS.fetch_add(1, Ordering::SeqCst);
    Ok(item)
}

static BIG_ORDERS: AtomicUsize = AtomicUsize::new(0);

/// Place a large order.
#[tool(risk = "medium", approval = "required", cost = 3)]
fn place_large_order(item: String) -> Result<String, ToolError> {
    BIG_ORDERS.fetch_add(1, Ordering::SeqCst);
    Ok(item)
}

/// 64 tasks at once, each sending every call twice, some of them waiting for approval that
/// two reviewers race to give: every call runs once, the budgets count exactly, and the audit
/// chain verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_tasks_with_repeats_and_approvals() {
    let sink = MemoryAuditSink::default();
    let registry = Registry::builder()
        .tool(PlaceOrder)
        .tool(PlaceLargeOrder)
        .budget(BudgetLimits {
            max_cost_per_task: Some(7),
            ..BudgetLimits::default()
        })
        .audit(sink.clone())
        .audit_key(key())
        .build()
        .unwrap();
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..64)
        .map(|task| {
            let (registry, outcomes) = (registry.clone(), Arc::clone(&outcomes));
            tokio::spawn(async move {
                let ctx = CallContext::new(format!("agent{task}")).with_task_id(format!("t{task}"));
                // cost 2 + 2 + 3 = 7: every call fits once; a fourth would not.
                let calls = [
                    call("a", "place_order", json!({"item": "pen"})),
                    call("b", "place_order", json!({"item": "ink"})),
                    call("c", "place_large_order", json!({"item": "desk"})),
                ];
                for call in &calls {
                    let (first, second) =
                        tokio::join!(registry.dispatch(&ctx, call), registry.dispatch(&ctx, call));
                    outcomes.lock().unwrap().push((first, second));
                }
                let over = registry
                    .dispatch(&ctx, &call("d", "place_order", json!({"item": "more"})))
                    .await;
                assert_eq!(over.code(), Some(RejectionCode::BudgetCostExceeded));
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let tickets = registry.pending_tickets().await.unwrap();
    assert_eq!(
        tickets.len(),
        64,
        "one ticket per task, however often it was sent"
    );
    let decisions: Vec<_> = tickets
        .iter()
        .flat_map(|ticket| {
            [finance(), Reviewer::new("sam")].map(|reviewer| {
                let (registry, id) = (registry.clone(), ticket.id.clone());
                tokio::spawn(async move { registry.resume(&id, approve(reviewer)).await })
            })
        })
        .collect();
    let mut ran = 0;
    for decision in decisions {
        match decision.await.unwrap() {
            Outcome::Completed(_) => ran += 1,
            // The other reviewer came second: while the first decision's call runs, or after.
            other => assert!(
                matches!(
                    other.code(),
                    Some(RejectionCode::TicketDecided | RejectionCode::TicketNotPending)
                ),
                "{other:?}"
            ),
        }
    }
    assert_eq!(ran, 64);
    assert_eq!(ORDERS.load(Ordering::SeqCst), 128);
    assert_eq!(BIG_ORDERS.load(Ordering::SeqCst), 64);
    for (first, second) in outcomes.lock().unwrap().iter() {
        assert!(
            [first, second]
                .iter()
                .any(|outcome| outcome.is_completed() || outcome.ticket().is_some()),
            "{first:?} {second:?}"
        );
    }
    let records = sink.records();
    assert!(verify(&records, Some(&key())).is_ok());
    let about_to_run = records
        .iter()
        .filter(|r| r.decision == "about_to_run")
        .count();
    assert_eq!(about_to_run, 128 + 64);
}

// ---------------------------------------------------------------------------------------------
// Decisions recorded in the store

static SETTLED: AtomicUsize = AtomicUsize::new(0);

/// Settle an invoice.
#[tool(
    risk = "critical",
    irreversible = "a settled invoice is paid",
    approver = "finance"
)]
fn settle_invoice(invoice: String) -> Result<String, ToolError> {
    SETTLED.fetch_add(1, Ordering::SeqCst);
    Ok(format!("settled {invoice}"))
}

fn settle(id: &str, invoice: &str) -> ToolCall {
    call(id, "settle_invoice", json!({ "invoice": invoice }))
}

fn settling(store: &InMemoryApprovalStore, lifetime: Duration) -> Registry {
    Registry::builder()
        .tool(SettleInvoice)
        .approval_store(store.clone())
        .accept_unsigned_decisions()
        .approval_lifetime(lifetime)
        .build()
        .unwrap()
}

/// Whoever writes to the store directly, around `record_decision`, still cannot approve: the
/// worker holds the recorded decision to the approver rules before it runs anything.
#[tokio::test]
async fn a_decision_written_around_the_rules_does_not_run() {
    let store = InMemoryApprovalStore::default();
    let registry = settling(&store, Duration::from_secs(60));
    let ctx = CallContext::new("agent");
    let pending = registry.dispatch(&ctx, &settle("s1", "inv-1")).await;
    let ticket = pending.ticket().unwrap().id.clone();
    let forged = ApprovalDecision::Approve {
        reviewer: Reviewer::new("mallory"),
    };
    let recorded = portcullis::ApprovalStore::decide(&store, &ticket, &forged.into(), 0).await;
    assert_eq!(recorded, portcullis::Recorded::Recorded);
    let ran = registry.run_decided().await.unwrap();
    assert_eq!(ran.len(), 1);
    assert_eq!(ran[0].1.code(), Some(RejectionCode::ReviewerNotAllowed));
    assert_eq!(SETTLED.load(Ordering::SeqCst), 0);
    let resent = registry.dispatch(&ctx, &settle("s1", "inv-1")).await;
    assert_eq!(resent.code(), Some(RejectionCode::ReviewerNotAllowed));
}

/// A worker without the ticket's tool leaves its decided call for one that has it.
#[tokio::test]
async fn a_worker_leaves_decided_calls_it_cannot_run() {
    let store = InMemoryApprovalStore::default();
    let registry = settling(&store, Duration::from_secs(60));
    let ctx = CallContext::new("agent");
    let pending = registry.dispatch(&ctx, &settle("s2", "inv-2")).await;
    let ticket = pending.ticket().unwrap().id.clone();
    let decision = ApprovalDecision::Reject {
        reviewer: finance(),
        message: "wrong invoice".into(),
    };
    portcullis::record_decision(&store, &ticket, decision)
        .await
        .unwrap();
    let other_application = Registry::builder()
        .tool(FindCustomer)
        .approval_store(store.clone())
        .accept_unsigned_decisions()
        .build()
        .unwrap();
    assert!(other_application.run_decided().await.unwrap().is_empty());
    let ran = registry.run_decided().await.unwrap();
    assert_eq!(ran.len(), 1, "still there for the worker that has the tool");
    assert_eq!(ran[0].1.code(), Some(RejectionCode::ApprovalRejected));
}

/// A rejection holds even when it is carried out after the ticket expired; an approval that
/// no worker ran in time says so, with who approved it in the audit.
#[tokio::test]
async fn decisions_outlive_their_ticket_as_they_should() {
    let store = InMemoryApprovalStore::default();
    let sink = MemoryAuditSink::default();
    let registry = Registry::builder()
        .tool(SettleInvoice)
        .approval_store(store.clone())
        .accept_unsigned_decisions()
        .approval_lifetime(Duration::from_millis(200))
        .audit(sink.clone())
        .build()
        .unwrap();
    let ctx = CallContext::new("agent");
    let mut tickets = Vec::new();
    for (id, invoice) in [("s3", "inv-3"), ("s4", "inv-4")] {
        let pending = registry.dispatch(&ctx, &settle(id, invoice)).await;
        tickets.push(pending.ticket().unwrap().id.clone());
    }
    let reject = ApprovalDecision::Reject {
        reviewer: finance(),
        message: "a duplicate".into(),
    };
    portcullis::record_decision(&store, &tickets[0], reject)
        .await
        .unwrap();
    portcullis::record_decision(&store, &tickets[1], approve(finance()))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(registry.expire_tickets().await.len(), 2);
    let rejected = registry.dispatch(&ctx, &settle("s3", "inv-3")).await;
    assert_eq!(rejected.code(), Some(RejectionCode::ApprovalRejected));
    assert!(
        rejected
            .rejection()
            .unwrap()
            .message()
            .contains("a duplicate")
    );
    let late = registry.dispatch(&ctx, &settle("s4", "inv-4")).await;
    assert_eq!(late.code(), Some(RejectionCode::ApprovalExpired));
    assert!(late.rejection().unwrap().message().contains("approved"));
    let resolutions: Vec<Option<String>> = sink
        .records()
        .into_iter()
        .filter(|record| record.code.is_some())
        .map(|record| record.resolution)
        .collect();
    assert!(resolutions.contains(&Some("rejected by rita".to_owned())));
    assert!(resolutions.contains(&Some("expired after rita decided".to_owned())));
    assert_eq!(SETTLED.load(Ordering::SeqCst), 0);
}

// ---------------------------------------------------------------------------------------------
// Bounded memory

/// An in-memory approval store holds at most its capacity of pending calls, whatever the
/// tasks and actors: one more is refused, and never waits.
#[tokio::test]
async fn a_full_approval_store_refuses_one_more_pending_call() {
    let registry = Registry::builder()
        .tool(PaySupplier)
        .approval_store(InMemoryApprovalStore::with_capacity(3))
        .accept_unsigned_decisions()
        .build()
        .unwrap();
    for index in 0..3 {
        let ctx = CallContext::new(format!("agent{index}")).with_task_id(format!("t{index}"));
        assert!(
            registry
                .dispatch(&ctx, &payout("p", 1))
                .await
                .ticket()
                .is_some()
        );
    }
    let ctx = CallContext::new("agent9").with_task_id("t9");
    let refused = registry.dispatch(&ctx, &payout("p", 1)).await;
    assert_eq!(refused.code(), Some(RejectionCode::TooManyPending));
    assert_eq!(registry.pending_tickets().await.unwrap().len(), 3);
}

static ARCHIVED: AtomicUsize = AtomicUsize::new(0);

/// Archive a record.
#[tool(risk = "medium")]
fn archive_record(record_id: u64) -> Result<u64, ToolError> {
    ARCHIVED.fetch_add(1, Ordering::SeqCst);
    Ok(record_id)
}

/// A full memory audit sink forgets no record: a call that must be recorded before it runs is
/// refused and does not run.
#[tokio::test]
async fn a_full_memory_audit_sink_stops_calls_that_must_be_recorded_first() {
    let sink = MemoryAuditSink::with_capacity(2);
    let registry = Registry::builder()
        .tool(ArchiveRecord)
        .audit(sink.clone())
        .build()
        .unwrap();
    let ctx = CallContext::new("agent");
    let first = call("a1", "archive_record", json!({"record_id": 1}));
    assert!(registry.dispatch(&ctx, &first).await.is_completed());
    let second = call("a2", "archive_record", json!({"record_id": 2}));
    let refused = registry.dispatch(&ctx, &second).await;
    assert_eq!(refused.code(), Some(RejectionCode::AuditUnavailable));
    assert_eq!(
        ARCHIVED.load(Ordering::SeqCst),
        1,
        "the second was not archived"
    );
    assert_eq!(sink.records().len(), 2);
    verify(&sink.records(), None).unwrap();
}

/// A full budget store refuses new tasks and never forgets a spent budget to make room:
/// flooding it with tasks gives no task its calls back. Tasks that ended make room.
#[tokio::test]
async fn flooding_a_full_budget_store_gives_no_task_its_budget_back() {
    let budget = InMemoryBudgetStore::default().with_capacity(BudgetCapacity {
        tasks: 64,
        actors: 64,
        // One caller floods: its share is more than the store, to reach the store's own bound.
        tasks_per_caller: Some(1000),
    });
    let registry = Registry::builder()
        .tool(FindCustomer)
        .budget(BudgetLimits {
            max_calls_per_task: Some(1),
            ..BudgetLimits::default()
        })
        .budget_store(budget.clone())
        .build()
        .unwrap();
    let lookup = |id: &str| call(id, "find_customer", json!({"customer_id": 1}));
    let spent = CallContext::new("agent").with_task_id("spent");
    assert!(registry.dispatch(&spent, &lookup("1")).await.is_completed());
    let refused = registry.dispatch(&spent, &lookup("2")).await;
    assert_eq!(refused.code(), Some(RejectionCode::BudgetCallsExceeded));

    let mut full = 0;
    for index in 0..1000 {
        let flood = CallContext::new("agent").with_task_id(format!("flood{index}"));
        match registry.dispatch(&flood, &lookup("1")).await.code() {
            None => {}
            Some(RejectionCode::BudgetStoreFull) => full += 1,
            Some(other) => panic!("{other}"),
        }
    }
    assert!(full >= 1000 - 64, "{full} refused as the store was full");
    assert!(budget.held().0 <= 64);
    let still = registry.dispatch(&spent, &lookup("3")).await;
    assert_eq!(still.code(), Some(RejectionCode::BudgetCallsExceeded));

    for index in 0..1000 {
        registry.end_task(&format!("flood{index}")).await;
    }
    let next = CallContext::new("agent").with_task_id("next");
    assert!(registry.dispatch(&next, &lookup("1")).await.is_completed());
}
