//! The audit log: one record for every decision the gates take, refusals included, chained by
//! keyed hashes so that an altered, dropped, reordered or forged record shows.
//!
//! What is guaranteed:
//! - **Write-ahead for effects.** A call whose contract requires it
//!   ([`ToolContract::audit_required`]) runs only after an `about_to_run` record reached the
//!   sink; if the sink fails, the call is refused with `audit_unavailable` and nothing ran. The
//!   outcome's record follows.
//! - **A keyed chain.** Each record's `hash` is an HMAC-SHA-256, under the operator's
//!   [`AuditKey`], of its place in the log, the hash before it and the digest of its fields. A
//!   reader of the log can check it with the key; a writer without the key cannot rewrite it.
//!   Without a key the chain is plain SHA-256: it shows accidents, not a forger.
//! - **One chain across restarts and writers.** A sink continues the chain from its last
//!   record: the JSON Lines sink reads it when it opens and, under a file lock, whenever
//!   another writer appended since.
//! - **Checkpoints.** [`verify`] returns the [`Checkpoint`] it reached (length and head); kept
//!   elsewhere, it lets [`verify_to`] find a log whose tail was cut.
//!
//! What is not: a decision whose outcome record cannot be written is still decided (the failure
//! goes to `tracing`, and the chain shows the gap); records of calls that are not
//! `audit_required` are written after the decision.
//!
//! [`ToolContract::audit_required`]: crate::ToolContract::audit_required

mod chain;
mod digest;
mod facts;
mod key;
mod record;
mod round_writer;
mod sinks;
mod stored;
mod verify;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use serde_json::Value;

use crate::call::{Arguments, ToolCall};
use crate::context::CallContext;
use crate::contract::ToolContract;
use crate::contract::{recorded_arguments, recorded_canonical};
use crate::gate::approve::store::PendingCall;
use crate::outcome::Outcome;
use crate::rejection::Rejection;
use crate::rejection::{shorten, shortened};

pub use chain::{AuditSink, Unchained};
pub(crate) use facts::{Facts, Snapshots};
pub use key::AuditKey;
pub use record::{AuditRecord, Checkpoint, GENESIS_HASH};
pub use round_writer::RoundWriter;
pub use sinks::{
    JsonLinesAuditSink, MemoryAuditSink, TracingAuditSink, read_json_lines, verify_json_lines,
};
pub use verify::{ChainBreak, Verifier, VerifyError, verify, verify_to};

pub use crate::contract::REDACTED;

impl Unchained {
    /// The record of a decision that `reviewer` tried to record on `pending` from outside a
    /// registry (an operator's command line), and that was refused: who tried, on which call
    /// (its arguments as the ticket shows them, sensitive values redacted), and why. Linked
    /// with `key`, as the log's other records are.
    pub fn refused_decision(
        pending: &PendingCall,
        reviewer: &str,
        refusal: &Rejection,
        key: Option<AuditKey>,
    ) -> Self {
        let call = ToolCall {
            id: pending.ticket.call_id.clone(),
            name: pending.ticket.tool.clone(),
            arguments: Arguments::Json(pending.ticket.arguments.clone()),
        };
        let outcome = Outcome::Rejected(refusal.clone());
        let mut decided = Decided::plain(&pending.ctx, &call, None, &outcome);
        decided.resolution = Some(format!("refused to {reviewer}"));
        let record = record_of(&decided, Written::Decision);
        Unchained::new(record, key)
    }
}

/// Prepares records and hands them to the sink that chains and stores them.
pub(crate) struct AuditLog {
    sink: Box<dyn AuditSink>,
    key: Option<AuditKey>,
    /// Outcome records of calls that ran, which the sink could not store when they came:
    /// stored, in order, before any record after them (so no call runs before they are on
    /// record, as its `about_to_run` record waits behind them), and by
    /// [`Registry::flush_audit`](crate::Registry::flush_audit).
    unstored: Mutex<VecDeque<AuditRecord>>,
    /// How many records `unstored` holds, read without its lock on every record.
    waiting: AtomicUsize,
    /// Whether a caller is storing the kept records: another then waits its turn rather than
    /// store a record before them.
    flushing: AtomicBool,
}

