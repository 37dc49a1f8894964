//! Refusals: which gate refused a call, with which stable code, and what the model can do about it.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod gate;

pub use gate::Gate;

/// The stable, snake_case code of a refusal. Codes never change meaning; new ones may be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RejectionCode {
    /// No tool of that name is registered.
    UnknownTool,
    /// The tool choice of this step does not allow the tool; see
    /// [`CallContext::with_tool_choice`](crate::CallContext::with_tool_choice).
    ToolNotAllowed,
    /// The arguments are not valid JSON.
    MalformedJson,
    /// An object in the arguments names the same key twice.
    DuplicateKey,
    /// The arguments exceed the registry's size limit.
    ArgumentsTooLarge,
    /// The arguments nest deeper than the registry's depth limit.
    ArgumentsTooDeep,
    /// The arguments are not a JSON object.
    NotAnObject,
    /// An argument the tool does not declare.
    UnknownArgument,
    /// A required argument is absent.
    MissingArgument,
    /// An argument has the wrong JSON type (a string for a number, a float for an integer, ...).
    InvalidType,
    /// An argument has the right type but a value the type cannot hold (outside an enum, an
    /// integer out of range).
    InvalidValue,
    /// The canonical arguments do not read back as the same arguments (the argument types'
    /// `Deserialize` and `Serialize` disagree), and the tool needs them read again: for the
    /// snapshot after the call, or for its compensation. The call does not run, as it could
    /// not be observed or undone; the tool's types are at fault, not the model.
    ArgumentsNotReproducible,
    /// One or more declared constraints are violated; see [`Rejection::violations`].
    ConstraintViolation,
    /// The caller holds none of the roles the tool requires. Given only by a registry that
    /// tells callers of the tools they may not use
    /// ([`RegistryBuilder::reveal_denied_tools`](crate::RegistryBuilder::reveal_denied_tools));
    /// otherwise such a tool is an `unknown_tool`.
    RoleDenied,
    /// The call runs in an environment the tool does not allow, or names another environment
    /// than the one it runs in.
    EnvironmentMismatch,
    /// The call names another tenant than the caller's.
    TenantMismatch,
    /// A policy refused the call; the rule's id is the rejection's reason.
    PolicyDenied,
    /// The call does not fit what the user asked for; the rule's id is the rejection's reason.
    IntentMismatch,
    /// A value declared `#[from(...)]` was found only in a source it may not come from: a
    /// tool's output the contract does not trust (or, for `#[from(user)]`, any tool's output).
    UntrustedValue,
    /// A value declared `#[from(...)]` was found in no source of the task: the model made it
    /// up, or changed it.
    UnsourcedValue,
    /// The tool does not run once its task read untrusted content (`after_untrusted =
    /// "refuse"`).
    UntrustedTask,
    /// The task's sources could not be read, so the provenance of the call's values cannot be
    /// told.
    SourcesUnavailable,
    /// The task has made all the calls it may make (in all, or of this tool).
    BudgetCallsExceeded,
    /// The call would spend more than the task's budget.
    BudgetCostExceeded,
    /// The same call was made too many times in a row.
    StalledLoop,
    /// The actor calls too fast.
    RateLimited,
    /// The tool failed too often and is paused.
    CircuitOpen,
    /// The task collected as many refusals as the registry allows, and is stopped.
    TooManyRefusals,
    /// The store of budgets could not be reached, so the call could not be counted and did
    /// not run.
    BudgetUnavailable,
    /// A bounded store of budgets holds as many tasks (or callers) as its capacity allows and
    /// not this one, so the call could not be counted and did not run; see
    /// [`BudgetCapacity`](crate::BudgetCapacity).
    BudgetStoreFull,
    /// The caller (its actor in its tenant) holds as many tasks in a bounded store of budgets
    /// as its share of the store allows, and this call would start another: it was not
    /// counted and did not run. Its calls in the tasks it holds still run, and a task it ends
    /// gives its place back; other callers are not affected. See
    /// [`BudgetCapacity::tasks_per_caller`](crate::BudgetCapacity::tasks_per_caller).
    BudgetShareFull,
    /// The task was ended by a bounded store of budgets on its own, idle past its lifetime or
    /// older than it ([`TaskLifetime`](crate::TaskLifetime)), after it spent some of a per-task
    /// budget: its calls are refused for as long as the store remembers it, since a budget
    /// begun afresh would allow what it refused. Start a new task.
    TaskExpired,
    /// The caller (its actor in its tenant) holds as many open calls (running, or waiting for
    /// approval) in a bounded store of claims as its share allows: the call was not claimed
    /// and did not run. Other callers are not affected; its calls that end give their places
    /// back. See [`InMemoryRepeatStore::open_claims_per_caller`](crate::InMemoryRepeatStore::open_claims_per_caller).
    ClaimShareFull,
    /// A call with the same id is running now; send it again later to read its outcome.
    CallInProgress,
    /// The call id was used before, by this caller in this task, for other arguments.
    CallIdReused,
    /// An earlier attempt of the call began and never reported how it ended (its worker
    /// stopped): it may have run, and does not run again.
    OutcomeUnknown,
    /// The store of claims could not be reached, so the call could not be claimed and did not
    /// run.
    ClaimsUnavailable,
    /// A bounded store of claims holds as many open calls (running, or waiting for approval)
    /// as its capacity allows, so the call could not be claimed and did not run; see
    /// [`InMemoryRepeatStore`](crate::InMemoryRepeatStore).
    ClaimStoreFull,
    /// An operator's settlement names no claim: no call was claimed under that id, or its
    /// claim was released.
    ClaimNotFound,
    /// An operator's settlement names a claim whose outcome is not unknown: its call is still
    /// within its lease (its worker may yet report), or it waits for a reviewer's decision.
    ClaimNotAbandoned,
    /// An operator's settlement names a claim already settled: by its worker, or by another
    /// operator first.
    ClaimSettled,
    /// The store of pending calls could not be reached, so the call could not wait and did
    /// not run.
    ApprovalsUnavailable,
    /// The pending call is sealed at rest with a key the store was not given: it is left as
    /// it is, and nothing was decided or run.
    SealKeyMissing,
    /// The task or the actor has as many calls waiting for approval as the registry allows.
    TooManyPending,
    /// The reviewer may not decide this ticket: it lacks the approver role, or belongs to
    /// another tenant.
    ReviewerNotAllowed,
    /// The reviewer is the actor who asked for the call.
    SelfApproval,
    /// The tool's contract changed since the ticket was opened; the call cannot run.
    ContractChanged,
    /// The call changes state and its audit record could not be written first, so it did not
    /// run.
    AuditUnavailable,
    /// A reviewer rejected the call.
    ApprovalRejected,
    /// Nobody decided on the call before its ticket expired.
    ApprovalExpired,
    /// The ticket is unknown, or was decided and its call ended already.
    TicketNotPending,
    /// A decision on the ticket is recorded already; its call runs (or ran) as decided.
    TicketDecided,
    /// The registry counts only signed decisions, and this one carries no signature.
    DecisionUnsigned,
    /// The decision's signature does not verify against a key the registry's keyring allows
    /// for the reviewer it names, over this ticket, this call and this decision: it was made
    /// for another ticket or other arguments, by an unknown key, or the stored call changed
    /// since.
    DecisionSignatureInvalid,
    /// The tool ran and returned an error.
    ToolFailed,
    /// The tool ran, but its output could not be recorded as a source of the task, so it is
    /// withheld from the model: what the gates cannot account for must not be read.
    OutputUnrecorded,
    /// The tool ran, but the caller (its actor in its tenant) holds as many tasks in a bounded
    /// store of sources as its share allows, and this output would start another: it is
    /// withheld from the model. Its calls in the tasks it holds are served, and a task it ends
    /// gives its place back; other callers are not affected. See
    /// [`InMemoryProvenanceStore::per_caller`](crate::InMemoryProvenanceStore::per_caller).
    SourcesShareFull,
    /// The tool did not finish within its `timeout_ms`.
    ToolTimeout,
    /// The tool panicked; the panic was contained.
    ToolPanicked,
    /// The registry runs dry ([`RegistryBuilder::dry_run`](crate::RegistryBuilder::dry_run)):
    /// the call passed every gate, and its tool was not run.
    DryRun,
}

