//! Transactions: compensations in reverse order on abort, on a failed step and on drop; a
//! failing compensation does not stop the others; repeated call ids do not run twice.

use std::collections::HashSet;
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portcullis::audit::MemoryAuditSink;
use portcullis::prelude::*;
use portcullis::{CompensationResult, Gate, Outcome, RegistryBuilder};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// What the tools did, in order, shared through the context.
#[derive(Clone, Default)]
struct Journal(Arc<Mutex<Vec<String>>>);

impl Journal {
    fn write(ctx: &CallContext, entry: String) {
        if let Some(journal) = ctx.extension::<Journal>() {
            journal.0.lock().unwrap().push(entry);
        }
        if let Some(done) = ctx.extension::<Mutex<Sender<String>>>() {
            let _ = done.lock().unwrap().send("written".into());
        }
    }

    fn entries(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Reservation {
    pub id: String,
}

/// Reserve stock.
#[tool(risk = "medium", rollback = release_stock)]
fn reserve_stock(ctx: &CallContext, sku: String) -> Result<Reservation, ToolError> {
    Journal::write(ctx, format!("reserve {sku}"));
    Ok(Reservation {
        id: format!("r-{sku}"),
    })
}

async fn release_stock(
    ctx: &CallContext,
    args: &ReserveStockArgs,
    output: &Reservation,
) -> Result<(), ToolError> {
    Journal::write(ctx, format!("release {} ({})", args.sku, output.id));
    Ok(())
}

/// Charge a card.
#[tool(risk = "high", rollback = refund_card)]
fn charge_card(ctx: &CallContext, amount_cents: u64) -> Result<u64, ToolError> {
    if amount_cents == 13 {
        return Err(ToolError::new("card_declined", "the card was declined"));
    }
    Journal::write(ctx, format!("charge {amount_cents}"));
    Ok(amount_cents)
}

async fn refund_card(ctx: &CallContext, args: &ChargeCardArgs, _: &u64) -> Result<(), ToolError> {
    if args.amount_cents == 666 {
        return Err(ToolError::new(
            "refund_refused",
            "the bank refused the refund",
        ));
    }
    Journal::write(ctx, format!("refund {}", args.amount_cents));
    Ok(())
}

/// Send the receipt.
#[tool(risk = "medium", irreversible = "e-mail cannot be unsent")]
fn send_receipt(ctx: &CallContext, to: String) -> Result<bool, ToolError> {
    Journal::write(ctx, format!("mail {to}"));
    Ok(true)
}

/// Count calls.
#[tool(idempotent)]
fn look_up(ctx: &CallContext, key: String) -> Result<String, ToolError> {
    Journal::write(ctx, format!("look up {key}"));
    Ok(key)
}

fn registry(sink: MemoryAuditSink) -> Registry {
    Registry::builder()
        .tool(ReserveStock)
        .tool(ChargeCard)
        .tool(SendReceipt)
        .tool(LookUp)
        .audit(sink)
        .build()
        .unwrap()
}

/// The registry `builder` makes, auditing into the sink returned beside it.
fn audited(builder: RegistryBuilder) -> (Registry, MemoryAuditSink) {
    let sink = MemoryAuditSink::default();
    let registry = builder.audit(sink.clone()).build().unwrap();
    (registry, sink)
}

/// A caller whose tools write what they did into the journal returned beside it.
fn journaled() -> (Journal, CallContext) {
    let journal = Journal::default();
    let ctx = CallContext::new("ann").with_extension(journal.clone());
    (journal, ctx)
}

/// The records of compensations in `sink`: call id and decision, in order.
fn compensations(sink: &MemoryAuditSink) -> Vec<(String, String)> {
    sink.records()
        .into_iter()
        .filter(|record| record.resolution.as_deref() == Some("compensation"))
        .map(|record| (record.call_id, record.decision))
        .collect()
}

fn call(id: &str, tool: &str, arguments: serde_json::Value) -> ToolCall {
    ToolCall::new(id, tool, arguments)
}

#[tokio::test]
async fn abort_compensates_in_reverse_order_and_survives_a_failing_compensation() {
    let journal = Journal::default();
    let sink = MemoryAuditSink::default();
    let registry = registry(sink.clone());
    let ctx = CallContext::new("ann").with_extension(journal.clone());
    let mut transaction = registry.transaction(&ctx);
    for step in [
        call("1", "reserve_stock", json!({"sku": "lamp"})),
        call("2", "charge_card", json!({"amount_cents": 666})),
        call("3", "send_receipt", json!({"to": "ann@example.com"})),
        call("4", "charge_card", json!({"amount_cents": 500})),
    ] {
        assert!(transaction.dispatch(&step).await.is_completed());
    }
    let report = transaction.abort().await;
    let results: Vec<(&str, &CompensationResult)> = report
        .iter()
        .map(|step| (step.call_id.as_str(), &step.result))
        .collect();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0], ("4", &CompensationResult::Compensated));
    assert_eq!(results[1], ("3", &CompensationResult::NothingToUndo));
    assert!(
        matches!(results[2], ("2", CompensationResult::Failed(error)) if error.code() == "refund_refused")
    );
    assert_eq!(results[3], ("1", &CompensationResult::Compensated));
    assert_eq!(
        journal.entries(),
        [
            "reserve lamp",
            "charge 666",
            "mail ann@example.com",
            "charge 500",
            "refund 500",
            "release lamp (r-lamp)"
        ]
    );
    // Each compensation changes state: recorded as about to run before it ran.
    assert_eq!(
        compensations(&sink),
        [
            ("4".into(), "about_to_run".into()),
            ("4".into(), "completed".into()),
            ("2".into(), "about_to_run".into()),
            ("2".into(), "rejected".into()),
            ("1".into(), "about_to_run".into()),
            ("1".into(), "completed".into())
        ]
    );
}

