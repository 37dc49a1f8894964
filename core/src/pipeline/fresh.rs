//! The fresh road: a call from the model, down every gate from the refusal limit to the tool.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{Dispatched, Kept, Road};
use crate::audit::{Decided, Facts};
use crate::future::Contained;

use crate::context::CallContext;

use crate::rejection::{Gate, Rejection, RejectionCode};

use crate::outcome::{Outcome, Ticket};

use crate::registry::Registry;

use crate::call::ToolCall;

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
            // Boxed: the audit's future is large, and a registry without one would carry it.
            Box::pin(settings.record(Decided {
                ctx,
                call,
                contract,
                outcome: &outcome,
                duration: started.elapsed(),
                resolution: repeated.then(|| "repeated call id".to_owned()),
                original_arguments: None,
                facts: Some(&facts),
            }))
            .await;
        }
        let kept = match (&outcome, &settings.approvals.approver, repeated) {
            // Boxed: resuming a call is a large future, and most calls never need it.
            (Outcome::Pending(ticket), Some(approver), false) => {
                Box::pin(self.approve_in_line(approver.as_ref(), ticket, keep)).await
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
            settings.budget.store.count_refusal(ctx, limit).await;
        }
        kept
    }

    /// Asks the registry's in-line approver about `ticket` and resumes the call with its
    /// decision; `None` leaves the call pending: the approver failed, may not decide it, or
    /// another decision came first (a repeat of the call reads that one's outcome).
    async fn approve_in_line(
        &self,
        approver: &dyn crate::gate::approve::store::Approver,
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
        let refusals = match settings.budget.store.refusals(ctx, limit).await {
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
                    | RejectionCode::ClaimShareFull
                    | RejectionCode::TaskExpired
                    | RejectionCode::BudgetUnavailable
                    | RejectionCode::BudgetStoreFull
                    | RejectionCode::BudgetShareFull
                    | RejectionCode::ApprovalsUnavailable
                    | RejectionCode::SealKeyMissing
            )
    })
}
