//! MCP (Model Context Protocol): the server side of `tools/call`.
//!
//! A call is a JSON-RPC request; its answer is a JSON-RPC response with the same id. Invalid
//! arguments and refusals are results with `isError: true`, so that the model can correct its
//! call; an unknown tool is a protocol error (`-32602`), as the specification asks.
//!
//! The call's id is the request's JSON-RPC id as a string (`7` and `"7"` both become `"7"`).
//! Clients number their requests per session, and the registry returns the first outcome of a
//! repeated call id within a task: give each session its own
//! [task id](crate::CallContext::with_task_id).

use serde_json::{Value, json};

use super::{Node, WireError, WireErrorKind, model_message, outcome_text, quoted};
use crate::call::ToolCall;
use crate::json::{StrictJsonError, parse_strictly, strict};
use crate::outcome::Outcome;
use crate::pointer::pointer;
use crate::rejection::RejectionCode;

/// The JSON-RPC error code for invalid parameters, an unknown tool among them.
const INVALID_PARAMS: i64 = -32602;
/// The JSON-RPC error code for a method the server does not have.
const METHOD_NOT_FOUND: i64 = -32601;
/// The JSON-RPC error code for text that is not JSON.
const PARSE_ERROR: i64 = -32700;
/// The JSON-RPC error code for a request that is not a valid request.
const INVALID_REQUEST: i64 = -32600;

/// A `tools/call` request: the call to dispatch and the request's JSON-RPC id, to answer with.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct McpCall {
    /// The call, for [`Registry::dispatch`](crate::Registry::dispatch); its id is the request
    /// id as a string.
    pub call: ToolCall,
    /// The request's id as it came (a string or a number): the response carries it unchanged.
    pub request_id: Value,
}

/// Reads a JSON-RPC `tools/call` request:
/// `{"jsonrpc":"2.0","id","method":"tools/call","params":{"name","arguments"?}}`. Absent (or
/// null) `arguments` are an empty object. Route the other methods (`initialize`,
/// `tools/list`, ...) before calling this: they are `not_a_tool_call` here.
///
/// ```
/// use portcullis_core::wire::mcp;
/// use portcullis_core::Outcome;
/// use serde_json::json;
///
/// let request = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
///     "params": {"name": "list_tables", "arguments": {}}});
/// let call = mcp::parse(&request).unwrap();
/// assert_eq!(call.call.id, "7");
///
/// // let outcome = registry.dispatch(&ctx, &call.call).await;
/// let outcome = Outcome::Completed(json!({"tables": ["users"]}));
/// assert_eq!(
///     mcp::reply(&call, &outcome),
///     json!({"jsonrpc": "2.0", "id": 7, "result": {
///         "content": [{"type": "text", "text": r#"{"tables":["users"]}"#}],
///         "structuredContent": {"tables": ["users"]},
///         "isError": false,
///     }})
/// );
/// ```
pub fn parse(request: &Value) -> Result<McpCall, WireError> {
    let root = Node::root(request);
    let version = root.field("jsonrpc")?;
    if version.string()? != "2.0" {
        return Err(version.error(
            WireErrorKind::InvalidValue,
            "the JSON-RPC version must be `2.0`",
        ));
    }
    let method = root.field("method")?;
    let method_name = method.string()?;
    if method_name != "tools/call" {
        return Err(method.error(
            WireErrorKind::NotAToolCall,
            format!("the method is {}, not `tools/call`", quoted(method_name)),
        ));
    }
    let id = root.field("id")?;
    let call_id = match id.value() {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        _ => {
            return Err(id.error(
                WireErrorKind::WrongType,
                "the request id must be a string or a number",
            ));
        }
    };
    let params = root.field("params")?;
    let name = params.field("name")?.string()?;
    let arguments = match params.optional("arguments")? {
        Some(arguments) => {
            arguments.object()?;
            arguments.value().clone()
        }
        None => json!({}),
    };
    Ok(McpCall {
        call: ToolCall::new(call_id, name, arguments),
        request_id: id.value().clone(),
    })
}

/// How deep a message [`read`] follows: serde_json's own limit.
const MAX_MESSAGE_DEPTH: usize = 128;

/// Reads the text of a JSON-RPC message as the decode gate reads argument text: a key named
/// twice in one object, anywhere in the message, is refused (`duplicate_key`, with its
/// pointer), as are text that is not JSON (`malformed_json`) and nesting beyond 128 levels
/// (`too_deep`). A server that parses messages into maps (rmcp does, and keeps the last of two
/// keys) calls it on the raw text first, so that the call it dispatches is the only reading of
/// the message; answer a refusal with [`reply_error`].
///
/// ```
/// use portcullis_core::wire::mcp;
///
/// let text = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call",
///     "params":{"name":"pay","arguments":{"cents":1,"cents":90000}}}"#;
/// let error = mcp::read(text).unwrap_err();
/// assert_eq!(error.code(), "duplicate_key");
/// assert_eq!(error.pointer(), "/params/arguments/cents");
/// ```
pub fn read(text: &str) -> Result<Value, WireError> {
    strictly(text).map(strict::Node::into_value)
}