#[tokio::test]
async fn a_failed_step_rolls_back_at_once() {
    let journal = Journal::default();
    let registry = registry(MemoryAuditSink::default());
    let ctx = CallContext::new("ann").with_extension(journal.clone());
    let mut transaction = registry.transaction(&ctx);
    assert!(
        transaction
            .dispatch(&call("1", "reserve_stock", json!({"sku": "desk"})))
            .await
            .is_completed()
    );
    // A refusal before the tool runs changes nothing: the agent may fix its call.
    let refused = transaction
        .dispatch(&call("2", "charge_card", json!({"amount_cents": "13"})))
        .await;
    assert_eq!(refused.code(), Some(RejectionCode::InvalidType));
    assert!(transaction.rollback_report().is_empty());
    // The tool fails: everything done so far is undone.
    let failed = transaction
        .dispatch(&call("3", "charge_card", json!({"amount_cents": 13})))
        .await;
    assert_eq!(failed.code(), Some(RejectionCode::ToolFailed));
    assert_eq!(transaction.rollback_report().len(), 1);
    assert_eq!(journal.entries(), ["reserve desk", "release desk (r-desk)"]);
    let after = transaction
        .dispatch(&call("4", "look_up", json!({"key": "x"})))
        .await;
    assert_eq!(
        after.rejection().and_then(Rejection::reason),
        Some("transaction_ended")
    );
}

#[tokio::test]
async fn a_dropped_transaction_is_compensated() {
    let journal = Journal::default();
    let (written, done) = channel::<String>();
    let registry = registry(MemoryAuditSink::default());
    let ctx = CallContext::new("ann")
        .with_extension(journal.clone())
        .with_extension(Mutex::new(written));
    {
        let mut transaction = registry.transaction(&ctx);
        assert!(
            transaction
                .dispatch(&call("1", "reserve_stock", json!({"sku": "chair"})))
                .await
                .is_completed()
        );
        done.recv_timeout(Duration::from_secs(5)).unwrap();
    }
    done.recv_timeout(Duration::from_secs(5))
        .expect("the compensation ran");
    assert_eq!(
        journal.entries(),
        ["reserve chair", "release chair (r-chair)"]
    );
}

#[tokio::test]
async fn commit_keeps_every_effect() {
    let journal = Journal::default();
    let registry = registry(MemoryAuditSink::default());
    let ctx = CallContext::new("ann").with_extension(journal.clone());
    let mut transaction = registry.transaction(&ctx);
    assert!(
        transaction
            .dispatch(&call("1", "reserve_stock", json!({"sku": "rug"})))
            .await
            .is_completed()
    );
    transaction.commit().await;
    assert_eq!(journal.entries(), ["reserve rug"]);
}