impl RejectionCode {
    /// The code as it appears on the wire, e.g. `"duplicate_key"`.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectionCode::UnknownTool => "unknown_tool",
            RejectionCode::MalformedJson => "malformed_json",
            RejectionCode::DuplicateKey => "duplicate_key",
            RejectionCode::ArgumentsTooLarge => "arguments_too_large",
            RejectionCode::ArgumentsTooDeep => "arguments_too_deep",
            RejectionCode::NotAnObject => "not_an_object",
            RejectionCode::UnknownArgument => "unknown_argument",
            RejectionCode::MissingArgument => "missing_argument",
            RejectionCode::InvalidType => "invalid_type",
            RejectionCode::InvalidValue => "invalid_value",
            RejectionCode::ArgumentsNotReproducible => "arguments_not_reproducible",
            RejectionCode::ConstraintViolation => "constraint_violation",
            RejectionCode::RoleDenied => "role_denied",
            RejectionCode::ToolNotAllowed => "tool_not_allowed",
            RejectionCode::EnvironmentMismatch => "environment_mismatch",
            RejectionCode::TenantMismatch => "tenant_mismatch",
            RejectionCode::PolicyDenied => "policy_denied",
            RejectionCode::IntentMismatch => "intent_mismatch",
            RejectionCode::UntrustedValue => "untrusted_value",
            RejectionCode::UnsourcedValue => "unsourced_value",
            RejectionCode::UntrustedTask => "untrusted_task",
            RejectionCode::SourcesUnavailable => "sources_unavailable",
            RejectionCode::OutputUnrecorded => "output_unrecorded",
            RejectionCode::SourcesShareFull => "sources_share_full",
            RejectionCode::BudgetCallsExceeded => "budget_calls_exceeded",
            RejectionCode::BudgetCostExceeded => "budget_cost_exceeded",
            RejectionCode::StalledLoop => "stalled_loop",
            RejectionCode::RateLimited => "rate_limited",
            RejectionCode::CircuitOpen => "circuit_open",
            RejectionCode::TooManyRefusals => "too_many_refusals",
            RejectionCode::BudgetUnavailable => "budget_unavailable",
            RejectionCode::BudgetStoreFull => "budget_store_full",
            RejectionCode::BudgetShareFull => "budget_share_full",
            RejectionCode::TaskExpired => "task_expired",
            RejectionCode::ClaimShareFull => "claim_share_full",
            RejectionCode::CallInProgress => "call_in_progress",
            RejectionCode::CallIdReused => "call_id_reused",
            RejectionCode::OutcomeUnknown => "outcome_unknown",
            RejectionCode::ClaimsUnavailable => "claims_unavailable",
            RejectionCode::ClaimStoreFull => "claim_store_full",
            RejectionCode::ClaimNotFound => "claim_not_found",
            RejectionCode::ClaimNotAbandoned => "claim_not_abandoned",
            RejectionCode::ClaimSettled => "claim_settled",
            RejectionCode::ApprovalsUnavailable => "approvals_unavailable",
            RejectionCode::SealKeyMissing => "seal_key_missing",
            RejectionCode::TooManyPending => "too_many_pending",
            RejectionCode::ReviewerNotAllowed => "reviewer_not_allowed",
            RejectionCode::SelfApproval => "self_approval",
            RejectionCode::ContractChanged => "contract_changed",
            RejectionCode::AuditUnavailable => "audit_unavailable",
            RejectionCode::ApprovalRejected => "approval_rejected",
            RejectionCode::ApprovalExpired => "approval_expired",
            RejectionCode::TicketNotPending => "ticket_not_pending",
            RejectionCode::TicketDecided => "ticket_decided",
            RejectionCode::DecisionUnsigned => "decision_unsigned",
            RejectionCode::DecisionSignatureInvalid => "decision_signature_invalid",
            RejectionCode::ToolFailed => "tool_failed",
            RejectionCode::ToolTimeout => "tool_timeout",
            RejectionCode::ToolPanicked => "tool_panicked",
            RejectionCode::DryRun => "dry_run",
        }
    }

    /// The gate that refuses with this code.
    pub fn gate(self) -> Gate {
        match self {
            RejectionCode::UnknownTool | RejectionCode::ToolNotAllowed => Gate::Resolve,
            RejectionCode::MalformedJson
            | RejectionCode::DuplicateKey
            | RejectionCode::ArgumentsTooLarge
            | RejectionCode::ArgumentsTooDeep
            | RejectionCode::NotAnObject
            | RejectionCode::UnknownArgument
            | RejectionCode::MissingArgument
            | RejectionCode::InvalidType
            | RejectionCode::InvalidValue
            | RejectionCode::ArgumentsNotReproducible => Gate::Decode,
            RejectionCode::ConstraintViolation => Gate::Validate,
            RejectionCode::RoleDenied
            | RejectionCode::EnvironmentMismatch
            | RejectionCode::TenantMismatch
            | RejectionCode::PolicyDenied
            | RejectionCode::IntentMismatch
            | RejectionCode::UntrustedValue
            | RejectionCode::UnsourcedValue
            | RejectionCode::UntrustedTask
            | RejectionCode::SourcesUnavailable => Gate::Authorize,
            RejectionCode::BudgetCallsExceeded
            | RejectionCode::BudgetCostExceeded
            | RejectionCode::StalledLoop
            | RejectionCode::RateLimited
            | RejectionCode::CircuitOpen
            | RejectionCode::TooManyRefusals
            | RejectionCode::BudgetUnavailable
            | RejectionCode::BudgetStoreFull
            | RejectionCode::BudgetShareFull
            | RejectionCode::TaskExpired => Gate::Budget,
            RejectionCode::CallInProgress
            | RejectionCode::CallIdReused
            | RejectionCode::OutcomeUnknown
            | RejectionCode::ClaimsUnavailable
            | RejectionCode::ClaimStoreFull
            | RejectionCode::ClaimShareFull
            | RejectionCode::ClaimNotFound
            | RejectionCode::ClaimNotAbandoned
            | RejectionCode::ClaimSettled => Gate::Repeat,
            RejectionCode::ApprovalRejected
            | RejectionCode::ApprovalExpired
            | RejectionCode::TicketNotPending
            | RejectionCode::TicketDecided
            | RejectionCode::DecisionUnsigned
            | RejectionCode::DecisionSignatureInvalid
            | RejectionCode::TooManyPending
            | RejectionCode::ReviewerNotAllowed
            | RejectionCode::SelfApproval
            | RejectionCode::ContractChanged
            | RejectionCode::ApprovalsUnavailable
            | RejectionCode::SealKeyMissing => Gate::Approve,
            RejectionCode::AuditUnavailable => Gate::Audit,
            RejectionCode::ToolFailed
            | RejectionCode::OutputUnrecorded
            | RejectionCode::SourcesShareFull
            | RejectionCode::ToolTimeout
            | RejectionCode::ToolPanicked
            | RejectionCode::DryRun => Gate::Execute,
        }
    }

    /// Whether the model can fix the call and try again. Refusals of the input are retryable;
    /// a panic is not (the same input would panic again), nor is a refusal of who is calling.
    fn retryable_by_default(self) -> bool {
        !matches!(
            self,
            RejectionCode::ToolPanicked
                | RejectionCode::ArgumentsNotReproducible
                | RejectionCode::RoleDenied
                | RejectionCode::TooManyRefusals
                | RejectionCode::TaskExpired
                | RejectionCode::OutputUnrecorded
                | RejectionCode::DryRun
        )
    }
}

