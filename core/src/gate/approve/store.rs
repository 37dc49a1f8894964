//! Human approval: a call that needs it waits as a [`Ticket`] until a reviewer approves, edits
//! or rejects it, or it expires.
//!
//! A ticket is bound to the exact call it shows: [`Registry::resume`](crate::Registry::resume)
//! runs the call stored with the ticket, never another, and records one decision on it in the
//! [`ApprovalStore`], so no ticket is decided twice; a worker leases the decided call and
//! removes it as the call runs, so that it runs once, whichever worker stops. Edited arguments go through
//! decode, validate, authorize and budget again: a reviewer cannot smuggle in what the gates
//! refuse. Ticket ids are 128 random bits from the operating system: knowing one ticket tells
//! nothing of another.

use std::collections::HashMap;
use std::future::ready;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::decision::{
    ApprovalDecision, Recorded, already_decided, expired, not_pending, unavailable,
};
use super::reviewer::Reviewer;
use super::signed::SignedDecision;
use crate::call::Arguments;
use crate::context::CallContext;
use crate::encoding::random_id;
use crate::future::BoxFuture;
use crate::outcome::Ticket;
use crate::rejection::{Rejection, RejectionCode};
use crate::time::{expiry_ms, now_ms};

/// A call waiting in a store: its ticket, the caller's context and the arguments as sent. It
/// serializes for a durable store; the context's extensions are not kept (see
/// [`CallContext`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingCall {
    /// The ticket shown to the reviewer.
    pub ticket: Ticket,
    /// The caller's context, restored when the call runs.
    pub ctx: CallContext,
    /// The arguments as the model sent them.
    pub arguments: Arguments,
    /// The canonical arguments, sensitive values included, for a reviewer allowed to decide.
    pub canonical: Value,
    /// The cost the budget reserved for the call as it began to wait, given back if it does
    /// not run; `None` when the budget did not count it.
    pub reserved_cost: Option<u64>,
    /// The decision recorded on the ticket, once a reviewer took it: the call then waits for
    /// a worker to run it ([`Registry::run_decided`](crate::Registry::run_decided)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<SignedDecision>,
}

/// How many calls may wait for approval at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingLimits {
    /// Calls of one task waiting at once.
    pub per_task: usize,
    /// Calls of one caller (its actor in its tenant: the same actor in another tenant is
    /// another caller) waiting at once, all tasks together.
    pub per_actor: usize,
}

impl PendingLimits {
    /// Whether one more call may wait, with `of_task` calls of its task and `of_actor` of its
    /// actor waiting (unexpired) already: `too_many_pending` otherwise. The rule every store
    /// applies, in the atomic step that keeps the call.
    pub fn admit(&self, of_task: u64, of_actor: u64) -> Result<(), Rejection> {
        let full = |message: String| {
            Err(Rejection::new(RejectionCode::TooManyPending, message)
                .with_hint("wait for a reviewer to decide the calls already waiting")
                .with_retryable(false))
        };
        let reached =
            |count: u64, limit: usize| usize::try_from(count).map_or(true, |count| count >= limit);
        if reached(of_task, self.per_task) {
            return full(format!(
                "this task has {of_task} calls waiting for approval"
            ));
        }
        if reached(of_actor, self.per_actor) {
            return full(format!(
                "{of_actor} calls of this caller wait for approval, its whole share"
            ));
        }
        Ok(())
    }
}

impl Default for PendingLimits {
    /// 10 per task, 100 per actor.
    fn default() -> Self {
        PendingLimits {
            per_task: 10,
            per_actor: 100,
        }
    }
}

/// A worker's hold on a decided call it is about to run: the call stays in the store until it
/// runs, so that if the worker stops first, another leases it once the lease ran out, and runs
/// it once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The lease's id, 128 random bits: only its holder may remove or give back the call.
    pub id: String,
    /// When the lease was taken, in milliseconds since the Unix epoch: a lease of another
    /// worker that ran out before it no longer holds.
    pub now_ms: u64,
    /// Until when it holds, in milliseconds since the Unix epoch.
    pub until_ms: u64,
}

