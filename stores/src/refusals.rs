//! The refusals a store answers with when its database fails: the gates then stop the call
//! (the stores fail closed), and the code says the store, not the call, is at fault.

use portcullis_core::{Rejection, RejectionCode};

use crate::seal::is_key_missing;

/// `approvals_unavailable`, with `message` saying what did not happen.
pub(crate) fn approvals_unavailable(message: &str) -> Rejection {
    Rejection::new(RejectionCode::ApprovalsUnavailable, message).with_hint("try again later")
}

/// The refusal of an approvals operation that failed with `error`: `seal_key_missing` for a
/// sealed call this store has no key for (the call stays as it is), `approvals_unavailable`
/// with `message` otherwise.
pub(crate) fn approvals_failed(
    error: &(dyn std::error::Error + 'static),
    message: &str,
) -> Rejection {
    if is_key_missing(error) {
        return Rejection::new(RejectionCode::SealKeyMissing, format!("{message}: {error}"))
            .with_hint(
                "open the store with its seal keys (SealKeys; --seal-key-file on the command line)",
            );
    }
    approvals_unavailable(message)
}
