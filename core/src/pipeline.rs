//! The order of the gates, written once: [`Registry::dispatch`] and [`Registry::resume`] send a
//! call down through them, from the tool's name to its body.
//!
//! ```text
//!    repeat      a call id of a tool that is not idempotent, already run in this task,
//!                returns its first outcome and passes no gate again
//! 1. resolve     the tool exists, the caller may see it, the step's tool choice allows it
//!    authorize   the caller holds one of the tool's roles and runs in one of its environments
//! 2. decode      strict JSON into the typed arguments, once; from them the canonical arguments
//! 3. validate    every constraint of the schema the model was shown, the tool's own checks,
//!                the current values of `#[one_of]` arguments
//! 4. authorize   the `#[tenant]` and `#[environment]` arguments, the tool's policy, the
//!                registry's policies, its intent checks
//! 7. approve     a call that needs a human waits as a ticket
//! 6. budget      the call is counted, atomically, or refused
//! 9. execute     the tool runs, its timeout kept and its panics contained
//! 10. audit      one hash-chained record of the decision, whichever gate took it
//! ```
//!
//! Approval still comes before the budget: a call waiting for a human is counted when it runs.
//! Every gate after decode reads the typed arguments or the canonical arguments, never the
//! model's text again.

use std::sync::OnceLock;
use std::time::Instant;

use serde_json::Value;

use crate::audit::{Decided, Snapshots};
use crate::gate::authorize::{authorize, authorize_caller};
use crate::gate::decode::{self, Canonical, canonical_of};
use crate::gate::execute::{Contained, Execution, contained, execute};
use crate::gate::resolve::{check_choice, resolve};
use crate::gate::validate::{SchemaCheck, validate};
use crate::registry::{Registered, Settings};
use crate::tool::BoxFuture;
use crate::{
    ApprovalDecision, Arguments, CallContext, Outcome, PendingCall, Registry, Rejection,
    RejectionCode, Tool, ToolCall, ToolContract, ToolError,
};

/// A tool with its types erased, so that tools of different argument types live in one map.
pub(crate) trait ErasedTool: Send + Sync {
    fn contract(&self) -> &ToolContract;

    /// Gates 2 to 9, which read the arguments, then the tool's body.
    fn run<'a>(&'a self, call: Passage<'a>) -> BoxFuture<'a, Outcome>;

    /// The compensation of a completed call, from its canonical arguments and its output.
    fn compensation<'a>(
        &'a self,
        ctx: &'a CallContext,
        canonical: &Value,
        output: Value,
    ) -> Option<BoxFuture<'a, Result<(), ToolError>>>;
}

/// One call on its way through the gates.
pub(crate) struct Passage<'a> {
    pub(crate) ctx: &'a CallContext,
    pub(crate) call: &'a ToolCall,
    /// The tool's arguments schema, compiled.
    pub(crate) check: &'a SchemaCheck,
    pub(crate) settings: &'a Settings,
    /// A reviewer approved the call: the approve gate lets it pass.
    pub(crate) approved: bool,
    pub(crate) facts: &'a Facts,
}

/// What the gates learn of one call, for its audit record and for its caller.
#[derive(Default)]
pub(crate) struct Facts {
    /// The canonical arguments, where a gate, the audit or the caller reads them.
    pub(crate) canonical: OnceLock<Value>,
    /// The caller needs the canonical arguments whatever the gates need: a transaction keeps
    /// them for the compensation.
    pub(crate) keep_canonical: bool,
    pub(crate) snapshots: Snapshots,
}

impl<T: Tool> ErasedTool for T {
    fn contract(&self) -> &ToolContract {
        Tool::contract(self)
    }

    fn run<'a>(&'a self, passage: Passage<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(async move { gates(self, passage).await.unwrap_or_else(Outcome::Rejected) })
    }

    fn compensation<'a>(
        &'a self,
        ctx: &'a CallContext,
        canonical: &Value,
        output: Value,
    ) -> Option<BoxFuture<'a, Result<(), ToolError>>> {
        // The canonical arguments are what the tool received; they decode into the same value.
        match decode::typed::<T::Args>(canonical) {
            Ok(args) => self.compensate_call(ctx, args, output),
            Err(rejection) => Some(Box::pin(std::future::ready(Err(ToolError::new(
                "compensation_arguments_unreadable",
                rejection.message().to_owned(),
            ))))),
        }
    }
}

