//! What dispatch returns.

use serde_json::Value;

use crate::{Rejection, RejectionCode};

/// The result of dispatching one call: the tool ran and returned its output, or a gate refused
/// the call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Outcome {
    /// Every gate passed and the tool returned this output, as JSON.
    Completed(Value),
    /// A gate refused the call; the tool's body did not run (or, for the execute gate's codes,
    /// it failed).
    Rejected(Rejection),
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
            Outcome::Rejected(_) => None,
        }
    }

    /// The refusal of a rejected call.
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            Outcome::Rejected(rejection) => Some(rejection),
            Outcome::Completed(_) => None,
        }
    }

    /// The refusal's code, if the call was refused.
    pub fn code(&self) -> Option<RejectionCode> {
        self.rejection().map(Rejection::code)
    }

    /// The output, or the refusal as an error.
    pub fn into_result(self) -> Result<Value, Rejection> {
        match self {
            Outcome::Completed(output) => Ok(output),
            Outcome::Rejected(rejection) => Err(rejection),
        }
    }
}
