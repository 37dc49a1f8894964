//! The audit log: one record for every decision the gates take, refusals included, chained by
//! hashes so that an altered, dropped or reordered record shows.
//!
//! The registry appends a record after each dispatch ([`RegistryBuilder::audit`]); the record
//! carries the SHA-256 of the one before, and [`verify`] walks a sequence of records and
//! reports the first break. Where the records go is an [`AuditSink`]'s business: memory, a JSON
//! Lines file, or `tracing`.
//!
//! [`RegistryBuilder::audit`]: crate::RegistryBuilder::audit

mod sinks;

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::gate::decode::longer_than;
use crate::pipeline::Facts;
use crate::rejection::shorten;
use crate::{Arguments, CallContext, Outcome, ToolCall, ToolContract};

pub use sinks::{JsonLinesAuditSink, MemoryAuditSink, TracingAuditSink, read_json_lines};

pub use crate::contract::REDACTED;

/// Arguments longer than this, as JSON text, are recorded by size only.
const RECORDED_ARGUMENTS_LIMIT: usize = 64 * 1024;

/// One decision: who asked for what, which gate decided and why, what it cost, and the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// The record's place in the log, from 0.
    pub sequence: u64,
    /// When the decision was taken, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// The caller's trace id.
    pub trace_id: String,
    /// The task the call belongs to.
    pub task_id: String,
    /// Who called.
    pub actor: String,
    /// The caller's tenant.
    pub tenant: Option<String>,
    /// The tool the model asked for, as it asked.
    pub tool: String,
    /// The provider's call id.
    pub call_id: String,
    /// The arguments, with `#[sensitive]` values redacted: the canonical arguments (what the
    /// tool received, or would have) once decoded; before that, the arguments as sent. Text that
    /// is not JSON, and arguments over 64 KiB, are recorded by their size and SHA-256 only:
    /// `{"unrecorded": {"bytes": N, "sha256": "..."}}`.
    pub arguments: Value,
    /// `completed` or `rejected`.
    pub decision: String,
    /// The gate that refused the call.
    pub gate: Option<String>,
    /// The refusal's code.
    pub code: Option<String>,
    /// The refusal's finer reason: the policy rule, the tool's own error code.
    pub reason: Option<String>,
    /// The refusal's message, the start of the output as JSON, or the ticket a pending call
    /// waits under.
    pub summary: String,
    /// How the record came about beyond a plain dispatch: `approved by ...`, `edited by ...`,
    /// `rejected by ...` or `expired` for a call a reviewer decided, `compensation` for the
    /// compensation of an earlier call of a transaction.
    pub resolution: Option<String>,
    /// For a call a reviewer edited: the arguments before the edit, as the ticket showed them.
    pub original_arguments: Option<Value>,
    /// The tool's snapshot of the state the call changes, taken just before it ran.
    pub snapshot_before: Option<Value>,
    /// The same snapshot, taken just after the call ran.
    pub snapshot_after: Option<Value>,
    /// Calls the budget counted for this decision (0 or 1).
    pub budget_calls: u64,
    /// Cost the budget counted for this decision.
    pub budget_cost: u64,
    /// How long the decision took, in microseconds.
    pub duration_us: u64,
    /// The hash of the record before this one (64 zeros for the first).
    pub previous_hash: String,
    /// The SHA-256 of this record's other fields and `previous_hash`.
    pub hash: String,
}

impl AuditRecord {
    /// The hash this record should carry: SHA-256 over its JSON form with `hash` emptied.
    fn computed_hash(&self) -> String {
        self.clone().seal()
    }

    /// Empties `hash` and returns the hash the record should carry, without copying it.
    fn seal(&mut self) -> String {
        self.hash = String::new();
        let bytes =
            serde_json::to_vec(&self).expect("a record of strings and JSON values serializes");
        sha256_hex(&bytes)
    }
}

/// The SHA-256 of `bytes`, in lowercase hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(64);
    for byte in Sha256::digest(bytes) {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    hex
}

/// Where records go. A sink that fails loses the record: the registry reports the failure to
/// `tracing` and the log's next record still chains to it, so [`verify`] shows the gap.
pub trait AuditSink: Send + Sync + 'static {
    /// Stores one record, durably if the sink promises durability.
    fn write(&self, record: &AuditRecord) -> std::io::Result<()>;
}

