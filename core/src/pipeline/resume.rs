//! The resume road: a reviewer's decision on a waiting call, and the decided call carried out
//! from decode, under a lease, by whichever worker takes it.

use std::time::Instant;

use serde_json::Value;

use super::{Dispatched, Road, ran};
use crate::audit::{Decided, Facts};
use crate::contract::Origin;
use crate::contract::contract_hash;
use crate::gate::approve::decision::{already_decided, expired, not_pending};
use crate::gate::approve::store::Lease;
use crate::gate::approve::store::record_decision;
use crate::gate::authorize::provenance::source;
use crate::gate::authorize::provenance::text::source_text;
use crate::gate::decode::fingerprint;

use crate::call::{Arguments, ToolCall};
use crate::gate::approve::decision::ApprovalDecision;
use crate::gate::approve::signed::SignedDecision;
use crate::gate::approve::store::PendingCall;
use crate::gate::repeat::{CallKey, Claim, ClaimState};
use crate::outcome::{Outcome, Ticket};
use crate::registry::Registered;
use crate::registry::Registry;
use crate::rejection::{Rejection, RejectionCode};
use crate::time::now_ms;

impl Registry {
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
        reviewer: &crate::gate::approve::reviewer::Reviewer,
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

    /// [`resume`](Self::resume), with what the gates learn of the call kept in `facts`.
    pub(super) async fn resume_with(
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
    pub(super) async fn run_decision(&self, ticket_id: &str, facts: &Facts) -> Option<Outcome> {
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
            None => {
                // Judged when the call began to wait (if its contract has the gate judge it),
                // and seen by the reviewer since: the policies read the same findings, and the
                // record of the run keeps them.
                if contract.is_some_and(|contract| contract.provenance().checks_calls()) {
                    let _ = facts.sources.set(pending.ticket.sources.clone());
                }
                (
                    Road::Approved,
                    format!("approved by {}, {signed}", reviewer.id()),
                    None,
                )
            }
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
        let fingerprint = fingerprint(check, &pending.canonical);
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

/// The refusal of a decided call whose lease ran out before it could run: another worker took
/// it, and runs it.
fn lease_lost() -> Rejection {
    Rejection::new(
        RejectionCode::TicketDecided,
        "the decided call was taken by another worker while this one prepared it; it runs there",
    )
    .with_retryable(false)
}
