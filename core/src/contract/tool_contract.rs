//! The contract itself: what a tool declares, as the gates and the exports read it.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::provenance::Provenance;

/// How much harm a wrong call can do. Ordered: `Low < Medium < High < Critical`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Harmless if wrong (reads, drafts).
    #[default]
    Low,
    /// A wrong call is a nuisance that is easy to undo.
    Medium,
    /// A wrong call does real damage; the tool must declare a rollback or why it has none.
    High,
    /// A wrong call does damage that matters to the business (money, production data).
    Critical,
}

impl Risk {
    /// The risk as written in the attribute, e.g. `"high"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
            Risk::Critical => "critical",
        }
    }
}

impl fmt::Display for Risk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a call needs a human's approval before it runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "snake_case", tag = "when", content = "predicate")]
pub enum Approval {
    /// The registry's default for the tool's risk decides.
    #[default]
    Default,
    /// Never: the contract opts out.
    Never,
    /// Always.
    Required,
    /// When the named predicate over context and arguments says so.
    Conditional(String),
}

/// Everything a tool declares, as data: what the model is shown, what the gates enforce and
/// what a reviewer reads.
///
/// The `#[tool]` attribute builds it; a hand-written [`Tool`](crate::Tool) builds it with
/// [`ToolContract::builder`].
///
/// ```
/// use portcullis_core::{Risk, ToolContract};
/// use serde_json::json;
///
/// let schema = json!({"type": "object", "additionalProperties": false});
/// let contract = ToolContract::builder("refund", "Refund a payment.", schema)
///     .risk(Risk::High)
///     .roles(["billing_admin"])
///     .irreversible("the payment provider cannot claw a refund back")
///     .build();
/// assert_eq!(contract.risk(), Risk::High);
/// assert!(contract.check().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolContract {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) risk: Risk,
    pub(super) roles: Vec<String>,
    pub(super) environments: Vec<String>,
    pub(super) tenant_argument: Option<String>,
    pub(super) environment_argument: Option<String>,
    pub(super) policy: Option<String>,
    pub(super) snapshot: Option<String>,
    pub(super) approval: Approval,
    pub(super) approvers: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) caller_confirms: bool,
    pub(super) rollback: Option<String>,
    pub(super) irreversible: Option<String>,
    pub(super) idempotent: bool,
    pub(super) open_world: bool,
    pub(super) read_only: bool,
    pub(super) cost: u64,
    pub(super) max_calls_per_task: Option<u64>,
    pub(super) audit_required: Option<bool>,
    #[serde(serialize_with = "serialize_millis")]
    pub(super) timeout: Option<Duration>,
    pub(super) sensitive: Vec<String>,
    #[serde(skip_serializing_if = "Provenance::is_empty")]
    pub(super) provenance: Provenance,
    /// Arguments whose type and own checks enforce all their schema shows; not for review.
    #[serde(skip)]
    pub(super) checked_in_code: Vec<String>,
    #[serde(rename = "one_of")]
    pub(super) dynamic_values: Vec<DynamicValues>,
    pub(super) input_schema: Value,
    pub(super) output_schema: Option<Value>,
}

fn serialize_millis<S: serde::Serializer>(
    timeout: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    timeout
        .map(|timeout| timeout.as_millis())
        .serialize(serializer)
}

impl ToolContract {
    /// The name the model calls the tool by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the tool does, for the model.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// How much harm a wrong call can do.
    pub fn risk(&self) -> Risk {
        self.risk
    }

    /// The roles that may call the tool (any one of them grants); empty means every caller.
    pub fn roles(&self) -> &[String] {
        &self.roles
    }

    /// The environments the tool may run in; empty means every environment.
    pub fn environments(&self) -> &[String] {
        &self.environments
    }

    /// The argument (its name as the model sees it) that must equal the caller's tenant.
    pub fn tenant_argument(&self) -> Option<&str> {
        self.tenant_argument.as_deref()
    }

    /// The argument (its name as the model sees it) that must equal the environment the call
    /// runs in.
    pub fn environment_argument(&self) -> Option<&str> {
        self.environment_argument.as_deref()
    }

    /// The name of the tool's own policy, if it declares one.
    pub fn policy(&self) -> Option<&str> {
        self.policy.as_deref()
    }

    /// The name of the hook that snapshots the state a call changes, if the tool declares one.
    pub fn snapshot(&self) -> Option<&str> {
        self.snapshot.as_deref()
    }

    /// Whether a caller with `ctx`'s roles may use the tool: the tool names no role, or the
    /// caller holds one of them. A tool the caller may not use is not exported to it.
    pub fn grants(&self, ctx: &crate::context::CallContext) -> bool {
        self.roles.is_empty() || self.roles.iter().any(|role| ctx.has_role(role))
    }