/// The hash a log starts from.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The snapshots a call's hook took before and after it ran, for its record.
#[derive(Default)]
pub(crate) struct Snapshots {
    pub(crate) before: Mutex<Option<Value>>,
    pub(crate) after: Mutex<Option<Value>>,
}

impl Snapshots {
    pub(crate) fn keep(slot: &Mutex<Option<Value>>, snapshot: Value) {
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(snapshot);
    }

    fn taken(slot: &Mutex<Option<Value>>) -> Option<Value> {
        slot.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// Appends chained records to a sink, one at a time.
pub(crate) struct AuditLog {
    sink: Box<dyn AuditSink>,
    chain: Mutex<(u64, String)>,
}

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

impl AuditLog {
    pub(crate) fn new(sink: impl AuditSink) -> Self {
        AuditLog {
            sink: Box::new(sink),
            chain: Mutex::new((0, GENESIS_HASH.to_owned())),
        }
    }

    /// Records one decision.
    pub(crate) fn append(&self, decided: Decided<'_>) {
        let mut record = record_of(&decided);
        // Held while writing, so that records reach the sink in the order they are chained.
        let mut chain = self.chain.lock().unwrap_or_else(PoisonError::into_inner);
        let (sequence, previous_hash) = &mut *chain;
        record.sequence = *sequence;
        record.previous_hash = previous_hash.clone();
        record.hash = record.seal();
        if let Err(error) = self.sink.write(&record) {
            tracing::error!(sequence = record.sequence, %error, "an audit record could not be written");
        }
        *sequence += 1;
        *previous_hash = record.hash;
    }
}

fn record_of(decided: &Decided<'_>) -> AuditRecord {
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
    let canonical = facts.and_then(|facts| facts.canonical.get());
    let rejection = outcome.rejection();
    // The budget gate counts a call right before it runs: a call that reached execute was
    // counted.
    let counted = rejection.is_none_or(|rejection| rejection.gate() == crate::Gate::Execute);
    let summary = match outcome {
        Outcome::Completed(output) => shorten(&output.to_string(), 1000).into_owned(),
        Outcome::Rejected(rejection) => shorten(rejection.message(), 1000).into_owned(),
        Outcome::Pending(ticket) => format!("waiting for approval under {}", ticket.id),
    };
    let pending = matches!(outcome, Outcome::Pending(_));
    AuditRecord {
        sequence: 0,
        time_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64),
        trace_id: ctx.trace_id().to_owned(),
        task_id: ctx.task_id().to_owned(),
        actor: ctx.actor().to_owned(),
        tenant: ctx.tenant().map(str::to_owned),
        tool: shorten(&call.name, 200).into_owned(),
        call_id: shorten(&call.id, 200).into_owned(),
        arguments: match canonical {
            Some(canonical) => recorded_canonical(canonical, *contract),
            None => recorded_arguments(&call.arguments, *contract),
        },
        decision: match outcome {
            Outcome::Completed(_) => "completed",
            Outcome::Rejected(_) => "rejected",
            Outcome::Pending(_) => "pending",
        }
        .to_owned(),
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
        budget_calls: u64::from(counted && !pending && contract.is_some()),
        budget_cost: match contract {
            Some(contract) if counted && !pending => contract.cost(),
            _ => 0,
        },
        duration_us: u64::try_from(duration.as_micros()).unwrap_or(u64::MAX),
        previous_hash: String::new(),
        hash: String::new(),
    }
}

/// Arguments as sent, as recorded: JSON with the contract's sensitive values redacted, or, for
/// text that is not JSON (which may hold a secret the redaction cannot find) and arguments too
/// long to keep, their size and SHA-256.
pub(crate) fn recorded_arguments(arguments: &Arguments, contract: Option<&ToolContract>) -> Value {
    let parsed = match arguments {
        Arguments::Text(text) if text.len() <= RECORDED_ARGUMENTS_LIMIT => {
            match serde_json::from_str::<Value>(text) {
                Ok(value) => Ok(value),
                Err(_) => Err(text.as_bytes().to_vec()),
            }
        }
        Arguments::Text(text) => Err(text.as_bytes().to_vec()),
        Arguments::Json(value) => Ok(value.clone()),
    };
    match parsed {
        Ok(value) => recorded_canonical(&value, contract),
        Err(bytes) => unrecorded(&bytes),
    }
}

/// Arguments already parsed, as recorded: redacted, or by size and SHA-256 when too long.
pub(crate) fn recorded_canonical(arguments: &Value, contract: Option<&ToolContract>) -> Value {
    if longer_than(arguments, RECORDED_ARGUMENTS_LIMIT) {
        return unrecorded(arguments.to_string().as_bytes());
    }
    let mut value = arguments.clone();
    if let Some(contract) = contract {
        contract.redact(&mut value);
    }
    value
}

fn unrecorded(bytes: &[u8]) -> Value {
    serde_json::json!({"unrecorded": {"bytes": bytes.len(), "sha256": sha256_hex(bytes)}})
}

/// Where a log's chain breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainBreak {
    /// The record at this position does not match its own hash: it was altered.
    Altered {
        /// The record's position in the sequence given to [`verify`].
        position: usize,
    },
    /// The record at this position does not follow the one before it: a record between them
    /// was dropped, or records were reordered.
    Broken {
        /// The record's position in the sequence given to [`verify`].
        position: usize,
        /// The sequence number expected there.
        expected_sequence: u64,
        /// The sequence number found.
        found_sequence: u64,
    },
}