/// Gates 2 to 9 for a tool whose arguments are `T::Args`.
async fn gates<T: Tool>(tool: &T, passage: Passage<'_>) -> Result<Outcome, Rejection> {
    let Passage {
        ctx,
        call,
        check,
        settings,
        approved,
        facts,
    } = passage;
    let contract = Tool::contract(tool);

    // 2. decode: the typed arguments, once; the canonical arguments from them, when read.
    let decoded = decode::decode::<T::Args>(contract, check, &call.arguments, &settings.limits)?;
    let args = decoded.args;
    let write = || canonical_of(&args);
    let canonical = Canonical::new(&write, &facts.canonical);

    // 3. validate
    validate(
        tool.validate_args(&args),
        decoded.violations,
        contract,
        ctx,
        &decoded.left_out,
        &canonical,
    )?;

    // 4. authorize: what the arguments name, then the policies and intent checks.
    authorize(tool, ctx, &args, &canonical, &settings.rules).await?;

    // 7. approve
    if !approved
        && settings
            .approvals
            .required(contract, tool.approval_required(ctx, &args))
    {
        let ticket = settings
            .approvals
            .ticket(ctx, contract, call, canonical.get()?);
        return Ok(Outcome::Pending(Box::new(ticket)));
    }

    // 6. budget
    let counted = settings.budget.applies_to(contract);
    if counted {
        settings.budget.reserve(ctx, contract, &canonical).await?;
    }

    // 9. execute, with the state it changes seen before and after. What the audit and the
    // caller read of the arguments is written before the tool takes them.
    let observed = contract.snapshot().is_some();
    if settings.audit.is_some() || facts.keep_canonical || observed {
        canonical.get()?;
    }
    if let Some(snapshot) = tool.snapshot(ctx, &args) {
        Snapshots::keep(&facts.snapshots.before, snapshot.await);
    }
    // Contained here, not only around the whole call, so that a panic still counts as a
    // failure for the circuit breaker and the state after it is still seen.
    let outcome = finish(contained(|| execute(tool, ctx, args))).await;
    if counted {
        settings.budget.settle(contract, &outcome).await;
    }
    // The tool took the arguments; the canonical ones, kept above, decode into the same value.
    let kept = facts.canonical.get().filter(|_| observed);
    if let Some(Ok(args)) = kept.map(decode::typed::<T::Args>) {
        if let Some(snapshot) = tool.snapshot(ctx, &args) {
            Snapshots::keep(&facts.snapshots.after, snapshot.await);
        }
    }
    Ok(outcome)
}

async fn finish(execution: Execution<'_>) -> Outcome {
    match execution {
        Execution::Finished(outcome) => outcome,
        Execution::Running(running) => running.await,
    }
}

/// What one pass through the gates produced.
pub(crate) struct Dispatched<'r> {
    pub(crate) outcome: Outcome,
    pub(crate) contract: Option<&'r ToolContract>,
}

impl Registry {
    /// Sends one model-produced call through every gate and, if all pass, runs the tool.
    ///
    /// Never panics and never returns an error: whatever the model sent, the answer is an
    /// [`Outcome`], completed or refused with a stable code. The call is borrowed: keep it to
    /// answer the provider with its id.
    pub async fn dispatch(&self, ctx: &CallContext, call: &ToolCall) -> Outcome {
        self.dispatch_keeping(ctx, call, false).await.0
    }

