//! The registry: the set of tools an agent may call, and its builder, which checks them. How a
//! call passes through the gates is the pipeline's business (`pipeline/`).

mod audit;
mod export;

use std::borrow::Cow;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::audit::{AuditKey, AuditLog, AuditSink};
use crate::context::CallContext;
use crate::contract::{Approval, ContractError, ToolContract};
use crate::export::{Profile, ProfileError, check_all};
use crate::gate::DecodeLimits;
use crate::gate::approve::signature::Keyring;
use crate::gate::approve::store::PendingLimits;
use crate::gate::approve::store::{ApprovalStore, Approver, InMemoryApprovalStore};
use crate::gate::approve::{Approvals, Trust};
use crate::gate::authorize::Rules;
use crate::gate::authorize::provenance::Provenance;
use crate::gate::authorize::provenance::store::{InMemoryProvenanceStore, ProvenanceStore};
use crate::gate::bound::ErasedTool;
use crate::gate::budget::Budget;
use crate::gate::budget::limits::{BudgetLimits, RefusalLimit};
use crate::gate::budget::memory::InMemoryBudgetStore;
use crate::gate::budget::store::BudgetStore;
use crate::gate::repeat::{InMemoryRepeatStore, RepeatStore};
use crate::outcome::Ticket;
use crate::policy::Policy;
use crate::rejection::{Gate, Rejection};
use crate::rollback::store::{DurableTransactions, TransactionStore};
use crate::schema::check::SchemaCheck;
use crate::tool::Tool;

/// Refusals a task may collect within a window before it is stopped, unless the registry says
/// otherwise: 50 every 10 minutes.
pub const DEFAULT_REFUSAL_LIMIT: RefusalLimit = RefusalLimit {
    refusals: 50,
    per: Duration::from_secs(600),
};

/// How long a claimed call may run before a repeat finds its outcome unknown, unless the
/// registry says otherwise ([`RegistryBuilder::claim_lease`]): 10 minutes.
pub const DEFAULT_CLAIM_LEASE: Duration = Duration::from_secs(10 * 60);
const DEFAULT_CLAIM_LEASE_MS: u64 = DEFAULT_CLAIM_LEASE.as_secs() * 1000;

/// The tools an agent may call, and the one way to call them: [`Registry::dispatch`].
///
/// Cheap to clone; clones share the tools.
///
/// ```
/// use portcullis_core::Registry;
///
/// let registry = Registry::builder().build().unwrap();
/// assert!(registry.contracts().next().is_none());
/// ```
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

struct Inner {
    /// Sorted by name: looked up by binary search, exported in a stable order.
    tools: Vec<(String, Registered)>,
    settings: Settings,
}

/// A tool as the registry keeps it: the tool, and the check of its arguments' schema,
/// compiled once.
pub(crate) struct Registered {
    pub(crate) tool: Box<dyn ErasedTool>,
    pub(crate) check: SchemaCheck,
}

/// What the gates after resolve need from the registry.
pub(crate) struct Settings {
    pub(crate) limits: DecodeLimits,
    pub(crate) rules: Rules,
    pub(crate) budget: Budget,
    pub(crate) approvals: Approvals,
    pub(crate) audit: Option<AuditLog>,
    /// The key of the audit chain, set before or after the sink.
    audit_key: Option<AuditKey>,
    pub(crate) repeats: Box<dyn RepeatStore>,
    /// The tasks' sources, for the provenance gate.
    pub(crate) provenance: Provenance,
    /// How long a claimed call may run before a repeat finds its outcome unknown.
    pub(crate) claim_lease_ms: u64,
    /// Refusals a task may collect within a window before it is stopped; `None`: no limit.
    pub(crate) refusal_limit: Option<RefusalLimit>,
    /// Whether a caller learns that a tool it may not use exists (`role_denied`).
    pub(crate) reveal_denied_tools: bool,
    /// Whether the execute gate answers `dry_run` instead of running the tool.
    pub(crate) dry_run: bool,
    /// Where transactions keep their steps, if anywhere but their worker's memory.
    pub(crate) transactions: Option<DurableTransactions>,
    /// The provider profiles the registry was built for, each checked against every tool.
    pub(crate) profiles: Vec<Profile>,
    /// The gates a mutation test switched off.
    #[cfg(feature = "mutation")]
    switched_off: Vec<Gate>,
}

