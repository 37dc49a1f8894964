//! The refusals a store answers with when its database fails: the gates then stop the call
//! (the stores fail closed), and the code says the store, not the call, is at fault.

use portcullis_core::{Rejection, RejectionCode};

/// `approvals_unavailable`, with `message` saying what did not happen.
pub(crate) fn approvals_unavailable(message: &str) -> Rejection {
    Rejection::new(RejectionCode::ApprovalsUnavailable, message).with_hint("try again later")
}
