//! The `portcullis` binary against a real SQLite store that registries of the application
//! wrote: pending approvals decided from the command line and run by a worker, the audit log
//! verified and found altered, manifests compared, exports printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// Move money between two of the company's accounts.
#[tool(risk = "medium")]
fn transfer(amount_cents: u64) -> Result<u64, ToolError> {
    Ok(amount_cents)
}

/// A fresh directory for one test.
fn directory(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("portcullis-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A worker of the application on the shared file.
fn worker(database: &Path) -> Registry {
    let store = SqliteStore::open(database).unwrap();
    Registry::builder()
        .tool(PaySupplier)
        .approval_store(store.clone())
        .repeat_store(store)
        .build()
        .unwrap()
}

fn audit_key_bytes() -> Vec<u8> {
    b"the operator's secret, 32 bytes+".to_vec()
}

/// Runs the binary with `args`, the environment's portcullis settings left out.
fn portcullis(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
    for variable in [
        "PORTCULLIS_STORE",
        "PORTCULLIS_REVIEWER",
        "PORTCULLIS_REVIEWER_ROLES",
        "PORTCULLIS_REVIEWER_TENANT",
        "PORTCULLIS_AUDIT_KEY_FILE",
        "PORTCULLIS_POSTGRES_CA",
    ] {
        command.env_remove(variable);
    }
    command.args(args).output().unwrap()
}

fn code(output: &Output) -> i32 {
    output.status.code().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn a_ticket_decided_on_the_command_line_runs_once_in_a_worker() {
    let dir = directory("approvals");
    let database = dir.join("state.db");
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
    let database = directory("missing").join("nowhere.db");
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
    let database = directory("foreign").join("orders.db");
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
    let database = dir.join("state.db");
    let store = database.to_str().unwrap();
    let key_file = dir.join("audit.key");
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
    let cut = portcullis(&[
        "--store",
        store,
        "audit",
        "verify",
        "--key-file",
        key,
        "--checkpoint",
        &checkpoint,
    ]);
    assert_eq!(code(&cut), 1);
    assert!(
        stderr(&cut).contains("its tail was cut"),
        "{}",
        stderr(&cut)
    );
    connection
        .execute(
            "UPDATE audit_records SET record = replace(record, '\"agent\"', '\"mallory\"') \
             WHERE sequence = 3",
            [],
        )
        .unwrap();
    let altered = portcullis(&["--store", store, "audit", "verify", "--key-file", key]);
    assert_eq!(code(&altered), 1);
    assert!(
        stderr(&altered).contains("record 3 was altered"),
        "{}",
        stderr(&altered)
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
    let old = dir.join("old.json");
    std::fs::write(&old, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let same = dir.join("same.json");
    std::fs::write(&same, manifest.to_string()).unwrap();
    let mut changed = manifest.clone();
    let tools = changed["tools"].as_array_mut().unwrap();
    tools[0]["risk"] = json!("high");
    tools.pop();
    let new = dir.join("new.json");
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
    let file = dir.join("tools.json");
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
