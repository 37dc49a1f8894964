//! What dispatch returns.

use serde_json::Value;

use crate::{Rejection, RejectionCode, Ticket};

/// The result of dispatching one call: the tool ran and returned its output, a gate refused
/// the call, or the call waits for a human's approval.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Outcome {
    /// Every gate passed and the tool returned this output, as JSON.
    Completed(Value),
    /// A gate refused the call; the tool's body did not run (or, for the execute gate's codes,
    /// it failed).
    Rejected(Rejection),
    /// The call waits for a human's decision; see [`Registry::resume`](crate::Registry::resume).
    Pending(Box<Ticket>),
}

impl Outcome {
    /// Whether the tool ran and succeeded.
    pub fn is_completed(&self) -> bool {
        matches!(self, Outcome::Completed(_))
    }

    /// The output of a completed call.
    pub fn output(&self) -> Option<&Value> {
        match self {
            Outcome::Completed(output) => Some(output),
            Outcome::Rejected(_) | Outcome::Pending(_) => None,
        }
    }

    /// The refusal of a rejected call.
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            Outcome::Rejected(rejection) => Some(rejection),
            Outcome::Completed(_) | Outcome::Pending(_) => None,
        }
    }

    /// The refusal's code, if the call was refused.
    pub fn code(&self) -> Option<RejectionCode> {
        self.rejection().map(Rejection::code)
    }

    /// The ticket of a call waiting for approval.
    pub fn ticket(&self) -> Option<&Ticket> {
        match self {
            Outcome::Pending(ticket) => Some(ticket),
            Outcome::Completed(_) | Outcome::Rejected(_) => None,
        }
    }
}
