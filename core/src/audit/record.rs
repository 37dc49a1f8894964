//! The record of one decision as a log holds it, the version of its format, and a place in
//! a log.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::CallContext;
use crate::time::now_ms;

/// The format of the records written before [`V2`], and of a record that names none.
pub(super) const V1: u8 = 1;
/// The format every record is written in now.
pub(super) const V2: u8 = 2;

/// One decision: who asked for what, which gate decided and why, what it cost, and the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// The record's format: 2 for the records written now, 1 for those written before
    /// version 2 (which do not name it). The format says what the record's link covers; the
    /// audit page of the guide spells both out.
    #[serde(default = "format_v1", skip_serializing_if = "is_format_v1")]
    pub version: u8,
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
    /// `completed`, `rejected`, `pending`, or `about_to_run` for the write-ahead record of a
    /// call that is about to run. An operator settling a claim whose outcome was unknown
    /// (`portcullis claims settle`) writes `about_to_settle` first, then `settled` (the
    /// outcome in `summary`, who and why in `resolution`) or `settle_refused` (the refusal's
    /// `code`).
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
    /// Why the snapshot after a call that ran is missing, for a tool with a snapshot hook: the
    /// canonical arguments did not read back as the same arguments, or the hook panicked.
    /// Absent otherwise, and then not written, so records from before this field still verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_missing: Option<String>,
    /// Where each value the contract declares `#[from(...)]` was found, for a call the
    /// provenance gate judged (on the decision's record, not the `about_to_run` one): the user's request or message `n`, the output of tool X in call
    /// Y, a reviewer's edit, or nowhere. Absent otherwise, and then not written, so records
    /// from before this field still verify.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<crate::contract::ValueSource>,
    /// Which version of each versioned rule set (a Cedar policy set) decided the call, and by
    /// which of its rules, on the decision's record. Absent otherwise, and then not written,
    /// so records from before this field still verify.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rulings: Vec<crate::policy::Ruling>,
    /// Calls the budget counted for this decision (0 or 1).
    pub budget_calls: u64,
    /// Cost the budget counted for this decision.
    pub budget_cost: u64,
    /// How long the decision took, in microseconds.
    pub duration_us: u64,
    /// The hash of the record before this one (64 zeros for the first).
    pub previous_hash: String,
    /// The record's link in the chain: HMAC-SHA-256 (or SHA-256, without a key) of its
    /// sequence, `previous_hash` and the digest of its other fields.
    pub hash: String,
}

pub(super) fn format_v1() -> u8 {
    V1
}

fn is_format_v1(version: &u8) -> bool {
    *version == V1
}

impl AuditRecord {
    /// A record, taken now, of the caller of `ctx`, with nothing yet about what it did: the
    /// start of every record a registry writes.
    pub(super) fn of_caller(ctx: &CallContext) -> Self {
        AuditRecord {
            version: V2,
            sequence: 0,
            time_ms: now_ms(),
            trace_id: ctx.trace_id().to_owned(),
            task_id: ctx.task_id().to_owned(),
            actor: ctx.actor().to_owned(),
            tenant: ctx.tenant().map(str::to_owned),
            tool: String::new(),
            call_id: String::new(),
            arguments: Value::Null,
            decision: String::new(),
            gate: None,
            code: None,
            reason: None,
            summary: String::new(),
            resolution: None,
            original_arguments: None,
            snapshot_before: None,
            snapshot_after: None,
            snapshot_missing: None,
            sources: Vec::new(),
            rulings: Vec::new(),
            budget_calls: 0,
            budget_cost: 0,
            duration_us: 0,
            previous_hash: String::new(),
            hash: String::new(),
        }
    }
}

/// A place in a log: how many records it holds, and the hash of its last ([`GENESIS_HASH`]
/// for an empty log). Kept outside the log, it proves later that none of those records was
/// cut off: see [`verify_to`](super::verify_to).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The number of records.
    pub length: u64,
    /// The hash of the last record.
    pub head: String,
}

impl Checkpoint {
    /// The place of an empty log.
    pub fn genesis() -> Self {
        Checkpoint {
            length: 0,
            head: GENESIS_HASH.to_owned(),
        }
    }

    /// The place of a log whose last record is `record`.
    pub fn after(record: &AuditRecord) -> Self {
        Checkpoint {
            length: record.sequence + 1,
            head: record.hash.clone(),
        }
    }
}

/// The hash a log starts from.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";
