//! A million tasks through the in-memory stores stay within a stated memory bound: the
//! budget (calls per task, rates, refusals over a window) and the repeat claims, through the
//! store traits, and a hundred thousand more through `Registry::dispatch`. A test binary of its
//! own, so that no other test moves the resident set it measures.
//!
//! The bound: once the stores hold what their capacities allow, a million more tasks add less
//! than 64 MiB to the resident set, and the stores hold no more entries than their capacities.
//! Without the bounds, the budget would keep some 500,000 tasks and the repeat store a million
//! outcomes: several hundred MiB.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use portcullis::prelude::*;
use portcullis::{
    BudgetLimits, BudgetStore, CallKey, Charge, Claim, ClaimState, InMemoryBudgetStore,
    InMemoryRepeatStore, RateLimit, RefusalLimit, RepeatStore,
};
use serde_json::json;

const TASKS: u64 = 1_000_000;
const DISPATCHED_TASKS: u64 = 100_000;
const ACTORS: u64 = 1_000;

/// Kibibytes of a line of `/proc/self/status`, such as `VmRSS` or `VmHWM`.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Pay an invoice.
#[tool(risk = "medium", max_calls_per_task = 5)]
fn pay_invoice(invoice: u64) -> Result<u64, ToolError> {
    Ok(invoice)
}

struct Stores {
    budget: InMemoryBudgetStore,
    repeats: InMemoryRepeatStore,
    clock: Arc<AtomicU64>,
}

fn stores() -> Stores {
    let start = Instant::now();
    let clock = Arc::new(AtomicU64::new(0));
    let hand = Arc::clone(&clock);
    let budget = InMemoryBudgetStore::with_clock(move || {
        start + Duration::from_millis(hand.load(Ordering::Relaxed))
    });
    Stores {
        budget,
        repeats: InMemoryRepeatStore::default(),
        clock,
    }
}

/// One task through the stores' traits, as the gates use them: a claimed and counted call, a
/// refusal counted and read. Even tasks are budgeted and end (the application forgets them);
/// odd ones only count their caller's rate and their refusals, which leave the window.
async fn one_task(stores: &Stores, task: u64, limit: &RefusalLimit) {
    let name = format!("task-{task}");
    let actor = format!("actor-{}", task % ACTORS);
    let rate = RateLimit {
        calls: 1_000,
        per: Duration::from_secs(60),
    };
    let budgeted = task.is_multiple_of(2);
    let limits = BudgetLimits {
        max_calls_per_task: budgeted.then_some(10),
        rate_limit: Some(rate),
        ..BudgetLimits::default()
    };
    let key = CallKey {
        tenant: None,
        actor: actor.clone(),
        task: name.clone(),
        tool: "pay_invoice".to_owned(),
        call_id: "call-1".to_owned(),
    };
    assert_eq!(
        stores.repeats.claim(&key, "fingerprint", 0).await,
        Claim::New
    );
    let charge = Charge {
        task: &name,
        actor: &actor,
        tenant: None,
        tool: "pay_invoice",
        cost: 1,
        tool_max_calls_per_task: budgeted.then_some(5),
        canonical_arguments: None,
    };
    stores.budget.reserve(charge, &limits).await.unwrap();
    let done = ClaimState::Settled(Outcome::Completed(json!(task)));
    stores.repeats.update(&key, done).await;
    let ctx = CallContext::new(actor.as_str()).with_task_id(name.as_str());
    stores.budget.count_refusal(&ctx, limit).await;
    assert_eq!(stores.budget.refusals(&ctx, limit).await.unwrap(), 1);
    if budgeted {
        stores.budget.forget_task(&name);
    }
    stores.clock.fetch_add(1, Ordering::Relaxed);
}

#[tokio::test]
async fn a_million_tasks_stay_in_bounded_memory() {
    let started = Instant::now();
    let stores = stores();
    let limit = RefusalLimit {
        refusals: 50,
        per: Duration::from_secs(60),
    };
    // The stores fill up to what they hold for good: 60,000 tasks' refusals within the window
    // (one task a millisecond), 10,000 outcomes or more, 1,000 callers.
    for task in 0..TASKS / 5 {
        one_task(&stores, task, &limit).await;
    }
    let full_kib = status_kib("VmRSS:");
    for task in TASKS / 5..TASKS + TASKS / 5 {
        one_task(&stores, task, &limit).await;
    }

    // Through the gates: a registry over the same stores.
    let registry = Registry::builder()
        .tool(PayInvoice)
        .budget(BudgetLimits {
            max_calls_per_task: Some(10),
            ..BudgetLimits::default()
        })
        .budget_store(stores.budget.clone())
        .repeat_store(stores.repeats.clone())
        .refusal_limit(Some(limit))
        .build()
        .unwrap();
    for task in 0..DISPATCHED_TASKS {
        let ctx = CallContext::new(format!("actor-{}", task % ACTORS))
            .with_task_id(format!("dispatched-{task}"));
        let good = ToolCall::new("c1", "pay_invoice", json!({"invoice": task}));
        assert!(registry.dispatch(&ctx, &good).await.is_completed());
        let bad = ToolCall::new("c2", "pay_invoice", json!({"invoice": "x"}));
        assert_eq!(
            registry.dispatch(&ctx, &bad).await.code(),
            Some(RejectionCode::InvalidType)
        );
        stores.budget.forget_task(ctx.task_id());
        stores.clock.fetch_add(1, Ordering::Relaxed);
    }
    let end_kib = status_kib("VmRSS:");
    let peak_kib = status_kib("VmHWM:");

    let (tasks, actors) = stores.budget.held();
    let (open, settled) = stores.repeats.held();
    eprintln!(
        "{} tasks in {:.1} s: resident {} MiB when full, {} MiB at the end, peak {} MiB; \
         the budget holds {tasks} tasks and {actors} callers, the repeat store {open} open \
         claims and {settled} outcomes",
        TASKS + TASKS / 5 + DISPATCHED_TASKS,
        started.elapsed().as_secs_f64(),
        full_kib / 1024,
        end_kib / 1024,
        peak_kib / 1024,
    );
    assert!(tasks <= 100_000, "{tasks} tasks held");
    assert!(actors <= ACTORS as usize, "{actors} callers held");
    assert_eq!(open, 0, "every call was decided");
    assert!(settled <= 2 * 10_000, "{settled} outcomes held");
    assert!(
        end_kib.saturating_sub(full_kib) < 64 * 1024,
        "a million more tasks grew the resident set from {full_kib} KiB to {end_kib} KiB"
    );
}
