//! The `portcullis` binary against a real SQLite store that registries of the application
//! wrote: pending approvals decided from the command line and run by a worker, the audit log
//! verified and found altered, manifests compared, exports printed.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{code, directory, portcullis, stderr, stdout};
use portcullis::audit::AuditKey;
use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis_stores::SqliteStore;
use serde_json::{Value, json};

/// How many payouts ran, in this test process.
static PAYOUTS: AtomicUsize = AtomicUsize::new(0);

/// Pay a supplier.
#[tool(
    risk = "critical",
    irreversible = "payouts settle at once",
    approver = "finance"
)]
fn pay_supplier(
    supplier: String,
    amount_cents: u64,
    #[sensitive] iban: String,
) -> Result<String, ToolError> {
    PAYOUTS.fetch_add(1, Ordering::SeqCst);
    Ok(format!(
        "paid {amount_cents} to {supplier} at {}",
        iban.len()
    ))
}

/// The customers refunded, one entry per refund; each test refunds customers of its own.
static REFUNDS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn refunds_to(customer: &str) -> usize {
    REFUNDS
        .lock()
        .unwrap()
        .iter()
        .filter(|c| *c == customer)
        .count()
}

/// Refund a customer.
#[tool(
    risk = "critical",
    irreversible = "refunds settle at once",
    approver = "finance"
)]
fn refund(
    customer: String,
    amount_cents: u64,
    #[sensitive] iban: String,
) -> Result<String, ToolError> {
    REFUNDS.lock().unwrap().push(customer.clone());
    Ok(format!(
        "refunded {amount_cents} to {customer} at {}",
        iban.len()
    ))
}

/// Move money between two of the company's accounts.
#[tool(risk = "medium")]
fn transfer(amount_cents: u64) -> Result<u64, ToolError> {
    Ok(amount_cents)
}

/// The wires started, by reference.
static WIRES_STARTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Wire funds to a bank; this one never hears back.
#[tool(risk = "medium")]
async fn wire_funds(reference: String) -> Result<String, ToolError> {
    WIRES_STARTED.lock().unwrap().push(reference);
    std::future::pending::<()>().await;
    Ok("wired".to_owned())
}

/// A fresh directory for one test, removed when the test ends, passed or failed.
/// A worker of the application on the shared file.
fn worker(database: &Path) -> Registry {
    let store = SqliteStore::open(database).unwrap();
    Registry::builder()
        .tool(PaySupplier)
        .approval_store(store.clone())
        .accept_unsigned_decisions()
        .repeat_store(store)
        .build()
        .unwrap()
}

fn audit_key_bytes() -> Vec<u8> {
    b"the operator's secret, 32 bytes+".to_vec()
}

/// A reviewer makes a key, the operator puts its public half in the workers' keyring, and the
/// reviewer's signed approval runs the payout; an unsigned one, or one signed over a call
/// changed in the store, runs nothing.
#[tokio::test]
async fn a_decision_signed_on_the_command_line_runs_in_a_worker_with_a_keyring() {
    let dir = directory("signed");
    let database = dir.path().join("state.db");
    let store = database.to_str().unwrap();
    let key_file = dir.path().join("rita.key");
    let key = key_file.to_str().unwrap();
    let made = portcullis(&[
        "keys",
        "generate",
        "--out",
        key,
        "--reviewer",
        "rita",
        "--role",
        "finance",
    ]);
    assert_eq!(code(&made), 0, "{}", stderr(&made));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the secret key is its owner's alone");
    }
    let again = portcullis(&["keys", "generate", "--out", key, "--reviewer", "rita"]);
    assert_eq!(code(&again), 4, "an existing key is never overwritten");
    // What `generate` printed is the keyring, as the workers load it.
    let printed = stdout(&made);
    let keyring = portcullis::Keyring::from_json(&printed).unwrap();
    let public = portcullis(&["keys", "public", key]);
    assert!(printed.contains(stdout(&public).trim()), "{printed}");

    let store_handle = SqliteStore::open(&database).unwrap();
    let signed_worker = Registry::builder()
        .tool(Refund)
        .approval_store(store_handle.clone())
        .keyring(keyring)
        .repeat_store(store_handle)
        .build()
        .unwrap();
    let ctx = CallContext::new("agent").with_task_id("t-signed");
    let payout = |id: &str, customer: &str| {
        ToolCall::new(
            id,
            "refund",
            json!({"customer": customer, "amount_cents": 900, "iban": "DE89370400440532013000"}),
        )
    };
    let ticket = |outcome: Outcome| outcome.ticket().unwrap().id.clone();
    let as_rita = ["--reviewer", "rita", "--role", "finance"];
    // The digest of the call as `show` prints it to the reviewer.
    let shown_digest = |ticket: &str| {
        let mut args = vec!["--store", store, "approvals", "show", ticket, "--json"];
        args.extend(as_rita);
        let shown: Value = serde_json::from_slice(&portcullis(&args).stdout).unwrap();
        shown["call_digest"].as_str().unwrap().to_owned()
    };
    let approve_shown = |ticket: &str, digest: Option<&str>| {
        let mut args = vec!["--store", store, "approvals", "approve", ticket];
        args.extend(as_rita);
        if let Some(digest) = digest {
            args.extend(["--key-file", key, "--call-digest", digest]);
        }
        portcullis(&args)
    };
    let approve = |ticket: &str, signed: bool| {
        let digest = signed.then(|| shown_digest(ticket));
        approve_shown(ticket, digest.as_deref())
    };

    let first = ticket(signed_worker.dispatch(&ctx, &payout("p1", "acme")).await);
    let approved = approve(&first, true);
    assert_eq!(code(&approved), 0, "{}", stderr(&approved));
    assert!(stdout(&approved).contains("signed with ed25519:"));
    let ran = signed_worker.run_decided().await.unwrap();
    assert_eq!(ran.len(), 1);
    assert!(ran[0].1.output().is_some(), "{:?}", ran[0].1);
    assert_eq!(refunds_to("acme"), 1);

    let unsigned = ticket(signed_worker.dispatch(&ctx, &payout("p2", "acme")).await);
    let approved = approve(&unsigned, false);
    assert_eq!(code(&approved), 0, "{}", stderr(&approved));
    assert!(stdout(&approved).contains("unsigned"));
    let ran = signed_worker.run_decided().await.unwrap();
    assert_eq!(ran[0].1.code(), Some(RejectionCode::DecisionUnsigned));

    // The stored call is changed before the reviewer signs: the command line refuses to sign.
    let changed = ticket(signed_worker.dispatch(&ctx, &payout("p3", "acme")).await);
    rusqlite::Connection::open(&database)
        .unwrap()
        .execute_batch("UPDATE pending_calls SET call = replace(call, '\"acme\"', '\"evil\"')")
        .unwrap();
    let refused = approve(&changed, true);
    assert_eq!(code(&refused), 1, "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("was changed in the store"),
        "{}",
        stderr(&refused)
    );
    // The call is changed after the reviewer saw it: the digest she was shown no longer
    // matches, and nothing is signed; a signed approval without a shown digest is refused.
    let swapped = ticket(signed_worker.dispatch(&ctx, &payout("p4", "acme")).await);
    let seen = shown_digest(&swapped);
    let without = approve_shown(&swapped, None);
    assert_eq!(code(&without), 0, "an unsigned approval needs no digest");
    let swapped = ticket(signed_worker.dispatch(&ctx, &payout("p5", "acme")).await);
    let no_digest = portcullis(&[
        "--store",
        store,
        "approvals",
        "approve",
        &swapped,
        "--reviewer",
        "rita",
        "--role",
        "finance",
        "--key-file",
        key,
    ]);
    assert_eq!(code(&no_digest), 2, "{}", stderr(&no_digest));
    let refused = approve_shown(&swapped, Some(&seen));
    assert_eq!(code(&refused), 1, "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("call digest differs"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(refunds_to("acme"), 1);
}

