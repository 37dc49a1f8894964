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

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::Value;

use crate::audit::{Decided, Facts, Snapshots};
use crate::contract::Origin;
use crate::contract::contract_hash;
use crate::digest::sha256_hex;
use crate::future::BoxFuture;
use crate::future::Contained;
use crate::gate::approve::decision::{already_decided, expired, not_pending, record_decision};
use crate::gate::approve::store::Lease;
use crate::gate::authorize::provenance::source;
use crate::gate::authorize::provenance::text::source_text;
use crate::gate::authorize::{Judge, authorize, authorize_caller};
use crate::gate::bound::{BoundCall, ErasedTool, rebind};
use crate::gate::decode::Canonical;
use crate::gate::execute::{Execution, contained, panicked};
use crate::gate::repeat::{self, CallKey, Claim, ClaimState};
use crate::gate::resolve::{check_choice, resolve};
use crate::gate::validate::validate;
use crate::registry::{Registered, Settings};
use crate::rollback::CompensationResult;
use crate::schema::check::SchemaCheck;
use crate::time::now_ms;
use crate::{
    ApprovalDecision, Arguments, CallContext, Gate, Outcome, PendingCall, Progress, Registry,
    Rejection, RejectionCode, SignedDecision, Ticket, ToolCall, ToolContract, ToolError,
};

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

/// Gates 2 to 9, which read the arguments, then the tool's body.
async fn gates<'a>(tool: &'a dyn ErasedTool, passage: Passage<'a>) -> Result<Outcome, Rejection> {
    let Passage {
        ctx,
        call,
        registry,
        road,
        facts,
        ..
    } = passage;
    let settings = registry.settings();
    let contract = tool.contract();

    // 2. decode: the typed arguments, once; the canonical arguments from them, when read.
    let decoded = tool.decode(passage.check, &call.arguments, &settings.limits)?;
    let bound = decoded.args;
    let write = || bound.canonical();
    let canonical = Canonical::new(&write, &facts.canonical);
    // Arguments that will be read again must read back as themselves before anything runs,
    // or the call could be neither observed nor undone.
    if read_again(contract) {
        rebind(tool, passage.check, canonical.get()?)?;
    }

    // 3. validate
    validate(
        bound.validate(),
        decoded.violations,
        contract,
        ctx,
        &decoded.left_out,
        &canonical,
    )?;

    // 4. authorize: what the arguments name, where their values came from (an approved call
    // was judged when it began to wait, and a human saw it since), then the policies and
    // intent checks.
    let judge = (road != Road::Approved && contract.provenance().checks_calls()).then(|| Judge {
        provenance: &settings.provenance,
        edit: facts.edit.get(),
        found: &facts.sources,
    });
    let untrusted = authorize(contract, &*bound, ctx, &canonical, &settings.rules, judge).await?;

    // 5. repeat: a call that may not run twice, or that may wait for a human, is claimed.
    let needs_approval = road == Road::Fresh
        && (untrusted
            || settings
                .approvals
                .required(contract, bound.approval_required(ctx)));
    let key = (road == Road::Fresh && (needs_approval || !contract.idempotent()))
        .then(|| CallKey::new(ctx, contract.name(), &call.id));
    if let Some(key) = &key {
        let fingerprint = sha256_hex(passage.check.identity_text(canonical.get()?).as_bytes());
        let lease_start = now_ms().saturating_sub(settings.claim_lease_ms);
        let mut claim = settings.repeats.claim(key, &fingerprint, lease_start).await;
        if let Claim::Existing(ClaimState::Pending(ticket)) = &claim
            && ticket.is_expired(now_ms())
        {
            registry.expire_tickets().await;
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
        if let Some(earlier) = repeat::answer(claim) {
            facts.repeated.store(true, Ordering::Relaxed);
            return Ok(earlier);
        }
    }

    // 6 to 9, then the claim records what became of the call. A panic in them (a snapshot
    // hook, a store) is contained here, so that the claim is still settled: the call may have
    // run, and must not run again.
    let admitted = Contained {
        future: Box::pin(admit(tool, bound, passage, key.as_ref(), needs_approval)),
    };
    let outcome = admitted.await.unwrap_or_else(|()| Ok(panicked()));
    if let Some(key) = &key {
        match &outcome {
            Ok(Outcome::Pending(_)) => {}
            Ok(outcome) if ran(outcome) => {
                let state = ClaimState::Settled(outcome.clone());
                settings.repeats.update(key, state).await;
            }
            _ => settings.repeats.release(key).await,
        }
    }
    outcome
}

