//! The core of portcullis: tool contracts, the registry, and the gates every model-produced
//! call passes before it can touch the world.
//!
//! Most users depend on the `portcullis` facade crate and its `#[tool]` attribute; this crate
//! holds the runtime those generated tools plug into.
//!
//! A call goes down one road, written once in `pipeline/mod.rs`: resolve (the tool, the caller's
//! roles and environments), decode (the model's text, read once, into the typed arguments),
//! validate (every constraint of the schema the model was shown, the arguments' own checks,
//! dynamic values), authorize (tenant and environment arguments, policies, intent checks),
//! repeat (one run per call), budget, approve, audit (write-ahead for effects), execute, and an
//! audit record of whatever was decided. Every gate after
//! decode judges what the tool receives: the typed arguments, or the canonical arguments,
//! their JSON written by their own `Serialize` ([`PolicyRequest::arguments`]).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod audit;
mod call;
mod context;
mod contract;
mod digest;
pub mod encoding;
pub mod export;
mod future;
mod gate;
pub mod json;
mod lifetime;
mod locked_parts;
pub mod manifest;
mod outcome;
mod pipeline;
mod pointer;
mod policy;
mod registry;
mod rejection;
mod rollback;
mod schema;
mod share;
mod suggest;
mod time;
mod tool;
mod transaction;
pub mod wire;

pub use call::{Arguments, ToolCall};
pub use context::{CallContext, ToolChoice};
pub use contract::{
    AfterUntrusted, AllowedValuesFn, Approval, ContractBuilder, ContractError, Matching,
    OnUntrusted, Origin, OutputTrust, Provenance, REDACTED, Risk, SourceRule, Sources,
    ToolContract, ValueSource, name_problem,
};
pub use future::BoxFuture;
pub use gate::DecodeLimits;
pub use gate::approve::decision::{ApprovalDecision, Progress, Recorded};
pub use gate::approve::key_error::KeyError;
pub use gate::approve::passkey::{PasskeyAssertion, PasskeyCredential, PasskeyPublicKey};
pub use gate::approve::reviewer::Reviewer;
pub use gate::approve::signature::{DecisionKey, DecisionPublicKey, Keyring};
pub use gate::approve::signed::{DecisionSignature, SignedDecision};
pub use gate::approve::store::{
    ApprovalStore, Approver, AutoApprove, AutoReject, InMemoryApprovalStore, Lease, PendingCall,
    PendingLimits, record_decision,
};
pub use gate::authorize::provenance::store::{
    InMemoryProvenanceStore, ProvenanceStore, SOURCE_TEXT_LIMIT, SourceRecord, TASK_TEXT_LIMIT,
    output_unrecorded, sources_share_full, sources_unavailable,
};
pub use gate::budget::judge::{
    Admitted, Usage, budget_share_full, budget_store_full, judge_charge, task_expired,
};
pub use gate::budget::limits::{BudgetLimits, CircuitBreaker, RateLimit, RefusalLimit};
pub use gate::budget::memory::{BudgetCapacity, InMemoryBudgetStore};
pub use gate::budget::store::{BudgetStore, Charge};
pub use gate::repeat::{
    CallKey, Claim, ClaimState, InMemoryRepeatStore, OpenClaim, RepeatStore, claim_not_found,
    existing_claim, may_settle,
};
pub use gate::validate::ArgumentsCheck;
pub use lifetime::TaskLifetime;
pub use outcome::{Outcome, Ticket};
pub use policy::{
    BudgetUsage, Decision, Policy, PolicyError, PolicyRequest, ReadOnlyRequests, Ruling,
};
pub use registry::{
    BuildError, DEFAULT_CLAIM_LEASE, DEFAULT_REFUSAL_LIMIT, Registry, RegistryBuilder,
};
pub use rejection::{Gate, Rejection, RejectionCode, Violation};
pub use rollback::store::{Abandoned, StoredStep, TransactionStore};
pub use rollback::{Compensation, CompensationResult};
pub use schema::schema_for;
pub use tool::{IntoToolResult, Invocation, Tool, ToolError};
pub use transaction::Transaction;

#[doc(hidden)]
pub mod __private;