/// The workers seal what the store keeps: the command line lists the queue without the keys,
/// refuses to show or decide a sealed call without them (`seal_key_missing`), and decides it
/// with them.
#[tokio::test]
async fn a_sealed_store_is_decided_with_its_seal_keys() {
    let dir = directory("sealed");
    let database = dir.path().join("state.db");
    let store = database.to_str().unwrap();
    let keys = portcullis_stores::SealKeys::generate("k1");
    let seal_file = dir.path().join("seal.keys");
    std::fs::write(&seal_file, keys.to_text()).unwrap();
    let seal = seal_file.to_str().unwrap();
    let sealed = SqliteStore::open(&database).unwrap().sealed_with(keys);
    let registry = Registry::builder()
        .tool(Refund)
        .approval_store(sealed.clone())
        .accept_unsigned_decisions()
        .repeat_store(sealed)
        .build()
        .unwrap();
    let ctx = CallContext::new("agent").with_task_id("t-sealed");
    let call = ToolCall::new(
        "r1",
        "refund",
        json!({"customer": "zed", "amount_cents": 5, "iban": "DE02120300000000202051"}),
    );
    let ticket = registry
        .dispatch(&ctx, &call)
        .await
        .ticket()
        .unwrap()
        .id
        .clone();
    let as_rita = ["--reviewer", "rita", "--role", "finance"];

    let listed = portcullis(&["--store", store, "approvals", "list", "--json"]);
    assert_eq!(code(&listed), 0, "{}", stderr(&listed));
    assert!(stdout(&listed).contains(&ticket));
    let mut show = vec!["--store", store, "approvals", "show", &ticket];
    show.extend(as_rita);
    let refused = portcullis(&show);
    assert_eq!(code(&refused), 1, "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("seal_key_missing"),
        "{}",
        stderr(&refused)
    );
    let mut approve = vec!["--store", store, "approvals", "approve", &ticket];
    approve.extend(as_rita);
    let refused = portcullis(&approve);
    assert!(
        stderr(&refused).contains("seal_key_missing"),
        "{}",
        stderr(&refused)
    );

    let mut show_sealed = vec!["--seal-key-file", seal];
    show_sealed.extend(&show);
    let shown = portcullis(&show_sealed);
    assert_eq!(code(&shown), 0, "{}", stderr(&shown));
    assert!(stdout(&shown).contains("DE02120300000000202051"));
    let mut approve_sealed = vec!["--seal-key-file", seal];
    approve_sealed.extend(&approve);
    let approved = portcullis(&approve_sealed);
    assert_eq!(code(&approved), 0, "{}", stderr(&approved));
    let ran = registry.run_decided().await.unwrap();
    assert!(ran[0].1.output().is_some(), "{:?}", ran[0].1);
}