/// Whether the tool ran: it completed, or failed while running.
fn ran(outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Completed(_) => true,
        Outcome::Rejected(rejection) => rejection.gate() == Gate::Execute,
        Outcome::Pending(_) => false,
    }
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
        ctx,
        call,
        registry,
        road,
        facts,
        ..
    } = passage;
    let settings = registry.settings();
    let contract = tool.contract();
    // The same canonical arguments as the earlier gates', written once in `facts`.
    let write = || bound.canonical();
    let canonical = &Canonical::new(&write, &facts.canonical);

    // 6. budget: an approved call was counted when it began to wait.
    let counted = settings.budget.applies_to(contract);
    let reserved = counted && road != Road::Approved;
    // Written before anything is reserved, so that nothing after can fail on them.
    if needs_approval {
        canonical.get()?;
    }
    if reserved {
        settings
            .budget
            .reserve(ctx, contract, canonical, passage.check)
            .await?;
    }

    // 7. approve
    if needs_approval {
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
                if let Some(origin) = &untrusted.found_in {
                    pending
                        .ticket
                        .description
                        .push_str(&format!("; {} came from {origin}", untrusted.named()));
                }
            }
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
        return Ok(Outcome::Pending(Box::new(ticket)));
    }

    // What the audit and the caller read of the arguments is written before the tool takes
    // them.
    let observed = contract.snapshot().is_some();
    if settings.audit.is_some() || facts.keep_canonical || observed {
        canonical.get()?;
    }

    // 8. audit: a call that changes state runs only once it is on record.
    if let Some(log) = settings.audit.as_ref()
        && contract.audit_required()
        && let Err(error) = log.about_to_run(ctx, call, contract, facts, None).await
    {
        tracing::error!(tool = contract.name(), %error, "the call could not be recorded before it ran, so it did not run");
        if reserved {
            settings
                .budget
                .release(ctx, contract.name(), contract.cost())
                .await;
        }
        return Err(Rejection::new(
            RejectionCode::AuditUnavailable,
            "the call could not be recorded before it ran, so it did not run",
        )
        .with_hint("try again later"));
    }

    // A decided call leaves the approval store as it runs, not before, so that a worker that
    // stops on the way leaves it for another; and only under its lease, so that it runs once.
    if let Err(refusal) = registry.unlease(facts).await {
        if reserved {
            settings
                .budget
                .release(ctx, contract.name(), contract.cost())
                .await;
        }
        return Err(refusal);
    }
    if facts.lease.get().is_some() {
        // Its claim says it runs now: a worker that stops while it runs leaves it
        // `outcome_unknown`, for an operator to settle.
        let key = CallKey::new(ctx, contract.name(), &call.id);
        settings.repeats.update(&key, ClaimState::Running).await;
    }

    // 9. execute, with the state it changes seen before and after.
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
    Ok(outcome)
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

