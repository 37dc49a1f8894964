//! The order of the gates, written once: [`Registry::dispatch`] and [`Registry::resume`] send a
//! call down through them, from the tool's name to its body.
//!
//! ```text
//!    refusals    a task that collected too many refusals is stopped
//! 1. resolve     the tool exists for this caller (one it may not use is refused as missing),
//!                the step's tool choice allows it
//!    authorize   the caller runs in one of the tool's environments
//! 2. decode      strict JSON into the typed arguments, once; from them the canonical arguments
//! 3. validate    every constraint of the schema the model was shown, the tool's own checks,
//!                the current values of `#[one_of]` arguments
//! 4. authorize   the `#[tenant]` and `#[environment]` arguments, the tool's policy, the
//!                registry's policies, its intent checks
//! 5. repeat      the call is claimed, atomically: a repeat of a claimed call gets its
//!                outcome (or its ticket), never a second run
//! 6. budget      the call is counted, atomically, or refused; a pending call is counted too
//! 7. approve     a call that needs a human waits as a ticket
//! 8. audit       a call that changes state is recorded as about to run, or does not run
//! 9. execute     the tool runs, its timeout kept and its panics contained
//! 10. audit      one chained record of the decision, whichever gate took it
//! ```
//!
//! A reviewer's decision ([`Registry::resume`]) sends the stored call down again from decode:
//! an approved call skips repeat, budget and approve (it was claimed and counted when it began
//! to wait), an edited one is counted again for its new arguments. Every gate after decode
//! reads the typed arguments or the canonical arguments, never the model's text again.
//!
//! The order runs in three short functions below: [`Registry::decide`] (the refusal limit is
//! checked before it, by the road), gate 1 and the caller's part of 4; [`gates`], 2 to 5; and
//! [`admit`], 6 to 9. Each road into them has its own home:
//! `fresh.rs` (a call from the model, [`Registry::dispatch`]), `resume.rs` (a reviewer's
//! decision and the decided call carried out, [`Registry::resume`]), `follow.rs` (where a
//! waiting call stands, [`Registry::follow`]) and `compensate.rs` (a completed step of an
//! abandoned transaction undone).

mod compensate;
mod follow;
mod fresh;
mod resume;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;

use serde_json::Value;

use crate::audit::{Decided, Facts, Snapshots};
use crate::call::ToolCall;
use crate::context::CallContext;
use crate::contract::ToolContract;
use crate::future::Contained;
use crate::gate::DecodeLimits;
use crate::gate::approve::decision::expired;
use crate::gate::approve::store::PendingCall;
use crate::gate::authorize::authorize_caller;
use crate::gate::authorize::{Consulted, Judge, authorize};
use crate::gate::bound::{BoundCall, ErasedTool, rebind};
use crate::gate::decode::Canonical;
use crate::gate::execute::{Execution, contained, dry_run, panicked};
use crate::gate::repeat::{self, CallKey, Claim, ClaimState};
use crate::gate::resolve::{check_choice, resolve};
use crate::gate::validate::validate;
use crate::outcome::Outcome;
use crate::policy::BudgetUsage;
use crate::registry::Registry;
use crate::registry::{Registered, Settings};
use crate::rejection::{Gate, Rejection, RejectionCode};
use crate::schema::check::SchemaCheck;
use crate::time::now_ms;

/// How a call came to the gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Road {
    /// From the model: claimed, counted, and held for a human where the contract asks.
    Fresh,
    /// Approved by a reviewer as it was: claimed and counted when it began to wait.
    Approved,
    /// Edited by a reviewer: claimed when it began to wait, counted again for its new
    /// arguments.
    Edited,
}

/// One call on its way through the gates.
#[derive(Clone, Copy)]
pub(crate) struct Passage<'a> {
    pub(crate) ctx: &'a CallContext,
    pub(crate) call: &'a ToolCall,
    /// The tool's arguments schema, compiled.
    pub(crate) check: &'a SchemaCheck,
    pub(crate) registry: &'a Registry,
    pub(crate) road: Road,
    pub(crate) facts: &'a Facts,
}