    /// When a call needs a human's approval.
    pub fn approval(&self) -> &Approval {
        &self.approval
    }

    /// The roles a reviewer must hold one of to decide this tool's calls; empty means the
    /// registry's default ([`RegistryBuilder::approvers`](crate::RegistryBuilder::approvers)).
    pub fn approvers(&self) -> &[String] {
        &self.approvers
    }

    /// Whether the caller may confirm its own calls of this tool: such a call waits for a
    /// decision (unless [`approval`](Self::approval) says it need not), and the actor who
    /// asked may approve it, as the person at the client who saw what it does. An operator
    /// may decide it too, under [`approvers`](Self::approvers). A critical tool never has it:
    /// its calls wait for an operator.
    pub fn caller_confirms(&self) -> bool {
        self.caller_confirms
    }

    /// Whether a call must be recorded as about to run before it runs (write-ahead), so that no
    /// effect happens without its audit record: as the contract says, and otherwise for every
    /// tool that is not read-only and of medium risk or above.
    pub fn audit_required(&self) -> bool {
        self.audit_required
            .unwrap_or(!self.read_only && self.risk >= Risk::Medium)
    }

    /// Whether a compensating action is declared.
    pub fn has_rollback(&self) -> bool {
        self.rollback.is_some()
    }

    /// The name of the compensating function, if one is declared.
    pub fn rollback(&self) -> Option<&str> {
        self.rollback.as_deref()
    }

    /// Why the tool's effect cannot be undone, if it cannot.
    pub fn irreversible(&self) -> Option<&str> {
        self.irreversible.as_deref()
    }

    /// Whether repeating a call has the same effect as making it once.
    pub fn idempotent(&self) -> bool {
        self.idempotent
    }

    /// Whether the tool reaches beyond a closed set of things the registry's owner controls
    /// (the web, third-party services, other people's inboxes). Declared with
    /// `open_world = false` for tools that only touch their own system; true by default.
    pub fn open_world(&self) -> bool {
        self.open_world
    }

    /// Whether the tool only reads.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The cost of one call, in the unit the application's budgets use.
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// The most calls of this tool one task may make.
    pub fn max_calls_per_task(&self) -> Option<u64> {
        self.max_calls_per_task
    }

    /// How long one call may run.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The sensitive values, redacted in audit records, tickets and `Debug`, and never repeated
    /// in a refusal: JSON pointers into the arguments, `*` standing for every element of a list
    /// or value of a map (`/admin_note`, `/cards/*/number`).
    pub fn sensitive(&self) -> &[String] {
        &self.sensitive
    }

    /// Where the arguments' values must come from, how far the output can be trusted, and
    /// what happens to a call an untrusted source touched.
    pub fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    /// The arguments whose Rust type and `#[validate]` rules already enforce everything their
    /// schema shows (see [`ContractBuilder::checked_in_code`](super::ContractBuilder::checked_in_code)).
    pub fn checked_in_code(&self) -> &[String] {
        &self.checked_in_code
    }

    /// The JSON Schema (2020-12) of the arguments, without the current values of dynamic
    /// arguments: what the model is shown is [`input_schema_for`](Self::input_schema_for).
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// The JSON Schema of the output, where the output type has one.
    pub fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }
}

/// The function that gives an argument's allowed values for a call's context: see
/// [`ContractBuilder::one_of`](crate::ContractBuilder::one_of).
pub type AllowedValuesFn = fn(&crate::context::CallContext) -> Vec<Value>;

/// An argument whose allowed values come from a function, asked again at every export and
/// every call.
#[derive(Clone)]
pub(crate) struct DynamicValues {
    /// The argument's name as the model sees it.
    pub(crate) argument: String,
    pub(crate) values: AllowedValuesFn,
}

impl fmt::Debug for DynamicValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicValues")
            .field("argument", &self.argument)
            .finish_non_exhaustive()
    }
}

impl PartialEq for DynamicValues {
    fn eq(&self, other: &Self) -> bool {
        self.argument == other.argument && std::ptr::fn_addr_eq(self.values, other.values)
    }
}

/// A reviewer reads which arguments have dynamic values; the function itself has no data form.
impl Serialize for DynamicValues {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.argument)
    }
}

/// Where the values of a dynamic argument apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValuesApply {
    /// To the argument itself.
    Whole,
    /// To each element of a list argument; `nullable` says whether the list itself may be null.
    EachElement { nullable: bool },
}

/// What one dynamic argument may hold in one context, as its schema states it.
#[derive(Debug)]
pub(crate) struct AllowedValues<'a> {
    /// The argument's name as the model sees it.
    pub(crate) argument: &'a str,
    pub(crate) applies: ValuesApply,
    /// The function's values, with `null` added where the schema accepts null there.
    pub(crate) values: Vec<Value>,
}
