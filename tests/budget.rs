//! The budget gate: calls and cost per task, per-tool limits, stalled loops, rate limits and
//! the circuit breaker, exact under concurrency.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use portcullis::prelude::*;
use portcullis::{BudgetLimits, CircuitBreaker, Gate, InMemoryBudgetStore, Outcome, RateLimit};
use serde_json::{Value, json};

/// Create an invoice; one per task.
#[tool(
    risk = "high",
    irreversible = "invoices are sent",
    max_calls_per_task = 1,
    cost = 5
)]
fn create_invoice(
    #[validate(range(min = 1, max = 5_000_000))] amount_cents: u64,
) -> Result<u64, ToolError> {
    Ok(amount_cents)
}

/// Search the catalogue.
#[tool(read_only, idempotent, cost = 2)]
fn search(query: String, #[serde(default)] page: u32) -> Result<String, ToolError> {
    Ok(format!("{query} page {page}"))
}

/// Call a payment provider that is down.
#[tool(risk = "medium")]
fn charge(amount_cents: u64) -> Result<u64, ToolError> {
    Err(ToolError::new("provider_down", format!("cannot charge {amount_cents}")).retryable(true))
}

fn registry(limits: BudgetLimits) -> Registry {
    Registry::builder()
        .tool(CreateInvoice)
        .tool(Search)
        .tool(Charge)
        .budget(limits)
        .build()
        .unwrap()
}

/// Dispatches a call with an id of its own: these are new calls, not repeats of one.
async fn call(registry: &Registry, ctx: &CallContext, name: &str, arguments: Value) -> Outcome {
    static NEXT_ID: AtomicU64 = AtomicU64::new(0);
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed).to_string();
    registry
        .dispatch(ctx, &ToolCall::new(id, name, arguments))
        .await
}

#[tokio::test]
async fn a_tool_limited_to_one_call_per_task() {
    let registry = registry(BudgetLimits::default());
    let task = CallContext::new("bo").with_task_id("task-1");
    // A refused call consumes nothing.
    let outcome = call(
        &registry,
        &task,
        "create_invoice",
        json!({"amount_cents": 99_999_999}),
    )
    .await;
    assert_eq!(outcome.code(), Some(RejectionCode::ConstraintViolation));
    let outcome = call(
        &registry,
        &task,
        "create_invoice",
        json!({"amount_cents": 1200}),
    )
    .await;
    assert_eq!(outcome.output(), Some(&json!(1200)));
    let outcome = call(
        &registry,
        &task,
        "create_invoice",
        json!({"amount_cents": 1200}),
    )
    .await;
    let rejection = outcome.rejection().unwrap();
    assert_eq!(
        (rejection.code(), rejection.gate()),
        (RejectionCode::BudgetCallsExceeded, Gate::Budget)
    );
    assert!(!rejection.retryable());
    // Another task may invoice again.
    let next_task = CallContext::new("bo").with_task_id("task-2");
    let outcome = call(
        &registry,
        &next_task,
        "create_invoice",
        json!({"amount_cents": 1200}),
    )
    .await;
    assert!(outcome.is_completed());
}

#[tokio::test]
async fn calls_and_cost_per_task() {
    let registry = registry(BudgetLimits {
        max_calls_per_task: Some(3),
        max_cost_per_task: Some(8),
        ..BudgetLimits::default()
    });
    let task = CallContext::new("sam");
    for page in 0..3 {
        let outcome = call(
            &registry,
            &task,
            "search",
            json!({"query": "lamp", "page": page}),
        )
        .await;
        assert!(outcome.is_completed(), "{outcome:?}");
    }
    // 3 calls made, 6 of 8 spent: the invoice (cost 5) would overspend, and any call is a fourth.
    let outcome = call(
        &registry,
        &task,
        "create_invoice",
        json!({"amount_cents": 1}),
    )
    .await;
    assert_eq!(outcome.code(), Some(RejectionCode::BudgetCallsExceeded));

    let task = CallContext::new("sam");
    call(&registry, &task, "search", json!({"query": "a"})).await;
    call(&registry, &task, "search", json!({"query": "b"})).await;
    let outcome = call(
        &registry,
        &task,
        "create_invoice",
        json!({"amount_cents": 1}),
    )
    .await;
    assert_eq!(outcome.code(), Some(RejectionCode::BudgetCostExceeded));
}