/// The most outcome records kept while the sink fails. Calls cannot run then (their
/// `about_to_run` records wait behind these), so only the calls already running add to them.
const MAX_UNSTORED: usize = 10_000;

/// What the dispatcher knows about a decision when it records it.
pub(crate) struct Decided<'a> {
    pub(crate) ctx: &'a CallContext,
    pub(crate) call: &'a ToolCall,
    pub(crate) contract: Option<&'a ToolContract>,
    pub(crate) outcome: &'a Outcome,
    pub(crate) duration: Duration,
    /// The reviewer's decision, or `compensation`; see [`AuditRecord::resolution`].
    pub(crate) resolution: Option<String>,
    /// The arguments before a reviewer edited them, as the ticket showed them.
    pub(crate) original_arguments: Option<Value>,
    /// What the gates learnt of the call: its canonical arguments, its snapshots.
    pub(crate) facts: Option<&'a Facts>,
}

impl<'a> Decided<'a> {
    /// A decision on `call` with nothing beyond its outcome to tell.
    pub(crate) fn plain(
        ctx: &'a CallContext,
        call: &'a ToolCall,
        contract: Option<&'a ToolContract>,
        outcome: &'a Outcome,
    ) -> Self {
        Decided {
            ctx,
            call,
            contract,
            outcome,
            duration: Duration::ZERO,
            resolution: None,
            original_arguments: None,
            facts: None,
        }
    }
}

impl AuditLog {
    pub(crate) fn new(sink: impl AuditSink) -> Self {
        AuditLog {
            sink: Box::new(sink),
            key: None,
            unstored: Mutex::new(VecDeque::new()),
            waiting: AtomicUsize::new(0),
            flushing: AtomicBool::new(false),
        }
    }

    pub(crate) fn set_key(&mut self, key: AuditKey) {
        self.key = Some(key);
    }

    /// Records one decision; a failure to store it is reported to `tracing`. The outcome of a
    /// call that ran is kept until it is stored: every run ends with its outcome on record.
    pub(crate) async fn append(&self, decided: Decided<'_>) {
        let shared = decided.facts.and_then(Facts::shared_digest);
        let record = decision_record(&decided);
        let time_ms = record.time_ms;
        if let Err(error) = self.store(record, shared).await {
            tracing::error!(tool = %decided.call.name, %error, "an audit record could not be written");
            let ran = decided
                .outcome
                .rejection()
                .is_none_or(|rejection| rejection.gate() == crate::rejection::Gate::Execute);
            // Written again rather than copied before every store: a failure is rare, and a
            // record's only reading of the clock is its time.
            if ran {
                let mut record = decision_record(&decided);
                record.time_ms = time_ms;
                self.keep_unstored(record);
            }
        }
    }

