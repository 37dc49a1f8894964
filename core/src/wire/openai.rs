//! OpenAI: the Chat Completions API and the Responses API.
//!
//! Both send a call's arguments as JSON text, and the calls keep it as
//! [`Arguments::Text`](crate::Arguments::Text): only the text still shows a key named twice.
//! Neither has an error flag on results: a refusal is the JSON text of
//! [`Rejection::to_model_message`](crate::Rejection::to_model_message).

use serde_json::{Value, json};

use super::{Node, WireError, WireErrorKind, outcome_text, quoted};
use crate::call::ToolCall;
use crate::outcome::Outcome;

/// Reads the tool calls of a Chat Completions response (`choices[0].message.tool_calls`), or of
/// its assistant `message` alone, in the order the model made them. A plain answer has none.
///
/// Only the first choice is read: a request with `n` above 1 gets several alternative
/// answers, and at most one of them is acted on.
///
/// ```
/// use portcullis_core::wire::openai;
/// use portcullis_core::{Arguments, Outcome};
/// use serde_json::json;
///
/// let message = json!({"role": "assistant", "content": null, "tool_calls": [
///     {"id": "call_1", "type": "function", "function": {"name": "list_tables", "arguments": "{}"}},
/// ]});
/// let calls = openai::parse_chat(&message).unwrap();
/// assert_eq!(calls[0].arguments, Arguments::Text("{}".into()));
///
/// let reply = openai::reply_chat(&calls[0], &Outcome::Completed(json!(["users"])));
/// assert_eq!(reply, json!({"role": "tool", "tool_call_id": "call_1", "content": r#"["users"]"#}));
/// ```
pub fn parse_chat(response: &Value) -> Result<Vec<ToolCall>, WireError> {
    let root = Node::root(response);
    root.object()?;
    let message = if root.has("choices") {
        root.field("choices")?.first()?.field("message")?
    } else if root.has("role") || root.has("tool_calls") {
        root
    } else {
        return Err(root.error(
            WireErrorKind::MalformedResponse,
            "expected a chat completion (with `choices`) or an assistant message",
        ));
    };
    message.check_role("assistant")?;
    let Some(tool_calls) = message.optional("tool_calls")? else {
        return Ok(Vec::new());
    };
    tool_calls.items()?.map(|call| chat_call(&call)).collect()
}

/// One entry of `tool_calls`: `{"id","type":"function","function":{"name","arguments"}}`.
fn chat_call(call: &Node<'_>) -> Result<ToolCall, WireError> {
    // Some compatible servers leave `type` out; when it is there, it must say `function`.
    if let Some(kind) = call.optional("type")? {
        let kind_name = kind.string()?;
        if kind_name != "function" {
            return Err(kind.error(
                WireErrorKind::InvalidValue,
                format!(
                    "portcullis runs function calls only, not {} calls",
                    quoted(kind_name)
                ),
            ));
        }
    }
    let id = call.field("id")?.string()?;
    let function = call.field("function")?;
    let name = function.field("name")?.string()?;
    let arguments = function.field("arguments")?.string()?;
    Ok(ToolCall::new(id, name, arguments))
}

/// The `tool` message that answers a Chat Completions call:
/// `{"role":"tool","tool_call_id","content"}`, the content as
/// [`outcome_text`] renders it. Every call of a response needs one, in
/// the messages that follow the assistant's.
pub fn reply_chat(call: &ToolCall, outcome: &Outcome) -> Value {
    json!({
        "role": "tool",
        "tool_call_id": call.id,
        "content": outcome_text(outcome),
    })
}

/// Reads the tool calls of a Responses API response: the `function_call` items of `output`, in
/// order, each identified by its `call_id` (the item's own `id` is not what results refer
/// to). Other items (messages, reasoning, built-in tools) are skipped.
///
/// ```
/// use portcullis_core::wire::openai;
/// use portcullis_core::{Outcome, Rejection, RejectionCode};
/// use serde_json::json;
///
/// let response = json!({"object": "response", "output": [
///     {"type": "reasoning", "id": "rs_1", "summary": []},
///     {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "list_tables", "arguments": "{}", "status": "completed"},
/// ]});
/// let calls = openai::parse_responses(&response).unwrap();
/// assert_eq!(calls[0].id, "call_9");
///
/// let refused = Outcome::Rejected(Rejection::new(RejectionCode::RoleDenied, "not yours"));
/// let reply = openai::reply_responses(&calls[0], &refused);
/// assert_eq!(reply["type"], "function_call_output");
/// assert_eq!(reply["call_id"], "call_9");
/// ```
pub fn parse_responses(response: &Value) -> Result<Vec<ToolCall>, WireError> {
    let mut calls = Vec::new();
    for item in Node::root(response).field("output")?.items()? {
        if item.field("type")?.string()? != "function_call" {
            continue;
        }
        let id = item.field("call_id")?.string()?;
        let name = item.field("name")?.string()?;
        let arguments = item.field("arguments")?.string()?;
        calls.push(ToolCall::new(id, name, arguments));
    }
    Ok(calls)
}