/// Whether the canonical arguments of a call that ran are read again: for the snapshot after
/// it, or for its compensation.
fn read_again(contract: &ToolContract) -> bool {
    contract.snapshot().is_some() || contract.has_rollback()
}

impl Registry {
    /// Every gate, in order, for a call that came by `road`.
    pub(crate) async fn decide(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        road: Road,
        facts: &Facts,
    ) -> Dispatched<'_> {
        let settings = self.settings();
        let refused = |rejection, contract| Dispatched {
            outcome: Outcome::Rejected(rejection),
            contract,
        };
        // 1. resolve: a tool the caller may not use is refused and hinted at as a missing one.
        let grants =
            |contract: &ToolContract| !settings.checks(Gate::Resolve) || contract.grants(ctx);
        let known =
            |entry: &Registered| settings.reveal_denied_tools || grants(entry.tool.contract());
        let visible = |entry: &Registered| {
            let contract = entry.tool.contract();
            grants(contract) && ctx.tool_choice().allows(contract.name())
        };
        let Registered { tool, check } = match resolve(self.tools(), &call.name, known, visible) {
            Ok(entry) => entry,
            // The audit still learns which tool it was, to redact its sensitive arguments.
            Err(rejection) => return refused(rejection, self.contract(&call.name)),
        };
        let contract = tool.contract();
        if let Err(rejection) = check_choice(contract.name(), ctx) {
            return refused(rejection, Some(contract));
        }
        // 4, first part: who is calling, before the arguments are read.
        if settings.checks(Gate::Authorize)
            && let Err(rejection) = authorize_caller(contract, ctx)
        {
            return refused(rejection, Some(contract));
        }
        // 2 to 9.
        let passage = Passage {
            ctx,
            call,
            check,
            registry: self,
            road,
            facts,
        };
        let outcome = match contained(|| {
            Execution::Running(Box::pin(async move {
                gates(&**tool, passage)
                    .await
                    .unwrap_or_else(Outcome::Rejected)
            }))
        }) {
            Execution::Finished(outcome) => outcome,
            Execution::Running(running) => running.await,
        };
        Dispatched {
            outcome,
            contract: Some(contract),
        }
    }
}

/// Gates 2 to 9, which read the arguments, then the tool's body.
async fn gates<'a>(tool: &'a dyn ErasedTool, passage: Passage<'a>) -> Result<Outcome, Rejection> {
    let Passage {
        ctx,
        call,
        road,
        facts,
        check,
        ..
    } = passage;
    let settings = passage.registry.settings();
    let contract = tool.contract();

    // 2. decode: the typed arguments, once; the canonical arguments from them, when read.
    let limits = match settings.checks(Gate::Decode) {
        true => settings.limits,
        false => DecodeLimits {
            max_bytes: usize::MAX,
            max_depth: DecodeLimits::MAX_DEPTH,
            ..settings.limits
        },
    };
    let decoded = tool.decode(check, &call.arguments, &limits)?;
    let bound = decoded.args;
    let canonical = Canonical::new(&*bound, &facts.canonical);
    // Arguments that will be read again must read back as themselves before anything runs,
    // or the call could be neither observed nor undone.
    if read_again(contract) {
        rebind(tool, check, canonical.get()?)?;
    }

    // 3. validate
    let (violations, left_out) = (decoded.violations, &decoded.left_out);
    if settings.checks(Gate::Validate) {
        validate(
            bound.validate(),
            violations,
            contract,
            ctx,
            left_out,
            &canonical,
        )?;
    }

    // 4. authorize: what the arguments name, where their values came from (an approved call
    // was judged when it began to wait, and a human saw it since), then the policies and
    // intent checks.
    let judge = (road != Road::Approved && contract.provenance().checks_calls()).then(|| Judge {
        provenance: &settings.provenance,
        edit: facts.edit.get(),
        found: &facts.sources,
        tainted_by: &facts.tainted_by,
    });
    let untrusted = match settings.checks(Gate::Authorize) {
        true => {
            let consulted = Consulted {
                rules: &settings.rules,
                usage: spent_before(settings, ctx, contract, road).await?,
                sources: &facts.sources,
                rulings: &facts.rulings,
            };
            authorize(contract, &*bound, ctx, &canonical, consulted, judge).await?
        }
        false => false,
    };

    // 5. repeat: a call that may not run twice, or that may wait for a human, is claimed.
    let needs_approval = road == Road::Fresh
        && settings.checks(Gate::Approve)
        && (untrusted || (settings.approvals).required(contract, bound.approval_required(ctx)));
    let key = (road == Road::Fresh
        && settings.checks(Gate::Repeat)
        && (needs_approval || !contract.idempotent()))
    .then(|| CallKey::new(ctx, contract.name(), &call.id));
    if let Some(key) = &key
        && let Some(earlier) = claim(passage, key, &canonical).await?
    {
        return Ok(earlier);
    }

    // 6 to 9, then the claim records what became of the call. A panic in them (a snapshot
    // hook, a store) is contained here, so that the claim is still settled: the call may have
    // run, and must not run again.
    let admitted = Contained {
        future: Box::pin(admit(tool, bound, passage, key.as_ref(), needs_approval)),
    };
    let outcome = admitted.await.unwrap_or_else(|()| Ok(panicked()));
    if let Some(key) = &key {
        settle(settings, key, &outcome).await;
    }
    outcome
}