/// [`read`]'s verdict on `text`, without the message: for a server that hands the text on to
/// a reader of its own once it passed.
///
/// ```
/// use portcullis_core::wire::mcp;
///
/// assert!(mcp::check(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
/// let error = mcp::check(r#"{"id":1,"id":2}"#).unwrap_err();
/// assert_eq!(error.code(), "duplicate_key");
/// ```
pub fn check(text: &str) -> Result<(), WireError> {
    strictly(text).map(drop)
}

fn strictly(text: &str) -> Result<strict::Node<'_>, WireError> {
    match parse_strictly(text, MAX_MESSAGE_DEPTH) {
        Ok(message) => Ok(message),
        Err(StrictJsonError::Malformed(detail)) => Err(WireError::new(
            WireErrorKind::MalformedJson,
            "",
            format!("the message is not JSON: {detail}"),
        )),
        Err(StrictJsonError::DuplicateKey { key, path }) => Err(WireError::new(
            WireErrorKind::DuplicateKey,
            pointer(&path),
            format!("the key `{key}` appears more than once in the same object"),
        )),
        Err(StrictJsonError::TooDeep { path }) => Err(WireError::new(
            WireErrorKind::TooDeep,
            pointer(&path),
            format!("the message nests deeper than {MAX_MESSAGE_DEPTH} levels"),
        )),
    }
}