/// The input item that answers a Responses API call:
/// `{"type":"function_call_output","call_id","output"}`, the output as
/// [`outcome_text`] renders it.
pub fn reply_responses(call: &ToolCall, outcome: &Outcome) -> Value {
    json!({
        "type": "function_call_output",
        "call_id": call.id,
        "output": outcome_text(outcome),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arguments, Rejection, RejectionCode};

    fn code(result: Result<Vec<ToolCall>, WireError>) -> (&'static str, String) {
        let error = result.unwrap_err();
        (error.code(), error.pointer().to_owned())
    }

    fn completion(tool_calls: Value) -> Value {
        json!({"id": "chatcmpl-1", "object": "chat.completion", "choices": [
            {"index": 0, "finish_reason": "tool_calls",
             "message": {"role": "assistant", "content": null, "tool_calls": tool_calls}}
        ]})
    }

    #[test]
    fn parallel_chat_calls_keep_their_order_and_text() {
        let response = completion(json!([
            {"id": "call_a", "type": "function", "function": {"name": "a", "arguments": "{\"x\":1,\"x\":2}"}},
            {"id": "call_b", "type": "function", "function": {"name": "b", "arguments": "not json"}},
        ]));
        let calls = parse_chat(&response).unwrap();
        assert_eq!(
            calls,
            vec![
                ToolCall::new("call_a", "a", "{\"x\":1,\"x\":2}"),
                ToolCall::new("call_b", "b", "not json"),
            ]
        );
    }

    #[test]
    fn plain_answers_have_no_calls() {
        let answer = json!({"choices": [{"message": {"role": "assistant", "content": "Hello"}}]});
        assert_eq!(parse_chat(&answer).unwrap(), vec![]);
        let null_calls = json!({"role": "assistant", "content": "Hi", "tool_calls": null});
        assert_eq!(parse_chat(&null_calls).unwrap(), vec![]);
    }

    #[test]
    fn malformed_chat_documents_are_typed_errors() {
        assert_eq!(code(parse_chat(&json!([]))), ("wrong_type", "".into()));
        assert_eq!(
            code(parse_chat(&json!({"data": 1}))),
            ("malformed_response", "".into())
        );
        assert_eq!(
            code(parse_chat(&json!({"choices": []}))),
            ("missing_field", "/choices/0".into())
        );
        assert_eq!(
            code(parse_chat(&json!({"choices": [{}]}))),
            ("missing_field", "/choices/0/message".into())
        );
        assert_eq!(
            code(parse_chat(&completion(json!({"id": "x"})))),
            ("wrong_type", "/choices/0/message/tool_calls".into())
        );
        assert_eq!(
            code(parse_chat(&completion(json!([
                {"type": "function", "function": {"name": "a", "arguments": "{}"}}
            ])))),
            ("missing_field", "/choices/0/message/tool_calls/0/id".into())
        );
        assert_eq!(
            code(parse_chat(&completion(json!([
                {"id": "c", "type": "function", "function": {"name": "a", "arguments": {"x": 1}}}
            ])))),
            (
                "wrong_type",
                "/choices/0/message/tool_calls/0/function/arguments".into()
            )
        );
        assert_eq!(
            code(parse_chat(&completion(json!([
                {"id": "c", "type": "function", "function": {"name": 7, "arguments": "{}"}}
            ])))),
            (
                "wrong_type",
                "/choices/0/message/tool_calls/0/function/name".into()
            )
        );
        assert_eq!(
            code(parse_chat(&completion(json!([
                {"id": "c", "type": "custom", "custom": {"name": "a", "input": "x"}}
            ])))),
            (
                "invalid_value",
                "/choices/0/message/tool_calls/0/type".into()
            )
        );
        assert_eq!(
            code(parse_chat(&json!({"role": "user", "content": "refund me"}))),
            ("invalid_value", "/role".into())
        );
    }

    #[test]
    fn responses_read_function_calls_by_call_id() {
        let response = json!({"output": [
            {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "a", "arguments": "{}"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "b", "arguments": "{\"n\":1}"},
        ]});
        let calls = parse_responses(&response).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("call_1", "a")
        );
        assert_eq!(calls[1].arguments, Arguments::Text("{\"n\":1}".into()));
    }

    #[test]
    fn malformed_responses_are_typed_errors() {
        let one = |item: Value| code(parse_responses(&json!({"output": [item]})));
        assert_eq!(
            code(parse_responses(&json!({"id": "resp_1"}))),
            ("missing_field", "/output".into())
        );
        assert_eq!(
            code(parse_responses(&json!({"output": {}}))),
            ("wrong_type", "/output".into())
        );
        assert_eq!(
            one(json!({"id": "x"})),
            ("missing_field", "/output/0/type".into())
        );
        assert_eq!(
            one(json!({"type": "function_call", "id": "fc_1", "name": "a", "arguments": "{}"})),
            ("missing_field", "/output/0/call_id".into())
        );
        assert_eq!(
            one(json!({"type": "function_call", "call_id": "c", "name": "a", "arguments": {}})),
            ("wrong_type", "/output/0/arguments".into())
        );
    }

    #[test]
    fn replies_carry_the_call_id_and_the_text() {
        let call = ToolCall::new("call_1", "a", "{}");
        let rejection = Rejection::new(RejectionCode::MalformedJson, "not JSON");
        let chat = reply_chat(&call, &Outcome::Rejected(rejection.clone()));
        assert_eq!(chat["role"], "tool");
        assert_eq!(chat["tool_call_id"], "call_1");
        assert_eq!(chat["content"], rejection.to_model_message());
        let responses = reply_responses(&call, &Outcome::Completed(json!("ok")));
        assert_eq!(
            responses,
            json!({"type": "function_call_output", "call_id": "call_1", "output": "ok"})
        );
    }
}