impl fmt::Display for RejectionCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The most violations one model message lists; the rest are counted. The model needs a few to
/// fix its call, and a reply must not grow with whatever the model sent.
const MODEL_MESSAGE_VIOLATIONS: usize = 20;

/// `text`, cut to `max_chars` characters with an ellipsis if it is longer: what the model sent
/// is echoed back, and it may be a megabyte long.
pub(crate) fn shorten(text: &str, max_chars: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        None => text.into(),
        Some((cut, _)) => format!("{}…", &text[..cut]).into(),
    }
}

/// [`shorten`] of a text the caller owns: kept as it is when it is short enough.
pub(crate) fn shortened(text: String, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text,
        Some(_) => shorten(&text, max_chars).into_owned(),
    }
}

/// One violated constraint found by the validate gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    /// JSON pointer to the offending value, using the names the model sees (`/items/0/qty`).
    pub path: String,
    /// The rule: `range`, `length`, `pattern`, `email`, `url`, `contains`, or the code of a
    /// custom validator.
    pub rule: String,
    /// A sentence for the model, e.g. "must be at least 3 characters".
    pub message: String,
    /// The bounds of the rule (`min`, `max`, `exclusive_min`, ...), without the offending value.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub params: Map<String, Value>,
}

/// Why a call was refused: the gate, a stable code, a JSON-pointer path to the offending
/// argument, a sentence, a hint, and whether retrying can help.
///
/// [`Rejection::to_model_message`] renders it as the compact JSON text that goes back to the
/// model so that it can correct its call. It serializes whole (its code, message, path, hint,
/// retryable flag, reason and violations), for a store that keeps a call's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rejection {
    // Boxed: a refusal is rare and the happy path should not carry its size around.
    inner: Box<Details>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Details {
    code: RejectionCode,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
    retryable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    violations: Vec<Violation>,
}

