//! What the stores answer an operator who reads or settles claims when the database fails.

use std::error::Error;

use portcullis_core::{ClaimState, Outcome, Rejection, RejectionCode, may_settle};

/// The refusal of an operator's reading or settling of claims that the database failed; the
/// reason goes to the operator, who can act on it, and to the log.
pub(crate) fn unavailable(operation: &str, error: &dyn Error) -> Rejection {
    tracing::error!(%error, "the store could not {operation}");
    Rejection::new(
        RejectionCode::ClaimsUnavailable,
        format!("the store could not {operation}: {error}"),
    )
    .with_hint("check that the database is reachable, then try again")
}

/// The answer to a settlement whose conditional update changed `updated` rows: the claim was
/// judged under its lock, so none changed only if another settlement came first.
pub(crate) fn settled_once(updated: u64) -> Result<(), Rejection> {
    if updated == 1 {
        return Ok(());
    }
    let settled = ClaimState::Settled(Outcome::Completed(serde_json::Value::Null));
    may_settle(Some((&settled, 0)), 0)
}