impl Settings {
    /// Whether `gate` checks calls: always, unless a mutation test switched it off.
    pub(crate) fn checks(&self, gate: Gate) -> bool {
        #[cfg(feature = "mutation")]
        return !self.switched_off.contains(&gate);
        #[cfg(not(feature = "mutation"))]
        {
            let _ = gate;
            true
        }
    }
}

impl Registry {
    /// Starts an empty registry.
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder {
            tools: Vec::new(),
            trust_declared: false,
            store_replaced: false,
            settings: Settings {
                limits: DecodeLimits::default(),
                rules: Rules {
                    policies: Vec::new(),
                    intent_checks: Vec::new(),
                },
                budget: Budget {
                    limits: BudgetLimits::default(),
                    store: Box::new(InMemoryBudgetStore::default()),
                },
                approvals: Approvals {
                    store: Box::new(InMemoryApprovalStore::default()),
                    approver: None,
                    lifetime: Duration::from_secs(3600),
                    high_risk_by_default: false,
                    approvers: Vec::new(),
                    self_approval: false,
                    limits: PendingLimits::default(),
                    trust: Trust::Unsigned,
                    lease: Duration::from_secs(60),
                },
                audit: None,
                audit_key: None,
                repeats: Box::new(InMemoryRepeatStore::default()),
                provenance: Provenance {
                    store: Arc::new(InMemoryProvenanceStore::default()),
                    cache: Default::default(),
                    recording: false,
                },
                claim_lease_ms: DEFAULT_CLAIM_LEASE_MS,
                refusal_limit: Some(DEFAULT_REFUSAL_LIMIT),
                reveal_denied_tools: false,
                dry_run: false,
                transactions: None,
                profiles: Vec::new(),
                #[cfg(feature = "mutation")]
                switched_off: Vec::new(),
            },
        }
    }

    pub(crate) fn tool(&self, name: &str) -> Option<&dyn ErasedTool> {
        Some(&*self.registered(name)?.tool)
    }

    /// The tool named `name`, with the check of its arguments' schema.
    pub(crate) fn registered(&self, name: &str) -> Option<&Registered> {
        let tools = &self.inner.tools;
        let index = tools
            .binary_search_by(|(candidate, _)| candidate.as_str().cmp(name))
            .ok()?;
        Some(&tools[index].1)
    }

    /// Tells the budget and provenance stores that task `task_id` ended and that its id is
    /// never used again, so that a bounded store forgets what it counted for it and what it
    /// read ([`BudgetStore::forget_task`], [`ProvenanceStore::forget_task`]), and the task's
    /// place in its caller's share of an in-memory store is given back. The MCP server
    /// does so as a session closes, since its task id was made for it. Never for a task that
    /// may go on: its budget and its refusals would start afresh, and the untrusted content it
    /// read would be forgotten.
    pub async fn end_task(&self, task_id: &str) {
        let settings = &self.inner.settings;
        settings.budget.store.forget_task(task_id).await;
        settings.provenance.store.forget_task(task_id).await;
        settings.provenance.cache.forget(task_id);
    }

    /// Records a later message of the user in the task of `ctx`, as a source its calls' values
    /// may come from (the request it began with is one already:
    /// [`CallContext::with_request`]). Pass every message the user writes, as they wrote it:
    /// a value the model was refused as `untrusted_value` passes once the user confirms it in
    /// one. The same words again in the task (a host relaying the turn with each call, a
    /// retry) are kept once. Refused with `sources_unavailable` when it could not be
    /// recorded; in a new task, an in-memory store refuses it with `sources_share_full` when
    /// the caller holds its whole share, or `output_unrecorded` when the store is full.
    pub async fn add_user_message(&self, ctx: &CallContext, text: &str) -> Result<(), Rejection> {
        self.inner
            .settings
            .provenance
            .add_user_message(ctx, text)
            .await
    }

    /// The calls waiting for a human, oldest first; `approvals_unavailable` when the store
    /// cannot be read.
    pub async fn pending_tickets(&self) -> Result<Vec<Ticket>, Rejection> {
        self.inner.settings.approvals.store.pending().await
    }

    pub(crate) fn tools(&self) -> &[(String, Registered)] {
        &self.inner.tools
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The contract of the tool named `name`.
    pub fn contract(&self, name: &str) -> Option<&ToolContract> {
        self.tool(name).map(|tool| tool.contract())
    }

    /// Every tool's contract, sorted by name.
    pub fn contracts(&self) -> impl Iterator<Item = &ToolContract> {
        self.inner
            .tools
            .iter()
            .map(|(_, entry)| entry.tool.contract())
    }

    /// Whether a caller learns that a tool it may not use exists
    /// ([`reveal_denied_tools`](RegistryBuilder::reveal_denied_tools)): such a call is then
    /// `role_denied` rather than `unknown_tool`.
    pub fn reveals_denied_tools(&self) -> bool {
        self.inner.settings.reveal_denied_tools
    }

    /// The refusals a task may collect before it is stopped
    /// ([`refusal_limit`](RegistryBuilder::refusal_limit)); `None`: no limit.
    pub fn refusal_limit(&self) -> Option<RefusalLimit> {
        self.inner.settings.refusal_limit
    }

    /// Whether the registry was built for `profile`.
    pub fn serves(&self, profile: Profile) -> bool {
        self.inner.settings.profiles.contains(&profile)
    }

    /// Whether every call of a tool with `contract` waits for a human's decision, whatever its
    /// arguments: a critical tool, one whose contract requires approval, or one the registry's
    /// defaults hold for a human (a tool the caller confirms, high risk where so configured).
    pub fn always_waits(&self, contract: &ToolContract) -> bool {
        let required = matches!(contract.approval(), Approval::Required);
        self.inner.settings.approvals.required(contract, required)
    }

    /// The limits the decode gate applies.
    pub fn limits(&self) -> DecodeLimits {
        self.inner.settings.limits
    }

    /// The tool list as plain JSON Schema, sorted by name: one `{name, description,
    /// input_schema}` object per tool that `ctx`'s roles may use (least privilege: a tool the
    /// caller may not use is not shown to the model). Provider-specific formats build on the
    /// same contracts.
    pub fn export_json_schema(&self, ctx: &CallContext) -> Value {
        Value::Array(
            self.shown_to(ctx)
                .map(|(contract, schema)| {
                    json!({
                        "name": contract.name(),
                        "description": contract.description(),
                        "input_schema": schema,
                    })
                })
                .collect(),
        )
    }

    /// The tools an export shows `ctx`, with their argument schemas as `ctx` sees them: those
    /// its roles may use, less any with a required dynamic argument that has no allowed value
    /// now (no call could pass: `invalid_value`) or whose dynamic values could not be listed
    /// because a `#[one_of]` function panicked (`tool_panicked`). Such a tool is left out
    /// rather than failing the whole list, so the other tools still serve. A panic's message
    /// goes to the process's panic hook.
    pub(crate) fn shown_to<'a>(
        &'a self,
        ctx: &'a CallContext,
    ) -> impl Iterator<Item = (&'a ToolContract, Cow<'a, Value>)> {
        self.contracts()
            .filter(|contract| contract.grants(ctx))
            .filter_map(|contract| {
                match catch_unwind(AssertUnwindSafe(|| contract.input_schema_for(ctx))) {
                    Ok(Some(schema)) => Some((contract, schema)),
                    Ok(None) => {
                        tracing::debug!(
                            tool = contract.name(),
                            "a required dynamic argument has no allowed value; the tool is left out of the export"
                        );
                        None
                    }
                    Err(_) => {
                        tracing::error!(
                            tool = contract.name(),
                            "a `#[one_of]` function panicked; the tool is left out of the export"
                        );
                        None
                    }
                }
            })
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self
            .inner
            .tools
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        f.debug_struct("Registry")
            .field("tools", &names)
            .field("limits", &self.inner.settings.limits)
            .field("budget", &self.inner.settings.budget.limits)
            .finish()
    }
}

