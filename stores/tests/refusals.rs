//! The refusal limit over a window, in the durable stores: workers sharing a database stop an
//! endless retrier together, its refusals leave the window, a limit over the task's whole life
//! survives restarts, and the whole-life counts of an older schema carry over. Every scenario
//! runs on SQLite and on PostgreSQL.

mod common;

use std::time::Duration;

use common::Backend;
use portcullis::RefusalLimit;
use portcullis::prelude::*;
use serde_json::json;

/// Look an order up.
#[tool(read_only)]
fn find_order(order_id: u64) -> Result<u64, ToolError> {
    Ok(order_id)
}

async fn worker(backend: &Backend, limit: RefusalLimit) -> Registry {
    Registry::builder()
        .tool(FindOrder)
        .budget_store(backend.open().await)
        .refusal_limit(Some(limit))
        .build()
        .unwrap()
}

/// Sends `count` calls that decode refuses, in task `task`, spread over `workers`.
async fn refused(workers: &[Registry], task: &str, count: usize, round: &str) {
    let ctx = CallContext::new("agent").with_task_id(task);
    for index in 0..count {
        let bad = ToolCall::new(
            format!("{round}{index}"),
            "find_order",
            json!({"order_id": "x"}),
        );
        let outcome = workers[index % workers.len()].dispatch(&ctx, &bad).await;
        assert_eq!(outcome.code(), Some(RejectionCode::InvalidType));
    }
}

async fn good(registry: &Registry, task: &str, id: &str) -> Outcome {
    let ctx = CallContext::new("agent").with_task_id(task);
    let call = ToolCall::new(id, "find_order", json!({"order_id": 7}));
    registry.dispatch(&ctx, &call).await
}

on_both!(
    an_endless_retrier_is_stopped_until_its_refusals_leave_the_window,
    a_whole_task_limit_holds_across_restarts,
    whole_life_counts_of_an_older_schema_carry_over,
);

/// 4 refusals within a second, spread over two workers, stop the task on both; once they are
/// older than the second, the task calls again; the retrier that goes on is stopped again.
async fn an_endless_retrier_is_stopped_until_its_refusals_leave_the_window(backend: Backend) {
    let limit = RefusalLimit {
        refusals: 4,
        per: Duration::from_millis(1000),
    };
    let workers = [worker(&backend, limit).await, worker(&backend, limit).await];
    refused(&workers, "retrier", 4, "a").await;
    for (index, registry) in workers.iter().enumerate() {
        let stopped = good(registry, "retrier", &format!("g{index}")).await;
        assert_eq!(stopped.code(), Some(RejectionCode::TooManyRefusals));
    }
    assert!(good(&workers[0], "another", "g").await.is_completed());
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(good(&workers[1], "retrier", "g2").await.is_completed());
    refused(&workers, "retrier", 4, "b").await;
    let stopped = good(&workers[0], "retrier", "g3").await;
    assert_eq!(stopped.code(), Some(RejectionCode::TooManyRefusals));
}

/// A limit over the task's whole life: the task stays stopped, after a while and in a worker
/// started later.
async fn a_whole_task_limit_holds_across_restarts(backend: Backend) {
    let limit = RefusalLimit::whole_task(3);
    let first = worker(&backend, limit).await;
    refused(std::slice::from_ref(&first), "stubborn", 3, "a").await;
    drop(first);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let restarted = worker(&backend, limit).await;
    let stopped = good(&restarted, "stubborn", "g").await;
    assert_eq!(stopped.code(), Some(RejectionCode::TooManyRefusals));
}

/// A store of the schema before refusals were kept as times: a task's whole-life count becomes
/// as many refusals made at the upgrade, so a task stopped before it stays stopped.
async fn whole_life_counts_of_an_older_schema_carry_over(backend: Backend) {
    drop(backend.open().await);
    backend
        .tamper(if backend.tag() == "sqlite" {
            "DROP TABLE budget_refusals;
             DROP TABLE reviewer_invites;
             DROP TABLE runs;
             DROP TABLE provenance_sources;
             DROP TABLE provenance_tasks;
             DROP INDEX pending_calls_by_caller;
             DROP INDEX claims_by_caller;
             DROP TABLE refusal_shares;
             ALTER TABLE claims DROP COLUMN tenant;
             ALTER TABLE claims DROP COLUMN actor;
             ALTER TABLE pending_calls DROP COLUMN tenant;
             ALTER TABLE pending_calls DROP COLUMN ticket;
             ALTER TABLE pending_calls DROP COLUMN lease_id;
             ALTER TABLE pending_calls DROP COLUMN leased_until_ms;
             PRAGMA user_version = 6;
             INSERT INTO budget_tasks (task, refusals) VALUES ('old', 7), ('calm', 1);"
        } else {
            "DROP TABLE budget_refusals;
             DROP TABLE reviewer_invites;
             DROP TABLE runs;
             DROP TABLE provenance_sources;
             DROP TABLE provenance_tasks;
             ALTER TABLE pending_calls DROP COLUMN ticket, DROP COLUMN lease_id,
                 DROP COLUMN leased_until_ms, DROP COLUMN tenant;
             ALTER TABLE claims DROP COLUMN tenant, DROP COLUMN actor;
             DROP TABLE refusal_shares;
             UPDATE portcullis_schema SET version = 2;
             INSERT INTO budget_tasks (task, refusals) VALUES ('old', 7), ('calm', 1);"
        })
        .await;
    let limit = RefusalLimit {
        refusals: 5,
        per: Duration::from_secs(600),
    };
    let upgraded = worker(&backend, limit).await;
    let stopped = good(&upgraded, "old", "g").await;
    assert_eq!(stopped.code(), Some(RejectionCode::TooManyRefusals));
    assert!(good(&upgraded, "calm", "g").await.is_completed());
}
