//! Workers as separate processes sharing one SQLite file: this test binary runs itself again
//! as each worker (`worker` below does the work when `PORTCULLIS_WORKER` names a role), so
//! that the database, not shared memory, keeps every decision once.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::time::Duration;

use portcullis::prelude::*;
use portcullis::{ApprovalDecision, BudgetLimits, Reviewer};
use portcullis_stores::SqliteStore;
use serde_json::json;

/// The journal of compensations run by the parent itself (a recoverer), which no worker's
/// environment names.
static PARENT_JOURNAL: OnceLock<PathBuf> = OnceLock::new();

/// Appends one line to the journal: what ran, in any process.
fn journal(line: &str) {
    let path = std::env::var_os("PORTCULLIS_JOURNAL")
        .map(PathBuf::from)
        .or_else(|| PARENT_JOURNAL.get().cloned())
        .expect("a worker's parent names a journal");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    writeln!(file, "{line}").unwrap();
}

fn journaled(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Pay a supplier.
#[tool(
    risk = "critical",
    irreversible = "payouts settle at once",
    approver = "finance"
)]
fn pay_supplier(supplier: String) -> Result<String, ToolError> {
    journal(&format!("paid {supplier}"));
    Ok(supplier)
}

/// Look a supplier up.
#[tool(read_only, cost = 1)]
fn find_supplier(name: String) -> Result<String, ToolError> {
    journal(&format!("found {name}"));
    Ok(name)
}

/// Charge a card.
#[tool(risk = "high", rollback = refund)]
fn charge(amount_cents: i64) -> Result<i64, ToolError> {
    journal(&format!("charged {amount_cents}"));
    Ok(amount_cents)
}

async fn refund(_: &CallContext, args: &ChargeArgs, _: &i64) -> Result<(), ToolError> {
    journal(&format!("refunded {}", args.amount_cents));
    Ok(())
}

fn registry(path: &Path) -> Registry {
    let store = SqliteStore::open(path).unwrap();
    Registry::builder()
        .tool(PaySupplier)
        .tool(FindSupplier)
        .tool(Charge)
        .approval_store(store.clone())
        .repeat_store(store.clone())
        .budget(BudgetLimits {
            max_cost_per_task: Some(5),
            ..BudgetLimits::default()
        })
        .budget_store(store.clone())
        .transaction_store(store, Duration::from_millis(200))
        .build()
        .unwrap()
}

/// The worker's side: does what `PORTCULLIS_WORKER` says, against the database the parent
/// named; as a plain test run (no role), nothing.
#[tokio::test]
async fn worker() {
    let Ok(role) = std::env::var("PORTCULLIS_WORKER") else {
        return;
    };
    let path = PathBuf::from(std::env::var("PORTCULLIS_DATABASE").unwrap());
    let registry = registry(&path);
    match role.as_str() {
        "approve" => {
            let ticket = std::env::var("PORTCULLIS_TICKET").unwrap();
            let decision = ApprovalDecision::Approve {
                reviewer: Reviewer::new("rita").with_roles(["finance"]),
            };
            let outcome = registry.resume(&ticket, decision).await;
            journal(&format!("decided {:?}", outcome.code()));
        }
        "spend" => {
            for task in 0..16 {
                let ctx = CallContext::new("agent").with_task_id(format!("task{task}"));
                for index in 0..3 {
                    let id = format!("{}-{index}", std::process::id());
                    let call = ToolCall::new(id, "find_supplier", json!({"name": "acme"}));
                    registry.dispatch(&ctx, &call).await;
                }
            }
        }
        "crash" => {
            let ctx = CallContext::new("agent").with_task_id("checkout");
            let mut transaction = registry.transaction(&ctx);
            for (id, amount) in [("c1", 11), ("c2", 22)] {
                let step = ToolCall::new(id, "charge", json!({"amount_cents": amount}));
                assert!(transaction.dispatch(&step).await.is_completed());
            }
            journal("ready");
            // Waits to be killed in the middle of its transaction.
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        other => panic!("unknown role {other}"),
    }
}

struct Scene {
    database: PathBuf,
    journal: PathBuf,
}

impl Scene {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "portcullis-processes-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scene {
            database: dir.join("state.db"),
            journal: dir.join("journal"),
        }
    }

    fn spawn(&self, role: &str, extra: &[(&str, &str)]) -> Child {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", "worker", "--nocapture", "--test-threads=1"])
            .env("PORTCULLIS_WORKER", role)
            .env("PORTCULLIS_DATABASE", &self.database)
            .env("PORTCULLIS_JOURNAL", &self.journal);
        for (name, value) in extra {
            command.env(name, value);
        }
        command.spawn().unwrap()
    }
}

fn succeeded(mut child: Child) {
    assert!(child.wait().unwrap().success());
}

#[tokio::test]
async fn two_worker_processes_resume_one_ticket_once() {
    let scene = Scene::new("ticket");
    let ctx = CallContext::new("agent");
    let call = ToolCall::new("p1", "pay_supplier", json!({"supplier": "acme"}));
    let ticket = registry(&scene.database)
        .dispatch(&ctx, &call)
        .await
        .ticket()
        .unwrap()
        .id
        .clone();
    let workers: Vec<Child> = (0..2)
        .map(|_| scene.spawn("approve", &[("PORTCULLIS_TICKET", &ticket)]))
        .collect();
    workers.into_iter().for_each(succeeded);
    let mut lines = journaled(&scene.journal);
    lines.sort();
    assert_eq!(
        lines,
        [
            "decided None",
            "decided Some(TicketNotPending)",
            "paid acme"
        ]
    );
}

#[tokio::test]
async fn four_worker_processes_share_one_budget() {
    let scene = Scene::new("budget");
    let workers: Vec<Child> = (0..4).map(|_| scene.spawn("spend", &[])).collect();
    workers.into_iter().for_each(succeeded);
    // 4 workers × 16 tasks × 3 calls of cost 1 against 5 per task: exactly 5 per task.
    assert_eq!(journaled(&scene.journal).len(), 16 * 5);
}

#[tokio::test]
async fn a_worker_killed_mid_transaction_is_recovered_once() {
    let scene = Scene::new("kill");
    let mut worker = scene.spawn("crash", &[]);
    while !journaled(&scene.journal).contains(&"ready".to_owned()) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.kill().unwrap(); // SIGKILL: nothing of the worker runs any more.
    worker.wait().unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await; // its lease runs out
    PARENT_JOURNAL.set(scene.journal.clone()).unwrap();
    let recovered = registry(&scene.database).recover().await;
    assert_eq!(recovered.len(), 1);
    assert!(registry(&scene.database).recover().await.is_empty());
    assert_eq!(
        journaled(&scene.journal),
        [
            "charged 11",
            "charged 22",
            "ready",
            "refunded 22",
            "refunded 11"
        ]
    );
}