/// What the task spent before this call, for the policies that read it (`None` when none
/// does): an approved call reserved its share when it began to wait, and is judged without it,
/// as it was then.
async fn spent_before(
    settings: &Settings,
    ctx: &CallContext,
    contract: &ToolContract,
    road: Road,
) -> Result<Option<BudgetUsage>, Rejection> {
    if !settings.rules.read_budget() {
        return Ok(None);
    }
    let mut usage = settings.budget.store.task_usage(ctx.task_id()).await?;
    if road == Road::Approved && settings.budget.applies_to(contract) {
        usage.calls = usage.calls.saturating_sub(1);
        usage.cost = usage.cost.saturating_sub(contract.cost());
    }
    Ok(Some(usage))
}

/// Gates 6 to 9 for a call that passed the others.
async fn admit<'a>(
    tool: &'a dyn ErasedTool,
    bound: Box<dyn BoundCall<'a> + 'a>,
    passage: Passage<'a>,
    claimed: Option<&CallKey>,
    needs_approval: bool,
) -> Result<Outcome, Rejection> {
    let Passage {
        ctx, road, facts, ..
    } = passage;
    let settings = passage.registry.settings();
    let contract = tool.contract();
    // The same canonical arguments as the earlier gates', written once in `facts`.
    let canonical = &Canonical::new(&*bound, &facts.canonical);

    // 6. budget: an approved call was counted when it began to wait.
    let counted = settings.checks(Gate::Budget) && settings.budget.applies_to(contract);
    let reserved = counted && road != Road::Approved;
    // Written before anything is reserved, so that nothing after can fail on them.
    if needs_approval {
        canonical.get()?;
    }
    if reserved {
        let budget = &settings.budget;
        budget
            .reserve(ctx, contract, canonical, passage.check)
            .await?;
    }

    // 7. approve
    // Boxed, as the rarer roads below are: a future holds room for the largest of the futures
    // it awaits, and the call that takes none of them would carry and copy that room.
    if needs_approval {
        return Box::pin(wait(passage, contract, canonical, claimed, reserved)).await;
    }

    // 8. audit: a call that changes state runs only once it is on record.
    if let Err(refusal) = about_to_run(passage, contract, canonical).await {
        if reserved {
            settings
                .budget
                .release(ctx, contract.name(), contract.cost())
                .await;
        }
        return Err(refusal);
    }

    // 9. execute, with the state it changes seen before and after.
    Ok(run(tool, bound, passage, counted).await)
}

