//! The stable codes of refusals: what each means, and which the model can fix.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::gate::Gate;

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
    /// One or more declared constraints are violated; see [`Rejection::violations`](super::Rejection::violations).
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
    pub(super) fn retryable_by_default(self) -> bool {
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

/// Which codes each gate refuses with: the other side of [`RejectionCode::gate`].
impl Gate {
    /// The codes this gate refuses with.
    pub fn codes(self) -> &'static [RejectionCode] {
        use RejectionCode::*;
        match self {
            Gate::Resolve => &[UnknownTool, ToolNotAllowed],
            Gate::Decode => &[
                MalformedJson,
                DuplicateKey,
                ArgumentsTooLarge,
                ArgumentsTooDeep,
                NotAnObject,
                UnknownArgument,
                MissingArgument,
                InvalidType,
                InvalidValue,
                ArgumentsNotReproducible,
            ],
            Gate::Validate => &[ConstraintViolation],
            Gate::Authorize => &[
                RoleDenied,
                EnvironmentMismatch,
                TenantMismatch,
                PolicyDenied,
                IntentMismatch,
                UntrustedValue,
                UnsourcedValue,
                UntrustedTask,
                SourcesUnavailable,
            ],
            Gate::Budget => &[
                BudgetCallsExceeded,
                BudgetCostExceeded,
                StalledLoop,
                RateLimited,
                CircuitOpen,
                TooManyRefusals,
                BudgetUnavailable,
                BudgetStoreFull,
                BudgetShareFull,
                TaskExpired,
            ],
            Gate::Repeat => &[
                CallInProgress,
                CallIdReused,
                OutcomeUnknown,
                ClaimsUnavailable,
                ClaimStoreFull,
                ClaimShareFull,
            ],
            Gate::Approve => &[
                ApprovalRejected,
                ApprovalExpired,
                TicketNotPending,
                TicketDecided,
                TooManyPending,
                ReviewerNotAllowed,
                SelfApproval,
                DecisionUnsigned,
                DecisionSignatureInvalid,
                ContractChanged,
                ApprovalsUnavailable,
                SealKeyMissing,
            ],
            Gate::Audit => &[AuditUnavailable],
            Gate::Execute => &[
                ToolFailed,
                OutputUnrecorded,
                SourcesShareFull,
                ToolTimeout,
                ToolPanicked,
                DryRun,
            ],
        }
    }
}