impl Lease {
    /// A new lease, from now for `length`.
    pub fn new(length: Duration) -> Self {
        let now = now_ms();
        Lease {
            id: random_id("lease"),
            now_ms: now,
            until_ms: expiry_ms(now, length),
        }
    }
}

/// Keeps pending calls until they are decided and run. `insert` must check the limits and keep
/// the call in one atomic step, `decide` must record a decision only on a ticket that has none
/// (of two concurrent decisions, one is recorded), and `lease` must lease atomically (of two
/// workers, one gets the call).
pub trait ApprovalStore: Send + Sync + 'static {
    /// Keeps a pending call, unless its task or its actor already has as many waiting as
    /// `limits` allow (`too_many_pending`). Expired tickets do not count.
    fn insert(
        &self,
        pending: PendingCall,
        limits: PendingLimits,
    ) -> BoxFuture<'_, Result<(), Rejection>>;
    /// The pending call of ticket `id`, left in place. A store that cannot be read answers
    /// with an `approvals_unavailable` refusal, here and below.
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<PendingCall>, Rejection>>;
    /// Records `decision` on ticket `id`, if the ticket is there, has no decision yet and has
    /// not expired at `now_ms`, in one atomic step.
    fn decide<'a>(
        &'a self,
        id: &'a str,
        decision: &'a SignedDecision,
        now_ms: u64,
    ) -> BoxFuture<'a, Recorded>;
    /// Leases the decided call of ticket `id` under `lease` and returns it, left in place; of
    /// two workers, one gets it. `None` when no decided call is there, or another lease on it
    /// still holds at `lease.now_ms`.
    fn lease<'a>(
        &'a self,
        id: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Option<PendingCall>, Rejection>>;
    /// Removes the call of ticket `id` if the lease `lease_id` still holds it: the call runs
    /// now, or ended without running. `false`: the lease ran out and another worker took it.
    fn remove<'a>(
        &'a self,
        id: &'a str,
        lease_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, Rejection>>;
    /// Gives back the call of ticket `id` held by the lease `lease_id`, as `pending` (its
    /// reservation may have changed), for a worker to run later.
    fn give_back<'a>(
        &'a self,
        id: &'a str,
        lease_id: &'a str,
        pending: &'a PendingCall,
    ) -> BoxFuture<'a, Result<(), Rejection>>;
    /// Removes and returns every call whose ticket expired at `now_ms` and that no lease holds.
    fn take_expired(&self, now_ms: u64) -> BoxFuture<'_, Vec<PendingCall>>;
    /// The tickets waiting for a decision, oldest first, for a reviewer's queue.
    fn pending(&self) -> BoxFuture<'_, Result<Vec<Ticket>, Rejection>>;
    /// The ids of tickets decided whose call no lease holds, oldest first.
    fn decided(&self) -> BoxFuture<'_, Result<Vec<String>, Rejection>>;
}

/// Records `decision` on ticket `ticket_id` in `store`, for a worker to run
/// ([`Registry::run_decided`](crate::Registry::run_decided)); returns the pending call, its
/// decision set. The rules of [`Registry::resume`](crate::Registry::resume) hold: the reviewer
/// must be allowed to decide the ticket, the ticket must not have expired, and a ticket takes
/// one decision (`ticket_decided` for the next).
///
/// This is how a process without the application's tools decides, such as the `portcullis`
/// command line. The store is not the authority: the worker that runs the call checks the
/// decision again, against its own keyring and settings.
pub async fn record_decision(
    store: &dyn ApprovalStore,
    ticket_id: &str,
    decision: impl Into<SignedDecision>,
) -> Result<PendingCall, Rejection> {
    let decision = decision.into();
    let Some(mut pending) = store.get(ticket_id).await? else {
        return Err(not_pending());
    };
    if pending.decision.is_some() {
        return Err(already_decided());
    }
    decision.reviewer().may_decide(&pending.ticket)?;
    let now = now_ms();
    if pending.ticket.is_expired(now) {
        return Err(expired());
    }
    match store.decide(ticket_id, &decision, now).await {
        Recorded::Recorded => {
            pending.decision = Some(decision);
            Ok(pending)
        }
        Recorded::AlreadyDecided => Err(already_decided()),
        Recorded::NotPending => Err(not_pending()),
        Recorded::Expired => Err(expired()),
        Recorded::Unavailable => Err(unavailable(
            "the decision could not be recorded, so nothing was decided",
        )),
    }
}