/// Collects tools and settings; [`RegistryBuilder::build`] checks them.
#[must_use]
pub struct RegistryBuilder {
    tools: Vec<Box<dyn ErasedTool>>,
    settings: Settings,
    /// Whether [`keyring`](Self::keyring) or
    /// [`accept_unsigned_decisions`](Self::accept_unsigned_decisions) said which decisions
    /// count, and whether the approval store was replaced: a store outside the process is
    /// not trusted by default.
    trust_declared: bool,
    store_replaced: bool,
}

impl RegistryBuilder {
    /// Adds a tool, e.g. the `DeleteRecord` type that `#[tool] fn delete_record` generates.
    pub fn tool<T: Tool>(mut self, tool: T) -> Self {
        self.tools.push(Box::new(tool));
        self
    }

    /// Adds a policy that every call must pass, after the tool's own policy; policies are
    /// consulted in the order they are added, and the first denial refuses the call with
    /// `policy_denied`.
    pub fn policy(mut self, policy: impl Policy) -> Self {
        self.settings.rules.policies.push(Box::new(policy));
        self
    }

    /// Adds an intent check: a policy about the user's original request
    /// ([`CallContext::request`]), consulted after the policies. Its denials refuse the call
    /// with `intent_mismatch`. [`ReadOnlyRequests`](crate::ReadOnlyRequests) is one.
    pub fn intent_check(mut self, check: impl Policy) -> Self {
        self.settings.rules.intent_checks.push(Box::new(check));
        self
    }

