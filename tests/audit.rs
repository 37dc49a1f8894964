//! Every decision is audited, refusals included, and the chain shows tampering.

use portcullis::audit::{
    ChainBreak, JsonLinesAuditSink, MemoryAuditSink, REDACTED, TracingAuditSink, verify,
};
use portcullis::prelude::*;
use portcullis::{BudgetLimits, Decision, PolicyRequest};
use serde_json::json;

/// Log a user in.
#[tool(risk = "medium", cost = 2)]
fn login(user: String, #[sensitive] password: String) -> Result<bool, ToolError> {
    Ok(!user.is_empty() && password.len() > 3)
}

fn registry(sink: impl portcullis::audit::AuditSink) -> Registry {
    Registry::builder()
        .tool(Login)
        .policy(|request: &PolicyRequest<'_>| {
            Ok(if request.arguments["user"] == "root" {
                Decision::deny("no_root_login", "root may not log in through the agent")
            } else {
                Decision::Allow
            })
        })
        .budget(BudgetLimits {
            max_calls_per_task: Some(10),
            ..BudgetLimits::default()
        })
        .audit(sink)
        .build()
        .unwrap()
}

#[tokio::test]
async fn every_decision_is_recorded_with_secrets_redacted() {
    let sink = MemoryAuditSink::default();
    let registry = registry(sink.clone());
    let ctx = CallContext::new("alice")
        .with_tenant("t_1")
        .with_task_id("task-7");
    let calls = [
        ToolCall::new("1", "login", json!({"user": "bob", "password": "hunter22"})),
        ToolCall::new("2", "logn", json!({})),
        ToolCall::new(
            "3",
            "login",
            r#"{"user":"bob","user":"root","password":"x"}"#,
        ),
        ToolCall::new(
            "4",
            "login",
            json!({"user": "root", "password": "toor-toor"}),
        ),
    ];
    for call in &calls {
        registry.dispatch(&ctx, call).await;
    }
    let all = sink.records();
    assert!(verify(&all, None).is_ok());
    // The login changes state: it was recorded as about to run before it ran.
    assert_eq!(all[0].decision, "about_to_run");
    assert_eq!(all[0].arguments, all[1].arguments);
    assert_eq!(
        (all[0].budget_calls, all[0].budget_cost),
        (0, 0),
        "the outcome's record counts the budget, once"
    );
    let records: Vec<_> = all
        .into_iter()
        .filter(|record| record.decision != "about_to_run")
        .collect();
    assert_eq!(records.len(), 4);

    let completed = &records[0];
    assert_eq!(completed.decision, "completed");
    assert_eq!(
        completed.arguments,
        json!({"user": "bob", "password": REDACTED})
    );
    assert_eq!((completed.budget_calls, completed.budget_cost), (1, 2));
    assert_eq!(
        (
            completed.actor.as_str(),
            completed.tenant.as_deref(),
            completed.task_id.as_str()
        ),
        ("alice", Some("t_1"), "task-7")
    );
    assert_eq!(completed.summary, "true");

    assert_eq!(records[1].code.as_deref(), Some("unknown_tool"));
    assert_eq!(records[1].gate.as_deref(), Some("resolve"));
    assert_eq!(records[2].code.as_deref(), Some("duplicate_key"));
    let denied = &records[3];
    assert_eq!(
        (denied.code.as_deref(), denied.reason.as_deref()),
        (Some("policy_denied"), Some("no_root_login"))
    );
    assert_eq!(denied.arguments["password"], REDACTED);
    assert_eq!(denied.budget_calls, 0, "a refused call is not counted");
    assert!(
        records
            .iter()
            .all(|record| !record.arguments.to_string().contains("toor"))
    );
}

