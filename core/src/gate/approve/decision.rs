//! A reviewer's decision on a ticket. It is recorded in the approval store before the call
//! runs, once: the process that runs the call need not be the one that took the decision (an
//! operator's command line, a review service), and a worker that stops between the two finds
//! the decision again ([`Registry::run_decided`](crate::Registry::run_decided)).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::reviewer::Reviewer;
use crate::outcome::Outcome;
use crate::rejection::{Rejection, RejectionCode};

/// A reviewer's decision on a ticket. The reviewer must be allowed to decide it
/// ([`Reviewer::may_decide`]); a decision of one who is not leaves the ticket pending.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run the call as it is.
    Approve {
        /// Who approved.
        reviewer: Reviewer,
    },
    /// Run the call with these arguments instead; they pass every gate again.
    Edit {
        /// Who edited.
        reviewer: Reviewer,
        /// The new arguments.
        arguments: Value,
    },
    /// Do not run the call; the message goes back to the model.
    Reject {
        /// Who rejected.
        reviewer: Reviewer,
        /// Why, for the model.
        message: String,
    },
}

impl ApprovalDecision {
    /// The reviewer.
    pub fn reviewer(&self) -> &Reviewer {
        match self {
            ApprovalDecision::Approve { reviewer }
            | ApprovalDecision::Edit { reviewer, .. }
            | ApprovalDecision::Reject { reviewer, .. } => reviewer,
        }
    }
}

/// What a store did with a decision it was asked to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recorded {
    /// The decision is recorded: the call runs as decided.
    Recorded,
    /// Another decision was recorded first.
    AlreadyDecided,
    /// No call waits under the ticket.
    NotPending,
    /// The ticket expired.
    Expired,
    /// The store could not be reached; nothing was recorded.
    Unavailable,
}

/// Where a call waiting under a ticket stands, as [`Registry::follow`](crate::Registry::follow)
/// found it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Progress {
    /// No one decided it yet, and it has not expired.
    Waiting,
    /// Its decision was carried out here, just now, with this outcome.
    Ended(Outcome),
    /// It left the store by another road: another worker carried out its decision, or it
    /// expired. Dispatching the same call again (same context, same call id) reads the outcome
    /// it ended with.
    Left,
}

/// The refusal of a store that cannot be read or written: `approvals_unavailable`, with
/// `message` saying what did not happen.
pub(crate) fn unavailable(message: &str) -> Rejection {
    Rejection::new(RejectionCode::ApprovalsUnavailable, message).with_hint("try again later")
}

pub(crate) fn expired() -> Rejection {
    Rejection::new(
        RejectionCode::ApprovalExpired,
        "nobody approved the call in time",
    )
    .with_retryable(false)
}

pub(crate) fn not_pending() -> Rejection {
    Rejection::new(
        RejectionCode::TicketNotPending,
        "no call waits under this ticket: it is unknown, or its call ended already",
    )
    .with_retryable(false)
}

pub(crate) fn already_decided() -> Rejection {
    Rejection::new(
        RejectionCode::TicketDecided,
        "the ticket was decided already; its call runs as that decision says",
    )
    .with_retryable(false)
}
