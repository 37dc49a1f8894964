//! Anthropic: the Messages API.
//!
//! A call is a `tool_use` content block whose `input` is a parsed object, so the calls carry
//! [`Arguments::Json`](crate::Arguments::Json). A result is a `tool_result` block with an
//! `is_error` flag, and the results of all the calls of one assistant message go back together,
//! in one user message ([`user_message`]).

use serde_json::{Value, json};

use super::{Node, WireError, outcome_text};
use crate::call::ToolCall;
use crate::outcome::Outcome;

/// Reads the tool calls of a Messages API response (or of any assistant message): its
/// `tool_use` content blocks, in order. Text, thinking and server-tool blocks are skipped; a
/// message whose `content` is a string has no calls.
///
/// ```
/// use portcullis_core::wire::anthropic;
/// use portcullis_core::Outcome;
/// use serde_json::json;
///
/// let message = json!({"role": "assistant", "stop_reason": "tool_use", "content": [
///     {"type": "text", "text": "Let me look."},
///     {"type": "tool_use", "id": "toolu_1", "name": "list_tables", "input": {}},
/// ]});
/// let calls = anthropic::parse(&message).unwrap();
/// let result = anthropic::reply(&calls[0], &Outcome::Completed(json!(["users"])));
/// assert_eq!(
///     anthropic::user_message([result]),
///     json!({"role": "user", "content": [
///         {"type": "tool_result", "tool_use_id": "toolu_1", "content": r#"["users"]"#, "is_error": false}
///     ]})
/// );
/// ```
pub fn parse(message: &Value) -> Result<Vec<ToolCall>, WireError> {
    let message = Node::root(message);
    message.check_role("assistant")?;
    let content = message.field("content")?;
    if content.value().is_string() {
        return Ok(Vec::new());
    }
    let mut calls = Vec::new();
    for block in content.items()? {
        if block.field("type")?.string()? != "tool_use" {
            continue;
        }
        let id = block.field("id")?.string()?;
        let name = block.field("name")?.string()?;
        let input = block.field("input")?;
        input.object()?;
        calls.push(ToolCall::new(id, name, input.value().clone()));
    }
    Ok(calls)
}

/// The `tool_result` block that answers a call:
/// `{"type":"tool_result","tool_use_id","content","is_error"}`, the content as
/// [`outcome_text`] renders it. `is_error` is true for a refusal only: a
/// call waiting for approval did not fail.
pub fn reply(call: &ToolCall, outcome: &Outcome) -> Value {
    json!({
        "type": "tool_result",
        "tool_use_id": call.id,
        "content": outcome_text(outcome),
        "is_error": outcome.rejection().is_some(),
    })
}

/// The user message that carries `results` (from [`reply`]). All the results of one
/// assistant message's calls must go in one user message, in any order.
pub fn user_message(results: impl IntoIterator<Item = Value>) -> Value {
    json!({
        "role": "user",
        "content": results.into_iter().collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arguments, Rejection, RejectionCode};

    fn code(message: Value) -> (&'static str, String) {
        let error = parse(&message).unwrap_err();
        (error.code(), error.pointer().to_owned())
    }

    #[test]
    fn tool_use_blocks_become_calls_with_parsed_input() {
        let message = json!({"id": "msg_1", "type": "message", "role": "assistant", "content": [
            {"type": "thinking", "thinking": "...", "signature": "sig"},
            {"type": "tool_use", "id": "toolu_a", "name": "a", "input": {"x": 1}},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            {"type": "tool_use", "id": "toolu_b", "name": "b", "input": {}},
        ]});
        let calls = parse(&message).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].id, "toolu_a");
        assert_eq!(calls[0].arguments, Arguments::Json(json!({"x": 1})));
        assert_eq!(calls[1].name, "b");
        assert_eq!(
            parse(&json!({"role": "assistant", "content": "Hello"})).unwrap(),
            vec![]
        );
    }

    #[test]
    fn malformed_messages_are_typed_errors() {
        assert_eq!(
            code(json!({"role": "assistant"})),
            ("missing_field", "/content".into())
        );
        assert_eq!(
            code(json!({"role": "user", "content": [
                {"type": "tool_use", "id": "t", "name": "refund", "input": {}}
            ]})),
            ("invalid_value", "/role".into())
        );
        assert_eq!(
            code(json!({"content": 3})),
            ("wrong_type", "/content".into())
        );
        assert_eq!(
            code(json!({"content": [{"text": "hi"}]})),
            ("missing_field", "/content/0/type".into())
        );
        assert_eq!(
            code(json!({"content": [{"type": "tool_use", "name": "a", "input": {}}]})),
            ("missing_field", "/content/0/id".into())
        );
        assert_eq!(
            code(json!({"content": [{"type": "tool_use", "id": "t", "name": "a", "input": "{}"}]})),
            ("wrong_type", "/content/0/input".into())
        );
        assert_eq!(
            code(json!({"content": [{"type": "tool_use", "id": "t", "name": "a"}]})),
            ("missing_field", "/content/0/input".into())
        );
    }

    #[test]
    fn refusals_are_errors_and_other_outcomes_are_not() {
        let call = ToolCall::new("toolu_1", "a", json!({}));
        let rejection = Rejection::new(RejectionCode::InvalidType, "wrong type");
        let refused = reply(&call, &Outcome::Rejected(rejection.clone()));
        assert_eq!(refused["is_error"], true);
        assert_eq!(refused["content"], rejection.to_model_message());
        let done = reply(&call, &Outcome::Completed(json!({"ok": true})));
        assert_eq!(done["is_error"], false);
        assert_eq!(done["content"], r#"{"ok":true}"#);
    }
}