#[tokio::test]
async fn an_endless_retry_loop_is_broken() {
    let registry = registry(BudgetLimits {
        stalled_loop_after: Some(3),
        ..BudgetLimits::default()
    });
    let task = CallContext::new("sam");
    let outcome = call(
        &registry,
        &task,
        "search",
        json!({"query": "lamp", "page": 1}),
    )
    .await;
    assert!(outcome.is_completed());
    // The same call, its keys in another order, as text.
    let same = ToolCall::new("c", "search", r#"{"page":1,"query":"lamp"}"#);
    assert!(registry.dispatch(&task, &same).await.is_completed());
    let outcome = registry.dispatch(&task, &same).await;
    assert_eq!(outcome.code(), Some(RejectionCode::StalledLoop));
    let outcome = call(
        &registry,
        &task,
        "search",
        json!({"query": "lamp", "page": 2}),
    )
    .await;
    assert!(outcome.is_completed(), "other arguments break the loop");
}

#[tokio::test]
async fn actors_are_rate_limited() {
    let start = Instant::now();
    let elapsed_ms = Arc::new(AtomicU64::new(0));
    let hand = Arc::clone(&elapsed_ms);
    let store = InMemoryBudgetStore::with_clock(move || {
        start + Duration::from_millis(hand.load(Ordering::SeqCst))
    });
    let registry = Registry::builder()
        .tool(Search)
        .budget(BudgetLimits {
            rate_limit: Some(RateLimit {
                calls: 2,
                per: Duration::from_secs(1),
            }),
            ..BudgetLimits::default()
        })
        .budget_store(store)
        .build()
        .unwrap();
    let alice = CallContext::new("alice");
    assert!(
        call(&registry, &alice, "search", json!({"query": "a"}))
            .await
            .is_completed()
    );
    assert!(
        call(&registry, &alice, "search", json!({"query": "b"}))
            .await
            .is_completed()
    );
    let outcome = call(&registry, &alice, "search", json!({"query": "c"})).await;
    assert_eq!(outcome.code(), Some(RejectionCode::RateLimited));
    assert!(outcome.rejection().unwrap().retryable());
    let bob = CallContext::new("bob");
    assert!(
        call(&registry, &bob, "search", json!({"query": "c"}))
            .await
            .is_completed()
    );
    elapsed_ms.store(1_000, Ordering::SeqCst);
    assert!(
        call(&registry, &alice, "search", json!({"query": "c"}))
            .await
            .is_completed()
    );
}

#[tokio::test]
async fn a_failing_tool_is_paused() {
    let registry = registry(BudgetLimits {
        circuit_breaker: Some(CircuitBreaker {
            failures: 2,
            cool_down: Duration::from_secs(3600),
        }),
        ..BudgetLimits::default()
    });
    let ctx = CallContext::new("sam");
    for _ in 0..2 {
        let outcome = call(&registry, &ctx, "charge", json!({"amount_cents": 100})).await;
        assert_eq!(outcome.code(), Some(RejectionCode::ToolFailed));
    }
    let outcome = call(&registry, &ctx, "charge", json!({"amount_cents": 100})).await;
    assert_eq!(outcome.code(), Some(RejectionCode::CircuitOpen));
    assert!(
        call(&registry, &ctx, "search", json!({"query": "a"}))
            .await
            .is_completed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_never_overspend() {
    let registry = registry(BudgetLimits {
        max_calls_per_task: Some(10),
        ..BudgetLimits::default()
    });
    let task = CallContext::new("swarm").with_task_id("one-task");
    let handles: Vec<_> = (0..64)
        .map(|index| {
            let (registry, task) = (registry.clone(), task.clone());
            tokio::spawn(async move {
                let call = ToolCall::new(
                    format!("c{index}"),
                    "search",
                    json!({"query": format!("q{index}")}),
                );
                registry.dispatch(&task, &call).await
            })
        })
        .collect();
    let mut completed = 0;
    for handle in handles {
        let outcome = handle.await.unwrap();
        match outcome.code() {
            None => completed += 1,
            // Past 50 refusals, the task is stopped outright.
            Some(code) => assert!(
                matches!(
                    code,
                    RejectionCode::BudgetCallsExceeded | RejectionCode::TooManyRefusals
                ),
                "{code}"
            ),
        }
    }
    assert_eq!(completed, 10);
}

/// The measured attack of issue 40, against the default store (100,000 tasks, 1,000 for each
/// caller), with a per-task limit (`create_invoice`: one call a task): one caller starts a task
/// after another, past its share; its new tasks are refused with its own share's code, never
/// the store's, and no task's spent budget is forgotten to make room. Another caller's new task
/// is served; a task the flooding caller ends gives its place back.
#[tokio::test]
async fn one_caller_flooding_the_budget_store_is_held_to_its_share() {
    let registry = registry(BudgetLimits::default());
    let flooder = |task: u32| CallContext::new("mallory").with_task_id(format!("flood-{task}"));
    let invoice = json!({"amount_cents": 1200});
    for task in 0..1000 {
        let outcome = call(&registry, &flooder(task), "create_invoice", invoice.clone()).await;
        assert!(outcome.is_completed(), "{task}: {outcome:?}");
    }
    for task in 1000..1100 {
        let refused = call(&registry, &flooder(task), "create_invoice", invoice.clone()).await;
        let rejection = refused.rejection().expect("refused");
        assert_eq!(rejection.code(), RejectionCode::BudgetShareFull, "{task}");
        assert_eq!(rejection.gate(), Gate::Budget);
        assert!(rejection.retryable());
        assert!(rejection.message().contains("1000 tasks"), "{rejection:?}");
    }
    // Its tasks keep their spent budgets.
    let spent = call(&registry, &flooder(0), "create_invoice", invoice.clone()).await;
    assert_eq!(spent.code(), Some(RejectionCode::BudgetCallsExceeded));
    // Another caller, and the same actor in another tenant, are served in new tasks.
    let bob = CallContext::new("bob").with_task_id("bob-1");
    assert!(
        call(&registry, &bob, "create_invoice", invoice.clone())
            .await
            .is_completed()
    );
    let other_tenant = CallContext::new("mallory")
        .with_tenant("globex")
        .with_task_id("globex-1");
    assert!(
        call(&registry, &other_tenant, "create_invoice", invoice.clone())
            .await
            .is_completed()
    );
    // A task it ends gives its place back, once.
    registry.end_task("flood-1").await;
    let next = call(&registry, &flooder(1100), "create_invoice", invoice.clone()).await;
    assert!(next.is_completed(), "{next:?}");
    let over = call(&registry, &flooder(1101), "create_invoice", invoice).await;
    assert_eq!(over.code(), Some(RejectionCode::BudgetShareFull));
}
