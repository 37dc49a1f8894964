//! `portcullis console` in a real browser: Debian's Chromium, driven by playwright-core (no
//! browser download), each reviewer's passkey Chromium's virtual authenticator. The operator
//! invites and confirms reviewers with this binary; the reviewers enrol, sign in, approve a
//! critical payout, edit one (out of range, then in range), reject one, and a clerk neither sees
//! nor decides one; a worker then runs what the passkeys signed, once
//! (`console/tests/browser/console.mjs` drives the browser).
//!
//! It needs `PORTCULLIS_CHROMIUM` (the browser) and the script's `node_modules`; `.ci/run`
//! installs both. Without `PORTCULLIS_CHROMIUM` the test says it skipped and passes.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use common::directory;
use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis::{Keyring, Ticket};
use portcullis_stores::SqliteStore;
use serde_json::json;

static PAID: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Pay a supplier from the company's account.
#[tool(
    risk = "critical",
    irreversible = "payouts settle at once",
    approver = "finance"
)]
fn pay_supplier(
    /// Who is paid.
    supplier: String,
    /// How much, in euro cents.
    #[validate(range(min = 1, max = 500_000))]
    amount_cents: u64,
    /// Where the money goes.
    #[sensitive]
    iban: String,
) -> Result<String, ToolError> {
    PAID.lock()
        .unwrap()
        .push(format!("{supplier}:{amount_cents}:{}", iban.len()));
    Ok(format!("paid {amount_cents} to {supplier}"))
}

fn registry(database: &Path, keyring: Keyring) -> Registry {
    let store = SqliteStore::open(database).unwrap();
    Registry::builder()
        .tool(PaySupplier)
        .profile(Profile::Mcp)
        .approval_store(store.clone())
        .keyring(keyring)
        .repeat_store(store.clone())
        .audit(store)
        .build()
        .unwrap()
}

/// A console process, stopped when dropped.
struct Console(Child);

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn reviewers_decide_in_a_real_browser_with_their_passkeys() {
    let Ok(chromium) = std::env::var("PORTCULLIS_CHROMIUM") else {
        eprintln!("skipped: set PORTCULLIS_CHROMIUM to run the console's browser tests");
        return;
    };
    let script = workspace().join("console/tests/browser/console.mjs");
    assert!(
        script
            .with_file_name("node_modules/playwright-core")
            .exists(),
        "run `npm ci --prefix console/tests/browser` first"
    );
    let dir = directory("console");
    let database = dir.path().join("state.db");
    let keyring = dir.path().join("keyring.json");
    std::fs::write(&keyring, Keyring::new().to_json()).unwrap();
    let scratch = dir.path().join("browser");
    std::fs::create_dir(&scratch).unwrap();

    // The agent's payouts, waiting for finance.
    let caller = registry(&database, Keyring::new());
    let ctx = CallContext::new("agent").with_task_id("month-end");
    let mut tickets = serde_json::Map::new();
    let mut waiting: Vec<(String, Ticket)> = Vec::new();
    for purpose in ["approve", "edit", "reject", "kept"] {
        let call = ToolCall::new(
            format!("pay-{purpose}"),
            "pay_supplier",
            json!({"supplier": format!("acme-{purpose}"), "amount_cents": 90_000, "iban": "DE89370400440532013000"}),
        );
        let ticket = caller.dispatch(&ctx, &call).await.ticket().unwrap().clone();
        tickets.insert(purpose.to_owned(), json!(ticket.id));
        waiting.push((purpose.to_owned(), ticket));
    }
    let exports = dir.path().join("tools.json");
    let export = caller
        .export(
            &CallContext::new("export").with_roles(["finance"]),
            Profile::Mcp,
        )
        .unwrap();
    std::fs::write(&exports, json!({ "mcp": export }).to_string()).unwrap();

    let port = free_port();
    let origin = format!("http://localhost:{port}");
    let mut console = Console(
        Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args([
                "--store",
                database.to_str().unwrap(),
                "console",
                "--keyring",
            ])
            .arg(&keyring)
            .args([
                "--origin",
                &origin,
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--exports",
            ])
            .arg(&exports)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut first = String::new();
    BufReader::new(console.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(
        first.starts_with(&format!("portcullis console on {origin}")),
        "{first}"
    );

    let screenshot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-ticket.png");
    let driven = Command::new("node")
        .arg(&script)
        .env("CONSOLE", &origin)
        .env("PORTCULLIS", env!("CARGO_BIN_EXE_portcullis"))
        .env("STORE", &database)
        .env("KEYRING", &keyring)
        .env("CHROMIUM", &chromium)
        .env("TICKETS", serde_json::Value::Object(tickets).to_string())
        .env("SCREENSHOT", &screenshot)
        // Whatever the browser writes goes with the test's directory.
        .env("TMPDIR", &scratch)
        .env("HOME", &scratch)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&driven.stdout);
    assert!(
        driven.status.success(),
        "{printed}\n{}",
        String::from_utf8_lossy(&driven.stderr)
    );
    drop(console);
    assert!(
        printed.contains("ok: a form from another origin is refused"),
        "{printed}"
    );
    if std::env::var("PORTCULLIS_SCREENSHOTS").as_deref() == Ok("overwrite") {
        std::fs::copy(&screenshot, workspace().join("docs/console-ticket.png")).unwrap();
    }

    // A worker with the keyring the operator confirmed runs what the passkeys signed, once.
    let worker = registry(&database, Keyring::load(&keyring).unwrap());
    let mut ran = worker.run_decided().await.unwrap();
    ran.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(ran.len(), 3, "{ran:?}");
    let outcome = |purpose: &str| {
        let ticket = &waiting
            .iter()
            .find(|(named, _)| named == purpose)
            .unwrap()
            .1;
        ran.iter()
            .find(|(id, _)| *id == ticket.id)
            .map(|(_, outcome)| outcome.clone())
            .unwrap()
    };
    assert_eq!(
        outcome("approve").output(),
        Some(&json!("paid 90000 to acme-approve"))
    );
    assert_eq!(
        outcome("edit").output(),
        Some(&json!("paid 45000 to acme-edit"))
    );
    let rejected = outcome("reject");
    assert_eq!(rejected.code(), Some(RejectionCode::ApprovalRejected));
    assert!(
        rejected
            .rejection()
            .unwrap()
            .message()
            .contains("this supplier was paid on Monday")
    );
    assert!(worker.run_decided().await.unwrap().is_empty());
    let paid = PAID.lock().unwrap().clone();
    // The edit kept the IBAN the page never showed.
    assert_eq!(paid, vec!["acme-approve:90000:22", "acme-edit:45000:22"]);
    let still: Vec<String> = worker
        .pending_tickets()
        .await
        .unwrap()
        .into_iter()
        .map(|ticket| ticket.id)
        .collect();
    assert_eq!(
        still,
        vec![waiting[3].1.id.clone()],
        "the clerk's ticket waits"
    );
    // The caller, asking again under the same call id, hears the rejection's message.
    let asked_again = caller
        .dispatch(&ctx, &ToolCall::new("pay-reject", "pay_supplier", json!({"supplier": "acme-reject", "amount_cents": 90_000, "iban": "DE89370400440532013000"})))
        .await;
    assert!(
        asked_again.rejection().is_some_and(|rejection| rejection
            .message()
            .contains("this supplier was paid on Monday")),
        "{asked_again:?}"
    );
}