#[tokio::test]
async fn a_ticket_decided_on_the_command_line_runs_once_in_a_worker() {
    let dir = directory("approvals");
    let database = dir.path().join("state.db");
    let store = database.to_str().unwrap();
    let ctx = CallContext::new("agent").with_task_id("t1");
    let call = ToolCall::new(
        "p1",
        "pay_supplier",
        json!({"supplier": "acme", "amount_cents": 900, "iban": "DE89370400440532013000"}),
    );
    let ticket = worker(&database)
        .dispatch(&ctx, &call)
        .await
        .ticket()
        .unwrap()
        .id
        .clone();

    let listed = portcullis(&["--store", store, "approvals", "list", "--json"]);
    assert_eq!(code(&listed), 0, "{}", stderr(&listed));
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["id"], json!(ticket));
    assert_eq!(listed[0]["state"], json!("pending"));
    assert_eq!(listed[0]["arguments"]["iban"], json!("[redacted]"));
    let table = portcullis(&["--store", store, "approvals", "list"]);
    assert!(stdout(&table).contains(&ticket), "{}", stdout(&table));

    // A reviewer who may decide sees the real arguments; anyone else the redacted ones.
    let shown = portcullis(&[
        "--store",
        store,
        "approvals",
        "show",
        &ticket,
        "--reviewer",
        "rita",
        "--role",
        "finance",
        "--json",
    ]);
    assert_eq!(code(&shown), 0, "{}", stderr(&shown));
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["arguments"]["iban"], json!("DE89370400440532013000"));
    assert_eq!(shown["arguments_redacted"], json!(false));
    let shown = portcullis(&[
        "--store",
        store,
        "approvals",
        "show",
        &ticket,
        "--reviewer",
        "rita",
    ]);
    assert_eq!(code(&shown), 0, "{}", stderr(&shown));
    assert!(!stdout(&shown).contains("DE89"), "{}", stdout(&shown));

    let approve = |reviewer: &str, roles: &[&str]| {
        let mut args = vec!["--store", store, "approvals", "approve", &ticket];
        args.extend(["--reviewer", reviewer]);
        for role in roles {
            args.extend(["--role", role]);
        }
        portcullis(&args)
    };
    let no_role = approve("rita", &[]);
    assert_eq!(code(&no_role), 1);
    assert!(
        stderr(&no_role).contains("reviewer_not_allowed"),
        "{}",
        stderr(&no_role)
    );
    let own_call = approve("agent", &["finance"]);
    assert_eq!(code(&own_call), 1);
    assert!(
        stderr(&own_call).contains("self_approval"),
        "{}",
        stderr(&own_call)
    );
    // Both refusals are in the store's audit log: who tried, on which call, why; the
    // sensitive argument redacted as the ticket shows it.
    let audited = SqliteStore::open_existing(&database)
        .unwrap()
        .audit_records(0, None)
        .unwrap();
    let refused: Vec<(Option<&str>, Option<&str>)> = audited
        .iter()
        .map(|record| (record.code.as_deref(), record.resolution.as_deref()))
        .collect();
    assert_eq!(
        refused,
        [
            (Some("reviewer_not_allowed"), Some("refused to rita")),
            (Some("self_approval"), Some("refused to agent")),
        ]
    );
    assert!(
        audited.iter().all(|record| record.tool == "pay_supplier"
            && record.arguments["iban"] == json!("[redacted]"))
    );
    portcullis::audit::verify(&audited, None).unwrap();
    let no_reviewer = portcullis(&["--store", store, "approvals", "approve", &ticket]);
    assert_eq!(code(&no_reviewer), 2, "{}", stderr(&no_reviewer));
    let not_an_object = portcullis(&[
        "--store",
        store,
        "approvals",
        "edit",
        &ticket,
        "--arguments",
        "[1]",
        "--reviewer",
        "rita",
        "--role",
        "finance",
    ]);
    assert_eq!(code(&not_an_object), 2, "{}", stderr(&not_an_object));
    assert!(
        stderr(&not_an_object).contains("JSON object"),
        "{}",
        stderr(&not_an_object)
    );
    assert_eq!(
        PAYOUTS.load(Ordering::SeqCst),
        0,
        "nothing ran before a decision"
    );

    let approved = approve("rita", &["finance"]);
    assert_eq!(code(&approved), 0, "{}", stderr(&approved));
    assert!(
        stdout(&approved).contains("run_decided"),
        "{}",
        stdout(&approved)
    );
    let again = approve("rita", &["finance"]);
    assert_eq!(code(&again), 1);
    assert!(
        stderr(&again).contains("ticket_decided"),
        "{}",
        stderr(&again)
    );
    let listed = portcullis(&["--store", store, "approvals", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    assert_eq!(listed[0]["state"], json!("decided"));

    let ran = worker(&database).run_decided().await.unwrap();
    assert_eq!(ran.len(), 1);
    assert!(ran[0].1.is_completed(), "{:?}", ran[0].1);
    assert!(worker(&database).run_decided().await.unwrap().is_empty());
    assert_eq!(PAYOUTS.load(Ordering::SeqCst), 1);

    let unknown = portcullis(&["--store", store, "approvals", "show", &ticket]);
    assert_eq!(code(&unknown), 1);
    assert!(
        stderr(&unknown).contains("ticket_not_pending"),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn a_missing_database_is_reported_and_not_created() {
    let dir = directory("missing");
    let database = dir.path().join("nowhere.db");
    let store = database.to_str().unwrap();
    let output = portcullis(&["--store", store, "approvals", "list"]);
    assert_eq!(code(&output), 3);
    assert!(
        stderr(&output).contains("no store database"),
        "{}",
        stderr(&output)
    );
    assert!(!database.exists());
    let no_store = portcullis(&["audit", "tail"]);
    assert_eq!(code(&no_store), 2, "{}", stderr(&no_store));
}

/// A file that is a database but not a store (a mistyped path to another application's
/// database) is refused, and left as it was.
#[test]
fn a_database_that_is_no_store_is_refused_and_left_alone() {
    let dir = directory("foreign");
    let database = dir.path().join("orders.db");
    let orders = rusqlite::Connection::open(&database).unwrap();
    orders
        .execute_batch("CREATE TABLE orders (id INTEGER)")
        .unwrap();
    drop(orders);
    let output = portcullis(&["--store", database.to_str().unwrap(), "approvals", "list"]);
    assert_eq!(code(&output), 3, "{}", stderr(&output));
    assert!(
        stderr(&output).contains("holds no portcullis store"),
        "{}",
        stderr(&output)
    );
    let orders = rusqlite::Connection::open(&database).unwrap();
    let version: i64 = orders
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    let tables: i64 = orders
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!((version, tables), (0, 1), "nothing was created");
}

#[test]
fn a_postgres_server_is_trusted_only_under_the_ca_given() {
    let (Ok(url), Ok(ca), Ok(untrusted)) = (
        std::env::var("PORTCULLIS_POSTGRES_URL"),
        std::env::var("PORTCULLIS_POSTGRES_CA"),
        std::env::var("PORTCULLIS_POSTGRES_UNTRUSTED_CA"),
    ) else {
        eprintln!("skipped: .ci/postgres sets the PostgreSQL server and its CAs");
        return;
    };
    // The roots from the command line, not from the URL.
    let (base, query) = url.split_once('?').unwrap_or((&url, ""));
    let query: Vec<&str> = query
        .split('&')
        .filter(|parameter| !parameter.starts_with("sslrootcert="))
        .collect();
    let url = format!("{base}?{}", query.join("&"));

    let refused = portcullis(&[
        "--store",
        &url,
        "--postgres-ca",
        &untrusted,
        "approvals",
        "list",
    ]);
    assert_eq!(code(&refused), 3, "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("TLS refused the connection")
            && stderr(&refused).contains("UnknownIssuer"),
        "{}",
        stderr(&refused)
    );

    // Trusted, the server is reached: its `postgres` database holds no store, and says so.
    let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
    command.env_remove("PORTCULLIS_STORE");
    command.env("PORTCULLIS_POSTGRES_CA", &ca);
    let reached = command
        .args(["--store", &url, "approvals", "list"])
        .output()
        .unwrap();
    assert_eq!(code(&reached), 3, "{}", stderr(&reached));
    assert!(
        stderr(&reached).contains("holds no portcullis store"),
        "{}",
        stderr(&reached)
    );

    let missing = portcullis(&[
        "--store",
        &url,
        "--postgres-ca",
        "/nonexistent/ca.pem",
        "approvals",
        "list",
    ]);
    assert_eq!(code(&missing), 4, "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("could not be read"),
        "{}",
        stderr(&missing)
    );
}

#[tokio::test]
async fn an_altered_audit_record_breaks_the_chain() {
    let dir = directory("audit");
    let database = dir.path().join("state.db");
    let store = database.to_str().unwrap();
    let key_file = dir.path().join("audit.key");
    std::fs::write(&key_file, audit_key_bytes()).unwrap();
    let sink = SqliteStore::open(&database).unwrap();
    let registry = Registry::builder()
        .tool(Transfer)
        .audit(sink.clone())
        .audit_key(AuditKey::new(audit_key_bytes()).unwrap())
        .build()
        .unwrap();
    for index in 0..3u64 {
        let call = ToolCall::new(
            format!("c{index}"),
            "transfer",
            json!({"amount_cents": index}),
        );
        assert!(
            registry
                .dispatch(&CallContext::new("agent"), &call)
                .await
                .is_completed()
        );
    }

    let key = key_file.to_str().unwrap();
    let verified = portcullis(&["--store", store, "audit", "verify", "--key-file", key]);
    assert_eq!(code(&verified), 0, "{}", stderr(&verified));
    let checkpoint = stdout(&verified)
        .lines()
        .find_map(|line| line.strip_prefix("checkpoint: ").map(str::to_owned))
        .unwrap();
    assert!(checkpoint.starts_with("6:"), "{checkpoint}");
    let to_checkpoint = portcullis(&[
        "--store",
        store,
        "audit",
        "verify",
        "--key-file",
        key,
        "--checkpoint",
        &checkpoint,
    ]);
    assert_eq!(code(&to_checkpoint), 0, "{}", stderr(&to_checkpoint));
    let unkeyed = portcullis(&["--store", store, "audit", "verify"]);
    assert_eq!(code(&unkeyed), 1);
    assert!(
        stderr(&unkeyed).contains("--key-file"),
        "{}",
        stderr(&unkeyed)
    );

    let tail = portcullis(&["--store", store, "audit", "tail", "-n", "2"]);
    assert_eq!(code(&tail), 0, "{}", stderr(&tail));
    let tail = stdout(&tail);
    let rows: Vec<&str> = tail.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{tail}");
    assert!(
        rows[0].starts_with("4 ") && rows[1].starts_with("5 "),
        "{rows:?}"
    );
    let exported = portcullis(&["--store", store, "audit", "export", "--json", "--from", "4"]);
    let sequences: Vec<u64> = stdout(&exported)
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["sequence"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(sequences, [4, 5]);

    let connection = rusqlite::Connection::open(&database).unwrap();
    connection
        .execute("DELETE FROM audit_records WHERE sequence = 5", [])
        .unwrap();
    let cut = verify_refused(store, key, Some(&checkpoint));
    assert!(cut.contains("its tail was cut"), "{cut}");
    connection
        .execute(
            "UPDATE audit_records SET record = replace(record, '\"agent\"', '\"mallory\"') \
             WHERE sequence = 3",
            [],
        )
        .unwrap();
    let altered = verify_refused(store, key, None);
    assert!(altered.contains("record 3 was altered"), "{altered}");
}

/// A log of many pages: verify reads it a page at a time, and still finds a cut tail and a
/// record altered deep in it.
#[tokio::test]
async fn a_long_log_verifies_page_by_page() {
    use portcullis::audit::{AuditRecord, AuditSink, Unchained};

    const RECORDS: u64 = 20_000;
    let dir = directory("long-log");
    let database = dir.path().join("state.db");
    let key_file = dir.path().join("audit.key");
    std::fs::write(&key_file, audit_key_bytes()).unwrap();
    let audit_key = AuditKey::new(audit_key_bytes()).unwrap();
    {
        let store = SqliteStore::open(&database).unwrap();
        let waits: Vec<_> = (0..RECORDS)
            .map(|index| {
                let record: AuditRecord = serde_json::from_value(json!({
                    "sequence": 0, "time_ms": index, "trace_id": "t", "task_id": "k",
                    "actor": "agent", "tenant": null, "tool": "transfer",
                    "call_id": format!("c{index}"), "arguments": {"amount_cents": index},
                    "decision": "completed", "gate": null, "code": null, "reason": null,
                    "summary": "ok", "resolution": null, "original_arguments": null,
                    "snapshot_before": null, "snapshot_after": null, "budget_calls": 1,
                    "budget_cost": 1, "duration_us": 1, "previous_hash": "", "hash": ""
                }))
                .unwrap();
                store.append(Unchained::new(record, Some(audit_key.clone())))
            })
            .collect();
        for wait in waits {
            wait.await.unwrap();
        }
    }
    let (store, key) = (database.to_str().unwrap(), key_file.to_str().unwrap());

    let verified = portcullis(&["--store", store, "audit", "verify", "--key-file", key]);
    assert_eq!(code(&verified), 0, "{}", stderr(&verified));
    assert!(
        stdout(&verified).contains("verifies: 20000 records"),
        "{}",
        stdout(&verified)
    );
    let checkpoint = stdout(&verified)
        .lines()
        .find_map(|line| line.strip_prefix("checkpoint: ").map(str::to_owned))
        .unwrap();

    let connection = rusqlite::Connection::open(&database).unwrap();
    connection
        .execute("DELETE FROM audit_records WHERE sequence >= 19500", [])
        .unwrap();
    let cut = verify_refused(store, key, Some(&checkpoint));
    assert!(
        cut.contains("holds 19500 records where a checkpoint saw 20000"),
        "{cut}"
    );

    connection
        .execute(
            "UPDATE audit_records SET record = replace(record, '\"agent\"', '\"mallory\"') \
             WHERE sequence = 17345",
            [],
        )
        .unwrap();
    let altered = verify_refused(store, key, None);
    assert!(altered.contains("record 17345 was altered"), "{altered}");

    connection
        .execute("DELETE FROM audit_records WHERE sequence = 4321", [])
        .unwrap();
    let dropped = verify_refused(store, key, None);
    assert!(
        dropped.contains("record 4321 is number 4322 where 4321 was expected"),
        "{dropped}"
    );
}

#[test]
fn manifests_compare_tool_by_tool() {
    let dir = directory("manifest");
    let registry = Registry::builder()
        .tool(PaySupplier)
        .tool(Transfer)
        .build()
        .unwrap();
    let manifest = registry.manifest();
    let old = dir.path().join("old.json");
    std::fs::write(&old, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let same = dir.path().join("same.json");
    std::fs::write(&same, manifest.to_string()).unwrap();
    let mut changed = manifest.clone();
    let tools = changed["tools"].as_array_mut().unwrap();
    tools[0]["risk"] = json!("high");
    tools.pop();
    let new = dir.path().join("new.json");
    std::fs::write(&new, changed.to_string()).unwrap();
    let (old, same, new) = (
        old.to_str().unwrap(),
        same.to_str().unwrap(),
        new.to_str().unwrap(),
    );

    let equal = portcullis(&["manifest", "diff", old, same]);
    assert_eq!(code(&equal), 0, "{}", stderr(&equal));
    let differ = portcullis(&["manifest", "diff", old, new]);
    assert_eq!(code(&differ), 1);
    assert!(
        stdout(&differ).contains("removed tool transfer"),
        "{}",
        stdout(&differ)
    );
    let differ = portcullis(&["manifest", "diff", old, new, "--json"]);
    assert_eq!(code(&differ), 1);
    let differ: Value = serde_json::from_slice(&differ.stdout).unwrap();
    assert_eq!(differ["removed"], json!(["transfer"]));
    assert_eq!(differ["changed"][0]["tool"], json!("pay_supplier"));
    assert_eq!(differ["changed"][0]["fields"][0]["field"], json!("risk"));
    let missing = portcullis(&["manifest", "diff", old, "/nonexistent/manifest.json"]);
    assert_eq!(code(&missing), 4, "{}", stderr(&missing));
}

#[test]
fn tools_export_prints_the_applications_export() {
    let dir = directory("tools");
    let profile = Profile::OpenAiChat { strict: true };
    let registry = Registry::builder()
        .tool(Transfer)
        .profile(profile)
        .build()
        .unwrap();
    let exported = registry
        .export(&CallContext::new("export"), profile)
        .unwrap();
    let file = dir.path().join("tools.json");
    std::fs::write(&file, json!({profile.name(): exported}).to_string()).unwrap();
    let file = file.to_str().unwrap();

    let output = portcullis(&[
        "tools",
        "export",
        "--exports",
        file,
        "--profile",
        "openai-chat-strict",
    ]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(
        serde_json::from_slice::<Value>(&output.stdout).unwrap(),
        exported
    );
    let absent = portcullis(&["tools", "export", "--exports", file, "--profile", "mcp"]);
    assert_eq!(code(&absent), 4);
    assert!(
        stderr(&absent).contains("openai-chat-strict"),
        "{}",
        stderr(&absent)
    );
    let unknown = portcullis(&["tools", "export", "--exports", file, "--profile", "openai"]);
    assert_eq!(code(&unknown), 2);
}

#[test]
fn tools_cedar_schema_prints_the_schema_the_registry_validates_policies_against() {
    let dir = directory("cedar-schema");
    let registry = Registry::builder()
        .tool(Transfer)
        .profile(Profile::Mcp)
        .build()
        .unwrap();
    let exported = registry
        .export(&CallContext::new("export"), Profile::Mcp)
        .unwrap();
    let file = dir.path().join("tools.json");
    std::fs::write(&file, json!({"mcp": exported}).to_string()).unwrap();
    let output = portcullis(&["tools", "cedar-schema", "--exports", file.to_str().unwrap()]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let contracts: Vec<_> = registry.contracts().collect();
    let expected = portcullis_cedar::schema_for_contracts(&contracts).unwrap();
    assert_eq!(stdout(&output), expected);
    assert!(
        expected.contains(r#"action "transfer" in [Action::"call_tool"]"#),
        "{expected}"
    );

    let other = dir.path().join("other.json");
    std::fs::write(&other, json!({"openai-chat": []}).to_string()).unwrap();
    let absent = portcullis(&[
        "tools",
        "cedar-schema",
        "--exports",
        other.to_str().unwrap(),
    ]);
    assert_eq!(code(&absent), 4);
    assert!(
        stderr(&absent).contains("no export for `mcp`"),
        "{}",
        stderr(&absent)
    );
}

/// A worker of the application that wires funds on the shared file, its claims leased for
/// `lease`, its audit log keyed with `key`.
fn wiring(database: &Path, lease: std::time::Duration, key: Option<&AuditKey>) -> Registry {
    let store = SqliteStore::open(database).unwrap();
    let builder = Registry::builder()
        .tool(WireFunds)
        .repeat_store(store.clone())
        .audit(store)
        .claim_lease(lease);
    match key {
        Some(key) => builder.audit_key(key.clone()),
        None => builder,
    }
    .build()
    .unwrap()
}

/// Sends the wire `reference` as call `call_id` of task `task` to a worker that stops in the
/// middle of it (its dispatch dropped once the wire started, as a killed process leaves it).
async fn stop_in_the_middle(database: &Path, key: Option<&AuditKey>, task: &str, reference: &str) {
    let stopping = wiring(database, std::time::Duration::from_secs(600), key);
    let (ctx, call) = wire(task, reference);
    let running = tokio::spawn(async move { stopping.dispatch(&ctx, &call).await });
    while !WIRES_STARTED
        .lock()
        .unwrap()
        .iter()
        .any(|started| started == reference)
    {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    running.abort();
    let _ = running.await;
    // Past a lease of 0 seconds, which counts in whole milliseconds.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
}

fn wire(task: &str, reference: &str) -> (CallContext, ToolCall) {
    (
        CallContext::new("agent").with_task_id(task),
        ToolCall::new("w1", "wire_funds", json!({ "reference": reference })),
    )
}

/// The open claims of `store`, as `claims list --json` prints them, with that lease.
fn open_claims(store: &str, lease_secs: &str) -> Vec<Value> {
    let listed = portcullis(&[
        "--store",
        store,
        "claims",
        "list",
        "--json",
        "--claim-lease-secs",
        lease_secs,
    ]);
    assert_eq!(code(&listed), 0, "{}", stderr(&listed));
    serde_json::from_slice::<Vec<Value>>(&listed.stdout).unwrap()
}

fn settle(store: &str, claim: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "--store",
        store,
        "claims",
        "settle",
        claim,
        "--operator",
        "olga",
        "--reason",
        "the bank's statement shows transfer tr_1",
    ];
    args.extend_from_slice(extra);
    portcullis(&args)
}

#[tokio::test]
async fn an_unknown_outcome_is_settled_from_the_command_line_once_and_audited() {
    let dir = directory("claims");
    let database = dir.path().join("state.db");
    let store = database.to_str().unwrap();
    stop_in_the_middle(&database, None, "t1", "claims-1").await;

    // Within the application's lease the claim is running, and is not settled.
    let claims = open_claims(store, "3600");
    assert_eq!(claims.len(), 1, "{claims:?}");
    assert_eq!(claims[0]["state"], json!("running"));
    assert_eq!(claims[0]["tool"], json!("wire_funds"));
    assert_eq!(claims[0]["call_id"], json!("w1"));
    assert_eq!(claims[0]["task"], json!("t1"));
    assert_eq!(claims[0]["actor"], json!("agent"));
    let id = claims[0]["id"].as_str().unwrap().to_owned();
    let completed = [
        "--outcome",
        "completed",
        "--output",
        r#"{"transfer": "tr_1"}"#,
    ];
    let early = settle(
        store,
        &id,
        &[&completed[..], &["--claim-lease-secs", "3600"]].concat(),
    );
    assert_eq!(code(&early), 1, "{}", stderr(&early));
    assert!(
        stderr(&early).contains("claim_not_abandoned"),
        "{}",
        stderr(&early)
    );

    // Past it, its outcome is unknown: a repeat is refused until an operator settles it.
    let claims = open_claims(store, "0");
    assert_eq!(claims[0]["state"], json!("outcome_unknown"));
    let (ctx, call) = wire("t1", "claims-1");
    let worker = wiring(&database, std::time::Duration::from_millis(1), None);
    assert_eq!(
        worker.dispatch(&ctx, &call).await.code(),
        Some(RejectionCode::OutcomeUnknown)
    );
    let unknown = settle(
        store,
        "0123456789abcdef",
        &[&completed[..], &["--claim-lease-secs", "0"]].concat(),
    );
    assert_eq!(code(&unknown), 1, "{}", stderr(&unknown));
    assert!(
        stderr(&unknown).contains("claim_not_found"),
        "{}",
        stderr(&unknown)
    );

    let settled = settle(
        store,
        &id,
        &[&completed[..], &["--claim-lease-secs", "0"]].concat(),
    );
    assert_eq!(code(&settled), 0, "{}", stderr(&settled));
    assert!(
        stdout(&settled).contains("settled as completed"),
        "{}",
        stdout(&settled)
    );
    assert_eq!(
        worker.dispatch(&ctx, &call).await,
        Outcome::Completed(json!({"transfer": "tr_1"})),
        "a repeat gets the settled outcome"
    );
    assert!(open_claims(store, "0").is_empty(), "nothing is open");

    // Settled once: another settlement is refused.
    let twice = settle(
        store,
        &id,
        &[
            "--outcome",
            "failed",
            "--message",
            "bounced",
            "--claim-lease-secs",
            "0",
        ],
    );
    assert_eq!(code(&twice), 1, "{}", stderr(&twice));
    assert!(
        stderr(&twice).contains("claim_settled"),
        "{}",
        stderr(&twice)
    );
    let wires = WIRES_STARTED
        .lock()
        .unwrap()
        .iter()
        .filter(|wire| *wire == "claims-1")
        .count();
    assert_eq!(wires, 1, "the wire never started again");

    // Every attempt is in the audit log, before and after, with who and why; the chain holds.
    let exported = portcullis(&["--store", store, "audit", "export"]);
    let records: Vec<Value> = stdout(&exported)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|record: &Value| record["decision"].as_str().unwrap().contains("settle"))
        .collect();
    let stages: Vec<(&str, Option<&str>)> = records
        .iter()
        .map(|record| {
            (
                record["decision"].as_str().unwrap(),
                record["code"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        stages,
        [
            ("about_to_settle", None),
            ("settle_refused", Some("claim_not_abandoned")),
            ("about_to_settle", None),
            ("settled", None),
            ("about_to_settle", None),
            ("settle_refused", Some("claim_settled")),
        ]
    );
    for record in &records {
        assert_eq!(record["tool"], json!("wire_funds"));
        assert_eq!(record["call_id"], json!("w1"));
        assert_eq!(
            record["resolution"],
            json!("settled by olga: the bank's statement shows transfer tr_1")
        );
    }
    assert!(records[3]["summary"].as_str().unwrap().contains("tr_1"));
    let verified = portcullis(&["--store", store, "audit", "verify"]);
    assert_eq!(code(&verified), 0, "{}", stderr(&verified));
}

#[tokio::test]
async fn of_two_operators_settling_at_once_one_wins() {
    let dir = directory("claims-race");
    let database = dir.path().join("state.db");
    let store = database.to_str().unwrap();
    stop_in_the_middle(&database, None, "t2", "claims-race").await;
    let id = open_claims(store, "0")[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Both processes started before either waits: they race for the claim.
    let operators: Vec<_> = [
        vec!["--outcome", "completed"],
        vec![
            "--outcome",
            "failed",
            "--message",
            "the bank refused the wire",
        ],
    ]
    .into_iter()
    .map(|outcome| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
        command
            .env_remove("PORTCULLIS_STORE")
            .env_remove("PORTCULLIS_AUDIT_KEY_FILE")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        command.args([
            "--store",
            store,
            "claims",
            "settle",
            &id,
            "--operator",
            "olga",
        ]);
        command
            .args(["--reason", "checked", "--claim-lease-secs", "0"])
            .args(outcome);
        command.spawn().unwrap()
    })
    .collect();
    let results: Vec<Output> = operators
        .into_iter()
        .map(|operator| operator.wait_with_output().unwrap())
        .collect();
    let codes: Vec<i32> = results.iter().map(code).collect();
    assert_eq!(
        codes.iter().filter(|code| **code == 0).count(),
        1,
        "{codes:?}"
    );
    let loser = results.iter().find(|result| code(result) != 0).unwrap();
    assert_eq!(code(loser), 1);
    assert!(stderr(loser).contains("claim_settled"), "{}", stderr(loser));

    // Whichever won, a repeat gets that outcome and nothing runs.
    let (ctx, call) = wire("t2", "claims-race");
    let worker = wiring(&database, std::time::Duration::from_millis(1), None);
    let repeat = worker.dispatch(&ctx, &call).await;
    let winner = results.iter().position(|result| code(result) == 0).unwrap();
    match winner {
        0 => assert_eq!(repeat, Outcome::Completed(Value::Null)),
        _ => {
            assert_eq!(repeat.code(), Some(RejectionCode::ToolFailed));
            assert_eq!(
                repeat.rejection().unwrap().message(),
                "the bank refused the wire"
            );
        }
    }
}

#[tokio::test]
async fn a_settlement_chains_with_the_applications_audit_key_only() {
    let dir = directory("claims-keyed");
    let database = dir.path().join("state.db");
    let store = database.to_str().unwrap();
    let key = AuditKey::new(audit_key_bytes()).unwrap();
    stop_in_the_middle(&database, Some(&key), "t3", "claims-keyed").await;
    let id = open_claims(store, "0")[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let failed = [
        "--outcome",
        "failed",
        "--message",
        "bounced",
        "--claim-lease-secs",
        "0",
    ];

    let unkeyed = settle(store, &id, &failed);
    assert_eq!(code(&unkeyed), 2, "{}", stderr(&unkeyed));
    assert!(
        stderr(&unkeyed).contains("--key-file"),
        "{}",
        stderr(&unkeyed)
    );
    let other_key = dir.path().join("other.key");
    std::fs::write(&other_key, b"another secret, also 32 bytes+++").unwrap();
    let wrong = settle(
        store,
        &id,
        &[&failed[..], &["--key-file", other_key.to_str().unwrap()]].concat(),
    );
    assert_eq!(code(&wrong), 2, "{}", stderr(&wrong));
    assert!(open_claims(store, "0").len() == 1, "nothing was settled");

    // Usage errors settle nothing either.
    let both = settle(
        store,
        &id,
        &[
            "--outcome",
            "completed",
            "--message",
            "x",
            "--claim-lease-secs",
            "0",
        ],
    );
    assert_eq!(code(&both), 2, "{}", stderr(&both));
    let no_message = settle(
        store,
        &id,
        &["--outcome", "failed", "--claim-lease-secs", "0"],
    );
    assert_eq!(code(&no_message), 2, "{}", stderr(&no_message));

    let key_file = dir.path().join("audit.key");
    std::fs::write(&key_file, audit_key_bytes()).unwrap();
    let key_file = key_file.to_str().unwrap();
    let settled = settle(
        store,
        &id,
        &[&failed[..], &["--key-file", key_file]].concat(),
    );
    assert_eq!(code(&settled), 0, "{}", stderr(&settled));
    let verified = portcullis(&["--store", store, "audit", "verify", "--key-file", key_file]);
    assert_eq!(code(&verified), 0, "{}", stderr(&verified));
    let (ctx, call) = wire("t3", "claims-keyed");
    let repeat = wiring(&database, std::time::Duration::from_millis(1), Some(&key))
        .dispatch(&ctx, &call)
        .await;
    assert_eq!(repeat.code(), Some(RejectionCode::ToolFailed));
}

/// An agent of the application on the shared file, its runs there too.
fn agent_on(
    store: &SqliteStore,
    model: portcullis_agent::ScriptedModel,
) -> portcullis_agent::Agent {
    let registry = Registry::builder()
        .tool(PaySupplier)
        .approval_store(store.clone())
        .accept_unsigned_decisions()
        .repeat_store(store.clone())
        .profile(Profile::OpenAiChat { strict: false })
        .build()
        .unwrap();
    portcullis_agent::Agent::builder(registry, model)
        .store(store.clone())
        .build()
        .unwrap()
}

/// The operator lists the runs (without the seal keys: what a run is listed by is kept in
/// clear) and reads one step by step, its tickets and its usage (with the keys, since its
/// steps are in its sealed state); text the user or the model wrote cannot steer the terminal.
#[tokio::test]
async fn runs_are_listed_and_shown_step_by_step() {
    let dir = directory("runs");
    let database = dir.path().join("state.db");
    let store = database.to_str().unwrap();
    let keys = portcullis_stores::SealKeys::generate("k1");
    let seal_file = dir.path().join("seal.keys");
    std::fs::write(&seal_file, keys.to_text()).unwrap();
    let seal = seal_file.to_str().unwrap();
    let sealed = SqliteStore::open(&database).unwrap().sealed_with(keys);

    let paying = portcullis_agent::ScriptedModel::new().call(
        "pay_supplier",
        json!({"supplier": "acme", "amount_cents": 900, "iban": "DE89370400440532013000"}),
    );
    let ctx = CallContext::new("agent")
        .with_tenant("acme")
        .with_task_id("t-runs");
    let paused = agent_on(&sealed, paying)
        .run(&ctx, "Pay acme\u{1b}[2J its invoice")
        .await
        .unwrap();
    let ticket = paused.tickets()[0].id.clone();
    let answering = portcullis_agent::ScriptedModel::new().answer("Hello there.");
    let finished = agent_on(&sealed, answering)
        .run(&CallContext::new("bob"), "Hi")
        .await
        .unwrap();

    let listed = portcullis(&["--store", store, "runs", "list"]);
    assert_eq!(code(&listed), 0, "{}", stderr(&listed));
    let text = stdout(&listed);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("WAITS FOR"),
        "{text}"
    );
    assert!(
        lines[1].starts_with(&finished.id),
        "most recent first: {text}"
    );
    assert!(
        lines[1].contains("finished") && lines[1].contains("bob"),
        "{text}"
    );
    assert!(
        lines[2].starts_with(&paused.id)
            && lines[2].contains("paused")
            && lines[2].contains("acme")
            && lines[2].contains(&ticket),
        "{text}"
    );
    let listed = portcullis(&["--store", store, "runs", "list", "--json"]);
    let runs: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(runs[1]["id"], json!(paused.id));
    assert_eq!(runs[1]["tickets"], json!([ticket]));
    assert_eq!(runs[1]["usage"]["input_tokens"], json!(100));

    // The steps are sealed: without the keys, refused, exit 3, and told which key.
    let refused = portcullis(&["--store", store, "runs", "show", &paused.id]);
    assert_eq!(code(&refused), 3, "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("seal_key_missing"),
        "{}",
        stderr(&refused)
    );

    let shown = portcullis(&[
        "--store",
        store,
        "--seal-key-file",
        seal,
        "runs",
        "show",
        &paused.id,
    ]);
    assert_eq!(code(&shown), 0, "{}", stderr(&shown));
    let text = stdout(&shown);
    for expected in [
        "status:      paused",
        "tenant:      acme",
        "usage:       120 tokens (100 read, 20 written), cost 0",
        "the user wrote \"Pay acme\\u{1b}[2J its invoice\"",
        "the model called pay_supplier (120 tokens)",
        "pay_supplier (call call_1_1): waits for a human",
        &format!("paused, waiting for {ticket}"),
        &format!("{ticket}  pay_supplier (call call_1_1): waits for a decision"),
    ] {
        assert!(text.contains(expected), "{expected} not in {text}");
    }
    assert!(!text.contains('\u{1b}'), "{text}");

    let raw = portcullis(&[
        "--store",
        store,
        "--seal-key-file",
        seal,
        "runs",
        "show",
        &finished.id,
        "--json",
    ]);
    assert_eq!(code(&raw), 0, "{}", stderr(&raw));
    let raw: Value = serde_json::from_slice(&raw.stdout).unwrap();
    assert_eq!(raw["state"]["id"], json!(finished.id));
    assert_eq!(raw["state"]["status"]["answer"], json!("Hello there."));
    assert_eq!(raw["state"]["transcript"][0]["text"], json!("Hi"));

    let missing = portcullis(&["--store", store, "runs", "show", "run_missing"]);
    assert_eq!(code(&missing), 1, "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("no run `run_missing`"),
        "{}",
        stderr(&missing)
    );
}

/// `portcullis audit verify` of `store` under `key` (and `checkpoint`, when given), which must
/// fail: what it says on stderr.
fn verify_refused(store: &str, key: &str, checkpoint: Option<&str>) -> String {
    let mut args = vec!["--store", store, "audit", "verify", "--key-file", key];
    if let Some(checkpoint) = checkpoint {
        args.extend(["--checkpoint", checkpoint]);
    }
    let output = portcullis(&args);
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    stderr(&output)
}
