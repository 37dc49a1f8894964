//! The user's messages, relayed by the host: a `tools/call` of a caller the operator marked
//! ([`RelaysUserMessages`]) may carry the user's latest message in
//! `_meta["dev.portcullis/user_message"]`, which the server records in the call's task
//! ([`Registry::add_user_message`](portcullis_core::Registry::add_user_message)) before the
//! call is judged, so that a `#[from(user)]` value the user gave passes over MCP as it does in
//! process.
//!
//! The same words in the same task are recorded once (the registry keeps them once): a retry
//! of the request (the same `_meta["dev.portcullis/call"]`), or a host that sends the turn
//! with each call the model makes in it, adds no second copy.

use portcullis_core::{CallContext, Outcome, SOURCE_TEXT_LIMIT};
use rmcp::ErrorData;
use serde_json::Value;

use crate::identity::RelaysUserMessages;
use crate::sealed::refusal;
use crate::server::Shared;

/// The request `_meta` key that carries the user's message with a `tools/call`.
pub(crate) const USER_MESSAGE_META: &str = "dev.portcullis/user_message";

/// The user's message `given` in a request's `_meta`, sent by the caller whose identity is
/// `identity`: refused unless the operator marked the caller as relaying its user's messages,
/// and unless it is a string of 1 to [`SOURCE_TEXT_LIMIT`] bytes (the most of one source the
/// provenance gate reads: words past it would be found nowhere).
pub(crate) fn relayed<'a>(
    given: Option<&'a Value>,
    identity: &CallContext,
) -> Result<Option<&'a str>, ErrorData> {
    let Some(given) = given else {
        return Ok(None);
    };
    if !RelaysUserMessages::marks(identity) {
        return Err(refusal(
            "user_message_not_allowed",
            format!(
                "this caller may not send the user's message (`_meta.{USER_MESSAGE_META}`): \
                 only a host the server's operator trusts to relay its user's words may. \
                 Nothing was recorded and the tool did not run"
            ),
        ));
    }
    match given {
        Value::String(words) if !words.is_empty() && words.len() <= SOURCE_TEXT_LIMIT => {
            Ok(Some(words))
        }
        _ => Err(refusal(
            "user_message_invalid",
            format!(
                "`_meta.{USER_MESSAGE_META}` must be a string of 1 to {SOURCE_TEXT_LIMIT} bytes: \
                 the user's message as they wrote it"
            ),
        )),
    }
}

/// Records the user's `words` in the task of `ctx`, before its call is judged; the refusal of
/// the call when they could not be recorded, as the call must not be judged without the words
/// it was sent with.
pub(crate) async fn record(
    shared: &Shared,
    ctx: &CallContext,
    words: Option<&str>,
) -> Result<(), Outcome> {
    let Some(words) = words else {
        return Ok(());
    };
    shared
        .registry
        .add_user_message(ctx, words)
        .await
        .map_err(Outcome::Rejected)
}

#[cfg(test)]
mod tests {
    use rmcp::model::ErrorCode;
    use serde_json::json;

    use super::*;

    fn code(refused: ErrorData) -> Value {
        assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
        refused.data.unwrap()["code"].clone()
    }

    #[test]
    fn only_a_marked_caller_may_send_a_string_of_bounded_size() {
        let host = CallContext::new("desk").with_extension(RelaysUserMessages);
        let other = CallContext::new("desk");
        let words = json!("Pay GB29 NWBK 6016 1331 9268 19");
        assert_eq!(relayed(None, &other).unwrap(), None);
        assert_eq!(
            relayed(Some(&words), &host).unwrap(),
            Some("Pay GB29 NWBK 6016 1331 9268 19")
        );
        let longest = json!("é".repeat(SOURCE_TEXT_LIMIT / 2));
        assert!(relayed(Some(&longest), &host).unwrap().is_some());
        assert_eq!(
            code(relayed(Some(&words), &other).unwrap_err()),
            "user_message_not_allowed"
        );
        for refused in [
            json!(""),
            json!("x".repeat(SOURCE_TEXT_LIMIT + 1)),
            json!(7),
            json!(null),
            json!(["Pay"]),
        ] {
            assert_eq!(
                code(relayed(Some(&refused), &host).unwrap_err()),
                "user_message_invalid",
                "{refused:.20}"
            );
            assert_eq!(
                code(relayed(Some(&refused), &other).unwrap_err()),
                "user_message_not_allowed"
            );
        }
    }
}