/// Gate 5 for a call that needs a claim: the earlier outcome of the call if it was claimed
/// before (or its ticket), `None` if this one is the first.
async fn claim(
    passage: Passage<'_>,
    key: &CallKey,
    canonical: &Canonical<'_>,
) -> Result<Option<Outcome>, Rejection> {
    let settings = passage.registry.settings();
    let fingerprint = canonical.fingerprint(passage.check)?;
    let lease_start = now_ms().saturating_sub(settings.claim_lease_ms);
    let mut claim = settings.repeats.claim(key, &fingerprint, lease_start).await;
    if let Claim::Existing(ClaimState::Pending(ticket)) = &claim
        && ticket.is_expired(now_ms())
    {
        Box::pin(passage.registry.expire_tickets()).await;
        claim = settings.repeats.claim(key, &fingerprint, lease_start).await;
        if let Claim::Existing(ClaimState::Pending(_)) = claim {
            // Its ticket left the store by another road (a restart of an in-memory store,
            // another worker's sweep): the call still cannot wait past its expiry.
            let expired = Outcome::Rejected(expired());
            let state = ClaimState::Settled(expired.clone());
            settings.repeats.update(key, state).await;
            claim = Claim::Existing(ClaimState::Settled(expired));
        }
    }
    let earlier = repeat::answer(claim);
    if earlier.is_some() {
        passage.facts.repeated.store(true, Ordering::Relaxed);
    }
    Ok(earlier)
}

/// What the claim of a call records once gates 6 to 9 are through: the outcome of a call that
/// ran, nothing for one that waits (its ticket is claimed already), and a release for one
/// that was refused, so that it may be sent again.
async fn settle(settings: &Settings, key: &CallKey, outcome: &Result<Outcome, Rejection>) {
    match outcome {
        Ok(Outcome::Pending(_)) => {}
        Ok(outcome) if ran(outcome) => {
            let state = ClaimState::Settled(outcome.clone());
            settings.repeats.update(key, state).await;
        }
        _ => settings.repeats.release(key).await,
    }
}

/// Whether the tool ran: it completed, or failed while running.
fn ran(outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Completed(_) => true,
        Outcome::Rejected(rejection) => rejection.gate() == Gate::Execute,
        Outcome::Pending(_) => false,
    }
}

/// Gate 7 for a call that needs a human: its ticket, stored with the call; a reserved budget
/// is given back if the call cannot wait.
async fn wait(
    passage: Passage<'_>,
    contract: &ToolContract,
    canonical: &Canonical<'_>,
    claimed: Option<&CallKey>,
    reserved: bool,
) -> Result<Outcome, Rejection> {
    let Passage {
        ctx,
        call,
        registry,
        facts,
        ..
    } = passage;
    let settings = registry.settings();
    registry.expire_tickets().await;
    let mut pending = PendingCall {
        ticket: settings
            .approvals
            .ticket(ctx, contract, call, canonical.get()?),
        ctx: ctx.clone(),
        arguments: call.arguments.clone(),
        canonical: canonical.get()?.clone(),
        reserved_cost: reserved.then(|| contract.cost()),
        decision: None,
    };
    if let Some(sources) = facts.sources.get() {
        pending.ticket.sources = sources.clone();
        for untrusted in sources.iter().filter(|found| !found.allowed) {
            if untrusted.found_in.is_some() {
                pending.ticket.description.push_str(&format!(
                    "; {} was found {}",
                    untrusted.named(),
                    untrusted.found_where()
                ));
            }
        }
    }
    if let Some(origin) = facts.tainted_by.get() {
        pending.ticket.description.push_str(&format!(
            "; the task read untrusted content before it ({origin}), and this tool waits for a human after that"
        ));
    }
    pending.ticket.call_digest = pending.digest();
    let ticket = pending.ticket.clone();
    // The claim waits before the ticket can be decided, so that a reviewer's quick
    // decision is never overwritten by it.
    if let Some(key) = claimed {
        let state = ClaimState::Pending(Box::new(ticket.clone()));
        settings.repeats.update(key, state).await;
    }
    let limits = settings.approvals.limits;
    if let Err(rejection) = settings.approvals.store.insert(pending, limits).await {
        if reserved {
            settings
                .budget
                .release(ctx, contract.name(), contract.cost())
                .await;
        }
        return Err(rejection);
    }
    Ok(Outcome::Pending(Box::new(ticket)))
}

