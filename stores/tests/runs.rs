//! Agent runs in the durable stores: a run is written only at the version its writer read (of
//! two writers, one wins); a run paused for a human survives its worker's restart and is
//! resumed by one of two workers, its call run once; its state (the transcript) is sealed at
//! rest, a worker without the key reads nothing and changes nothing, and a state moved to
//! another run's row does not open. Every scenario runs on SQLite and on PostgreSQL, each
//! worker with its own connection, as separate processes would have.

mod common;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use common::Backend;
use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis::{ApprovalDecision, Reviewer, record_decision};
use portcullis_agent::{
    Agent, Message, Model, ModelError, ModelRequest, ModelTurn, RunError, RunState, RunStatus,
    RunStore, RunStoreError, ScriptedModel, StoredRun, Usage,
};
use portcullis_stores::{PostgresTls, SealKeys, Shares, Store, postgres_client};
use serde_json::json;

/// The suppliers paid, one entry per payout; each test pays a supplier of its own.
static PAID: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn payouts_to(supplier: &str) -> usize {
    PAID.lock()
        .unwrap()
        .iter()
        .filter(|paid| *paid == supplier)
        .count()
}

/// Pay a supplier.
#[tool(
    risk = "critical",
    irreversible = "payouts settle at once",
    approver = "finance"
)]
fn pay_supplier(supplier: String, amount_cents: u64) -> Result<String, ToolError> {
    PAID.lock().unwrap().push(supplier.clone());
    Ok(format!("paid {amount_cents} to {supplier}"))
}

/// Read a customer's file.
#[tool(read_only)]
fn read_file(customer: String) -> Result<String, ToolError> {
    Ok(format!("{customer}: password hint is marmalade-{customer}"))
}

fn profile() -> Profile {
    Profile::OpenAiChat { strict: false }
}

/// A worker's registry on `store`: approvals, claims and the task's sources in the database.
fn registry(store: &Store) -> Registry {
    Registry::builder()
        .tool(PaySupplier)
        .tool(ReadFile)
        .approval_store(store.clone())
        .accept_unsigned_decisions()
        .repeat_store(store.clone())
        .provenance_store(store.clone())
        .profile(profile())
        .build()
        .unwrap()
}

/// A worker: its own connection, registry and agent, the runs in the same database.
fn agent(store: &Store, model: impl Model) -> Agent {
    Agent::builder(registry(store), model)
        .store(store.clone())
        .build()
        .unwrap()
}

fn approve() -> ApprovalDecision {
    ApprovalDecision::Approve {
        reviewer: Reviewer::new("rita").with_roles(["finance"]),
    }
}

fn ctx(task: &str) -> CallContext {
    CallContext::new("agent")
        .with_tenant("acme")
        .with_task_id(task)
}

/// Pays `supplier`, then waits for a human.
fn paying(supplier: &str) -> ScriptedModel {
    ScriptedModel::new().call(
        "pay_supplier",
        json!({"supplier": supplier, "amount_cents": 900}),
    )
}

/// Answers with what it read of the last call's result, after `delay`: a model slow enough
/// that the worker running it still holds the run when another worker tries.
fn answering(delay: Duration) -> SlowModel {
    SlowModel(
        ScriptedModel::new().turn(|request| {
            let Some(Message::Tool(result)) = request.transcript.last() else {
                panic!("the model reads the call's result");
            };
            ModelTurn {
                text: Some(result.content.clone()),
                ..ModelTurn::default()
            }
        }),
        delay,
    )
}