#[tokio::test]
async fn a_repeated_call_id_runs_once_unless_the_tool_is_idempotent() {
    let journal = Journal::default();
    let registry = registry(MemoryAuditSink::default());
    let ctx = CallContext::new("ann").with_extension(journal.clone());
    let mut transaction = registry.transaction(&ctx);
    let charge = call("pay-1", "charge_card", json!({"amount_cents": 250}));
    let first = transaction.dispatch(&charge).await;
    let second = transaction.dispatch(&charge).await;
    assert_eq!(first, second);
    assert!(matches!(second, Outcome::Completed(_)));
    let look = call("q-1", "look_up", json!({"key": "k"}));
    transaction.dispatch(&look).await;
    transaction.dispatch(&look).await;
    assert_eq!(journal.entries(), ["charge 250", "look up k", "look up k"]);
    transaction.commit().await;
}

#[tokio::test]
async fn a_repeated_call_id_in_a_task_runs_once_outside_transactions_too() {
    let journal = Journal::default();
    let sink = MemoryAuditSink::default();
    let registry = registry(sink.clone());
    let ctx = CallContext::new("ann")
        .with_extension(journal.clone())
        .with_task_id("task-9");
    let charge = call("pay-9", "charge_card", json!({"amount_cents": 70}));
    let first = registry.dispatch(&ctx, &charge).await;
    let repeat = registry.dispatch(&ctx, &charge).await;
    assert_eq!(first, repeat);
    assert_eq!(journal.entries(), ["charge 70"]);
    assert_eq!(
        sink.records().last().unwrap().resolution.as_deref(),
        Some("repeated call id")
    );

    // Another task, or a registry that remembers nothing, runs it again.
    let other_task = ctx.clone().with_task_id("task-10");
    registry.dispatch(&other_task, &charge).await;
    let forgetful = Registry::builder()
        .tool(ChargeCard)
        .remembered_calls(0)
        .build()
        .unwrap();
    forgetful.dispatch(&ctx, &charge).await;
    assert_eq!(journal.entries(), ["charge 70", "charge 70", "charge 70"]);
}

/// Seat codes that no longer read: as if the seat type changed between a call and its
/// compensation (a new release, then `recover()`).
static WITHDRAWN_SEATS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A seat code whose `Deserialize` panics on a withdrawn code.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Seat(String);

impl<'de> Deserialize<'de> for Seat {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let code = String::deserialize(deserializer)?;
        let withdrawn = WITHDRAWN_SEATS.lock().unwrap().contains(&code);
        assert!(!withdrawn, "a seat code that cannot be read");
        Ok(Seat(code))
    }
}

fn withdraw(seat: &str) {
    WITHDRAWN_SEATS.lock().unwrap().push(seat.to_owned());
}

/// Book a seat.
#[tool(risk = "medium", rollback = free_seat)]
fn book_seat(ctx: &CallContext, seat: Seat) -> Result<bool, ToolError> {
    Journal::write(ctx, format!("book {}", seat.0));
    Ok(true)
}

async fn free_seat(ctx: &CallContext, args: &BookSeatArgs, _: &bool) -> Result<(), ToolError> {
    Journal::write(ctx, format!("free {}", args.seat.0));
    Ok(())
}

#[tokio::test]
async fn a_compensation_whose_arguments_no_longer_read_fails_alone() {
    let (registry, sink) = audited(Registry::builder().tool(BookSeat).tool(ReserveStock));
    let (journal, ctx) = journaled();
    let mut transaction = registry.transaction(&ctx);
    for step in [
        call("1", "reserve_stock", json!({"sku": "lamp"})),
        call("2", "book_seat", json!({"seat": "12A"})),
    ] {
        assert!(transaction.dispatch(&step).await.is_completed());
    }
    withdraw("12A");
    let report = transaction.abort().await;
    assert!(
        matches!(&report[0].result, CompensationResult::Failed(error) if error.code() == "compensation_arguments_unreadable"),
        "{:?}",
        report[0]
    );
    assert_eq!(report[1].result, CompensationResult::Compensated);
    assert_eq!(
        journal.entries(),
        ["reserve lamp", "book 12A", "release lamp (r-lamp)"]
    );
    let failed: Vec<String> = compensations(&sink)
        .into_iter()
        .filter(|(call_id, _)| call_id == "2")
        .map(|(_, decision)| decision)
        .collect();
    assert_eq!(failed, ["about_to_run", "rejected"]);
}