impl fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChainBreak::Altered { position } => write!(f, "record {position} was altered"),
            ChainBreak::Broken {
                position,
                expected_sequence,
                found_sequence,
            } => write!(
                f,
                "record {position} is number {found_sequence} where {expected_sequence} was expected: records were dropped or reordered"
            ),
        }
    }
}

impl std::error::Error for ChainBreak {}

/// Checks that `records`, read back from a sink, form an unbroken chain from the log's first
/// record: each matches its own hash, follows the one before it, and carries the next
/// sequence number.
///
/// ```
/// use portcullis_core::audit::{verify, ChainBreak};
///
/// assert_eq!(verify(&[]), Ok(()));
/// ```
pub fn verify(records: &[AuditRecord]) -> Result<(), ChainBreak> {
    let mut previous_hash = GENESIS_HASH;
    for (position, record) in records.iter().enumerate() {
        if record.hash != record.computed_hash() {
            return Err(ChainBreak::Altered { position });
        }
        let expected_sequence = position as u64;
        if record.sequence != expected_sequence || record.previous_hash != previous_hash {
            return Err(ChainBreak::Broken {
                position,
                expected_sequence,
                found_sequence: record.sequence,
            });
        }
        previous_hash = &record.hash;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Rejection, RejectionCode, Risk};
    use serde_json::json;

    fn log_of(count: usize) -> Vec<AuditRecord> {
        let sink = MemoryAuditSink::default();
        let log = AuditLog::new(sink.clone());
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
            log.append(Decided {
                ctx: &ctx,
                call: &call,
                contract: Some(&contract),
                outcome: &outcome,
                duration: Duration::from_micros(5),
                resolution: None,
                original_arguments: None,
                facts: None,
            });
        }
        sink.records()
    }

    #[test]
    fn records_are_redacted_and_chained() {
        let records = log_of(4);
        assert_eq!(verify(&records), Ok(()));
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
        assert_eq!(verify(&altered), Err(ChainBreak::Altered { position: 2 }));

        let mut dropped = records.clone();
        dropped.remove(1);
        assert!(matches!(
            verify(&dropped),
            Err(ChainBreak::Broken {
                position: 1,
                expected_sequence: 1,
                found_sequence: 2
            })
        ));

        let mut reordered = records.clone();
        reordered.swap(1, 2);
        assert!(matches!(
            verify(&reordered),
            Err(ChainBreak::Broken { position: 1, .. })
        ));

        let mut truncated_front = records.clone();
        truncated_front.remove(0);
        assert!(matches!(
            verify(&truncated_front),
            Err(ChainBreak::Broken { position: 0, .. })
        ));
    }
}