    /// Stores the outcome records kept while the sink failed, in order; how many it stored.
    pub(crate) async fn store_unstored(&self) -> std::io::Result<usize> {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return Ok(0);
        }
        if self.flushing.swap(true, Ordering::AcqRel) {
            return Err(std::io::Error::other(
                "records kept while the audit sink failed are being stored",
            ));
        }
        // Let go however this ends, a caller dropping the future included.
        struct Turn<'a>(&'a AtomicBool);
        impl Drop for Turn<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _turn = Turn(&self.flushing);
        // Boxed: records are rarely kept, and every record's future would carry this one's room.
        Box::pin(self.store_kept()).await
    }

    /// [`store_unstored`](Self::store_unstored), by the one caller that stores them.
    async fn store_kept(&self) -> std::io::Result<usize> {
        let mut stored = 0;
        while self.waiting.load(Ordering::Acquire) > 0 {
            let Some(record) = self.unstored_records().pop_front() else {
                break;
            };
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            let kept = record.clone();
            let digest = record.digest();
            if let Err(error) = self.append_now(record, digest).await {
                self.unstored_records().push_front(kept);
                self.waiting.fetch_add(1, Ordering::AcqRel);
                return Err(error);
            }
            stored += 1;
        }
        Ok(stored)
    }

    fn keep_unstored(&self, record: AuditRecord) {
        let mut unstored = self.unstored_records();
        if unstored.len() >= MAX_UNSTORED {
            tracing::error!(
                tool = %record.tool,
                "an outcome record is lost: {MAX_UNSTORED} wait for the audit sink already"
            );
            return;
        }
        unstored.push_back(record);
        self.waiting.fetch_add(1, Ordering::AcqRel);
    }

    fn unstored_records(&self) -> std::sync::MutexGuard<'_, VecDeque<AuditRecord>> {
        self.unstored.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that `call` (or, with `resolution`, its compensation) is about to run: the
    /// write-ahead record, which must be stored before the tool may run. It counts no budget:
    /// the outcome's record does.
    pub(crate) async fn about_to_run(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        contract: &ToolContract,
        facts: &Facts,
        resolution: Option<&str>,
    ) -> std::io::Result<()> {
        let running = Outcome::Completed(Value::Null);
        let mut decided = Decided::plain(ctx, call, Some(contract), &running);
        decided.facts = Some(facts);
        decided.resolution = resolution.map(str::to_owned);
        let shared = facts.shared_digest();
        let record = record_of(&decided, Written::AboutToRun);
        self.store(record, shared).await
    }

    /// Records one step of an agent's run ([`RunStep`]) in the same chain as the calls it made.
    pub(crate) async fn append_step(
        &self,
        ctx: &CallContext,
        step: RunStep<'_>,
    ) -> std::io::Result<()> {
        let record = AuditRecord {
            tool: (step.tool)
                .map(|tool| shorten(tool, 200).into_owned())
                .unwrap_or_default(),
            call_id: shorten(step.run_id, 200).into_owned(),
            decision: format!("run_{}", step.step),
            code: step.code.map(str::to_owned),
            summary: shorten(step.summary, 1000).into_owned(),
            ..AuditRecord::of_caller(ctx)
        };
        self.store(record, None).await
    }

    /// Stores `record` after the records kept before it. `shared` keeps the digest of the
    /// fields a call's records share, for the call's next record.
    async fn store(
        &self,
        record: AuditRecord,
        shared: Option<&OnceLock<[u8; 32]>>,
    ) -> std::io::Result<()> {
        self.store_unstored().await?;
        let digest = match shared {
            Some(shared) => {
                let fields = record.fields();
                fields.digest_after(shared.get_or_init(|| fields.call_digest()))
            }
            None => record.digest(),
        };
        self.append_now(record, digest).await
    }

    async fn append_now(&self, record: AuditRecord, digest: [u8; 32]) -> std::io::Result<()> {
        self.sink
            .append(Unchained {
                record,
                digest,
                key: self.key.clone(),
            })
            .await
    }
}

/// One step of an agent's run, for the audit log: recorded as `run_{step}` (`run_model_turn`,
/// `run_paused`, `run_resumed`, `run_finished`, `run_stopped`, ...) under the run's id, so
/// that a run's transitions read in order between the records of the calls it made.
#[derive(Debug, Clone, Copy)]
pub struct RunStep<'a> {
    /// The run.
    pub run_id: &'a str,
    /// What happened, in snake_case: `model_turn`, `paused`, `resumed`, `finished`, `stopped`.
    pub step: &'a str,
    /// The tool the step concerns, if one.
    pub tool: Option<&'a str>,
    /// The code of a stop or a refusal, if one.
    pub code: Option<&'a str>,
    /// A sentence for the operator.
    pub summary: &'a str,
}

/// The record of a decision, with where its declared values came from (the write-ahead record
/// leaves them to it).
fn decision_record(decided: &Decided<'_>) -> AuditRecord {
    let mut record = record_of(decided, Written::Decision);
    if let Some(facts) = decided.facts {
        if let Some(sources) = facts.sources.get() {
            record.sources = sources.clone();
        }
        record.rulings = facts
            .rulings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
    }
    record
}

/// Which of its call's records a record is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Written {
    /// The call is about to run: it holds no outcome, and copies the recorded arguments.
    AboutToRun,
    /// The decision, the call's last record: it takes the recorded arguments (one written
    /// again after a failed store writes them anew).
    Decision,
}

