//! The registry: the set of tools an agent may call, and the dispatcher that forces every call
//! through the gates.

use std::borrow::Cow;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::approval::now_ms;
use crate::audit::{AuditLog, AuditSink, Decided, Snapshots};
use crate::export::{Profile, ProfileError, check_all};
use crate::gate::approve::Approvals;
use crate::gate::authorize::{Rules, authorize_arguments, authorize_caller, judge};
use crate::gate::budget::Budget;
use crate::gate::decode::{decode, decode_noting_left_out};
use crate::gate::execute::{Contained, Execution, contained, execute};
use crate::gate::resolve::{check_choice, resolve};
use crate::gate::validate::{check_allowed_values, validate};
use crate::idempotency::RanCalls;
use crate::rejection::shorten;
use crate::tool::BoxFuture;
use crate::{
    ApprovalDecision, ApprovalStore, Approver, Arguments, BudgetLimits, BudgetStore, CallContext,
    ContractError, DecodeLimits, InMemoryApprovalStore, InMemoryBudgetStore, Outcome, PendingCall,
    Policy, Rejection, RejectionCode, Ticket, Tool, ToolCall, ToolContract,
};
use crate::{CompensationResult, ToolError};

/// A tool with its types erased, so tools of different argument types can live in one map.
trait ErasedTool: Send + Sync {
    fn contract(&self) -> &ToolContract;

    /// The compensation of a completed call, from its arguments and output.
    fn compensation<'a>(
        &'a self,
        ctx: &'a CallContext,
        arguments: &Arguments,
        output: Value,
        limits: &DecodeLimits,
    ) -> Option<BoxFuture<'a, Result<(), ToolError>>>;

    /// Decode, validate, authorize (the steps that read the arguments) and execute.
    fn run<'a>(
        &'a self,
        ctx: &'a CallContext,
        call: &'a ToolCall,
        settings: &'a Settings,
        approved: bool,
        snapshots: &'a Snapshots,
    ) -> Execution<'a>;
}

impl<T: Tool> ErasedTool for T {
    fn contract(&self) -> &ToolContract {
        Tool::contract(self)
    }

    fn compensation<'a>(
        &'a self,
        ctx: &'a CallContext,
        arguments: &Arguments,
        output: Value,
        limits: &DecodeLimits,
    ) -> Option<BoxFuture<'a, Result<(), ToolError>>> {
        // The arguments decoded when the call ran; they decode the same way again.
        match decode::<T::Args>(arguments, limits) {
            Ok(args) => self.compensate_call(ctx, args, output),
            Err(rejection) => Some(Box::pin(std::future::ready(Err(ToolError::new(
                "compensation_arguments_unreadable",
                rejection.message().to_owned(),
            ))))),
        }
    }

    fn run<'a>(
        &'a self,
        ctx: &'a CallContext,
        call: &'a ToolCall,
        settings: &'a Settings,
        approved: bool,
        snapshots: &'a Snapshots,
    ) -> Execution<'a> {
        let Settings {
            limits,
            rules,
            budget,
            approvals,
            ..
        } = settings;
        let arguments = &call.arguments;
        let contract = Tool::contract(self);
        let (args, left_out) = match decode_noting_left_out::<T::Args>(arguments, limits, contract)
        {
            Ok(decoded) => decoded,
            Err(rejection) => return Execution::Finished(Outcome::Rejected(rejection)),
        };
        let argument_json = |argument: &str| self.argument_json(&args, argument);
        if let Err(rejection) = check_allowed_values(contract, ctx, &left_out, argument_json) {
            return Execution::Finished(Outcome::Rejected(rejection));
        }
        if let Err(rejection) = validate(self.validate_args(&args), contract.input_schema()) {
            return Execution::Finished(Outcome::Rejected(rejection));
        }
        if let Err(rejection) = authorize_arguments(contract, ctx, self.scope(&args)) {
            return Execution::Finished(Outcome::Rejected(rejection));
        }
        let counted = budget.applies_to(contract);
        let needs_approval =
            !approved && approvals.required(contract, self.approval_required(ctx, &args));
        let observed = contract.snapshot().is_some();
        if !rules.apply_to(contract) && !counted && !needs_approval && !observed {
            return execute(self, ctx, args);
        }
        Execution::Running(Box::pin(async move {
            if let Err(rejection) = judge(self, ctx, &args, arguments, rules).await {
                return Outcome::Rejected(rejection);
            }
            // Budgets count a call when it runs: a call waiting for a human counts nothing yet.
            if needs_approval {
                return Outcome::Pending(Box::new(approvals.ticket(ctx, contract, call)));
            }
            if counted {
                if let Err(rejection) = budget.reserve(ctx, contract, arguments).await {
                    return Outcome::Rejected(rejection);
                }
            }
            if let Some(snapshot) = self.snapshot(ctx, &args) {
                Snapshots::keep(&snapshots.before, snapshot.await);
            }
            // Contained here, not only around the whole call, so that a panic still counts
            // as a failure for the circuit breaker and the state after it is still seen.
            let outcome = finish(contained(|| execute(self, ctx, args))).await;
            if counted {
                budget.settle(contract, &outcome).await;
            }
            if observed {
                // The arguments went into the tool; they decode the same way again.
                if let Ok(args) = decode::<T::Args>(arguments, limits) {
                    if let Some(snapshot) = self.snapshot(ctx, &args) {
                        Snapshots::keep(&snapshots.after, snapshot.await);
                    }
                }
            }
            outcome
        }))
    }
}