/// The JSON-RPC response to a `tools/call` request:
/// `{"jsonrpc":"2.0","id","result":{"content":[{"type":"text","text"}],"structuredContent"?,"isError"}}`,
/// the text as [`outcome_text`] renders it.
///
/// - Completed: `isError: false`, and an object output is the `structuredContent` too.
/// - Refused: `isError: true`; but a refusal with `unknown_tool` is a JSON-RPC error `-32602`
///   whose `data` is the model message.
/// - Waiting for approval: `isError: true`, the [`pending_result`](super::pending_result) as text, no
///   `structuredContent`. The call has not produced the tool's output, and MCP clients check
///   the `structuredContent` of a successful result against the tool's `outputSchema` (the
///   official Python client raises when it is missing or does not match); the text tells the
///   model not to call again.
pub fn reply(call: &McpCall, outcome: &Outcome) -> Value {
    match result(outcome) {
        Ok(result) => json!({"jsonrpc": "2.0", "id": call.request_id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": call.request_id, "error": error}),
    }
}

/// The `result` of the response [`reply`] builds, or its JSON-RPC `error` object for an
/// unknown tool: for a server that frames its responses itself.
///
/// ```
/// use portcullis_core::Outcome;
/// use portcullis_core::wire::mcp;
/// use serde_json::json;
///
/// let result = mcp::result(&Outcome::Completed(json!({"rows": 2}))).unwrap();
/// assert_eq!(result["isError"], false);
/// assert_eq!(result["structuredContent"], json!({"rows": 2}));
/// ```
pub fn result(outcome: &Outcome) -> Result<Value, Value> {
    if let Outcome::Rejected(rejection) = outcome
        && rejection.code() == RejectionCode::UnknownTool
    {
        return Err(json!({
            "code": INVALID_PARAMS,
            "message": rejection.message(),
            "data": model_message(rejection),
        }));
    }
    let mut result = json!({
        "content": [{"type": "text", "text": outcome_text(outcome)}],
        "isError": !outcome.is_completed(),
    });
    if let (Some(output @ Value::Object(_)), Some(fields)) =
        (outcome.output(), result.as_object_mut())
    {
        fields.insert("structuredContent".into(), output.clone());
    }
    Ok(result)
}

/// The JSON-RPC error response to a request [`parse`] or [`read`] could not read: `-32601`
/// (method not found) for another method than `tools/call`, `-32700` (parse error) for text
/// that is not JSON, `-32602` (invalid params) for a fault in `params`, `-32600` (invalid
/// request) otherwise. The id is the request's when it has a
/// usable one, else null; `data` holds the error's code and pointer.
///
/// ```
/// use portcullis_core::wire::mcp;
/// use serde_json::json;
///
/// let request = json!({"jsonrpc": "2.0", "id": "r1", "method": "tools/call", "params": {}});
/// let error = mcp::parse(&request).unwrap_err();
/// let response = mcp::reply_error(&request, &error);
/// assert_eq!(response["id"], "r1");
/// assert_eq!(response["error"]["code"], -32602);
/// assert_eq!(response["error"]["data"]["pointer"], "/params/name");
/// ```
pub fn reply_error(request: &Value, error: &WireError) -> Value {
    let code = if error.kind() == WireErrorKind::NotAToolCall {
        METHOD_NOT_FOUND
    } else if error.kind() == WireErrorKind::MalformedJson {
        PARSE_ERROR
    } else if error.pointer().starts_with("/params") {
        INVALID_PARAMS
    } else {
        INVALID_REQUEST
    };
    let id = match request.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": code,
            "message": error.to_string(),
            "data": {"code": error.code(), "pointer": error.pointer()},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arguments, Rejection};

    fn request(id: Value, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    }

    fn code(request: Value) -> (&'static str, String) {
        let error = parse(&request).unwrap_err();
        (error.code(), error.pointer().to_owned())
    }

    #[test]
    fn requests_become_calls_with_their_id() {
        let call = parse(&request(
            json!(12),
            json!({"name": "a", "arguments": {"x": 1}}),
        ))
        .unwrap();
        assert_eq!(call.call, ToolCall::new("12", "a", json!({"x": 1})));
        assert_eq!(call.request_id, json!(12));
        let call = parse(&request(json!("req-1"), json!({"name": "a"}))).unwrap();
        assert_eq!(call.call.id, "req-1");
        assert_eq!(call.call.arguments, Arguments::Json(json!({})));
        let call = parse(&request(
            json!("r"),
            json!({"name": "a", "arguments": null}),
        ))
        .unwrap();
        assert_eq!(call.call.arguments, Arguments::Json(json!({})));
    }

    #[test]
    fn malformed_requests_are_typed_errors() {
        assert_eq!(code(json!("tools/call")), ("wrong_type", "".into()));
        assert_eq!(
            code(json!({"id": 1, "method": "tools/call", "params": {"name": "a"}})),
            ("missing_field", "/jsonrpc".into())
        );
        assert_eq!(
            code(
                json!({"jsonrpc": "1.0", "id": 1, "method": "tools/call", "params": {"name": "a"}})
            ),
            ("invalid_value", "/jsonrpc".into())
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
            ("not_a_tool_call", "/method".into())
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "a"}})),
            ("missing_field", "/id".into())
        );
        assert_eq!(
            code(request(json!(null), json!({"name": "a"}))),
            ("wrong_type", "/id".into())
        );
        assert_eq!(
            code(request(json!({"n": 1}), json!({"name": "a"}))),
            ("wrong_type", "/id".into())
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"})),
            ("missing_field", "/params".into())
        );
        assert_eq!(
            code(request(json!(1), json!({"arguments": {}}))),
            ("missing_field", "/params/name".into())
        );
        assert_eq!(
            code(request(json!(1), json!({"name": "a", "arguments": [1]}))),
            ("wrong_type", "/params/arguments".into())
        );
    }

    #[test]
    fn refusals_are_error_results_and_unknown_tools_protocol_errors() {
        let call = parse(&request(json!("r1"), json!({"name": "a"}))).unwrap();
        let invalid = Rejection::new(RejectionCode::InvalidType, "wrong type");
        let refused = reply(&call, &Outcome::Rejected(invalid.clone()));
        assert_eq!(refused["id"], "r1");
        assert_eq!(refused["result"]["isError"], true);
        assert_eq!(
            refused["result"]["content"][0]["text"],
            invalid.to_model_message()
        );
        assert!(refused["result"].get("structuredContent").is_none());
        let unknown = Rejection::new(RejectionCode::UnknownTool, "there is no tool named \"a\"");
        let error = reply(&call, &Outcome::Rejected(unknown));
        assert_eq!(error["error"]["code"], -32602);
        assert_eq!(error["error"]["data"]["error"], "unknown_tool");
        assert!(error.get("result").is_none());
        let text = reply(&call, &Outcome::Completed(json!("plain")));
        assert_eq!(text["result"]["content"][0]["text"], "plain");
        assert!(text["result"].get("structuredContent").is_none());
    }

    #[test]
    fn unreadable_requests_get_protocol_errors() {
        let listing = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
        let response = reply_error(&listing, &parse(&listing).unwrap_err());
        assert_eq!(response["error"]["code"], -32601);
        assert_eq!(response["id"], 3);
        let broken = json!({"id": [1], "method": "tools/call"});
        let response = reply_error(&broken, &parse(&broken).unwrap_err());
        assert_eq!(response["error"]["code"], -32600);
        assert_eq!(response["id"], Value::Null);
    }
}