    /// Sets the budget limits (all off by default; a contract's `max_calls_per_task` counts
    /// even so).
    pub fn budget(mut self, limits: BudgetLimits) -> Self {
        self.settings.budget.limits = limits;
        self
    }

    /// Keeps the tasks' sources in `store` instead of this process's memory (an
    /// [`InMemoryProvenanceStore`]): give every worker serving the same tasks the same durable
    /// store (the stores crate has SQLite and PostgreSQL ones), so that each judges a call
    /// against everything its task read.
    ///
    /// A registry given a store records every output in it, whether or not its own tools
    /// declare provenance: a worker of another service may judge the same task's calls.
    pub fn provenance_store(mut self, store: impl ProvenanceStore) -> Self {
        self.settings.provenance.store = Arc::new(store);
        self.settings.provenance.recording = true;
        self
    }

    /// Replaces the store that counts budgets (default: an [`InMemoryBudgetStore`]).
    pub fn budget_store(mut self, store: impl BudgetStore) -> Self {
        self.settings.budget.store = Box::new(store);
        self
    }

    /// Makes every call of a high-risk tool whose contract says nothing of approval wait for
    /// one (critical tools always do).
    pub fn approval_for_high_risk(mut self, required: bool) -> Self {
        self.settings.approvals.high_risk_by_default = required;
        self
    }

    /// Asks `approver` in line, while the dispatch waits, instead of returning
    /// [`Outcome::Pending`](crate::Outcome::Pending).
    pub fn approver(mut self, approver: impl Approver) -> Self {
        self.settings.approvals.approver = Some(Box::new(approver));
        self
    }

    /// Replaces the store of pending calls (default: an [`InMemoryApprovalStore`]). Say also
    /// which decisions count ([`keyring`](Self::keyring), or
    /// [`accept_unsigned_decisions`](Self::accept_unsigned_decisions)): a registry with another
    /// store and neither is not built.
    pub fn approval_store(mut self, store: impl ApprovalStore) -> Self {
        self.settings.approvals.store = Box::new(store);
        self.store_replaced = true;
        self
    }

    /// Counts only decisions signed by a key that `keyring` allows for the reviewer they name,
    /// who then decides with the roles and tenant the keyring gives: a decision written into
    /// the store by anyone else (a forged row, a signature over another ticket or another
    /// call, a key the keyring does not hold) runs nothing, and is refused with
    /// `decision_unsigned` or `decision_signature_invalid`. See
    /// [`DecisionKey`](crate::DecisionKey).
    pub fn keyring(mut self, keyring: Keyring) -> Self {
        self.settings.approvals.trust = Trust::Keyring(keyring);
        self.trust_declared = true;
        self
    }

    /// Counts unsigned decisions too, taking the reviewer a decision names, and its roles, at
    /// the store's word: for tests and local use, where whoever can write the store may
    /// decide any call. The audit records each decision as `unsigned`. This is the default
    /// with the in-memory approval store.
    pub fn accept_unsigned_decisions(mut self) -> Self {
        self.settings.approvals.trust = Trust::Unsigned;
        self.trust_declared = true;
        self
    }

    /// Sets how long a worker holds a decided call it took to run (default one minute): the
    /// call stays in the store until it runs, and if the worker stops first, another worker
    /// runs it once the lease ran out. Choose it longer than the gates take before the call
    /// runs (its policies, its write-ahead audit record).
    pub fn approval_lease(mut self, lease: Duration) -> Self {
        self.settings.approvals.lease = lease;
        self
    }