/// An [`ApprovalStore`] in memory, for one process. It holds at most `capacity` pending calls
/// (10,000 by default), all tasks and actors together, besides the limits per task and per
/// actor ([`PendingLimits`]): a call that would wait in a full store is refused with
/// `too_many_pending`. A pending call is forgotten only as it ends: taken to run, or expired
/// ([`Registry::expire_tickets`](crate::Registry::expire_tickets), which runs whenever a new
/// call begins to wait).
#[derive(Debug, Clone)]
pub struct InMemoryApprovalStore {
    kept: Arc<Mutex<Kept>>,
    capacity: usize,
}

impl Default for InMemoryApprovalStore {
    fn default() -> Self {
        InMemoryApprovalStore::with_capacity(10_000)
    }
}

/// The calls waiting, and the leases on those about to run.
#[derive(Debug, Default)]
struct Kept {
    calls: HashMap<String, PendingCall>,
    /// Ticket id to the lease's id and until when it holds.
    leases: HashMap<String, (String, u64)>,
}

impl Kept {
    fn leased(&self, id: &str, now_ms: u64) -> bool {
        self.leases
            .get(id)
            .is_some_and(|(_, until_ms)| *until_ms > now_ms)
    }

    fn held_by(&self, id: &str, lease_id: &str) -> bool {
        self.leases
            .get(id)
            .is_some_and(|(held, _)| held == lease_id)
    }
}

impl InMemoryApprovalStore {
    /// A store that holds at most `capacity` pending calls at once.
    pub fn with_capacity(capacity: usize) -> Self {
        InMemoryApprovalStore {
            kept: Arc::default(),
            capacity,
        }
    }

    /// How many pending calls the store holds now.
    #[doc(hidden)]
    pub fn held(&self) -> usize {
        self.lock().calls.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tickets of the calls `which` selects, oldest first.
    fn oldest_first(&self, which: impl Fn(&Kept, &PendingCall) -> bool) -> Vec<Ticket> {
        let kept = self.lock();
        let mut tickets: Vec<Ticket> = kept
            .calls
            .values()
            .filter(|pending| which(&kept, pending))
            .map(|pending| pending.ticket.clone())
            .collect();
        tickets.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        tickets
    }
}

impl ApprovalStore for InMemoryApprovalStore {
    fn insert(
        &self,
        pending: PendingCall,
        limits: PendingLimits,
    ) -> BoxFuture<'_, Result<(), Rejection>> {
        let mut kept = self.lock();
        if kept.calls.len() >= self.capacity {
            return Box::pin(ready(Err(Rejection::new(
                RejectionCode::TooManyPending,
                format!(
                    "{} calls wait for approval, as many as this store holds",
                    kept.calls.len()
                ),
            )
            .with_hint("wait for a reviewer to decide the calls already waiting"))));
        }
        let now = now_ms();
        let waiting = kept
            .calls
            .values()
            .filter(|other| !other.ticket.is_expired(now));
        let (mut of_task, mut of_actor) = (0, 0);
        for other in waiting {
            of_task += u64::from(other.ctx.task_id() == pending.ctx.task_id());
            of_actor += u64::from(
                other.ticket.actor == pending.ticket.actor
                    && other.ctx.tenant() == pending.ctx.tenant(),
            );
        }
        let result = limits.admit(of_task, of_actor).map(|()| {
            kept.calls.insert(pending.ticket.id.clone(), pending);
        });
        Box::pin(ready(result))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<PendingCall>, Rejection>> {
        Box::pin(ready(Ok(self.lock().calls.get(id).cloned())))
    }

