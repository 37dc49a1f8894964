//! One caller, one registry, a million tasks that nobody ends: a worker that starts a task per
//! request and never calls `Registry::end_task`. Each task reads a third party's page (so it
//! is tainted), spends a per-task budget and collects a refusal. The in-memory stores end the
//! idle tasks themselves: the millionth task is served like the first, a tainted task that
//! comes back after the store ended it is still refused the tool that may not run after
//! untrusted content, and the resident set stays flat. A test binary of its own, so that no
//! other test moves the resident set it measures.
//!
//! The clock is moved by hand: 20 ms a task, tasks idle after a second, no task older than 10
//! seconds, an ended task remembered for a minute. At the default lifetimes (an hour, a day, a
//! week) the same bounds hold for a caller starting fewer than one task per 36 ms on average
//! (its share of 100 live tasks an hour); a caller faster than that is refused past its share
//! (`sources_share_full`, `budget_share_full`), and other callers are not.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use portcullis::prelude::*;
use portcullis::{
    BudgetLimits, InMemoryBudgetStore, InMemoryProvenanceStore, InMemoryRepeatStore, RefusalLimit,
    TaskLifetime,
};
use serde_json::json;

const TASKS: u64 = 1_000_000;
/// Milliseconds of the hand-moved clock between two tasks.
const STEP_MS: u64 = 20;

/// Fetch a web page (its text, as a third party wrote it).
#[tool(read_only)]
fn fetch_page(page: String) -> Result<String, ToolError> {
    Ok(page)
}

/// Pay an invoice.
#[tool(risk = "medium", max_calls_per_task = 5)]
fn pay_invoice(invoice: u64) -> Result<u64, ToolError> {
    Ok(invoice)
}

/// Close the account: never after untrusted content.
#[tool(
    risk = "high",
    irreversible = "the account is gone",
    after_untrusted = "refuse"
)]
fn close_account() -> Result<(), ToolError> {
    Ok(())
}

/// Kibibytes of a line of `/proc/self/status`, such as `VmRSS`.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

struct Worker {
    registry: Registry,
    sources: Arc<InMemoryProvenanceStore>,
    budget: InMemoryBudgetStore,
    clock: Arc<AtomicU64>,
}

fn worker() -> Worker {
    let start = Instant::now();
    let clock = Arc::new(AtomicU64::new(0));
    let now = {
        let clock = Arc::clone(&clock);
        move || start + Duration::from_millis(clock.load(Ordering::Relaxed))
    };
    let lifetime = TaskLifetime {
        idle: Duration::from_secs(1),
        absolute: Duration::from_secs(10),
        remembered: Duration::from_secs(60),
    };
    let sources = Arc::new(
        InMemoryProvenanceStore::default()
            .with_lifetime(lifetime)
            .with_clock(now.clone()),
    );
    let budget = InMemoryBudgetStore::with_clock(now).with_lifetime(lifetime);
    let registry = Registry::builder()
        .tool(FetchPage)
        .tool(PayInvoice)
        .tool(CloseAccount)
        .budget(BudgetLimits {
            max_calls_per_task: Some(10),
            ..BudgetLimits::default()
        })
        .budget_store(budget.clone())
        .provenance_store(Arc::clone(&sources))
        .repeat_store(InMemoryRepeatStore::default())
        .refusal_limit(Some(RefusalLimit {
            refusals: 5,
            per: Duration::from_secs(60),
        }))
        .build()
        .unwrap();
    Worker {
        registry,
        sources,
        budget,
        clock,
    }
}

fn task(number: u64) -> CallContext {
    CallContext::new("worker").with_task_id(format!("task-{number}"))
}

/// One task: a page read, an invoice paid, a call refused; then the clock moves on.
async fn one_task(worker: &Worker, number: u64) {
    let ctx = task(number);
    let page = ToolCall::new("c1", "fetch_page", json!({"page": "a third party's page"}));
    let read = worker.registry.dispatch(&ctx, &page).await;
    assert!(read.is_completed(), "task {number}: {read:?}");
    let pay = ToolCall::new("c2", "pay_invoice", json!({"invoice": number}));
    let paid = worker.registry.dispatch(&ctx, &pay).await;
    assert!(paid.is_completed(), "task {number}: {paid:?}");
    let close = ToolCall::new("c3", "close_account", json!({}));
    let refused = worker.registry.dispatch(&ctx, &close).await;
    assert_eq!(
        refused.code(),
        Some(RejectionCode::UntrustedTask),
        "task {number}"
    );
    worker.clock.fetch_add(STEP_MS, Ordering::Relaxed);
}

#[tokio::test]
async fn a_million_tasks_nobody_ends_are_served_in_bounded_memory() {
    let started = Instant::now();
    let worker = worker();
    // Past the first minute, the stores hold what they hold for good.
    for number in 0..TASKS / 10 {
        one_task(&worker, number).await;
    }
    let full_kib = status_kib("VmRSS:");
    for number in TASKS / 10..TASKS {
        one_task(&worker, number).await;
    }
    let end_kib = status_kib("VmRSS:");

    // A task the stores ended comes back: still tainted, and its budget not given afresh.
    let ended = task(TASKS - 1000);
    let close = ToolCall::new("c4", "close_account", json!({}));
    let refused = worker.registry.dispatch(&ended, &close).await;
    assert_eq!(refused.code(), Some(RejectionCode::UntrustedTask));
    let pay = ToolCall::new("c5", "pay_invoice", json!({"invoice": 1}));
    let expired = worker.registry.dispatch(&ended, &pay).await;
    assert_eq!(expired.code(), Some(RejectionCode::TaskExpired));

    let (live, remembered) = worker.sources.held();
    let (budgeted, _) = worker.budget.held();
    eprintln!(
        "{TASKS} tasks in {:.1} s: resident {} MiB after the first {}, {} MiB at the end; the \
         sources store holds {live} tasks and remembers {remembered} ended ones, the budget \
         store {budgeted} tasks",
        started.elapsed().as_secs_f64(),
        full_kib / 1024,
        TASKS / 10,
        end_kib / 1024,
    );
    // A second's tasks live; a minute's are remembered.
    let per_second = 1000 / STEP_MS as usize;
    assert!(live <= 2 * per_second, "{live} tasks held");
    assert!(
        remembered <= 61 * per_second,
        "{remembered} ended tasks remembered"
    );
    assert!(budgeted <= 100_000, "{budgeted} budget tasks held");
    assert!(
        end_kib < full_kib + 64 * 1024,
        "{} MiB grew to {} MiB",
        full_kib / 1024,
        end_kib / 1024
    );
}