    /// Sets how long a ticket may wait for a decision (default one hour).
    pub fn approval_lifetime(mut self, lifetime: Duration) -> Self {
        self.settings.approvals.lifetime = lifetime;
        self
    }

    /// Sets how many decided calls of tools that are not idempotent the in-memory repeat
    /// store remembers at least ([`InMemoryRepeatStore::with_capacity`]), so that a repeated
    /// call id returns the first outcome instead of running the tool again (default 10,000).
    /// Calls running or waiting for approval are remembered while open, up to
    /// [`InMemoryRepeatStore::OPEN_CLAIMS`] at once (one more is refused with
    /// `claim_store_full`); with 0, a call id may run again once its call is decided.
    pub fn remembered_calls(mut self, capacity: usize) -> Self {
        self.settings.repeats = Box::new(InMemoryRepeatStore::with_capacity(capacity));
        self
    }

    /// Replaces the store that claims calls (default: an [`InMemoryRepeatStore`]); a store
    /// shared by several workers makes a call run once across all of them.
    pub fn repeat_store(mut self, store: impl RepeatStore) -> Self {
        self.settings.repeats = Box::new(store);
        self
    }

    /// How long a claimed call may run (default 10 minutes; longer than any tool of the
    /// registry runs). Until then, a repeat of the call is told `call_in_progress`; after, its
    /// worker is taken to have stopped in the middle, and the repeat is refused with
    /// `outcome_unknown`: the call may have run, so it never runs again, and the model stops
    /// waiting for it.
    pub fn claim_lease(mut self, lease: Duration) -> Self {
        self.settings.claim_lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Records every decision, refusals included, as a chained
    /// [`AuditRecord`](crate::audit::AuditRecord) in `sink`. The sink is written while the
    /// dispatch waits, so that the record exists before the outcome is returned; a call whose
    /// contract is [`audit_required`](ToolContract::audit_required) runs only once its
    /// `about_to_run` record is stored.
    pub fn audit(mut self, sink: impl AuditSink) -> Self {
        let mut log = AuditLog::new(sink);
        if let Some(key) = self.settings.audit_key.clone() {
            log.set_key(key);
        }
        self.settings.audit = Some(log);
        self
    }

    /// Keys the audit chain with the operator's secret (HMAC-SHA-256), so that a writer
    /// without it cannot rewrite the log unnoticed. Without a key, the chain is plain SHA-256.
    pub fn audit_key(mut self, key: AuditKey) -> Self {
        if let Some(log) = &mut self.settings.audit {
            log.set_key(key.clone());
        }
        self.settings.audit_key = Some(key);
        self
    }

    /// Sets the roles of which a reviewer must hold one to decide the calls of tools whose
    /// contract names no `approver` (default: none, so any reviewer but the actor).
    pub fn approvers<I, S>(mut self, roles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.settings.approvals.approvers = roles.into_iter().map(Into::into).collect();
        self
    }

    /// Lets an actor decide its own calls (default: never).
    pub fn allow_self_approval(mut self, allowed: bool) -> Self {
        self.settings.approvals.self_approval = allowed;
        self
    }

    /// Sets how many calls may wait for approval at once, per task and per actor (default
    /// 10 and 100); one more is refused with `too_many_pending`.
    pub fn pending_limits(mut self, limits: PendingLimits) -> Self {
        self.settings.approvals.limits = limits;
        self
    }

    /// Sets how many refusals a task may collect within a window before its calls are refused
    /// with `too_many_refusals` (default [`DEFAULT_REFUSAL_LIMIT`], 50 every 10 minutes;
    /// `None` for no limit), so that a model cannot retry refused calls forever. The window
    /// slides: a task stopped by its refusals may call again once the oldest of them is older
    /// than the window, so a long session is not stopped for good by old refusals, while a
    /// model that keeps retrying is held to `refusals` refused calls every `per`. Use
    /// [`RefusalLimit::whole_task`] to stop a task for good. Refusals of the tool's own failures
    /// do not count (the circuit breaker handles those), nor do the store's own
    /// (`budget_unavailable`, `budget_store_full`, ...) or `too_many_refusals` itself.
    ///
    /// ```
    /// use std::time::Duration;
    /// use portcullis_core::{RefusalLimit, Registry};
    ///
    /// let registry = Registry::builder()
    ///     .refusal_limit(Some(RefusalLimit { refusals: 20, per: Duration::from_secs(300) }))
    ///     .build()
    ///     .unwrap();
    /// # drop(registry);
    /// ```
    pub fn refusal_limit(mut self, limit: Option<RefusalLimit>) -> Self {
        self.settings.refusal_limit = limit;
        self
    }

    /// Keeps every transaction's completed steps in `store` as they complete, so that
    /// [`Registry::recover`] can compensate the transactions of a worker that crashed. A worker
    /// holds its transaction for `lease` after each step; a transaction idle for longer counts
    /// as abandoned, so choose a lease longer than a transaction's longest pause.
    pub fn transaction_store(mut self, store: impl TransactionStore, lease: Duration) -> Self {
        self.settings.transactions = Some(DurableTransactions {
            store: Box::new(store),
            lease,
        });
        self
    }

    /// Refuses a tool the caller's roles may not use with `role_denied`, instead of exactly as
    /// a tool that does not exist (the default, so that a model cannot probe which tools
    /// exist).
    pub fn reveal_denied_tools(mut self, reveal: bool) -> Self {
        self.settings.reveal_denied_tools = reveal;
        self
    }

    /// Detaches the registry from everything outside the process, for a test or a red-team
    /// run of an application's own builder: every store is a fresh one in memory, as a new
    /// builder has them (claims, budgets, pending calls, sources, transactions), no approver is
    /// asked in line (a call that needs one waits), and no audit sink is set (set one after,
    /// with [`audit`](Self::audit)). Tools, policies, intent checks, limits, the keyring and
    /// every other rule stay as they are.
    pub fn isolated(mut self) -> Self {
        let settings = &mut self.settings;
        settings.repeats = Box::new(InMemoryRepeatStore::default());
        settings.budget.store = Box::new(InMemoryBudgetStore::default());
        settings.approvals.store = Box::new(InMemoryApprovalStore::default());
        settings.approvals.approver = None;
        settings.provenance.store = Arc::new(InMemoryProvenanceStore::default());
        settings.provenance.recording = false;
        settings.transactions = None;
        settings.audit = None;
        self.store_replaced = false;
        self
    }

    /// Runs no tool: a call that passes every gate is refused by the execute gate with
    /// `dry_run`, and nothing is recorded as about to run. Every other gate works as it does
    /// in production, and such a call counts as one that ran: its claim keeps its outcome (a
    /// repeat gets it, a reused id with other arguments is `call_id_reused`) and its budget
    /// stays spent. For a red-team run, or to watch what an agent would do (shadow mode).
    /// Code the gates run is still run: policies, intent checks, `#[one_of]` functions,
    /// custom deserializers and validators; snapshot hooks are not.
    pub fn dry_run(mut self) -> Self {
        self.settings.dry_run = true;
        self
    }

    /// Switches `gate`'s check off, for a mutation test of a red-team suite: a suite that
    /// still passes over such a registry has no case for that gate. Resolve then lets a caller
    /// use tools its roles do not grant; decode lifts its size and depth limits; validate,
    /// authorize, repeat, budget, approve and audit do not run. Only with the feature
    /// `mutation`, which only the red-team kit's dev-dependency enables: an application that
    /// depends on portcullis never carries it.
    ///
    /// # Panics
    /// For [`Gate::Execute`]: a tool's body is not a check.
    #[cfg(feature = "mutation")]
    pub fn switch_off(mut self, gate: Gate) -> Self {
        assert_ne!(
            gate,
            Gate::Execute,
            "the execute gate runs the tool; it has no check to switch off"
        );
        self.settings.switched_off.push(gate);
        self
    }

    /// Sets the largest argument text accepted (default 1 MiB).
    pub fn max_argument_bytes(mut self, max_bytes: usize) -> Self {
        self.settings.limits.max_bytes = max_bytes;
        self
    }

    /// Sets the deepest nesting accepted (default 32, at most [`DecodeLimits::MAX_DEPTH`]).
    pub fn max_argument_depth(mut self, max_depth: usize) -> Self {
        self.settings.limits.max_depth = max_depth;
        self
    }

    /// Declares a provider profile the registry serves: [`build`](Self::build) checks every
    /// tool against it, and [`Registry::export`] renders the tool list in its format.
    ///
    /// A profile that shows optional arguments as required and nullable (OpenAI's strict
    /// mode) also makes the decode gate read a `null` for an argument that may be left out as
    /// if it had not been sent, so that its default applies.
    pub fn profile(mut self, profile: Profile) -> Self {
        if !self.settings.profiles.contains(&profile) {
            self.settings.profiles.push(profile);
            if profile.sends_null_for_absent() {
                self.settings.limits.null_means_absent = true;
            }
        }
        self
    }

    /// Checks every contract, that no two tools share a name, and that every declared profile
    /// can take every tool.
    pub fn build(self) -> Result<Registry, BuildError> {
        if self.store_replaced && !self.trust_declared {
            return Err(BuildError::DecisionTrustUndeclared);
        }
        let max_depth = self.settings.limits.max_depth;
        if max_depth == 0 || max_depth > DecodeLimits::MAX_DEPTH {
            return Err(BuildError::InvalidLimits(format!(
                "max_argument_depth must be 1 to {}, not {max_depth}",
                DecodeLimits::MAX_DEPTH,
            )));
        }
        let mut tools = Vec::with_capacity(self.tools.len());
        for tool in self.tools {
            let contract = tool.contract();
            contract.check().map_err(BuildError::InvalidContract)?;
            let check = SchemaCheck::compile(contract.input_schema(), contract.checked_in_code())
                .map_err(|reason| {
                BuildError::InvalidContract(ContractError {
                    tool: contract.name().to_owned(),
                    reason,
                })
            })?;
            tools.push((contract.name().to_owned(), Registered { tool, check }));
        }
        tools.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        if let Some(pair) = tools.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(BuildError::DuplicateTool(pair[0].0.clone()));
        }
        let mut settings = self.settings;
        // Outputs are recorded only where a contract, or a worker sharing the store, reads
        // where values came from.
        settings.provenance.recording |= tools
            .iter()
            .any(|(_, entry)| entry.tool.contract().provenance().checks_calls());
        let contracts: Vec<&ToolContract> = tools
            .iter()
            .map(|(_, entry)| entry.tool.contract())
            .collect();
        for policy in settings.rules.all() {
            policy
                .prepare(&contracts)
                .map_err(|error| BuildError::Policy(error.to_string()))?;
        }
        // A policy that reads what a task spent needs every task counted: a limit no task
        // reaches makes every store count.
        if settings.rules.read_budget() {
            let limits = &mut settings.budget.limits;
            limits.max_calls_per_task.get_or_insert(u64::MAX);
        }
        for profile in &settings.profiles {
            check_all(
                *profile,
                tools.iter().map(|(_, entry)| entry.tool.contract()),
            )
            .map_err(BuildError::Profile)?;
        }
        Ok(Registry {
            inner: Arc::new(Inner { tools, settings }),
        })
    }
}