/// The seat's state; the hook panics once the seat is booked.
async fn seat_state(ctx: &CallContext, args: &BookObservedSeatArgs) -> serde_json::Value {
    let booking = format!("book {}", args.seat.0);
    let booked = ctx
        .extension::<Journal>()
        .is_some_and(|journal| journal.entries().contains(&booking));
    assert!(!booked, "the seat map cannot be read");
    json!({"seat": args.seat.0, "booked": false})
}

/// Book a seat, its state seen before and after.
#[tool(risk = "medium", snapshot = seat_state, rollback = free_observed_seat)]
fn book_observed_seat(ctx: &CallContext, seat: Seat) -> Result<bool, ToolError> {
    Journal::write(ctx, format!("book {}", seat.0));
    Ok(true)
}

async fn free_observed_seat(
    ctx: &CallContext,
    args: &BookObservedSeatArgs,
    _: &bool,
) -> Result<(), ToolError> {
    Journal::write(ctx, format!("free {}", args.seat.0));
    Ok(())
}

/// Book a seat for good.
#[tool(risk = "medium", irreversible = "bookings are final")]
fn book_final_seat(ctx: &CallContext, seat: Seat) -> Result<bool, ToolError> {
    Journal::write(ctx, format!("book {}", seat.0));
    Ok(true)
}

/// A call that ran stays completed when the state after it cannot be seen (the snapshot hook
/// panics): the record says why the snapshot is missing. A step with nothing to undo is not
/// read again at all.
#[tokio::test]
async fn what_happens_after_a_call_ran_does_not_change_its_outcome() {
    let (registry, sink) = audited(
        Registry::builder()
            .tool(BookObservedSeat)
            .tool(BookFinalSeat),
    );
    let (journal, ctx) = journaled();
    let mut transaction = registry.transaction(&ctx);
    let outcome = transaction
        .dispatch(&call("1", "book_observed_seat", json!({"seat": "12B"})))
        .await;
    assert_eq!(outcome.output(), Some(&json!(true)));
    let outcome = transaction
        .dispatch(&call("2", "book_final_seat", json!({"seat": "14C"})))
        .await;
    assert_eq!(outcome.output(), Some(&json!(true)));

    let records = sink.records();
    let completed = records
        .iter()
        .find(|record| record.call_id == "1" && record.decision == "completed")
        .expect("the booking is recorded as completed");
    assert_eq!(
        completed.snapshot_before,
        Some(json!({"seat": "12B", "booked": false}))
    );
    assert_eq!(completed.snapshot_after, None);
    assert_eq!(
        completed.snapshot_missing.as_deref(),
        Some("the snapshot hook panicked")
    );

    withdraw("14C");
    let report = transaction.abort().await;
    assert_eq!(report[0].call_id, "2");
    assert_eq!(report[0].result, CompensationResult::NothingToUndo);
    assert_eq!(report[1].result, CompensationResult::Compensated);
    assert_eq!(journal.entries(), ["book 12B", "book 14C", "free 12B"]);
    assert_eq!(
        compensations(&sink),
        [
            ("1".into(), "about_to_run".into()),
            ("1".into(), "completed".into())
        ]
    );
}

/// An amount the model sends in dollars and the tool holds in cents: its `Deserialize` scales,
/// its `Serialize` does not, so the canonical arguments (in cents) read back a hundred times
/// larger.
#[derive(Debug, schemars::JsonSchema)]
pub struct Dollars(u64);

impl Serialize for Dollars {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for Dollars {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Dollars(u64::deserialize(deserializer)?.saturating_mul(100)))
    }
}

async fn balance(_: &CallContext, args: &ChargeDollarsArgs) -> serde_json::Value {
    json!({"charged_cents": args.amount.0})
}

/// Charge a card, in dollars.
#[tool(risk = "high", snapshot = balance, rollback = refund_dollars)]
fn charge_dollars(ctx: &CallContext, amount: Dollars) -> Result<u64, ToolError> {
    Journal::write(ctx, format!("charge {} cents", amount.0));
    Ok(amount.0)
}

async fn refund_dollars(
    ctx: &CallContext,
    args: &ChargeDollarsArgs,
    _: &u64,
) -> Result<(), ToolError> {
    Journal::write(ctx, format!("refund {} cents", args.amount.0));
    Ok(())
}