impl Rejection {
    /// A refusal with `code` and a sentence saying what is wrong.
    pub fn new(code: RejectionCode, message: impl Into<String>) -> Self {
        Rejection {
            inner: Box::new(Details {
                code,
                message: message.into(),
                path: None,
                hint: None,
                retryable: code.retryable_by_default(),
                reason: None,
                violations: Vec::new(),
            }),
        }
    }

    /// Points the refusal at one argument (a JSON pointer such as `/record_id`).
    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.inner.path = Some(path.into());
        self
    }

    /// Adds a hint: the closest valid name, the allowed values, what to do instead.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.inner.hint = Some(hint.into());
        self
    }

    /// Overrides whether retrying can help.
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.inner.retryable = retryable;
        self
    }

    /// Adds a finer-grained, stable reason within the code (for `tool_failed`, the tool's own
    /// error code).
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.inner.reason = Some(reason.into());
        self
    }

    pub(crate) fn with_violations(mut self, violations: Vec<Violation>) -> Self {
        self.inner.violations = violations;
        self
    }

    /// The gate that refused.
    pub fn gate(&self) -> Gate {
        self.inner.code.gate()
    }

    /// The stable code.
    pub fn code(&self) -> RejectionCode {
        self.inner.code
    }

    /// A sentence saying what is wrong.
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// JSON pointer to the offending argument, when one argument is at fault.
    pub fn path(&self) -> Option<&str> {
        self.inner.path.as_deref()
    }

    /// What the model can do instead.
    pub fn hint(&self) -> Option<&str> {
        self.inner.hint.as_deref()
    }

    /// Whether a corrected call may succeed.
    pub fn retryable(&self) -> bool {
        self.inner.retryable
    }

    /// The finer-grained reason, where there is one (the tool's own code for `tool_failed`).
    pub fn reason(&self) -> Option<&str> {
        self.inner.reason.as_deref()
    }

    /// Every violated constraint, for `constraint_violation`; empty otherwise.
    pub fn violations(&self) -> &[Violation] {
        &self.inner.violations
    }

    /// The compact JSON text that goes back to the model.
    ///
    /// ```
    /// use portcullis_core::{Rejection, RejectionCode};
    ///
    /// let rejection = Rejection::new(RejectionCode::UnknownArgument, "unknown argument `recordid`")
    ///     .with_path("/recordid")
    ///     .with_hint("did you mean `record_id`?");
    /// assert_eq!(
    ///     rejection.to_model_message(),
    ///     r#"{"error":"unknown_argument","gate":"decode","message":"unknown argument `recordid`","path":"/recordid","hint":"did you mean `record_id`?","retryable":true}"#
    /// );
    /// ```
    pub fn to_model_message(&self) -> String {
        #[derive(Serialize)]
        struct ModelMessage<'a> {
            error: RejectionCode,
            gate: Gate,
            message: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            path: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            hint: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            reason: Option<&'a str>,
            retryable: bool,
            #[serde(skip_serializing_if = "<[Violation]>::is_empty")]
            violations: &'a [Violation],
            #[serde(skip_serializing_if = "is_zero")]
            violations_omitted: usize,
        }
        fn is_zero(count: &usize) -> bool {
            *count == 0
        }
        let shown = self.inner.violations.len().min(MODEL_MESSAGE_VIOLATIONS);
        let path = self.inner.path.as_deref().map(|path| shorten(path, 200));
        let hint = self.inner.hint.as_deref().map(|hint| shorten(hint, 500));
        let message = ModelMessage {
            error: self.inner.code,
            gate: self.gate(),
            message: &shorten(&self.inner.message, 500),
            path: path.as_deref(),
            hint: hint.as_deref(),
            reason: self.inner.reason.as_deref(),
            retryable: self.inner.retryable,
            violations: &self.inner.violations[..shown],
            violations_omitted: self.inner.violations.len() - shown,
        };
        serde_json::to_string(&message)
            .expect("a message of strings, booleans and JSON values always serializes")
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} gate): {}",
            self.inner.code,
            self.gate(),
            self.inner.message
        )?;
        if let Some(path) = &self.inner.path {
            write!(f, " at {path}")?;
        }
        if let Some(hint) = &self.inner.hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Rejection {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_belong_to_their_gates() {
        assert_eq!(RejectionCode::UnknownTool.gate(), Gate::Resolve);
        assert_eq!(RejectionCode::DuplicateKey.gate(), Gate::Decode);
        assert_eq!(RejectionCode::ConstraintViolation.gate(), Gate::Validate);
        assert_eq!(RejectionCode::ToolPanicked.gate(), Gate::Execute);
    }

    #[test]
    fn serialized_code_matches_as_str() {
        for code in [
            RejectionCode::ArgumentsTooLarge,
            RejectionCode::NotAnObject,
            RejectionCode::ToolTimeout,
            RejectionCode::ClaimNotAbandoned,
        ] {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                Value::String(code.as_str().into())
            );
        }
    }

    #[test]
    fn panics_are_not_retryable() {
        assert!(!Rejection::new(RejectionCode::ToolPanicked, "boom").retryable());
        assert!(Rejection::new(RejectionCode::InvalidType, "bad").retryable());
    }

    #[test]
    fn model_messages_stay_small() {
        let long_name = "x".repeat(100_000);
        let violation = Violation {
            path: "/a".into(),
            rule: "range".into(),
            message: "must be at least 1".into(),
            params: Map::new(),
        };
        let rejection = Rejection::new(RejectionCode::ConstraintViolation, long_name.clone())
            .with_path(format!("/{long_name}"))
            .with_violations(vec![violation; 1000]);
        let message: Value = serde_json::from_str(&rejection.to_model_message()).unwrap();
        assert_eq!(message["message"].as_str().unwrap().chars().count(), 501);
        assert_eq!(message["path"].as_str().unwrap().chars().count(), 201);
        assert_eq!(message["violations"].as_array().unwrap().len(), 20);
        assert_eq!(message["violations_omitted"], 980);
        assert_eq!(
            rejection.violations().len(),
            1000,
            "the rejection itself keeps them all"
        );
        assert_eq!(shorten("héllo", 2), "hé…");
        assert_eq!(shorten("héllo", 5), "héllo");
    }

    #[test]
    fn model_message_lists_violations() {
        let rejection = Rejection::new(RejectionCode::ConstraintViolation, "1 constraint violated")
            .with_path("/a")
            .with_violations(vec![Violation {
                path: "/a".into(),
                rule: "range".into(),
                message: "must be at least 1".into(),
                params: Map::from_iter([("min".to_string(), Value::from(1))]),
            }]);
        let parsed: Value = serde_json::from_str(&rejection.to_model_message()).unwrap();
        assert_eq!(parsed["error"], "constraint_violation");
        assert_eq!(parsed["gate"], "validate");
        assert_eq!(parsed["violations"][0]["rule"], "range");
        assert_eq!(parsed["violations"][0]["params"]["min"], 1);
    }
}