/// Gate 8: a call that changes state is recorded as about to run, or does not run; a decided
/// call leaves the approval store under its lease.
async fn about_to_run(
    passage: Passage<'_>,
    contract: &ToolContract,
    canonical: &Canonical<'_>,
) -> Result<(), Rejection> {
    let Passage {
        ctx,
        call,
        registry,
        facts,
        ..
    } = passage;
    let settings = registry.settings();
    // What the audit and the caller read of the arguments is written before the tool takes
    // them.
    if settings.audit.is_some() || facts.keep_canonical || contract.snapshot().is_some() {
        canonical.get()?;
    }
    if let Some(log) = settings.audit.as_ref()
        && contract.audit_required()
        && !settings.dry_run
        && settings.checks(Gate::Audit)
        && let Err(error) = Box::pin(log.about_to_run(ctx, call, contract, facts, None)).await
    {
        tracing::error!(tool = contract.name(), %error, "the call could not be recorded before it ran, so it did not run");
        return Err(Rejection::new(
            RejectionCode::AuditUnavailable,
            "the call could not be recorded before it ran, so it did not run",
        )
        .with_hint("try again later"));
    }

    // A decided call leaves the approval store as it runs, not before, so that a worker that
    // stops on the way leaves it for another; and only under its lease, so that it runs once.
    registry.unlease(facts).await?;
    if facts.lease.get().is_some() {
        // Its claim says it runs now: a worker that stops while it runs leaves it
        // `outcome_unknown`, for an operator to settle.
        let key = CallKey::new(ctx, contract.name(), &call.id);
        settings.repeats.update(&key, ClaimState::Running).await;
    }
    Ok(())
}

/// Gate 9: the tool's body, with the state it changes seen before and after; what the model
/// will read of it is recorded as a source of the task.
async fn run<'a>(
    tool: &'a dyn ErasedTool,
    bound: Box<dyn BoundCall<'a> + 'a>,
    passage: Passage<'a>,
    counted: bool,
) -> Outcome {
    let Passage {
        ctx, call, facts, ..
    } = passage;
    let settings = passage.registry.settings();
    let contract = tool.contract();
    if settings.dry_run {
        let outcome = Outcome::Rejected(dry_run(contract));
        if counted {
            settings.budget.settle(contract, &outcome).await;
        }
        return outcome;
    }
    // A call whose output the provenance store could not record does not run: what it would
    // change would be done, and the model told nothing of it.
    if settings.provenance.recording
        && let Err(refused) = settings.provenance.store.admit(ctx).await
    {
        let outcome = Outcome::Rejected(not_run(refused));
        if counted {
            settings.budget.settle(contract, &outcome).await;
        }
        return outcome;
    }
    if let Some(snapshot) = bound.snapshot(ctx) {
        Snapshots::keep(&facts.snapshots.before, snapshot.await);
    }
    // Contained here, not only around the whole call, so that a panic still counts as a
    // failure for the circuit breaker and the state after it is still seen.
    let outcome = finish(contained(|| bound.execute(ctx))).await;
    if counted {
        settings.budget.settle(contract, &outcome).await;
    }
    let outcome = recorded(settings, ctx, contract, &call.id, outcome).await;
    let observed = contract.snapshot().is_some();
    if let Some(canonical) = facts.canonical.get().filter(|_| observed) {
        match after_snapshot(tool, passage.check, ctx, canonical).await {
            Ok(snapshot) => Snapshots::keep(&facts.snapshots.after, snapshot),
            Err(missing) => {
                tracing::error!(
                    tool = contract.name(),
                    missing,
                    "the state after the call could not be seen"
                );
                Snapshots::keep_missing(&facts.snapshots, missing);
            }
        }
    }
    outcome
}