    /// [`dispatch`](Self::dispatch), and the canonical arguments of the call whose outcome it
    /// is (with `keep`, whether or not a gate read them): those a reviewer's edit gave, when
    /// an in-line approver edited the call.
    pub(crate) async fn dispatch_keeping(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        keep: bool,
    ) -> (Outcome, Option<Value>) {
        let facts = Facts {
            keep_canonical: keep,
            ..Facts::default()
        };
        // The clock is read only for the audit: it costs as much as a gate.
        let started = self.settings().audit.as_ref().map(|_| Instant::now());
        let (outcome, contract, resolution) = match self.repeated(ctx, call) {
            Some((earlier, contract)) => (earlier, contract, Some("repeated call id".to_owned())),
            None => {
                let dispatched = self.decide(ctx, call, false, &facts).await;
                self.remember(ctx, call, dispatched.contract, &dispatched.outcome);
                (dispatched.outcome, dispatched.contract, None)
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
                facts: Some(&facts),
            });
        }
        let Outcome::Pending(ticket) = &outcome else {
            return (outcome, facts.canonical.into_inner());
        };
        let approvals = &self.settings().approvals;
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
                let resumed = Facts {
                    keep_canonical: keep,
                    ..Facts::default()
                };
                let outcome = self.resume_with(&ticket.id, decision, &resumed).await;
                (outcome, resumed.canonical.into_inner())
            }
            None => (outcome, facts.canonical.into_inner()),
        }
    }

    /// Decides a pending call: runs it as it was (approve) or with the reviewer's arguments
    /// (edit), which pass decode, validate, authorize and budget again, or refuses it with the
    /// reviewer's message (reject). The call is the one stored with the ticket; a ticket is
    /// decided once, and not after it expired.
    pub async fn resume(&self, ticket_id: &str, decision: ApprovalDecision) -> Outcome {
        self.resume_with(ticket_id, decision, &Facts::default())
            .await
    }

    /// [`resume`](Self::resume), with what the gates learn of the call kept in `facts`.
    async fn resume_with(
        &self,
        ticket_id: &str,
        decision: ApprovalDecision,
        facts: &Facts,
    ) -> Outcome {
        let started = Instant::now();
        let Some(pending) = self.settings().approvals.store.take(ticket_id).await else {
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
        let mut call = ToolCall {
            id: ticket.call_id.clone(),
            name: ticket.tool.clone(),
            arguments,
        };
        let reviewer = decision.reviewer().to_owned();
        let refused = |code, message: String| {
            Outcome::Rejected(Rejection::new(code, message).with_retryable(false))
        };
        let mut original_arguments = None;
        let (outcome, contract, resolution) = if ticket.is_expired(crate::gate::approve::now_ms()) {
            let outcome = refused(
                RejectionCode::ApprovalExpired,
                "nobody approved the call in time".to_owned(),
            );
            (outcome, self.contract(&ticket.tool), "expired".to_owned())
        } else {
            match decision {
                ApprovalDecision::Reject { message, .. } => {
                    let message = crate::rejection::shorten(&message, 500);
                    let outcome = refused(
                        RejectionCode::ApprovalRejected,
                        format!("a reviewer rejected the call: {message}"),
                    );
                    let resolution = format!("rejected by {reviewer}");
                    (outcome, self.contract(&ticket.tool), resolution)
                }
                ApprovalDecision::Approve { .. } => {
                    let dispatched = self.decide(&ctx, &call, true, facts).await;
                    self.remember(&ctx, &call, dispatched.contract, &dispatched.outcome);
                    let resolution = format!("approved by {reviewer}");
                    (dispatched.outcome, dispatched.contract, resolution)
                }
                ApprovalDecision::Edit { arguments, .. } => {
                    call.arguments = Arguments::Json(arguments);
                    original_arguments = Some(ticket.arguments.clone());
                    let dispatched = self.decide(&ctx, &call, true, facts).await;
                    self.remember(&ctx, &call, dispatched.contract, &dispatched.outcome);
                    let resolution = format!("edited by {reviewer}");
                    (dispatched.outcome, dispatched.contract, resolution)
                }
            }
        };
        self.record(Decided {
            ctx: &ctx,
            call: &call,
            contract,
            outcome: &outcome,
            duration: started.elapsed(),
            resolution: Some(resolution),
            original_arguments,
            facts: Some(facts),
        });
        outcome
    }

    /// Every gate, in order; `approved` lets a call a reviewer approved past the approve gate.
    pub(crate) async fn decide(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        approved: bool,
        facts: &Facts,
    ) -> Dispatched<'_> {
        let refused = |rejection, contract| Dispatched {
            outcome: Outcome::Rejected(rejection),
            contract,
        };
        // 1. resolve: a tool the caller may not use is hinted at no more than a missing one.
        let Registered { tool, check } = match resolve(self.tools(), &call.name, |entry| {
            let contract = entry.tool.contract();
            contract.grants(ctx) && ctx.tool_choice().allows(contract.name())
        }) {
            Ok(entry) => entry,
            Err(rejection) => return refused(rejection, None),
        };
        let contract = tool.contract();
        if let Err(rejection) = check_choice(contract.name(), ctx) {
            return refused(rejection, Some(contract));
        }
        // 4, first part: who is calling, before the arguments are read.
        if let Err(rejection) = authorize_caller(contract, ctx) {
            return refused(rejection, Some(contract));
        }
        // 2 to 9.
        let passage = Passage {
            ctx,
            call,
            check,
            settings: self.settings(),
            approved,
            facts,
        };
        let outcome = match contained(|| Execution::Running(tool.run(passage))) {
            Execution::Finished(outcome) => outcome,
            Execution::Running(running) => running.await,
        };
        Dispatched {
            outcome,
            contract: Some(contract),
        }
    }

    /// Runs the compensation of a completed call, contained and audited.
    pub(crate) async fn compensate(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        canonical: &Value,
        output: Value,
    ) -> crate::CompensationResult {
        use crate::CompensationResult;
        let started = Instant::now();
        let Some(tool) = self.tool(&call.name) else {
            return CompensationResult::NothingToUndo;
        };
        let Some(compensation) = tool.compensation(ctx, canonical, output) else {
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
        let facts = Facts::default();
        let _ = facts.canonical.set(canonical.clone());
        self.record(Decided {
            ctx,
            call,
            contract: Some(tool.contract()),
            outcome: &outcome,
            duration: started.elapsed(),
            resolution: Some("compensation".to_owned()),
            original_arguments: None,
            facts: Some(&facts),
        });
        result
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
        let earlier = self.settings().ran_calls.earlier(ctx, call)?;
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
            self.settings().ran_calls.remember(ctx, call, outcome);
        }
    }

    fn record(&self, decided: Decided<'_>) {
        if let Some(log) = &self.settings().audit {
            log.append(decided);
        }
    }
}