fn record_of(decided: &Decided<'_>, written: Written) -> AuditRecord {
    let Decided {
        ctx,
        call,
        contract,
        outcome,
        duration,
        resolution,
        original_arguments,
        facts,
    } = decided;
    let snapshots = facts.map(|facts| &facts.snapshots);
    let recorded = facts.and_then(|facts| {
        let canonical = facts.canonical.get()?;
        let write = || recorded_canonical(canonical, *contract);
        let mut recorded = facts
            .recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Some(match written {
            Written::Decision => recorded.take().unwrap_or_else(write),
            Written::AboutToRun => recorded.get_or_insert_with(write).clone(),
        })
    });
    let rejection = outcome.rejection();
    // The budget gate counts a call right before it runs: a call that reached execute was
    // counted; one about to run is counted by its decision.
    let counted = written == Written::Decision
        && rejection.is_none_or(|rejection| rejection.gate() == crate::rejection::Gate::Execute);
    let (decision, summary) = match (written, outcome) {
        (Written::AboutToRun, _) => ("about_to_run", "about to run".to_owned()),
        (Written::Decision, Outcome::Completed(output)) => {
            ("completed", shortened(output.to_string(), 1000))
        }
        (Written::Decision, Outcome::Rejected(rejection)) => {
            ("rejected", shorten(rejection.message(), 1000).into_owned())
        }
        (Written::Decision, Outcome::Pending(ticket)) => (
            "pending",
            format!("waiting for approval under {}", ticket.id),
        ),
    };
    let pending = matches!(outcome, Outcome::Pending(_));
    AuditRecord {
        tool: shorten(&call.name, 200).into_owned(),
        call_id: shorten(&call.id, 200).into_owned(),
        arguments: match recorded {
            Some(recorded) => recorded,
            None => recorded_arguments(&call.arguments, *contract),
        },
        decision: decision.to_owned(),
        gate: rejection.map(|rejection| rejection.gate().to_string()),
        code: rejection.map(|rejection| rejection.code().to_string()),
        reason: rejection
            .and_then(|rejection| rejection.reason())
            .map(str::to_owned),
        summary,
        resolution: resolution.clone(),
        original_arguments: original_arguments.clone(),
        snapshot_before: snapshots.and_then(|snapshots| Snapshots::taken(&snapshots.before)),
        snapshot_after: snapshots.and_then(|snapshots| Snapshots::taken(&snapshots.after)),
        snapshot_missing: snapshots.and_then(|snapshots| Snapshots::taken(&snapshots.missing)),
        budget_calls: u64::from(counted && !pending && contract.is_some()),
        budget_cost: match contract {
            Some(contract) if counted && !pending => contract.cost(),
            _ => 0,
        },
        duration_us: u64::try_from(duration.as_micros()).unwrap_or(u64::MAX),
        ..AuditRecord::of_caller(ctx)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::rejection::Rejection;
    use crate::{RejectionCode, Risk};
    use serde_json::json;

    /// Runs an append to its end, as a test on a plain thread needs.
    pub(super) fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    pub(super) fn key() -> AuditKey {
        AuditKey::new(b"an operator's secret of 32 bytes!".to_vec()).unwrap()
    }

    pub(super) fn log_of(count: usize) -> Vec<AuditRecord> {
        let sink = MemoryAuditSink::default();
        let mut log = AuditLog::new(sink.clone());
        log.set_key(key());
        let ctx = CallContext::new("alice");
        let contract = ToolContract::builder(
            "login",
            "Logs in.",
            json!({"type": "object", "additionalProperties": false}),
        )
        .risk(Risk::Low)
        .sensitive(["password"])
        .cost(3)
        .build();
        for index in 0..count {
            let call = ToolCall::new(
                format!("c{index}"),
                "login",
                json!({"user": "a", "password": "hunter2"}),
            );
            let outcome = if index % 2 == 0 {
                Outcome::Completed(json!(true))
            } else {
                Outcome::Rejected(Rejection::new(RejectionCode::RateLimited, "slow down"))
            };
            block_on(log.append(Decided {
                ctx: &ctx,
                call: &call,
                contract: Some(&contract),
                outcome: &outcome,
                duration: Duration::from_micros(5),
                resolution: None,
                original_arguments: None,
                facts: None,
            }));
        }
        sink.records()
    }

    /// `log_of(count)`, its first `written_v1` records linked as version 1 wrote them, as a
    /// log from before version 2 that a version 2 writer continued.
    pub(super) fn mixed_log(count: usize, written_v1: usize) -> Vec<AuditRecord> {
        let mut head = Checkpoint::genesis();
        log_of(count)
            .into_iter()
            .enumerate()
            .map(|(index, record)| {
                let record = match index < written_v1 {
                    true => digest::tests::chained_v1(record, &head, &key()),
                    false => Unchained::new(record, Some(key())).chain_after(&head),
                };
                head = Checkpoint::after(&record);
                record
            })
            .collect()
    }

    #[test]
    fn records_are_redacted_and_chained() {
        let records = log_of(4);
        assert_eq!(
            verify(&records, Some(&key())),
            Ok(Checkpoint::after(&records[3]))
        );
        assert_eq!(
            records[0].arguments,
            json!({"user": "a", "password": REDACTED})
        );
        assert_eq!(records[0].previous_hash, GENESIS_HASH);
        assert_eq!(records[1].previous_hash, records[0].hash);
        assert_eq!((records[0].budget_calls, records[0].budget_cost), (1, 3));
        assert_eq!((records[1].budget_calls, records[1].budget_cost), (0, 0));
        assert_eq!(records[1].code.as_deref(), Some("rate_limited"));
        assert_eq!(records[1].gate.as_deref(), Some("budget"));
    }

    #[test]
    fn verify_finds_altered_dropped_and_reordered_records() {
        let records = log_of(4);

        let mut altered = records.clone();
        altered[2].actor = "mallory".into();
        assert_eq!(
            verify(&altered, Some(&key())),
            Err(ChainBreak::Altered { position: 2 })
        );

        let mut dropped = records.clone();
        dropped.remove(1);
        assert!(matches!(
            verify(&dropped, Some(&key())),
            Err(ChainBreak::Broken {
                position: 1,
                expected_sequence: 1,
                found_sequence: 2
            })
        ));

        let mut reordered = records.clone();
        reordered.swap(1, 2);
        assert!(matches!(
            verify(&reordered, Some(&key())),
            Err(ChainBreak::Broken { position: 1, .. })
        ));

        let mut truncated_front = records.clone();
        truncated_front.remove(0);
        assert!(matches!(
            verify(&truncated_front, Some(&key())),
            Err(ChainBreak::Broken { position: 0, .. })
        ));
    }

    #[test]
    fn a_checkpoint_finds_a_cut_tail() {
        let records = log_of(4);
        let checkpoint = verify(&records, Some(&key())).unwrap();
        let cut = &records[..2];
        assert!(
            verify(cut, Some(&key())).is_ok(),
            "a cut log verifies alone"
        );
        assert_eq!(
            verify_to(cut, Some(&key()), &checkpoint),
            Err(ChainBreak::CutShort {
                expected_length: 4,
                found_length: 2
            })
        );
        assert_eq!(
            verify_to(&records, Some(&key()), &checkpoint),
            Ok(checkpoint)
        );
    }

    #[test]
    fn a_rewritten_chain_fails_without_the_key() {
        let mut records = log_of(3);
        // The forger changes a record and re-links the whole chain, as it can without a key.
        records[1].actor = "mallory".into();
        let mut head = Checkpoint::genesis();
        for record in &mut records {
            let unchained = Unchained {
                digest: record.digest(),
                record: record.clone(),
                key: None,
            };
            *record = unchained.chain_after(&head);
            head = Checkpoint::after(record);
        }
        assert!(
            verify(&records, None).is_ok(),
            "an unkeyed chain can be rewritten"
        );
        assert_eq!(
            verify(&records, Some(&key())),
            Err(ChainBreak::Altered { position: 0 })
        );
    }
}
