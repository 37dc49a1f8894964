//! Workers as separate processes sharing one database, SQLite or PostgreSQL: this test binary
//! runs itself again as each worker (`worker` below does the work when `PORTCULLIS_WORKER`
//! names a role), so that the database, not shared memory, keeps every decision once.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use common::Backend;
use portcullis::audit::{AuditKey, ChainBreak, verify, verify_to};
use portcullis::prelude::*;
use portcullis::{ApprovalDecision, BudgetLimits, Reviewer};
use serde_json::json;
use tempfile::TempDir;

/// Appends one line to the journal: what ran, in any process.
fn journal(line: &str) {
    let path = std::env::var_os("PORTCULLIS_JOURNAL").expect("a worker's parent names a journal");
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

fn audit_key() -> AuditKey {
    AuditKey::new(b"the operator's secret, 32 bytes+".to_vec()).unwrap()
}

async fn registry(location: &str) -> Registry {
    let store = portcullis_stores::Store::open(location).await.unwrap();
    Registry::builder()
        .tool(PaySupplier)
        .tool(FindSupplier)
        .tool(Charge)
        .approval_store(store.clone())
        .accept_unsigned_decisions()
        .repeat_store(store.clone())
        .budget(BudgetLimits {
            max_cost_per_task: Some(5),
            ..BudgetLimits::default()
        })
        .budget_store(store.clone())
        .transaction_store(store.clone(), Duration::from_millis(200))
        .audit(store)
        .audit_key(audit_key())
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
    let location = std::env::var("PORTCULLIS_DATABASE").unwrap();
    let registry = registry(&location).await;
    match role.as_str() {
        "wait" => {
            let ctx = CallContext::new("agent").with_task_id("payroll");
            let call = ToolCall::new("p1", "pay_supplier", json!({"supplier": "initech"}));
            let outcome = registry.dispatch(&ctx, &call).await;
            journal(&format!("waiting {}", outcome.ticket().unwrap().id));
        }
        "recover" => {
            let recovered = registry.recover().await;
            journal(&format!("recovered {}", recovered.len()));
        }
        "run-decided" => {
            for (_, outcome) in registry.run_decided().await.unwrap() {
                journal(&format!("ran {:?}", outcome.code()));
            }
        }
        "approve" => {
            let ticket = std::env::var("PORTCULLIS_TICKET").unwrap();
            let decision = ApprovalDecision::Approve {
                reviewer: Reviewer::new("rita").with_roles(["finance"]),
            };
            let outcome = registry.resume(&ticket, decision).await;
            let code = match outcome.code() {
                // Whether the other worker had recorded its decision or run it already.
                Some(RejectionCode::TicketDecided | RejectionCode::TicketNotPending) => "lost",
                Some(_) => "refused",
                None => "ran",
            };
            journal(&format!("decided: {code}"));
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
    backend: Backend,
    journal: PathBuf,
    /// The journal's directory, removed when the scene ends.
    _directory: TempDir,
}

impl Scene {
    fn new(name: &str, backend: Backend) -> Self {
        let directory = tempfile::Builder::new()
            .prefix(&format!("portcullis-processes-{name}-{}-", backend.tag()))
            .tempdir()
            .unwrap();
        Scene {
            backend,
            journal: directory.path().join("journal"),
            _directory: directory,
        }
    }

    async fn registry(&self) -> Registry {
        registry(&self.backend.location).await
    }

    fn spawn(&self, role: &str, extra: &[(&str, &str)]) -> Child {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", "worker", "--nocapture", "--test-threads=1"])
            .env("PORTCULLIS_WORKER", role)
            .env("PORTCULLIS_DATABASE", &self.backend.location)
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

on_both!(
    two_worker_processes_resume_one_ticket_once,
    a_pending_call_outlives_its_worker_process,
    four_worker_processes_share_one_budget,
    worker_processes_write_one_verifiable_audit_chain,
    a_worker_killed_mid_transaction_is_recovered_once,
);

async fn two_worker_processes_resume_one_ticket_once(backend: Backend) {
    let scene = Scene::new("ticket", backend);
    let ctx = CallContext::new("agent");
    let call = ToolCall::new("p1", "pay_supplier", json!({"supplier": "acme"}));
    let ticket = scene
        .registry()
        .await
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
    assert_eq!(lines, ["decided: lost", "decided: ran", "paid acme"]);
}

/// A worker process leaves a call waiting and exits; a reviewer decides from a third process;
/// two restarted workers run it once.
async fn a_pending_call_outlives_its_worker_process(backend: Backend) {
    let scene = Scene::new("restart", backend);
    succeeded(scene.spawn("wait", &[]));
    let waiting = journaled(&scene.journal);
    let ticket = waiting[0].strip_prefix("waiting ").unwrap().to_owned();
    let pending = scene.registry().await.pending_tickets().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, ticket);
    let store = scene.backend.open().await;
    let decision = ApprovalDecision::Approve {
        reviewer: Reviewer::new("rita").with_roles(["finance"]),
    };
    portcullis::record_decision(&store, &ticket, decision)
        .await
        .unwrap();
    let workers: Vec<Child> = (0..2).map(|_| scene.spawn("run-decided", &[])).collect();
    workers.into_iter().for_each(succeeded);
    assert_eq!(
        journaled(&scene.journal)[1..],
        ["paid initech", "ran None"],
        "run once, by one of the two"
    );
}

async fn four_worker_processes_share_one_budget(backend: Backend) {
    let scene = Scene::new("budget", backend);
    let workers: Vec<Child> = (0..4).map(|_| scene.spawn("spend", &[])).collect();
    workers.into_iter().for_each(succeeded);
    // 4 workers × 16 tasks × 3 calls of cost 1 against 5 per task: exactly 5 per task.
    assert_eq!(journaled(&scene.journal).len(), 16 * 5);
}

/// Four worker processes audit into one log: it verifies as one chain; a cut tail and an
/// altered record are reported.
async fn worker_processes_write_one_verifiable_audit_chain(backend: Backend) {
    let scene = Scene::new("audit", backend);
    let workers: Vec<Child> = (0..4).map(|_| scene.spawn("spend", &[])).collect();
    workers.into_iter().for_each(succeeded);
    let store = scene.backend.open().await;
    let records = store.audit_records(0, None).await.unwrap();
    // 4 workers × 16 tasks × 3 calls, each call one record (read-only calls have no
    // write-ahead record).
    assert_eq!(records.len(), 4 * 16 * 3);
    let checkpoint = verify(&records, Some(&audit_key())).unwrap();
    scene
        .backend
        .tamper("DELETE FROM audit_records WHERE sequence >= 190")
        .await;
    let cut = store.audit_records(0, None).await.unwrap();
    assert_eq!(
        verify_to(&cut, Some(&audit_key()), &checkpoint),
        Err(ChainBreak::CutShort {
            expected_length: 192,
            found_length: 190
        })
    );
    scene
        .backend
        .tamper(
            "UPDATE audit_records SET record = replace(record, '\"acme\"', '\"evil\"')
             WHERE sequence = 7",
        )
        .await;
    let altered = store.audit_records(0, None).await.unwrap();
    assert!(matches!(
        verify(&altered, Some(&audit_key())),
        Err(ChainBreak::Altered { position: 7 })
    ));
}

async fn a_worker_killed_mid_transaction_is_recovered_once(backend: Backend) {
    let scene = Scene::new("kill", backend);
    let mut worker = scene.spawn("crash", &[]);
    while !journaled(&scene.journal).contains(&"ready".to_owned()) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.kill().unwrap(); // SIGKILL: nothing of the worker runs any more.
    worker.wait().unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await; // its lease runs out
    succeeded(scene.spawn("recover", &[]));
    succeeded(scene.spawn("recover", &[]));
    assert_eq!(
        journaled(&scene.journal),
        [
            "charged 11",
            "charged 22",
            "ready",
            "refunded 22",
            "refunded 11",
            "recovered 1",
            "recovered 0"
        ]
    );
}
