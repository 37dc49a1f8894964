//! `portcullis usage` shows what each caller (an actor in its tenant) holds in the store
//! against its share; `portcullis prune` ends the tasks past their lifetime and deletes what
//! the retention allows, telling what it removed, and changes nothing with `--dry-run`. On a
//! SQLite file, and on PostgreSQL when `PORTCULLIS_POSTGRES_URL` names a server.

mod common;

use std::time::Duration;

use common::{code, directory, portcullis, stderr, stdout};
use portcullis::{
    BudgetLimits, BudgetStore, CallContext, Charge, Origin, ProvenanceStore, SourceRecord,
};
use portcullis_stores::{PostgresTls, Store, postgres_client};
use serde_json::Value;

fn source(trusted: bool, text: &str) -> SourceRecord {
    SourceRecord {
        origin: Origin::ToolOutput {
            tool: "read_inbox".to_owned(),
            call_id: "c1".to_owned(),
            trusted,
            prose: false,
        },
        text: text.to_owned(),
    }
}

/// Alice of acme reads untrusted mail in one task and spends a budget in another; Mallory
/// (no tenant) reads trusted pages in two tasks.
async fn fill(store: &Store) {
    let alice = CallContext::new("alice").with_tenant("acme");
    store
        .record(
            &alice.clone().with_task_id("inbox"),
            &source(false, "pay X"),
        )
        .await
        .unwrap();
    let charge = Charge {
        task: "orders",
        actor: "alice",
        tenant: Some("acme"),
        tool: "find_order",
        cost: 1,
        tool_max_calls_per_task: None,
        canonical_arguments: None,
    };
    let limits = BudgetLimits {
        max_calls_per_task: Some(5),
        ..BudgetLimits::default()
    };
    store.reserve(charge, &limits).await.unwrap();
    for task in ["m1", "m2"] {
        let mallory = CallContext::new("mallory").with_task_id(task);
        store
            .record(&mallory, &source(true, "a page"))
            .await
            .unwrap();
    }
}

fn json_of(location: &str, args: &[&str]) -> Value {
    let mut all = vec!["--store", location];
    all.extend_from_slice(args);
    all.push("--json");
    let output = portcullis(&all);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    serde_json::from_str(&stdout(&output)).unwrap()
}

/// The counts of `actor` in `usage --json`.
fn caller<'a>(usage: &'a Value, actor: &str) -> Option<&'a Value> {
    usage["callers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|caller| caller["actor"] == actor)
}

async fn usage_and_prune(location: &str) {
    let store = Store::open(location).await.unwrap();
    fill(&store).await;
    drop(store);

    let output = portcullis(&["--store", location, "usage", "--tasks-per-caller", "2"]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let table = stdout(&output);
    let mallory = table.lines().find(|line| line.contains("mallory")).unwrap();
    assert!(mallory.contains("2 (full)"), "{table}");
    let alice = table.lines().find(|line| line.contains("alice")).unwrap();
    assert!(alice.contains("acme"), "{table}");
    assert!(
        table.contains("shares: 2 live tasks per caller of 100000"),
        "{table}"
    );

    let usage = json_of(location, &["usage"]);
    assert_eq!(usage["shares"]["tasks_per_caller"], 1000);
    let alice = caller(&usage, "alice").unwrap();
    assert_eq!(alice["tenant"], "acme");
    assert_eq!(alice["provenance_tasks"], 1);
    assert_eq!(alice["budget_tasks"], 1);
    assert_eq!(alice["source_bytes"], 5);
    let mallory = caller(&usage, "mallory").unwrap();
    assert_eq!(mallory["tenant"], Value::Null);
    assert_eq!(mallory["provenance_tasks"], 2);

    std::thread::sleep(Duration::from_millis(300));
    let output = portcullis(&["--store", location, "prune", "--dry-run", "--idle", "200ms"]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let told = stdout(&output);
    for line in [
        "2 clean provenance tasks past their lifetime would be deleted with their sources",
        "1 tainted provenance tasks past their lifetime would be ended",
        "1 budget tasks past their lifetime would be ended",
        "dry run: nothing was changed",
    ] {
        assert!(told.contains(line), "{line}: {told}");
    }
    assert_eq!(json_of(location, &["usage"]), usage, "nothing changed");

    let pruned = json_of(location, &["prune", "--idle", "200ms"]);
    assert_eq!(pruned["dry_run"], false);
    assert_eq!(pruned["provenance_deleted"], 2);
    assert_eq!(pruned["provenance_ended"], 1);
    assert_eq!(pruned["budget_ended"], 1);
    assert_eq!(pruned["sources_deleted"], 3);
    let usage = json_of(location, &["usage"]);
    assert!(caller(&usage, "mallory").is_none(), "{usage}");
    let alice = caller(&usage, "alice").unwrap();
    assert_eq!(alice["provenance_tasks"], 0);
    assert_eq!(alice["provenance_ended"], 1);
    assert_eq!(alice["budget_ended"], 1);
    assert_eq!(alice["source_bytes"], 0);
    // The records go once their time is up.
    std::thread::sleep(Duration::from_millis(100));
    let forgotten = json_of(location, &["prune", "--remembered", "50ms"]);
    assert_eq!(forgotten["provenance_forgotten"], 1);
    assert_eq!(forgotten["budget_forgotten"], 1);
    let output = portcullis(&["--store", location, "usage"]);
    assert!(
        stdout(&output).contains("no caller holds anything in the store"),
        "{}",
        stdout(&output)
    );
}

#[tokio::test]
async fn usage_shows_each_callers_share_and_prune_ends_what_the_lifetime_allows() {
    let directory = directory("usage");
    let database = directory.path().join("state.db");
    usage_and_prune(database.to_str().unwrap()).await;
}

#[tokio::test]
async fn usage_and_prune_on_postgres() {
    let Ok(url) = std::env::var("PORTCULLIS_POSTGRES_URL") else {
        eprintln!("skipped: set PORTCULLIS_POSTGRES_URL to run the PostgreSQL tests");
        return;
    };
    let client = postgres_client(&url, &PostgresTls::default())
        .await
        .unwrap();
    for statement in [
        "DROP DATABASE IF EXISTS portcullis_cli_usage WITH (FORCE)",
        "CREATE DATABASE portcullis_cli_usage",
    ] {
        client.batch_execute(statement).await.unwrap();
    }
    let (base, query) = url.split_once('?').unwrap_or((&url, ""));
    let server = base.rsplit_once('/').map_or(base, |(server, _)| server);
    let location = if query.is_empty() {
        format!("{server}/portcullis_cli_usage")
    } else {
        format!("{server}/portcullis_cli_usage?{query}")
    };
    usage_and_prune(&location).await;
}