/// The refusal of a call that did not run because its output could not be recorded: the
/// store's refusal, said of a call that did not run.
fn not_run(refused: Rejection) -> Rejection {
    let mut not_run = Rejection::new(
        refused.code(),
        format!(
            "the tool did not run, since its output could not be recorded: {}",
            refused.message()
        ),
    )
    .with_retryable(refused.retryable());
    if let Some(hint) = refused.hint() {
        not_run = not_run.with_hint(hint);
    }
    not_run
}

/// The outcome of a call that ran, once what the model will read of it is recorded as a source
/// of its task: its output, or its error's message (a tool's error may quote what it read).
/// One that could not be recorded is withheld: the model must not read what the provenance
/// gate cannot account for.
async fn recorded(
    settings: &Settings,
    ctx: &CallContext,
    contract: &ToolContract,
    call_id: &str,
    outcome: Outcome,
) -> Outcome {
    let provenance = &settings.provenance;
    if !provenance.recording {
        return outcome;
    }
    let read = match &outcome {
        Outcome::Completed(output) => {
            provenance
                .record_output(ctx, contract, call_id, output)
                .await
        }
        Outcome::Rejected(rejection) if rejection.code() == RejectionCode::ToolFailed => {
            provenance
                .record_error(ctx, contract, call_id, rejection.message())
                .await
        }
        _ => Ok(()),
    };
    match read {
        Ok(()) => outcome,
        // The caller's own share is full: say so, as its own, not the store's.
        Err(refusal) if refusal.code() == RejectionCode::SourcesShareFull => {
            let mut withheld = Rejection::new(
                RejectionCode::SourcesShareFull,
                format!(
                    "the tool ran, but its output is withheld: {}",
                    refusal.message()
                ),
            );
            if let Some(hint) = refusal.hint() {
                withheld = withheld.with_hint(hint);
            }
            Outcome::Rejected(withheld)
        }
        Err(refusal) => Outcome::Rejected(Rejection::new(
            RejectionCode::OutputUnrecorded,
            format!(
                "the tool ran, but its output could not be recorded as a source of this task, so it is withheld ({})",
                refusal.message()
            ),
        )
        .with_hint("tell the user the tool ran and its output could not be shown")),
    }
}

/// The state after a call ran, seen through its canonical arguments bound again (the tool took
/// the decoded ones), or why it could not be seen. The call ran, so nothing here changes its
/// outcome: a failure, a panic included, leaves its reason in the record instead.
async fn after_snapshot(
    tool: &dyn ErasedTool,
    check: &SchemaCheck,
    ctx: &CallContext,
    canonical: &Value,
) -> Result<Value, String> {
    let hook_panicked = || "the snapshot hook panicked".to_owned();
    let bound =
        rebind(tool, check, canonical).map_err(|rejection| rejection.message().to_owned())?;
    let snapshot =
        catch_unwind(AssertUnwindSafe(|| bound.snapshot(ctx))).map_err(|_| hook_panicked())?;
    let Some(future) = snapshot else {
        return Err("the tool took no snapshot".to_owned());
    };
    Contained { future }.await.map_err(|()| hook_panicked())
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

/// What [`Registry::dispatch_keeping`] tells its caller.
pub(crate) struct Kept {
    pub(crate) outcome: Outcome,
    /// The canonical arguments of the call whose outcome it is, where they were read or kept.
    pub(crate) canonical: Option<Value>,
    /// The outcome is that of an earlier call with the same id: nothing ran now.
    pub(crate) repeated: bool,
}

impl Settings {
    pub(crate) async fn record(&self, decided: Decided<'_>) {
        if let Some(log) = &self.audit {
            log.append(decided).await;
        }
    }
}