#[tokio::test]
async fn a_file_log_detects_tampering() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let registry = registry(JsonLinesAuditSink::open(&path, false).unwrap());
    let ctx = CallContext::new("alice");
    for user in ["ann", "ben", "cat"] {
        let call = ToolCall::new(user, "login", json!({"user": user, "password": "secret"}));
        registry.dispatch(&ctx, &call).await;
    }
    let records = portcullis::audit::read_json_lines(&path).unwrap();
    assert!(verify(&records, None).is_ok());

    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let position = lines
        .iter()
        .position(|line| line.contains("\"ben\""))
        .unwrap();
    let edited = lines[position].replace("\"ben\"", "\"bea\"");
    lines[position] = &edited;
    std::fs::write(&path, lines.join("\n")).unwrap();
    let records = portcullis::audit::read_json_lines(&path).unwrap();
    assert_eq!(
        verify(&records, None),
        Err(ChainBreak::Altered { position })
    );
}

#[tokio::test]
async fn the_tracing_sink_accepts_records() {
    let registry = registry(TracingAuditSink::default());
    let outcome = registry
        .dispatch(
            &CallContext::new("a"),
            &ToolCall::new("1", "login", json!({"user": "u", "password": "pass"})),
        )
        .await;
    assert!(outcome.is_completed());
}

/// The balance the tests' account holds.
static BALANCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1_000);

/// The account's state, before and after a withdrawal.
async fn account_state(_ctx: &CallContext, args: &WithdrawArgs) -> serde_json::Value {
    json!({"account": args.account, "balance": BALANCE.load(std::sync::atomic::Ordering::SeqCst)})
}

/// Withdraw money.
#[tool(risk = "medium", snapshot = account_state)]
fn withdraw(account: String, amount: u64) -> Result<u64, ToolError> {
    let _ = account;
    Ok(BALANCE.fetch_sub(amount, std::sync::atomic::Ordering::SeqCst) - amount)
}

#[tokio::test]
async fn snapshots_show_the_state_before_and_after() {
    let sink = MemoryAuditSink::default();
    let registry = Registry::builder()
        .tool(Withdraw)
        .audit(sink.clone())
        .build()
        .unwrap();
    assert_eq!(Withdraw.contract().snapshot(), Some("account_state"));
    let outcome = registry
        .dispatch(
            &CallContext::new("a"),
            &ToolCall::new("1", "withdraw", json!({"account": "acc-1", "amount": 250})),
        )
        .await;
    assert_eq!(outcome.output(), Some(&json!(750)));
    // A refused call never ran, and has no snapshot.
    registry
        .dispatch(
            &CallContext::new("a"),
            &ToolCall::new("2", "withdraw", json!({"account": "acc-1"})),
        )
        .await;
    let all = sink.records();
    assert!(verify(&all, None).is_ok());
    let records: Vec<_> = all
        .into_iter()
        .filter(|record| record.decision != "about_to_run")
        .collect();
    assert_eq!(
        records[0].snapshot_before,
        Some(json!({"account": "acc-1", "balance": 1000}))
    );
    assert_eq!(
        records[0].snapshot_after,
        Some(json!({"account": "acc-1", "balance": 750}))
    );
    assert_eq!(
        (
            records[1].snapshot_before.as_ref(),
            records[1].snapshot_after.as_ref()
        ),
        (None, None)
    );
}

/// A sink whose storage can fail, as a database that goes down and comes back does.
#[derive(Clone, Default)]
struct FlakySink {
    records: MemoryAuditSink,
    down: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl portcullis::audit::AuditSink for FlakySink {
    fn append(
        &self,
        entry: portcullis::audit::Unchained,
    ) -> portcullis::BoxFuture<'_, std::io::Result<()>> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Box::pin(std::future::ready(Err(std::io::Error::other(
                "the database is down",
            ))));
        }
        self.records.append(entry)
    }
}

static STORE_DOWN: std::sync::OnceLock<FlakySink> = std::sync::OnceLock::new();
static MOVED: std::sync::Mutex<Vec<u64>> = std::sync::Mutex::new(Vec::new());