/// Every row of the `runs` table as text, as whoever reads the database file, a backup or the
/// table sees it.
async fn raw_runs(backend: &Backend) -> String {
    if backend.tag() == "postgres" {
        let client = postgres_client(&backend.location, &PostgresTls::default())
            .await
            .unwrap();
        let rows = client
            .query(
                "SELECT row_to_json(t)::text FROM portcullis.runs t ORDER BY id",
                &[],
            )
            .await
            .unwrap();
        rows.iter()
            .map(|row| row.get::<_, String>(0))
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        let connection = rusqlite::Connection::open(&backend.location).unwrap();
        let mut statement = connection
            .prepare("SELECT * FROM runs ORDER BY id")
            .unwrap();
        let columns = statement.column_count();
        let rows = statement
            .query_map([], |row| {
                (0..columns)
                    .map(|at| {
                        let value: rusqlite::types::Value = row.get(at)?;
                        Ok(format!("{value:?}"))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .unwrap();
        rows.map(|row| row.unwrap().join(" | "))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A run as a worker would store it, changed at `updated_ms`.
fn stored(id: &str, text: &str, updated_ms: u64) -> StoredRun {
    StoredRun {
        version: 0,
        held_until_ms: 0,
        state: RunState {
            id: id.to_owned(),
            ctx: ctx("t-cas"),
            status: RunStatus::Paused,
            transcript: vec![Message::User {
                text: text.to_owned(),
            }],
            turn: Vec::new(),
            steps: Vec::new(),
            usage: Usage::default(),
            turns: 0,
            refused: BTreeMap::new(),
            created_ms: updated_ms,
            updated_ms,
        },
    }
}

/// The text of the user's first message.
fn first_words(run: &StoredRun) -> &str {
    match &run.state.transcript[0] {
        Message::User { text } => text,
        other => panic!("not the user's message: {other:?}"),
    }
}

on_both!(
    of_two_writers_at_one_version_one_wins,
    a_paused_run_survives_a_restart_and_one_of_two_workers_resumes_it_once,
    a_sealed_run_holds_no_transcript_in_clear,
    a_worker_without_the_seal_key_reads_no_run_and_changes_nothing,
    a_run_moved_to_another_row_does_not_open,
    a_deploy_that_changed_the_tool_stops_the_paused_run_with_its_code,
    a_caller_holds_only_its_share_of_runs_going_on,
);

/// One caller stores runs from 4 workers at once into a store giving each caller 2 runs going
/// on: exactly 2 are stored, the others refused `run_share_full`; a run of another caller
/// (the same actor in another tenant) is stored; once one of the caller's runs finished, it
/// may start one more.
async fn a_caller_holds_only_its_share_of_runs_going_on(backend: Backend) {
    let shares = Shares {
        runs_per_caller: 2,
        ..Shares::default()
    };
    let mut workers = Vec::new();
    for _ in 0..4 {
        workers.push(backend.open().await.with_shares(shares));
    }
    let mut inserting = Vec::new();
    for index in 0..12 {
        let store = workers[index % workers.len()].clone();
        inserting.push(tokio::spawn(async move {
            RunStore::insert(&store, stored(&format!("run_{index}"), "go", 1_000)).await
        }));
    }
    let (mut kept, mut refused) = (Vec::new(), Vec::new());
    for (index, inserting) in inserting.into_iter().enumerate() {
        match inserting.await.unwrap() {
            Ok(()) => kept.push(format!("run_{index}")),
            Err(error) => refused.push(error),
        }
    }
    assert_eq!(kept.len(), 2, "exactly the share, whoever raced");
    assert!(
        refused
            .iter()
            .all(|error| *error == RunStoreError::ShareFull(2)),
        "{refused:?}"
    );
    let store = &workers[0];
    let mut elsewhere = stored("run_initech", "go", 1_000);
    elsewhere.state.ctx = CallContext::new("agent")
        .with_tenant("initech")
        .with_task_id("t-cas");
    RunStore::insert(store, elsewhere).await.unwrap();
    assert_eq!(
        RunStore::insert(store, stored("run_more", "go", 1_000)).await,
        Err(RunStoreError::ShareFull(2))
    );
    let mut finished = RunStore::get(store, &kept[0]).await.unwrap().unwrap();
    let read = finished.version;
    finished.version += 1;
    finished.state.status = RunStatus::Finished {
        answer: "done".into(),
    };
    assert!(RunStore::replace(store, finished, read).await.unwrap());
    RunStore::insert(store, stored("run_more", "go", 1_000))
        .await
        .unwrap();
}

/// Two workers read one version of a run and each writes its own next version: one write
/// lands, the other changes nothing and is told so, round after round.
async fn of_two_writers_at_one_version_one_wins(backend: Backend) {
    let (first, second) = (backend.open().await, backend.open().await);
    RunStore::insert(&first, stored("run_a", "start", 1_000))
        .await
        .unwrap();
    let again = RunStore::insert(&second, stored("run_a", "again", 1_000)).await;
    assert!(again.unwrap_err().to_string().contains("exists already"));

    for round in 0..5u64 {
        let mut mine = stored("run_a", &format!("first {round}"), 2_000 + round);
        let mut theirs = stored("run_a", &format!("second {round}"), 2_000 + round);
        (mine.version, theirs.version) = (round + 1, round + 1);
        let (landed, also) =
            tokio::join!(first.replace(mine, round), second.replace(theirs, round));
        let (landed, also) = (landed.unwrap(), also.unwrap());
        assert!(landed ^ also, "round {round}: exactly one write lands");
        let now = RunStore::get(&first, "run_a").await.unwrap().unwrap();
        assert_eq!(now.version, round + 1);
        let winner = if landed { "first" } else { "second" };
        assert_eq!(first_words(&now), format!("{winner} {round}"));
    }
    // A writer at a version that is gone, or of a run that is not there, writes nothing.
    let mut stale = stored("run_a", "stale", 9_000);
    stale.version = 3;
    assert!(!first.replace(stale, 2).await.unwrap());
    assert!(
        !first
            .replace(stored("run_missing", "x", 9_000), 0)
            .await
            .unwrap()
    );
    assert!(
        RunStore::get(&first, "run_missing")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        first_words(&RunStore::get(&second, "run_a").await.unwrap().unwrap())
            .split(' ')
            .nth(1),
        Some("4")
    );

    // Listed most recently changed first.
    RunStore::insert(&first, stored("run_b", "later", 5_000))
        .await
        .unwrap();
    RunStore::insert(&first, stored("run_c", "earlier", 500))
        .await
        .unwrap();
    let listed: Vec<String> = second
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|run| run.state.id)
        .collect();
    assert_eq!(listed, ["run_b", "run_a", "run_c"]);
    let summaries = second.run_summaries().await.unwrap();
    let ids: Vec<&str> = summaries.iter().map(|run| run.id.as_str()).collect();
    assert_eq!(ids, ["run_b", "run_a", "run_c"]);
    assert_eq!(summaries[1].version, 5);
    assert_eq!(
        (summaries[1].actor.as_str(), summaries[1].tenant.as_deref()),
        ("agent", Some("acme"))
    );
}

/// Worker A pauses a run on a payout and stops (the restart). A reviewer decides on the
/// command line. Workers B and C, started afresh, resume the run at once: one finishes it,
/// the other is told the run is taken, and the payout ran once.
async fn a_paused_run_survives_a_restart_and_one_of_two_workers_resumes_it_once(backend: Backend) {
    let supplier = format!("acme-{}", backend.tag());
    let (run_id, ticket) = {
        let worker_a = agent(&backend.open().await, paying(&supplier));
        let run = worker_a
            .run(&ctx("t-restart"), "Pay acme's invoice")
            .await
            .unwrap();
        let [ticket] = run.tickets() else {
            panic!("one ticket: {run:?}");
        };
        (run.id.clone(), ticket.id.clone())
    };
    assert_eq!(payouts_to(&supplier), 0);

    let reviewer_store = backend.open().await;
    record_decision(&reviewer_store, &ticket, approve())
        .await
        .unwrap();
    assert_eq!(payouts_to(&supplier), 0, "deciding runs nothing");

    let delay = Duration::from_millis(300);
    let worker_b = agent(&backend.open().await, answering(delay));
    let worker_c = agent(&backend.open().await, answering(delay));
    let (b, c) = tokio::join!(worker_b.resume(&run_id), worker_c.resume(&run_id));
    let (finished, refused): (Vec<_>, Vec<_>) = [b, c].into_iter().partition(Result::is_ok);
    assert_eq!(
        (finished.len(), refused.len()),
        (1, 1),
        "{finished:?} {refused:?}"
    );
    let refused = refused[0].as_ref().unwrap_err().code();
    assert!(
        matches!(refused, "run_in_progress" | "run_not_paused"),
        "{refused}"
    );
    let run = finished[0].as_ref().unwrap();
    assert_eq!(
        run.answer(),
        Some(format!("paid 900 to {supplier}").as_str())
    );
    assert_eq!(payouts_to(&supplier), 1);

    // Once finished, no worker resumes it again, and the payout is not run again.
    let late = agent(&backend.open().await, answering(Duration::ZERO));
    let again = late.resume(&run_id).await.unwrap_err();
    assert_eq!(again.code(), "run_not_paused");
    assert_eq!(payouts_to(&supplier), 1);
    let kept = late.get(&run_id).await.unwrap();
    assert_eq!(kept.steps, run.steps);
}

/// The user's words, the tool's output and the model's answer are in the run's state, sealed:
/// none of them is in any column in clear; what a run is listed by is.
async fn a_sealed_run_holds_no_transcript_in_clear(backend: Backend) {
    let keys = SealKeys::generate("k1");
    let store = backend.open().await.sealed_with(keys);
    let customer = format!("customer-{}", backend.tag());
    let model = ScriptedModel::new()
        .call("read_file", json!({"customer": customer}))
        .answer("The hint is on file; I will not repeat it.");
    let worker = agent(&store, model);
    let secret = "my mother's maiden name is Quetzalcoatl";
    let run = worker
        .run(&ctx("t-sealed"), &format!("Help me log in; {secret}"))
        .await
        .unwrap();
    assert!(run.answer().is_some(), "{run:?}");

    let rows = raw_runs(&backend).await;
    assert!(rows.contains(&run.id), "the dump reads the rows: {rows}");
    assert!(rows.contains("finished"), "{rows}");
    assert!(rows.contains("sealed:v1:k1:"), "{rows}");
    for text in [
        secret,
        "Quetzalcoatl",
        "marmalade",
        "will not repeat",
        "log in",
    ] {
        assert!(!rows.contains(text), "{text} in {rows}");
    }
    // The worker, with the key, reads it all back.
    let read = RunStore::get(&store, &run.id).await.unwrap().unwrap();
    assert!(matches!(&read.state.transcript[0], Message::User { text } if text.contains(secret)));
}

/// A worker opened without the key finds a sealed paused run it cannot read: it refuses
/// (`runs_unavailable`, naming the missing key), runs nothing and writes nothing; the run is
/// still there, listed, for a worker with the key, which resumes it.
async fn a_worker_without_the_seal_key_reads_no_run_and_changes_nothing(backend: Backend) {
    let keys = SealKeys::generate("k1");
    let supplier = format!("keyless-{}", backend.tag());
    let sealed = backend.open().await.sealed_with(keys.clone());
    let run = agent(&sealed, paying(&supplier))
        .run(&ctx("t-keyless"), "Pay the supplier")
        .await
        .unwrap();
    let ticket = run.tickets()[0].id.clone();
    record_decision(&sealed, &ticket, approve()).await.unwrap();
    let before = raw_runs(&backend).await;

    let keyless = backend.open().await;
    let worker = agent(&keyless, answering(Duration::ZERO));
    let refused = worker.resume(&run.id).await.unwrap_err();
    assert_eq!(refused.code(), "runs_unavailable");
    assert!(
        refused.to_string().contains("k1") && refused.to_string().contains("seal"),
        "{refused}"
    );
    assert!(matches!(
        worker.get(&run.id).await.unwrap_err(),
        RunError::Unavailable(_)
    ));
    assert!(
        keyless.list().await.is_err(),
        "a run it cannot open is not skipped"
    );
    assert_eq!(payouts_to(&supplier), 0);
    assert_eq!(raw_runs(&backend).await, before, "nothing was written");

    // Listed from what is kept in clear, without the key.
    let listed = keyless.run_summaries().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].status.as_str(), listed[0].tickets.clone()),
        ("paused", vec![ticket])
    );

    let resumed = agent(&sealed, answering(Duration::ZERO))
        .resume(&run.id)
        .await
        .unwrap();
    assert_eq!(
        resumed.answer(),
        Some(format!("paid 900 to {supplier}").as_str())
    );
    assert_eq!(payouts_to(&supplier), 1);
}

/// Whoever writes the table copies one run's state into another run's row: sealed, it does not
/// open there; in clear, it names another run and is refused. Either way nothing runs.
async fn a_run_moved_to_another_row_does_not_open(backend: Backend) {
    let supplier = format!("moved-{}", backend.tag());
    for sealed in [true, false] {
        let store = backend.open().await;
        let store = if sealed {
            store.sealed_with(SealKeys::generate("k1"))
        } else {
            store
        };
        let task = format!("t-moved-{sealed}");
        let paused = agent(&store, paying(&supplier))
            .run(&ctx(&task), "Pay the supplier")
            .await
            .unwrap();
        record_decision(&store, &paused.tickets()[0].id, approve())
            .await
            .unwrap();
        let other = agent(&store, ScriptedModel::new().answer("Hello."))
            .run(&ctx(&task), "Hi")
            .await
            .unwrap();
        backend
            .tamper(&format!(
                "UPDATE runs SET state = (SELECT state FROM runs WHERE id = '{}'),
                     status = 'paused' WHERE id = '{}'",
                paused.id, other.id
            ))
            .await;
        let worker = agent(&store, answering(Duration::ZERO));
        let refused = worker.resume(&other.id).await.unwrap_err();
        assert_eq!(refused.code(), "runs_unavailable", "sealed: {sealed}");
        assert!(RunStore::get(&store, &other.id).await.is_err());
        assert_eq!(payouts_to(&supplier), 0, "sealed: {sealed}");
        // The run whose state it is still reads, in its own row.
        assert!(RunStore::get(&store, &paused.id).await.unwrap().is_some());
    }
}

/// The payout tool after a deploy that raised what it may pay: the same name, another contract.
#[tool(
    name = "pay_supplier",
    risk = "critical",
    irreversible = "payouts settle at once",
    approver = "finance"
)]
fn pay_supplier_deployed(
    supplier: String,
    #[validate(range(max = 10_000_000))] amount_cents: u64,
) -> Result<String, ToolError> {
    PAID.lock().unwrap().push(supplier.clone());
    Ok(format!("paid {amount_cents} to {supplier}"))
}