/// The attack: a compensation that reads the canonical arguments again would refund 50,000
/// cents for a charge of 500. A tool whose arguments do not read back as themselves cannot be
/// undone or observed, so its calls do not run.
#[tokio::test]
async fn arguments_that_read_back_otherwise_do_not_run() {
    let (registry, sink) = audited(Registry::builder().tool(ChargeDollars));
    let (journal, ctx) = journaled();
    let mut transaction = registry.transaction(&ctx);
    let outcome = transaction
        .dispatch(&call("1", "charge_dollars", json!({"amount": 5})))
        .await;
    let rejection = outcome.rejection().expect("refused");
    assert_eq!(rejection.code(), RejectionCode::ArgumentsNotReproducible);
    assert_eq!(rejection.gate(), Gate::Decode);
    assert!(!rejection.retryable());
    assert!(journal.entries().is_empty());
    let decisions: Vec<String> = sink
        .records()
        .into_iter()
        .map(|record| record.decision)
        .collect();
    assert_eq!(decisions, ["rejected"]);
    assert!(transaction.abort().await.is_empty());
}

/// A route whose `Serialize` writes its ends swapped: it reads back as the reverse route.
#[derive(Debug, schemars::JsonSchema)]
pub struct Route(String, String);

impl Serialize for Route {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (&self.1, &self.0).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Route {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (from, to) = <(String, String)>::deserialize(deserializer)?;
        Ok(Route(from, to))
    }
}

/// Move funds along a route.
#[tool(risk = "medium", rollback = move_back)]
fn move_funds(ctx: &CallContext, route: Route, cents: u64) -> Result<u64, ToolError> {
    Journal::write(ctx, format!("move {cents} {} -> {}", route.0, route.1));
    Ok(cents)
}

async fn move_back(ctx: &CallContext, args: &MoveFundsArgs, _: &u64) -> Result<(), ToolError> {
    let Route(from, to) = &args.route;
    Journal::write(ctx, format!("move {} {to} -> {from}", args.cents));
    Ok(())
}

/// The same attack with the order of a list: the compensation would move the money the same
/// way a second time.
#[tokio::test]
async fn arguments_that_read_back_in_another_order_do_not_run() {
    let (registry, _) = audited(Registry::builder().tool(MoveFunds));
    let (journal, ctx) = journaled();
    let mut transaction = registry.transaction(&ctx);
    let arguments = json!({"route": ["alice", "bob"], "cents": 500});
    let outcome = transaction
        .dispatch(&call("1", "move_funds", arguments))
        .await;
    assert_eq!(
        outcome.code(),
        Some(RejectionCode::ArgumentsNotReproducible)
    );
    assert!(transaction.abort().await.is_empty());
    assert!(journal.entries().is_empty());
}

/// Tag items: a set, written by `HashSet` in an order of its own each time.
#[tool(risk = "medium", snapshot = tag_state, rollback = untag)]
fn tag_items(ctx: &CallContext, tags: HashSet<String>) -> Result<usize, ToolError> {
    Journal::write(ctx, format!("tag {}", tags.len()));
    Ok(tags.len())
}

async fn tag_state(_: &CallContext, args: &TagItemsArgs) -> serde_json::Value {
    json!({"tags": args.tags.len()})
}

async fn untag(ctx: &CallContext, args: &TagItemsArgs, _: &usize) -> Result<(), ToolError> {
    Journal::write(ctx, format!("untag {}", args.tags.len()));
    Ok(())
}

/// A set reads back as itself, whatever order its elements come in: the call is observed after
/// it ran, and undone.
#[tokio::test]
async fn a_set_reads_back_as_itself() {
    let (registry, sink) = audited(Registry::builder().tool(TagItems));
    let (journal, ctx) = journaled();
    let mut transaction = registry.transaction(&ctx);
    let tags: Vec<String> = (0..32).map(|index| format!("tag-{index}")).collect();
    let outcome = transaction
        .dispatch(&call("1", "tag_items", json!({"tags": tags})))
        .await;
    assert_eq!(outcome.output(), Some(&json!(32)));
    let records = sink.records();
    let completed = records
        .iter()
        .find(|record| record.decision == "completed")
        .expect("recorded");
    assert_eq!(completed.snapshot_after, Some(json!({"tags": 32})));
    let recorded: HashSet<String> =
        serde_json::from_value(completed.arguments["tags"].clone()).unwrap();
    assert_eq!(recorded, tags.iter().cloned().collect());
    let report = transaction.abort().await;
    assert_eq!(report[0].result, CompensationResult::Compensated);
    assert_eq!(journal.entries(), ["tag 32", "untag 32"]);
}