/// Why a registry could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// Two tools have the same name; the model could not tell them apart.
    DuplicateTool(String),
    /// A tool's contract breaks a rule.
    InvalidContract(ContractError),
    /// A limit is out of its range.
    InvalidLimits(String),
    /// A declared profile's provider cannot take a tool.
    Profile(ProfileError),
    /// The approval store was replaced, and the registry was not told which decisions count.
    DecisionTrustUndeclared,
    /// A policy does not fit the registry's tools: a rule set names an argument no tool has,
    /// or compares a value with one of another type (the rule set's own diagnostics).
    Policy(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::DuplicateTool(name) => {
                write!(
                    f,
                    "two tools are named `{name}`: rename one with `#[tool(name = \"...\")]`"
                )
            }
            BuildError::InvalidContract(error) => error.fmt(f),
            BuildError::InvalidLimits(reason) => f.write_str(reason),
            BuildError::Profile(error) => error.fmt(f),
            BuildError::Policy(reason) => write!(f, "a policy does not fit the tools: {reason}"),
            BuildError::DecisionTrustUndeclared => f.write_str(
                "an approval store outside the process needs `.keyring(...)`, so that only \
                 signed decisions count, or `.accept_unsigned_decisions()` for tests and local use",
            ),
        }
    }
}

impl std::error::Error for BuildError {}
