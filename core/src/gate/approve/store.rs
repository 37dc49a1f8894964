//! Human approval: a call that needs it waits as a [`Ticket`] until a reviewer approves, edits
//! or rejects it, or it expires.
//!
//! A ticket is bound to the exact call it shows: [`Registry::resume`](crate::Registry::resume)
//! runs the call stored with the ticket, never another, and takes the ticket out of the
//! [`ApprovalStore`] as it decides, so no ticket is decided twice. Edited arguments go through
//! decode, validate, authorize and budget again: a reviewer cannot smuggle in what the gates
//! refuse.

use std::collections::HashMap;
use std::future::ready;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

use crate::tool::BoxFuture;
use crate::{Arguments, CallContext, Risk};

/// A call waiting for a human: what it is, who asked, and until when it may be decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Ticket {
    /// The ticket's id, for [`Registry::resume`](crate::Registry::resume).
    pub id: String,
    /// The tool.
    pub tool: String,
    /// The provider's call id.
    pub call_id: String,
    /// The arguments, as the model sent them.
    pub arguments: Value,
    /// Who asked.
    pub actor: String,
    /// The caller's tenant.
    pub tenant: Option<String>,
    /// The tool's risk.
    pub risk: Risk,
    /// Why the tool cannot be undone, if it cannot.
    pub irreversible: Option<String>,
    /// A sentence for the reviewer: who wants to run what, with which arguments.
    pub description: String,
    /// When the ticket was opened, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// After this time (milliseconds since the Unix epoch) the call can no longer be approved.
    pub expires_ms: u64,
}

impl Ticket {
    pub(crate) fn is_expired(&self, now_ms: u64) -> bool {
        now_ms >= self.expires_ms
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

pub(crate) fn expiry_ms(created_ms: u64, lifetime: Duration) -> u64 {
    created_ms.saturating_add(u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX))
}

/// A reviewer's decision on a ticket.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalDecision {
    /// Run the call as it is.
    Approve {
        /// Who approved.
        reviewer: String,
    },
    /// Run the call with these arguments instead; they pass every gate again.
    Edit {
        /// Who edited.
        reviewer: String,
        /// The new arguments.
        arguments: Value,
    },
    /// Do not run the call; the message goes back to the model.
    Reject {
        /// Who rejected.
        reviewer: String,
        /// Why, for the model.
        message: String,
    },
}

impl ApprovalDecision {
    /// The reviewer.
    pub fn reviewer(&self) -> &str {
        match self {
            ApprovalDecision::Approve { reviewer }
            | ApprovalDecision::Edit { reviewer, .. }
            | ApprovalDecision::Reject { reviewer, .. } => reviewer,
        }
    }
}

/// A call waiting in a store: its ticket, the caller's context and the arguments as sent.
#[derive(Debug, Clone)]
pub struct PendingCall {
    /// The ticket shown to the reviewer.
    pub ticket: Ticket,
    /// The caller's context, restored when the call runs.
    pub ctx: CallContext,
    /// The arguments as the model sent them.
    pub arguments: Arguments,
}

/// Keeps pending calls until they are decided. `take` must remove atomically: of two
/// concurrent decisions on one ticket, only one may get the call.
pub trait ApprovalStore: Send + Sync + 'static {
    /// Keeps a pending call.
    fn insert(&self, pending: PendingCall) -> BoxFuture<'_, ()>;
    /// Removes and returns the pending call of ticket `id`, if it is still pending.
    fn take<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Option<PendingCall>>;
    /// The tickets still pending, for a reviewer's queue.
    fn pending(&self) -> BoxFuture<'_, Vec<Ticket>>;
}

/// An [`ApprovalStore`] in memory, for one process.
#[derive(Debug, Clone, Default)]
pub struct InMemoryApprovalStore {
    calls: Arc<Mutex<HashMap<String, PendingCall>>>,
}

impl ApprovalStore for InMemoryApprovalStore {
    fn insert(&self, pending: PendingCall) -> BoxFuture<'_, ()> {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.insert(pending.ticket.id.clone(), pending);
        Box::pin(ready(()))
    }

    fn take<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Option<PendingCall>> {
        let taken = self
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        Box::pin(ready(taken))
    }

    fn pending(&self) -> BoxFuture<'_, Vec<Ticket>> {
        let mut tickets: Vec<Ticket> = self
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|pending| pending.ticket.clone())
            .collect();
        tickets.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        Box::pin(ready(tickets))
    }
}

/// A reviewer that answers in line, while the dispatch waits: a terminal prompt, a callback,
/// or, in tests, [`AutoApprove`] and [`AutoReject`]. Without one, a call that needs approval
/// returns [`Outcome::Pending`](crate::Outcome::Pending).
pub trait Approver: Send + Sync + 'static {
    /// Decides on `ticket`.
    fn decide<'a>(&'a self, ticket: &'a Ticket) -> BoxFuture<'a, ApprovalDecision>;
}

/// Approves everything, as reviewer `auto-approve`. For tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoApprove;

impl Approver for AutoApprove {
    fn decide<'a>(&'a self, _ticket: &'a Ticket) -> BoxFuture<'a, ApprovalDecision> {
        Box::pin(ready(ApprovalDecision::Approve {
            reviewer: "auto-approve".to_owned(),
        }))
    }
}

/// Rejects everything, as reviewer `auto-reject`. For tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoReject;

impl Approver for AutoReject {
    fn decide<'a>(&'a self, _ticket: &'a Ticket) -> BoxFuture<'a, ApprovalDecision> {
        Box::pin(ready(ApprovalDecision::Reject {
            reviewer: "auto-reject".to_owned(),
            message: "rejected automatically".to_owned(),
        }))
    }
}