    fn decide<'a>(
        &'a self,
        id: &'a str,
        decision: &'a SignedDecision,
        now_ms: u64,
    ) -> BoxFuture<'a, Recorded> {
        let recorded = match self.lock().calls.get_mut(id) {
            None => Recorded::NotPending,
            Some(pending) if pending.decision.is_some() => Recorded::AlreadyDecided,
            Some(pending) if pending.ticket.is_expired(now_ms) => Recorded::Expired,
            Some(pending) => {
                pending.decision = Some(decision.clone());
                Recorded::Recorded
            }
        };
        Box::pin(ready(recorded))
    }

    fn lease<'a>(
        &'a self,
        id: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Option<PendingCall>, Rejection>> {
        let mut kept = self.lock();
        let leasable = kept
            .calls
            .get(id)
            .filter(|pending| pending.decision.is_some())
            .cloned()
            .filter(|_| !kept.leased(id, lease.now_ms));
        if leasable.is_some() {
            kept.leases
                .insert(id.to_owned(), (lease.id.clone(), lease.until_ms));
        }
        Box::pin(ready(Ok(leasable)))
    }

    fn remove<'a>(
        &'a self,
        id: &'a str,
        lease_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, Rejection>> {
        let mut kept = self.lock();
        let held = kept.held_by(id, lease_id);
        if held {
            kept.calls.remove(id);
            kept.leases.remove(id);
        }
        Box::pin(ready(Ok(held)))
    }

    fn give_back<'a>(
        &'a self,
        id: &'a str,
        lease_id: &'a str,
        pending: &'a PendingCall,
    ) -> BoxFuture<'a, Result<(), Rejection>> {
        let mut kept = self.lock();
        if kept.held_by(id, lease_id) {
            kept.leases.remove(id);
            kept.calls.insert(id.to_owned(), pending.clone());
        }
        Box::pin(ready(Ok(())))
    }

    fn take_expired(&self, now_ms: u64) -> BoxFuture<'_, Vec<PendingCall>> {
        let mut kept = self.lock();
        let expired: Vec<String> = kept
            .calls
            .values()
            .filter(|pending| pending.ticket.is_expired(now_ms))
            .map(|pending| pending.ticket.id.clone())
            .filter(|id| !kept.leased(id, now_ms))
            .collect();
        let mut taken = Vec::with_capacity(expired.len());
        for id in expired {
            kept.leases.remove(&id);
            taken.extend(kept.calls.remove(&id));
        }
        Box::pin(ready(taken))
    }

    fn pending(&self) -> BoxFuture<'_, Result<Vec<Ticket>, Rejection>> {
        Box::pin(ready(Ok(
            self.oldest_first(|_, pending| pending.decision.is_none())
        )))
    }

    fn decided(&self) -> BoxFuture<'_, Result<Vec<String>, Rejection>> {
        let now = now_ms();
        let tickets = self.oldest_first(|kept, pending| {
            pending.decision.is_some() && !kept.leased(&pending.ticket.id, now)
        });
        Box::pin(ready(Ok(tickets
            .into_iter()
            .map(|ticket| ticket.id)
            .collect())))
    }
}

/// A reviewer that answers in line, while the dispatch waits: a terminal prompt, a callback,
/// or, in tests, [`AutoApprove`] and [`AutoReject`]. Without one, a call that needs approval
/// returns [`Outcome::Pending`](crate::Outcome::Pending). Its decisions are held to the same
/// rules as any other: a registry with a [`Keyring`](crate::Keyring) counts them only signed
/// ([`DecisionKey::sign`](crate::DecisionKey::sign)).
pub trait Approver: Send + Sync + 'static {
    /// Decides on `ticket`.
    fn decide<'a>(&'a self, ticket: &'a Ticket) -> BoxFuture<'a, SignedDecision>;
}

/// Approves everything, as reviewer `auto-approve`. For tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoApprove;

impl Approver for AutoApprove {
    fn decide<'a>(&'a self, _ticket: &'a Ticket) -> BoxFuture<'a, SignedDecision> {
        Box::pin(ready(
            ApprovalDecision::Approve {
                reviewer: Reviewer::new("auto-approve"),
            }
            .into(),
        ))
    }
}

/// Rejects everything, as reviewer `auto-reject`. For tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoReject;

impl Approver for AutoReject {
    fn decide<'a>(&'a self, _ticket: &'a Ticket) -> BoxFuture<'a, SignedDecision> {
        Box::pin(ready(
            ApprovalDecision::Reject {
                reviewer: Reviewer::new("auto-reject"),
                message: "rejected automatically".to_owned(),
            }
            .into(),
        ))
    }
}