async fn finish(execution: Execution<'_>) -> Outcome {
    match execution {
        Execution::Finished(outcome) => outcome,
        Execution::Running(running) => running.await,
    }
}

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
    tools: Vec<(String, Box<dyn ErasedTool>)>,
    settings: Settings,
}

/// What the gates after resolve need from the registry.
struct Settings {
    limits: DecodeLimits,
    rules: Rules,
    budget: Budget,
    approvals: Approvals,
    audit: Option<AuditLog>,
    ran_calls: RanCalls,
    /// The provider profiles the registry was built for, each checked against every tool.
    profiles: Vec<Profile>,
}

impl Registry {
    /// Starts an empty registry.
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder {
            tools: Vec::new(),
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
                },
                audit: None,
                ran_calls: RanCalls::new(10_000),
                profiles: Vec::new(),
            },
        }
    }

    /// Sends one model-produced call through every gate and, if all pass, runs the tool.
    ///
    /// Never panics and never returns an error: whatever the model sent, the answer is an
    /// [`Outcome`], completed or refused with a stable code. The call is borrowed: keep it to
    /// answer the provider with its id.
    pub async fn dispatch(&self, ctx: &CallContext, call: &ToolCall) -> Outcome {
        // The clock is read only for the audit: it costs as much as a gate.
        let started = self.inner.settings.audit.as_ref().map(|_| Instant::now());
        let snapshots = Snapshots::default();
        let (outcome, contract, resolution) = match self.repeated(ctx, call) {
            Some((earlier, contract)) => (earlier, contract, Some("repeated call id".to_owned())),
            None => {
                let (outcome, contract) = self.decide(ctx, call, false, &snapshots).await;
                self.remember(ctx, call, contract, &outcome);
                (outcome, contract, None)
            }
        };
        if let Some(started) = started {
            self.record(Decided {
                ctx,
                call,
                contract,
                outcome: &outcome,
                duration: started.elapsed(),
                resolution,
                original_arguments: None,
                snapshots: Some(&snapshots),
            });
        }
        let Outcome::Pending(ticket) = &outcome else {
            return outcome;
        };
        let approvals = &self.inner.settings.approvals;
        approvals
            .store
            .insert(PendingCall {
                ticket: (**ticket).clone(),
                ctx: ctx.clone(),
                arguments: call.arguments.clone(),
            })
            .await;
        match &approvals.approver {
            Some(approver) => {
                let decision = approver.decide(ticket).await;
                self.resume(&ticket.id, decision).await
            }
            None => outcome,
        }
    }

    /// Decides a pending call: runs it as it was (approve) or with the reviewer's arguments
    /// (edit), which pass decode, validate, authorize and budget again, or refuses it with the
    /// reviewer's message (reject). The call is the one stored with the ticket; a ticket is
    /// decided once, and not after it expired.
    pub async fn resume(&self, ticket_id: &str, decision: ApprovalDecision) -> Outcome {
        let started = Instant::now();
        let Some(pending) = self.inner.settings.approvals.store.take(ticket_id).await else {
            return Outcome::Rejected(
                Rejection::new(
                    RejectionCode::TicketNotPending,
                    "no call waits under this ticket: it is unknown or was decided already",
                )
                .with_retryable(false),
            );
        };
        let PendingCall {
            ticket,
            ctx,
            arguments,
        } = pending;
        let original = ToolCall {
            id: ticket.call_id.clone(),
            name: ticket.tool.clone(),
            arguments,
        };
        let reviewer = decision.reviewer().to_owned();
        let snapshots = Snapshots::default();
        let (call, outcome, contract, approval) = if ticket.is_expired(now_ms()) {
            let rejection = Rejection::new(
                RejectionCode::ApprovalExpired,
                "nobody approved the call in time",
            )
            .with_retryable(false);
            let contract = self.contract(&ticket.tool);
            (
                &original,
                Outcome::Rejected(rejection),
                contract,
                "expired".to_owned(),
            )
        } else {
            match decision {
                ApprovalDecision::Reject { message, .. } => {
                    let rejection = Rejection::new(
                        RejectionCode::ApprovalRejected,
                        format!("a reviewer rejected the call: {}", shorten(&message, 500)),
                    )
                    .with_retryable(false);
                    let contract = self.contract(&ticket.tool);
                    (
                        &original,
                        Outcome::Rejected(rejection),
                        contract,
                        format!("rejected by {reviewer}"),
                    )
                }
                ApprovalDecision::Approve { .. } => {
                    let (outcome, contract) = self.decide(&ctx, &original, true, &snapshots).await;
                    self.remember(&ctx, &original, contract, &outcome);
                    (
                        &original,
                        outcome,
                        contract,
                        format!("approved by {reviewer}"),
                    )
                }
                ApprovalDecision::Edit { arguments, .. } => {
                    let edited = ToolCall {
                        arguments: Arguments::Json(arguments),
                        ..original.clone()
                    };
                    let (outcome, contract) = self.decide(&ctx, &edited, true, &snapshots).await;
                    self.remember(&ctx, &edited, contract, &outcome);
                    self.record(Decided {
                        ctx: &ctx,
                        call: &edited,
                        contract,
                        outcome: &outcome,
                        duration: started.elapsed(),
                        resolution: Some(format!("edited by {reviewer}")),
                        original_arguments: Some(&original.arguments),
                        snapshots: Some(&snapshots),
                    });
                    return outcome;
                }
            }
        };
        self.record(Decided {
            ctx: &ctx,
            call,
            contract,
            outcome: &outcome,
            duration: started.elapsed(),
            resolution: Some(approval),
            original_arguments: None,
            snapshots: Some(&snapshots),
        });
        outcome
    }

    /// Runs the compensation of a completed call, contained and audited.
    pub(crate) async fn compensate(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        output: Value,
    ) -> CompensationResult {
        let started = Instant::now();
        let Some(tool) = self.tool(&call.name) else {
            return CompensationResult::NothingToUndo;
        };
        let limits = &self.inner.settings.limits;
        let Some(compensation) = tool.compensation(ctx, &call.arguments, output, limits) else {
            return CompensationResult::NothingToUndo;
        };
        let result = match (Contained {
            future: compensation,
        })
        .await
        {
            Ok(Ok(())) => CompensationResult::Compensated,
            Ok(Err(error)) => CompensationResult::Failed(error),
            Err(()) => CompensationResult::Failed(ToolError::new(
                "compensation_panicked",
                "the compensation failed unexpectedly",
            )),
        };
        let outcome = match &result {
            CompensationResult::Failed(error) => Outcome::Rejected(
                Rejection::new(RejectionCode::ToolFailed, error.message())
                    .with_reason(error.code()),
            ),
            _ => Outcome::Completed(Value::Null),
        };
        self.record(Decided {
            ctx,
            call,
            contract: Some(tool.contract()),
            outcome: &outcome,
            duration: started.elapsed(),
            resolution: Some("compensation".to_owned()),
            original_arguments: None,
            snapshots: None,
        });
        result
    }

    fn tool(&self, name: &str) -> Option<&dyn ErasedTool> {
        let tools = &self.inner.tools;
        let index = tools
            .binary_search_by(|(candidate, _)| candidate.as_str().cmp(name))
            .ok()?;
        Some(&*tools[index].1)
    }

    /// The first outcome of this call id in this task, for a tool that is not idempotent.
    fn repeated(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
    ) -> Option<(Outcome, Option<&ToolContract>)> {
        let contract = self
            .contract(&call.name)
            .filter(|contract| !contract.idempotent())?;
        let earlier = self.inner.settings.ran_calls.earlier(ctx, call)?;
        Some((earlier, Some(contract)))
    }

    fn remember(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        contract: Option<&ToolContract>,
        outcome: &Outcome,
    ) {
        if contract.is_some_and(|contract| !contract.idempotent()) {
            self.inner.settings.ran_calls.remember(ctx, call, outcome);
        }
    }

    /// The calls waiting for a human, oldest first.
    pub async fn pending_tickets(&self) -> Vec<Ticket> {
        self.inner.settings.approvals.store.pending().await
    }

    fn record(&self, decided: Decided<'_>) {
        if let Some(log) = &self.inner.settings.audit {
            log.append(decided);
        }
    }

    /// Every gate, in order; the outcome and the contract of the tool, if it was found.
    /// `approved` skips the approve gate, for a call a reviewer approved.
    async fn decide(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        approved: bool,
        snapshots: &Snapshots,
    ) -> (Outcome, Option<&ToolContract>) {
        let tool = match resolve(&self.inner.tools, &call.name, |tool| {
            tool.contract().grants(ctx) && ctx.tool_choice().allows(tool.contract().name())
        }) {
            Ok(tool) => tool,
            Err(rejection) => return (Outcome::Rejected(rejection), None),
        };
        let contract = tool.contract();
        if let Err(rejection) = check_choice(contract.name(), ctx) {
            return (Outcome::Rejected(rejection), Some(contract));
        }
        if let Err(rejection) = authorize_caller(contract, ctx) {
            return (Outcome::Rejected(rejection), Some(contract));
        }
        let outcome = finish(contained(|| {
            tool.run(ctx, call, &self.inner.settings, approved, snapshots)
        }))
        .await;
        (outcome, Some(contract))
    }

    /// The contract of the tool named `name`.
    pub fn contract(&self, name: &str) -> Option<&ToolContract> {
        self.tool(name).map(|tool| tool.contract())
    }

    /// Every tool's contract, sorted by name.
    pub fn contracts(&self) -> impl Iterator<Item = &ToolContract> {
        self.inner.tools.iter().map(|(_, tool)| tool.contract())
    }

    /// Whether the registry was built for `profile`.
    pub fn serves(&self, profile: Profile) -> bool {
        self.inner.settings.profiles.contains(&profile)
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
    /// [`Outcome::Pending`].
    pub fn approver(mut self, approver: impl Approver) -> Self {
        self.settings.approvals.approver = Some(Box::new(approver));
        self
    }

    /// Replaces the store of pending calls (default: an [`InMemoryApprovalStore`]).
    pub fn approval_store(mut self, store: impl ApprovalStore) -> Self {
        self.settings.approvals.store = Box::new(store);
        self
    }

    /// Sets how long a ticket may wait for a decision (default one hour).
    pub fn approval_lifetime(mut self, lifetime: Duration) -> Self {
        self.settings.approvals.lifetime = lifetime;
        self
    }

    /// Sets how many calls of tools that are not idempotent the registry remembers, so that a
    /// repeated call id in the same task returns the first outcome instead of running the tool
    /// again (default 10,000; 0 turns it off).
    pub fn remembered_calls(mut self, capacity: usize) -> Self {
        self.settings.ran_calls = RanCalls::new(capacity);
        self
    }

    /// Records every decision, refusals included, as a hash-chained
    /// [`AuditRecord`](crate::audit::AuditRecord) in `sink`. The sink is written while the
    /// dispatch waits, so that the record exists before the outcome is returned.
    pub fn audit(mut self, sink: impl AuditSink) -> Self {
        self.settings.audit = Some(AuditLog::new(sink));
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
        let max_depth = self.settings.limits.max_depth;
        if max_depth == 0 || max_depth > DecodeLimits::MAX_DEPTH {
            return Err(BuildError::InvalidLimits(format!(
                "max_argument_depth must be 1 to {}, not {max_depth}",
                DecodeLimits::MAX_DEPTH,
            )));
        }
        let mut tools = Vec::with_capacity(self.tools.len());
        for tool in self.tools {
            tool.contract()
                .check()
                .map_err(BuildError::InvalidContract)?;
            tools.push((tool.contract().name().to_owned(), tool));
        }
        tools.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        if let Some(pair) = tools.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(BuildError::DuplicateTool(pair[0].0.clone()));
        }
        for profile in &self.settings.profiles {
            check_all(*profile, tools.iter().map(|(_, tool)| tool.contract()))
                .map_err(BuildError::Profile)?;
        }
        Ok(Registry {
            inner: Arc::new(Inner {
                tools,
                settings: self.settings,
            }),
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
        }
    }
}

impl std::error::Error for BuildError {}
