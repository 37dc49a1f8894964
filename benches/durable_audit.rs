//! Audited dispatches per second into a durable log against the same into memory, in one run.
//!
//! The tool, `transfer`, is medium risk: each call writes an `about_to_run` record before it
//! runs (the write-ahead rule) and an outcome record after, so a call waits for two stored
//! records. `TASKS` tasks dispatch at once on a two-thread runtime, each call with a fresh id;
//! the registry has nothing else configured, so the difference is the audit sink:
//!
//! * memory: `MemoryAuditSink`, the chain in memory;
//! * SQLite: `SqliteStore` in WAL mode with `synchronous = FULL` (a commit is `fsync`ed);
//! * JSON Lines: `JsonLinesAuditSink` with `fsync`;
//! * PostgreSQL, when `PORTCULLIS_POSTGRES_URL` names a server: `PostgresStore`, in a schema
//!   of its own, dropped afterwards.
//!
//! The durable sinks gather the records of concurrent calls into one commit (group commit);
//! each call still runs only after its own `about_to_run` record is stored. Each sink runs
//! `ROUNDS` times, interleaved, and its best round counts. Run with
//! `cargo bench --bench durable_audit`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use portcullis::audit::{AuditSink, JsonLinesAuditSink, MemoryAuditSink};
use portcullis::prelude::*;
use portcullis_stores::{PostgresStore, PostgresTls, SqliteStore, postgres_client};
use serde_json::json;

/// Tasks dispatching at once, unless `PORTCULLIS_BENCH_TASKS` says otherwise.
const TASKS: usize = 64;

fn tasks() -> usize {
    std::env::var("PORTCULLIS_BENCH_TASKS")
        .ok()
        .and_then(|tasks| tasks.parse().ok())
        .unwrap_or(TASKS)
}
/// Calls each task dispatches in a round.
const CALLS_PER_TASK: usize = 50;
/// Rounds per sink.
const ROUNDS: usize = 3;

/// Move money between two of the company's accounts.
#[tool(risk = "medium")]
fn transfer(amount_cents: u64) -> Result<u64, ToolError> {
    Ok(amount_cents)
}

/// The calls per second of one round through a registry auditing into `sink`.
async fn round(sink: impl AuditSink, round: usize, tasks: usize) -> f64 {
    let registry = Registry::builder()
        .tool(Transfer)
        .audit(sink)
        .build()
        .expect("the registry builds");
    let registry = Arc::new(registry);
    let started = Instant::now();
    let running: Vec<_> = (0..tasks)
        .map(|task| {
            let registry = Arc::clone(&registry);
            tokio::spawn(async move {
                let ctx = CallContext::new("agent").with_task_id(format!("r{round}-t{task}"));
                for index in 0..CALLS_PER_TASK {
                    let call = ToolCall::new(
                        format!("c{index}"),
                        "transfer",
                        json!({"amount_cents": index + 1}),
                    );
                    let outcome = registry.dispatch(&ctx, &call).await;
                    assert!(outcome.is_completed(), "{outcome:?}");
                }
            })
        })
        .collect();
    for task in running {
        task.await.expect("a task completes");
    }
    (tasks * CALLS_PER_TASK) as f64 / started.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let postgres = match std::env::var("PORTCULLIS_POSTGRES_URL") {
        Ok(url) => Some(url),
        Err(_) => {
            println!("PostgreSQL skipped: set PORTCULLIS_POSTGRES_URL to measure it");
            None
        }
    };
    let schema = format!("bench_{}", std::process::id());
    let tasks = tasks();
    let mut best = [0f64; 4];
    for index in 0..ROUNDS {
        best[0] = best[0].max(round(MemoryAuditSink::default(), index, tasks).await);
        let sqlite =
            SqliteStore::open(dir.path().join(format!("state-{index}.db"))).expect("SQLite");
        best[1] = best[1].max(round(sqlite, index, tasks).await);
        let lines = JsonLinesAuditSink::open(dir.path().join(format!("audit-{index}.jsonl")), true)
            .expect("a JSON Lines file");
        best[2] = best[2].max(round(lines, index, tasks).await);
        if let Some(url) = &postgres {
            let store = PostgresStore::connect_with(url, &schema, 16)
                .await
                .expect("PostgreSQL");
            best[3] = best[3].max(round(store, index, tasks).await);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "audited dispatches per second, {tasks} tasks at once on 2 threads, 2 records a call \
         (best of {ROUNDS}):"
    );
    let names = ["memory", "SQLite, fsync", "JSON Lines, fsync", "PostgreSQL"];
    for (name, calls) in names.iter().zip(best) {
        if calls > 0.0 {
            println!(
                "  {name:<18} {calls:>9.0}/s   {:.2} of memory",
                calls / best[0]
            );
        }
    }
    if let Some(url) = &postgres {
        drop_schema(url, &schema).await;
    }
}

async fn drop_schema(url: &str, schema: &str) {
    let Ok(client) = postgres_client(url, &PostgresTls::default()).await else {
        return;
    };
    let _ = client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await;
}