/// The refusal of a decided call whose lease ran out before it could run: another worker took
/// it, and runs it.
fn lease_lost() -> Rejection {
    Rejection::new(
        RejectionCode::TicketDecided,
        "the decided call was taken by another worker while this one prepared it; it runs there",
    )
    .with_retryable(false)
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

/// The refusal, and the audit's resolution, of a pending call that ends without running:
/// rejected by its reviewer, or expired (before or after a reviewer approved it).
fn unrun(decision: Option<&ApprovalDecision>) -> (Rejection, String) {
    match decision {
        None => (expired(), "expired".to_owned()),
        Some(ApprovalDecision::Reject { reviewer, message }) => {
            let message = crate::rejection::shorten(message, 500);
            (
                Rejection::new(
                    RejectionCode::ApprovalRejected,
                    format!("a reviewer rejected the call: {message}"),
                )
                .with_retryable(false),
                format!("rejected by {}", reviewer.id()),
            )
        }
        Some(approved) => (
            Rejection::new(
                RejectionCode::ApprovalExpired,
                "the call was approved, but its ticket expired before a worker ran it",
            )
            .with_retryable(false),
            format!("expired after {} decided", approved.reviewer().id()),
        ),
    }
}

/// The call a pending call was, as the model sent it.
fn pending_call(pending: &PendingCall) -> ToolCall {
    ToolCall {
        id: pending.ticket.call_id.clone(),
        name: pending.ticket.tool.clone(),
        arguments: pending.arguments.clone(),
    }
}

impl Registry {
    /// Sends one model-produced call through every gate and, if all pass, runs the tool.
    ///
    /// Never panics and never returns an error: whatever the model sent, the answer is an
    /// [`Outcome`], completed or refused with a stable code. The call is borrowed: keep it to
    /// answer the provider with its id.
    pub async fn dispatch(&self, ctx: &CallContext, call: &ToolCall) -> Outcome {
        self.dispatch_keeping(ctx, call, false).await.outcome
    }

    /// [`dispatch`](Self::dispatch), and the canonical arguments of the call whose outcome it
    /// is (with `keep`, whether or not a gate read them): those a reviewer's edit gave, when
    /// an in-line approver edited the call.
    pub(crate) async fn dispatch_keeping(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        keep: bool,
    ) -> Kept {
        let settings = self.settings();
        let facts = Facts {
            keep_canonical: keep,
            ..Facts::default()
        };
        // The clock is read only for the audit: it costs as much as a gate.
        let started = settings.audit.as_ref().map(|_| Instant::now());
        let dispatched = match self.stopped(ctx).await {
            Some(rejection) => Dispatched {
                outcome: Outcome::Rejected(rejection),
                contract: self.contract(&call.name),
            },
            None => self.decide(ctx, call, Road::Fresh, &facts).await,
        };
        let Dispatched { outcome, contract } = dispatched;
        let repeated = facts.repeated.load(Ordering::Relaxed);
        if let Some(started) = started {
            settings
                .record(Decided {
                    ctx,
                    call,
                    contract,
                    outcome: &outcome,
                    duration: started.elapsed(),
                    resolution: repeated.then(|| "repeated call id".to_owned()),
                    original_arguments: None,
                    facts: Some(&facts),
                })
                .await;
        }
        let kept = match (&outcome, &settings.approvals.approver, repeated) {
            (Outcome::Pending(ticket), Some(approver), false) => {
                self.approve_in_line(approver.as_ref(), ticket, keep).await
            }
            _ => None,
        };
        let kept = kept.unwrap_or_else(|| Kept {
            outcome,
            canonical: facts.canonical.into_inner(),
            repeated,
        });
        if let Some(limit) = &settings.refusal_limit
            && counts_as_refusal(&kept.outcome)
        {
            settings
                .budget
                .store
                .count_refusal(ctx.task_id(), limit)
                .await;
        }
        kept
    }

    /// Asks the registry's in-line approver about `ticket` and resumes the call with its
    /// decision; `None` leaves the call pending: the approver failed, may not decide it, or
    /// another decision came first (a repeat of the call reads that one's outcome).
    async fn approve_in_line(
        &self,
        approver: &dyn crate::Approver,
        ticket: &Ticket,
        keep: bool,
    ) -> Option<Kept> {
        let decision = (Contained {
            future: approver.decide(ticket),
        })
        .await
        .ok()?;
        let resumed = Facts {
            keep_canonical: keep,
            ..Facts::default()
        };
        let outcome = self.resume_with(&ticket.id, decision, &resumed).await;
        let waits = matches!(
            outcome.code(),
            Some(
                RejectionCode::ReviewerNotAllowed
                    | RejectionCode::SelfApproval
                    | RejectionCode::DecisionUnsigned
                    | RejectionCode::DecisionSignatureInvalid
                    | RejectionCode::TicketNotPending
                    | RejectionCode::TicketDecided
            )
        );
        (!waits).then(|| Kept {
            outcome,
            canonical: resumed.canonical.into_inner(),
            repeated: false,
        })
    }

    /// The refusal of a task that collected as many refusals within the window as the
    /// registry allows, or whose refusals the store cannot tell.
    async fn stopped(&self, ctx: &CallContext) -> Option<Rejection> {
        let settings = self.settings();
        let limit = settings.refusal_limit.as_ref()?;
        let refusals = match settings.budget.store.refusals(ctx.task_id(), limit).await {
            Ok(refusals) => refusals,
            Err(refusal) => return Some(refusal),
        };
        (refusals >= limit.refusals).then(|| {
            let message = if limit.per == std::time::Duration::MAX {
                format!("this task collected {refusals} refused calls and is stopped")
            } else {
                format!(
                    "this task collected {refusals} refused calls in the last {} s and is stopped until they are older",
                    limit.per.as_secs()
                )
            };
            Rejection::new(RejectionCode::TooManyRefusals, message)
                .with_hint("stop calling tools and tell the user what went wrong")
        })
    }

    /// Ends every pending call whose ticket expired, each refused with `approval_expired`
    /// (or, if a reviewer rejected it, `approval_rejected`), its budget given back and its
    /// decision audited; returns their tickets. Also done whenever a new call begins to wait.
    pub async fn expire_tickets(&self) -> Vec<Ticket> {
        let taken = self.settings().approvals.store.take_expired(now_ms()).await;
        let mut tickets = Vec::with_capacity(taken.len());
        for pending in taken {
            let decision = pending.decision.as_ref().map(|signed| &signed.decision);
            let (refusal, resolution) = unrun(decision);
            self.end_pending(&pending, refusal, resolution).await;
            tickets.push(pending.ticket);
        }
        tickets
    }

    /// Ends a pending call taken from the store that will not run: gives back what the budget
    /// reserved for it, settles its claim with `refusal`, and audits it.
    async fn end_pending(
        &self,
        pending: &PendingCall,
        refusal: Rejection,
        resolution: String,
    ) -> Outcome {
        let settings = self.settings();
        let outcome = Outcome::Rejected(refusal);
        let ticket = &pending.ticket;
        let contract = self.contract(&ticket.tool);
        if let Some(cost) = pending.reserved_cost {
            settings
                .budget
                .release(&pending.ctx, &ticket.tool, cost)
                .await;
        }
        let key = CallKey::new(&pending.ctx, &ticket.tool, &ticket.call_id);
        settings
            .repeats
            .update(&key, ClaimState::Settled(outcome.clone()))
            .await;
        let call = pending_call(pending);
        let mut decided = Decided::plain(&pending.ctx, &call, contract, &outcome);
        decided.resolution = Some(resolution);
        settings.record(decided).await;
        outcome
    }

    /// The pending call of `ticket_id` as `reviewer` may see it: its ticket and its real
    /// canonical arguments, sensitive values included. The model and the audit see only the
    /// ticket, redacted. Refused as [`resume`](Self::resume) would refuse the reviewer.
    pub async fn review(
        &self,
        ticket_id: &str,
        reviewer: &crate::Reviewer,
    ) -> Result<(Ticket, Value), Rejection> {
        let pending = self
            .settings()
            .approvals
            .store
            .get(ticket_id)
            .await?
            .ok_or_else(not_pending)?;
        reviewer.may_decide(&pending.ticket)?;
        Ok((pending.ticket, pending.canonical))
    }

    /// Decides a pending call: runs it as it was (approve) or with the reviewer's arguments
    /// (edit), which pass decode, validate, authorize and budget again, or refuses it with the
    /// reviewer's message (reject). The call is the one stored with the ticket; a ticket is
    /// decided once (`ticket_decided` for the next decision), by a reviewer allowed to
    /// ([`Reviewer::may_decide`](crate::Reviewer::may_decide)), not after it expired, and not
    /// under a contract that changed since it was opened. A reviewer who may not decide leaves
    /// the ticket pending.
    ///
    /// The decision is recorded in the approval store before the call runs: if this process
    /// stops in between, [`run_decided`](Self::run_decided) runs it.
    ///
    /// A registry with a [`keyring`](crate::RegistryBuilder::keyring) counts only a decision
    /// signed by a key it allows for the reviewer ([`DecisionKey::sign`](crate::DecisionKey::sign)),
    /// and takes the reviewer's roles from the keyring: another leaves the ticket pending,
    /// refused with `decision_unsigned` or `decision_signature_invalid`.
    pub async fn resume(&self, ticket_id: &str, decision: impl Into<SignedDecision>) -> Outcome {
        self.resume_with(ticket_id, decision.into(), &Facts::default())
            .await
    }

    /// Runs the calls whose decision is recorded but that no worker took yet: decided by
    /// another process (the `portcullis` command line, a review service) with
    /// [`record_decision`](crate::record_decision), or by a worker that stopped before it ran
    /// them. Each runs once, whichever worker takes it. A worker calls it when it starts and
    /// then every few seconds; returns the id and outcome of each ticket this call took, or
    /// `approvals_unavailable` when the store cannot be read.
    ///
    /// A ticket is left for another worker when this registry does not have its tool under
    /// the contract it was opened for (another application sharing the store, or an older
    /// or newer build during a deploy); it ends when it expires if no worker has.
    pub async fn run_decided(&self) -> Result<Vec<(String, Outcome)>, Rejection> {
        if let Err(error) = self.flush_audit().await {
            tracing::error!(%error, "the outcome records kept while the audit failed could not be stored yet");
        }
        let store = &self.settings().approvals.store;
        let decided = store.decided().await?;
        let mut outcomes = Vec::with_capacity(decided.len());
        for ticket_id in decided {
            let ours = match store.get(&ticket_id).await {
                Ok(Some(pending)) => {
                    self.contract(&pending.ticket.tool).map(contract_hash)
                        == Some(pending.ticket.contract_hash)
                }
                Ok(None) => false,
                Err(rejection) => {
                    outcomes.push((ticket_id, Outcome::Rejected(rejection)));
                    continue;
                }
            };
            if !ours {
                continue;
            }
            // A ticket another worker took meanwhile is its to report.
            if let Some(outcome) = self.run_decision(&ticket_id, &Facts::default()).await {
                outcomes.push((ticket_id, outcome));
            }
        }
        Ok(outcomes)
    }

    /// Stores the outcome records of calls that ran while the audit sink could not store them
    /// (its database was down, say), in order; returns how many. Each was kept in memory when
    /// its store failed, and the next record stores them first, so no call runs before they
    /// are on record; a worker's loop calls this too ([`run_decided`](Self::run_decided)
    /// does), so that they are stored once the sink is back even when no call comes. They are
    /// lost if the process stops first: its `about_to_run` records show which calls ran.
    pub async fn flush_audit(&self) -> std::io::Result<usize> {
        match &self.settings().audit {
            Some(log) => log.store_unstored().await,
            None => Ok(0),
        }
    }

    /// Moves the call waiting under `ticket_id` on, for a caller that waits for it (an MCP
    /// client holding its request open): carries out its decision when one is recorded and no
    /// worker took it yet, and ends it when it expired. Returns where it stands, or
    /// `approvals_unavailable` when the store cannot be read. Poll it; the call runs once,
    /// whoever polls.
    pub async fn follow(&self, ticket_id: &str) -> Result<Progress, Rejection> {
        let store = &self.settings().approvals.store;
        let Some(pending) = store.get(ticket_id).await? else {
            return Ok(Progress::Left);
        };
        if pending.decision.is_some() {
            return Ok(self
                .run_decision(ticket_id, &Facts::default())
                .await
                .map_or(Progress::Left, Progress::Ended));
        }
        if pending.ticket.is_expired(now_ms()) {
            self.expire_tickets().await;
            return Ok(Progress::Left);
        }
        Ok(Progress::Waiting)
    }

    /// [`resume`](Self::resume), with what the gates learn of the call kept in `facts`.
    async fn resume_with(
        &self,
        ticket_id: &str,
        decision: SignedDecision,
        facts: &Facts,
    ) -> Outcome {
        let settings = self.settings();
        let store = &settings.approvals.store;
        let reviewer = decision.reviewer().id().to_owned();
        // A decision that will not count is refused before it is recorded, so that the ticket
        // still waits for one that does; the worker that runs the call checks it again.
        let checked = match store.get(ticket_id).await {
            Ok(Some(pending)) if pending.decision.is_none() => {
                let contract = self.contract(&pending.ticket.tool);
                match settings.approvals.check(contract, &pending, &decision) {
                    Ok(_) => Ok(()),
                    Err(refusal) => Err((refusal, Some(pending))),
                }
            }
            Ok(_) => Ok(()),
            Err(refusal) => Err((refusal, None)),
        };
        let recorded = match checked {
            Ok(()) => record_decision(store.as_ref(), ticket_id, decision)
                .await
                .map_err(|refusal| (refusal, None)),
            Err(refused) => Err(refused),
        };
        if let Err((rejection, checked)) = recorded {
            let refused_reviewer = matches!(
                rejection.code(),
                RejectionCode::ReviewerNotAllowed
                    | RejectionCode::SelfApproval
                    | RejectionCode::DecisionUnsigned
                    | RejectionCode::DecisionSignatureInvalid
            );
            let outcome = Outcome::Rejected(rejection);
            let pending = match checked {
                Some(pending) => Some(pending),
                None if refused_reviewer => store.get(ticket_id).await.ok().flatten(),
                None => None,
            };
            if refused_reviewer && let Some(pending) = pending {
                let call = pending_call(&pending);
                let contract = self.contract(&pending.ticket.tool);
                let mut decided = Decided::plain(&pending.ctx, &call, contract, &outcome);
                decided.resolution = Some(format!("refused to {reviewer}"));
                settings.record(decided).await;
            }
            return outcome;
        }
        // Recorded, but taken by another worker first: it runs there, as decided.
        self.run_decision(ticket_id, facts)
            .await
            .unwrap_or_else(|| Outcome::Rejected(already_decided()))
    }

    /// Takes the decided call of `ticket_id` from the store and carries out its decision;
    /// `None` when there was no decided call to take.
    async fn run_decision(&self, ticket_id: &str, facts: &Facts) -> Option<Outcome> {
        let settings = self.settings();
        let store = &settings.approvals.store;
        let lease = Lease::new(settings.approvals.lease);
        let pending = match store.lease(ticket_id, &lease).await {
            Ok(leased) => leased?,
            Err(rejection) => return Some(Outcome::Rejected(rejection)),
        };
        let decision = pending.decision.clone()?;
        let _ = facts.lease.set((ticket_id.to_owned(), lease.id));
        Some(self.carry_out(pending, decision, facts).await)
    }

    /// Carries out `decision` on `pending`, taken from the store.
    async fn carry_out(
        &self,
        pending: PendingCall,
        decision: SignedDecision,
        facts: &Facts,
    ) -> Outcome {
        let started = Instant::now();
        let settings = self.settings();
        let store = &settings.approvals.store;
        let contract = self.contract(&pending.ticket.tool);
        // The store is not taken at its word: a decision recorded around `record_decision`, or
        // a row written around portcullis, is held to the same rules, its signature included.
        let (reviewer, signed) = match settings.approvals.check(contract, &pending, &decision) {
            Ok(checked) => checked,
            Err(refusal) => {
                let named = decision.reviewer().id();
                return self
                    .end_leased(&pending, refusal, format!("refused to {named}"), facts)
                    .await;
            }
        };
        let decision = decision.decision;
        // A rejection stands whenever it is carried out; an approval only within the ticket's
        // lifetime, and under the contract it was given for. `edited`: None for a rejection,
        // then the arguments a reviewer put in place of the model's, if any.
        let edited = match decision {
            ApprovalDecision::Reject { .. } => None,
            ApprovalDecision::Approve { .. } => Some(None),
            ApprovalDecision::Edit { ref arguments, .. } => Some(Some(arguments.clone())),
        };
        let Some(edited) = edited.filter(|_| !pending.ticket.is_expired(now_ms())) else {
            let (refusal, resolution) = unrun(Some(&decision));
            return self
                .end_leased(&pending, refusal, format!("{resolution}, {signed}"), facts)
                .await;
        };
        if contract.map(contract_hash).as_deref() != Some(pending.ticket.contract_hash.as_str()) {
            return self
                .end_leased(
                    &pending,
                    Rejection::new(
                        RejectionCode::ContractChanged,
                        "the tool changed since the call began to wait, so it does not run",
                    )
                    .with_retryable(false),
                    format!("contract changed before {} decided", reviewer.id()),
                    facts,
                )
                .await;
        }
        let mut call = pending_call(&pending);
        let ctx = &pending.ctx;
        let (road, resolution, original_arguments) = match edited {
            None => (
                Road::Approved,
                format!("approved by {}, {signed}", reviewer.id()),
                None,
            ),
            Some(arguments) => {
                // What the reviewer typed is theirs: a source of the edited call, and of the
                // task's later calls.
                let origin = Origin::Edit {
                    reviewer: reviewer.id().to_owned(),
                    ticket: pending.ticket.id.clone(),
                };
                let edit = source(origin, source_text(&arguments, &|_| true));
                if settings.provenance.recording
                    && let Err(refusal) = settings.provenance.store.record(ctx, &edit).await
                {
                    tracing::error!(%refusal, "a reviewer's edit could not be recorded as a source of its task");
                }
                let _ = facts.edit.set(edit);
                // The edited call is counted for itself.
                if let Some(cost) = pending.reserved_cost {
                    settings.budget.release(ctx, &call.name, cost).await;
                }
                call.arguments = Arguments::Json(arguments);
                let original = pending.ticket.arguments.clone();
                (
                    Road::Edited,
                    format!("edited by {}, {signed}", reviewer.id()),
                    Some(original),
                )
            }
        };
        let key = CallKey::new(ctx, &pending.ticket.tool, &pending.ticket.call_id);
        // A decided call runs only while its claim still waits under this ticket: a row put
        // back into the store after its call ran, or whose claim is gone, runs nothing.
        if let Err(refusal) = self.still_waiting(&key, &pending).await {
            // A replayed row ends here; a call whose claim could not be read waits for the
            // claims to come back, under its lease.
            if refusal.code() != RejectionCode::ClaimsUnavailable {
                let _ = self.unlease(facts).await;
            }
            let outcome = Outcome::Rejected(refusal);
            let mut decided = Decided::plain(ctx, &call, self.contract(&call.name), &outcome);
            decided.resolution = Some(resolution);
            settings.record(decided).await;
            return outcome;
        }
        let Dispatched { outcome, contract } = self.decide(ctx, &call, road, facts).await;
        let unrecorded = matches!(
            outcome.code(),
            Some(RejectionCode::AuditUnavailable | RejectionCode::BudgetUnavailable)
        );
        let left = matches!(
            outcome.code(),
            Some(
                RejectionCode::ApprovalsUnavailable
                    | RejectionCode::SealKeyMissing
                    | RejectionCode::TicketDecided
            )
        );
        if unrecorded || left {
            // Nothing ran: the call stays under its ticket and its decision, claimed as
            // pending. Given back when its audit could not be written or its budget counted,
            // for `run_decided` once they can; left under the lease when the store could not remove it (the lease runs
            // out, and a worker runs it then) or another worker holds it. An approved call
            // keeps its reservation; an edited one was given back and is counted again then.
            let mut decided = Decided::plain(ctx, &call, contract, &outcome);
            decided.resolution = Some(resolution);
            settings.record(decided).await;
            if let (true, Some((ticket_id, lease_id))) = (unrecorded, facts.lease.get()) {
                let mut pending = pending;
                if road == Road::Edited {
                    pending.reserved_cost = None;
                }
                if let Err(rejection) = store.give_back(ticket_id, lease_id, &pending).await {
                    tracing::error!(%rejection, "an approved call could not wait again for its audit");
                }
            }
            return outcome;
        }
        // A call the gates refused before it ran is still in the store: it ends here (a call
        // that ran left it already).
        let _ = self.unlease(facts).await;
        if road == Road::Approved
            && !ran(&outcome)
            && let Some(cost) = pending.reserved_cost
        {
            settings.budget.release(ctx, &call.name, cost).await;
        }
        settings
            .repeats
            .update(&key, ClaimState::Settled(outcome.clone()))
            .await;
        settings
            .record(Decided {
                ctx,
                call: &call,
                contract,
                outcome: &outcome,
                duration: started.elapsed(),
                resolution: Some(resolution),
                original_arguments,
                facts: Some(facts),
            })
            .await;
        outcome
    }

    /// Whether the claim of the call waiting under `pending`'s ticket still waits for it: the
    /// claim made when the call began to wait, with the call's arguments, pending under this
    /// ticket. `ticket_decided` otherwise: the call ran or ended already (its row was put back
    /// into the store), or its claim is gone.
    async fn still_waiting(&self, key: &CallKey, pending: &PendingCall) -> Result<(), Rejection> {
        let settings = self.settings();
        let Some(Registered { check, .. }) = self.registered(&pending.ticket.tool) else {
            return Ok(());
        };
        let fingerprint = sha256_hex(check.identity_text(&pending.canonical).as_bytes());
        let replayed = || {
            Rejection::new(
                RejectionCode::TicketDecided,
                "this ticket's call ran or ended already; a decision runs it once",
            )
            .with_retryable(false)
        };
        match settings.repeats.claim(key, &fingerprint, 0).await {
            Claim::Existing(ClaimState::Pending(ticket)) if ticket.id == pending.ticket.id => {
                Ok(())
            }
            Claim::New => {
                settings.repeats.release(key).await;
                Err(replayed())
            }
            Claim::Unavailable | Claim::Full => Err(Rejection::new(
                RejectionCode::ClaimsUnavailable,
                "the call's claim could not be read, so it did not run",
            )
            .with_hint("try again later")),
            _ => Err(replayed()),
        }
    }

    /// Ends a leased call that will not run: takes it out of the store under its lease, then
    /// as [`end_pending`](Self::end_pending). A call whose lease ran out is left to the worker
    /// that holds it now.
    async fn end_leased(
        &self,
        pending: &PendingCall,
        refusal: Rejection,
        resolution: String,
        facts: &Facts,
    ) -> Outcome {
        if let Err(left) = self.unlease(facts).await {
            return Outcome::Rejected(left);
        }
        self.end_pending(pending, refusal, resolution).await
    }

    /// Removes the decided call this worker leased from the approval store: `lease_lost` when
    /// another worker took it since, the store's refusal when it could not be written.
    pub(crate) async fn unlease(&self, facts: &Facts) -> Result<(), Rejection> {
        let Some((ticket_id, lease_id)) = facts.lease.get() else {
            return Ok(());
        };
        let store = &self.settings().approvals.store;
        match store.remove(ticket_id, lease_id).await? {
            true => Ok(()),
            false => Err(lease_lost()),
        }
    }

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
        let known =
            |entry: &Registered| settings.reveal_denied_tools || entry.tool.contract().grants(ctx);
        let visible = |entry: &Registered| {
            let contract = entry.tool.contract();
            contract.grants(ctx) && ctx.tool_choice().allows(contract.name())
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
        if let Err(rejection) = authorize_caller(contract, ctx) {
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

    /// Runs the compensation of a completed call, contained and audited.
    pub(crate) async fn compensate(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        canonical: &Value,
        output: Value,
    ) -> CompensationResult {
        let started = Instant::now();
        let Some(Registered { tool, check }) = self
            .registered(&call.name)
            .filter(|registered| registered.tool.contract().has_rollback())
        else {
            return CompensationResult::NothingToUndo;
        };
        let failed = |error| -> BoxFuture<'_, _> { Box::pin(std::future::ready(Err(error))) };
        // The tool's own code reads the output back: a panic there fails this compensation,
        // not the transaction that asked for it.
        let prepared = catch_unwind(AssertUnwindSafe(|| {
            match rebind(&**tool, check, canonical) {
                Ok(bound) => bound.compensate(ctx, output),
                Err(rejection) => Some(failed(ToolError::new(
                    "compensation_arguments_unreadable",
                    rejection.message().to_owned(),
                ))),
            }
        }));
        let compensation = prepared.unwrap_or_else(|_| Some(failed(compensation_panicked())));
        let Some(compensation) = compensation else {
            return CompensationResult::NothingToUndo;
        };
        let facts = Facts::default();
        let _ = facts.canonical.set(canonical.clone());
        let settings = self.settings();
        // A compensation changes state too: under the same write-ahead rule as the call.
        if let Some(log) = settings.audit.as_ref() {
            let contract = tool.contract();
            if contract.audit_required()
                && let Err(error) = log
                    .about_to_run(ctx, call, contract, &facts, Some("compensation"))
                    .await
            {
                tracing::error!(tool = contract.name(), %error, "a compensation could not be recorded before it ran, so it did not run");
                return CompensationResult::Failed(ToolError::new(
                    "audit_unavailable",
                    "the compensation could not be recorded before it ran, so it did not run",
                ));
            }
        }
        let result = match (Contained {
            future: compensation,
        })
        .await
        {
            Ok(Ok(())) => CompensationResult::Compensated,
            Ok(Err(error)) => CompensationResult::Failed(error),
            Err(()) => CompensationResult::Failed(compensation_panicked()),
        };
        let outcome = match &result {
            CompensationResult::Failed(error) => Outcome::Rejected(
                Rejection::new(RejectionCode::ToolFailed, error.message())
                    .with_reason(error.code()),
            ),
            _ => Outcome::Completed(Value::Null),
        };
        settings
            .record(Decided {
                ctx,
                call,
                contract: Some(tool.contract()),
                outcome: &outcome,
                duration: started.elapsed(),
                resolution: Some("compensation".to_owned()),
                original_arguments: None,
                facts: Some(&facts),
            })
            .await;
        result
    }
}

/// The failure of a compensation that panicked.
fn compensation_panicked() -> ToolError {
    ToolError::new(
        "compensation_panicked",
        "the compensation failed unexpectedly",
    )
}

/// Whether a refusal counts toward the task's refusal limit: a refusal of what the model sent
/// or asked for, not the tool's own failure, a call still running, the limit itself, or a
/// store or audit sink that could not be reached.
fn counts_as_refusal(outcome: &Outcome) -> bool {
    outcome.rejection().is_some_and(|rejection| {
        rejection.gate() != Gate::Execute
            && !matches!(
                rejection.code(),
                RejectionCode::CallInProgress
                    | RejectionCode::OutcomeUnknown
                    | RejectionCode::TooManyRefusals
                    | RejectionCode::AuditUnavailable
                    | RejectionCode::ClaimsUnavailable
                    | RejectionCode::ClaimStoreFull
                    | RejectionCode::BudgetUnavailable
                    | RejectionCode::BudgetStoreFull
                    | RejectionCode::ApprovalsUnavailable
                    | RejectionCode::SealKeyMissing
            )
    })
}