/// Move money; the audit's database dies while the first transfer runs.
#[tool(risk = "medium")]
fn transfer(amount_cents: u64) -> Result<u64, ToolError> {
    MOVED.lock().unwrap().push(amount_cents);
    if amount_cents == 1 {
        let sink = STORE_DOWN.get().unwrap();
        sink.down.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    Ok(amount_cents)
}

/// The audit's store dies while a call runs: the call completed, so its outcome record is
/// kept and stored once the store is back, before any later record; no call runs while it
/// waits (their write-ahead records wait behind it); every run ends with its outcome on record.
#[tokio::test]
async fn an_outcome_whose_store_died_mid_call_is_recorded_when_it_returns() {
    let sink = STORE_DOWN.get_or_init(FlakySink::default).clone();
    let registry = Registry::builder()
        .tool(Transfer)
        .audit(sink.clone())
        .build()
        .unwrap();
    let ctx = CallContext::new("agent").with_task_id("t-down");
    let first = registry
        .dispatch(
            &ctx,
            &ToolCall::new("c1", "transfer", json!({"amount_cents": 1})),
        )
        .await;
    assert!(first.is_completed(), "{first:?}");
    let while_down = registry
        .dispatch(
            &ctx,
            &ToolCall::new("c2", "transfer", json!({"amount_cents": 2})),
        )
        .await;
    assert_eq!(while_down.code(), Some(RejectionCode::AuditUnavailable));
    assert!(registry.flush_audit().await.is_err(), "still down");
    assert_eq!(
        *MOVED.lock().unwrap(),
        [1],
        "nothing ran while the record waited"
    );

    sink.down.store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(registry.flush_audit().await.unwrap(), 1);
    assert_eq!(registry.flush_audit().await.unwrap(), 0, "stored once");
    let again = registry
        .dispatch(
            &ctx,
            &ToolCall::new("c3", "transfer", json!({"amount_cents": 3})),
        )
        .await;
    assert!(again.is_completed(), "{again:?}");

    let records = sink.records.records();
    let seen: Vec<(&str, &str)> = records
        .iter()
        .map(|record| (record.call_id.as_str(), record.decision.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("c1", "about_to_run"),
            ("c1", "completed"),
            ("c3", "about_to_run"),
            ("c3", "completed"),
        ]
    );
    verify(&records, None).unwrap();
}

/// The key of `audit/v1_log.jsonl`, six records written by the version 1 writer.
const V1_LOG_KEY: &[u8] = b"an operator's secret of 32 bytes!";

/// The verifier the guide's audit page gives, in Python, written from the page alone.
fn verifier_from_the_guide(dir: &std::path::Path) -> std::path::PathBuf {
    let page = include_str!("../src/guide/audit.md");
    let (_, code) = page
        .split_once("```python\n")
        .expect("the page holds a verifier");
    let (code, _) = code.split_once("```").expect("the verifier ends");
    let path = dir.join("verify_audit.py");
    std::fs::write(&path, code).unwrap();
    path
}

/// What the guide's verifier says of the JSON Lines log at `log`.
fn python_verdict(verifier: &std::path::Path, log: &std::path::Path) -> String {
    let python = std::env::var("PORTCULLIS_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let output = std::process::Command::new(python)
        .arg(verifier)
        .arg(log)
        .arg(
            V1_LOG_KEY
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect::<String>(),
        )
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

#[tokio::test]
async fn a_version_1_log_continued_in_version_2_verifies_here_and_with_the_guides_verifier() {
    use portcullis::audit::{AuditKey, AuditRecord, AuditSink, Unchained, verify_json_lines};
    use portcullis::{Origin, Ruling, ValueSource};

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    std::fs::copy("tests/audit/v1_log.jsonl", &log).unwrap();
    let key = AuditKey::new(V1_LOG_KEY.to_vec()).unwrap();
    let registry = Registry::builder()
        .tool(Login)
        .audit(JsonLinesAuditSink::open(&log, true).unwrap())
        .audit_key(key.clone())
        .build()
        .unwrap();
    let ctx = CallContext::new("alice").with_tenant("t_1");
    for (id, tool, arguments) in [
        (
            "c1",
            "login",
            json!({"user": "zoë \"z\"\n", "password": "hunter2"}),
        ),
        ("c2", "login", json!({"user": 7})),
        (
            "c3",
            "login",
            json!({"user": "bob", "password": "🦀🦀🦀🦀", "user ": 1}),
        ),
        (
            "c4",
            "nothing",
            json!({"b": 1.5, "a": [null, true, -3], "é": {}}),
        ),
    ] {
        registry
            .dispatch(&ctx, &ToolCall::new(id, tool, arguments))
            .await;
    }
    drop(registry);
    // A record written beside the registry, every field of it set, with values of every kind.
    let every_field = AuditRecord {
        version: 2,
        sequence: 0,
        time_ms: 1_795_000_000_000,
        trace_id: "trace-🦀".to_owned(),
        task_id: "task-1".to_owned(),
        actor: "mallory".to_owned(),
        tenant: None,
        tool: "transfer".to_owned(),
        call_id: "call-9".to_owned(),
        arguments: json!({
            "Z": u64::MAX, "z": i64::MIN, "é": 1e300, "e": -0.0, "nested": [[], {"k": "v"}],
        }),
        decision: "rejected".to_owned(),
        gate: Some("authorize".to_owned()),
        code: Some("untrusted_value".to_owned()),
        reason: Some("".to_owned()),
        summary: "a \\ backslash and a tab\t".to_owned(),
        resolution: Some("edited by rita".to_owned()),
        original_arguments: Some(json!({"amount": 0.1})),
        snapshot_before: Some(json!([1, "two"])),
        snapshot_after: None,
        snapshot_missing: Some("the hook panicked".to_owned()),
        sources: vec![ValueSource {
            path: "/iban".to_owned(),
            entity: Some("IBAN 1".to_owned()),
            found_in: Some(Origin::ToolOutput {
                tool: "read_inbox".to_owned(),
                call_id: "c0".to_owned(),
                trusted: false,
                prose: false,
            }),
            inside: true,
            allowed: false,
        }],
        rulings: vec![Ruling {
            rule_set: "cedar".to_owned(),
            version: "v7".to_owned(),
            allowed: false,
            rules: vec!["forbid-unknown-payee".to_owned()],
        }],
        budget_calls: 0,
        budget_cost: 0,
        duration_us: 42,
        previous_hash: String::new(),
        hash: String::new(),
    };
    JsonLinesAuditSink::open(&log, true)
        .unwrap()
        .append(Unchained::new(every_field, Some(key.clone())))
        .await
        .unwrap();

    let records = portcullis::audit::read_json_lines(&log).unwrap();
    let versions: Vec<u8> = records.iter().map(|record| record.version).collect();
    // login's write-ahead record and outcome, two refusals of it, an unknown tool, the record
    // of every field.
    assert_eq!(versions, [1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2]);
    let file = std::io::BufReader::new(std::fs::File::open(&log).unwrap());
    let checkpoint = verify_json_lines(file, Some(&key), None).unwrap();
    assert_eq!(checkpoint.length, 12);

    let verifier = verifier_from_the_guide(dir.path());
    assert_eq!(
        python_verdict(&verifier, &log),
        format!("verified 12 records, head {}", checkpoint.head)
    );
    // A changed word in a record of either version: both verifiers name it.
    let text = std::fs::read_to_string(&log).unwrap();
    for (position, from, to) in [(3, "\"alice\"", "\"alicf\""), (11, "mallory", "mallorz")] {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines[position] = lines[position].replacen(from, to, 1);
        let altered = dir.path().join("altered.jsonl");
        std::fs::write(&altered, lines.join("\n")).unwrap();
        assert_eq!(
            python_verdict(&verifier, &altered),
            format!("altered at record {position}")
        );
        let file = std::io::BufReader::new(std::fs::File::open(&altered).unwrap());
        assert!(matches!(
            verify_json_lines(file, Some(&key), None),
            Err(portcullis::audit::VerifyError::Broken(ChainBreak::Altered { position: found }))
                if found == position
        ));
    }
}