/// A run paused on a payout is resumed after a deploy. Where the tool's contract did not
/// change (the restart test), it goes on; where it changed, the decided call is refused with
/// `contract_changed`, which the model cannot act on, so the run stops with that code and the
/// payout never runs.
async fn a_deploy_that_changed_the_tool_stops_the_paused_run_with_its_code(backend: Backend) {
    let supplier = format!("deploy-{}", backend.tag());
    let store = backend.open().await;
    let run = agent(&store, paying(&supplier))
        .run(&ctx("t-deploy"), "Pay the invoice")
        .await
        .unwrap();
    record_decision(&store, &run.tickets()[0].id, approve())
        .await
        .unwrap();

    let deployed = Registry::builder()
        .tool(PaySupplierDeployed)
        .tool(ReadFile)
        .approval_store(store.clone())
        .accept_unsigned_decisions()
        .repeat_store(store.clone())
        .provenance_store(store.clone())
        .profile(profile())
        .build()
        .unwrap();
    let worker = Agent::builder(deployed, answering(Duration::ZERO))
        .store(store.clone())
        .build()
        .unwrap();
    let run = worker.resume(&run.id).await.unwrap();
    assert_eq!(
        run.stop_reason().map(|reason| reason.code()),
        Some("contract_changed")
    );
    assert_eq!(payouts_to(&supplier), 0);
}

/// A model that waits before each turn.
struct SlowModel(ScriptedModel, Duration);

impl Model for SlowModel {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn profile(&self) -> Profile {
        self.0.profile()
    }

    fn complete<'a>(
        &'a self,
        request: ModelRequest<'a>,
    ) -> portcullis::BoxFuture<'a, Result<ModelTurn, ModelError>> {
        Box::pin(async move {
            tokio::time::sleep(self.1).await;
            self.0.complete(request).await
        })
    }
}
