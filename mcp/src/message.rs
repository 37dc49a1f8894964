//! Malformed JSON-RPC, answered as the specification says before rmcp sees it.

use portcullis_core::wire::mcp;
use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};

/// Checks that `body` is JSON read as strictly as the decode gate reads arguments, or returns
/// the JSON-RPC error response for it: `-32700` for what is not JSON, `-32602` for a key named
/// twice under `params` (`-32600` elsewhere), with the code `duplicate_key` and its pointer in
/// `data`. rmcp alone keeps the last of two keys. Whether the JSON is a client message at all
/// is rmcp's to read ([`client_message`]).
pub(crate) fn check(body: &[u8]) -> Result<(), Value> {
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(json!({"jsonrpc": "2.0", "id": null, "error": {
            "code": -32700, "message": "parse error: the message is not UTF-8"}}));
    };
    mcp::check(text).map_err(|error| mcp::reply_error(&lenient(text), &error))
}

/// Checks that `body`, which passed [`check`], is a client message as rmcp reads it, or returns
/// `-32600` with the request's id. rmcp alone answers such a message with a bare `415` over
/// HTTP and with silence over stdio. Text that passed [`check`] holds no key twice, so rmcp's
/// reading of it is the only one.
pub(crate) fn client_message(body: &[u8]) -> Result<(), Value> {
    let text = String::from_utf8_lossy(body);
    serde_json::from_str::<ClientJsonRpcMessage>(&text).map_err(|error| {
        let id = match lenient(&text).get("id") {
            Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
            _ => Value::Null,
        };
        json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32600, "message": format!("invalid request: {error}")}})
    })?;
    Ok(())
}

/// `text` read the way rmcp reads it, to find a refused message's id.
fn lenient(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// The JSON-RPC error response to a message longer than `limit` bytes, of which `head` is the
/// start: `-32600` with the code `message_too_large`, and the request's id if `head` names it.
pub(crate) fn too_large(head: &[u8], limit: usize) -> Value {
    json!({"jsonrpc": "2.0", "id": leading_id(head), "error": {
        "code": -32600,
        "message": format!("invalid request: the message is longer than {limit} bytes"),
        "data": {"code": "message_too_large", "limit": limit}}})
}

/// The `id` of the JSON-RPC object that `head` begins, if `head` holds it whole: a number or a
/// string at the object's top level, wherever it comes among the keys before the cut.
/// `head` holds at most a few kilobytes.
fn leading_id(head: &[u8]) -> Value {
    let mut depth = 0usize;
    let mut at = 0;
    while at < head.len() {
        match head[at] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let Some(end) = string_end(head, at) else {
                    break;
                };
                let key = &head[at + 1..end - 1];
                let rest = &head[end..];
                let colon = rest.iter().position(|byte| !byte.is_ascii_whitespace());
                if depth == 1
                    && key == b"id"
                    && let Some(colon) = colon
                    && rest[colon] == b':'
                {
                    let after = &rest[colon + 1..];
                    let mut values = serde_json::Deserializer::from_slice(after).into_iter();
                    return match values.next() {
                        Some(Ok(id @ Value::String(_))) => id,
                        // A number the cut ends may be the start of a longer one.
                        Some(Ok(id @ Value::Number(_))) if values.byte_offset() < after.len() => id,
                        _ => Value::Null,
                    };
                }
                at = end;
                continue;
            }
            _ => {}
        }
        at += 1;
    }
    Value::Null
}

/// The index after the closing quote of the JSON string that opens at `start`, if it closes.
fn string_end(text: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    while at < text.len() {
        match text[at] {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_bodies_get_json_rpc_errors() {
        let error = check(br#"{"jsonrpc": "2.0", "id": 3, "method": "#).unwrap_err();
        assert_eq!(error["error"]["code"], -32700);
        assert_eq!(error["id"], Value::Null);
        let no_message = br#"{"jsonrpc": "2.0", "id": 4, "method": 7}"#;
        assert!(check(no_message).is_ok(), "it is strict JSON");
        let error = client_message(no_message).unwrap_err();
        assert_eq!(error["error"]["code"], -32600);
        assert_eq!(error["id"], 4);
        let ping = br#"{"jsonrpc": "2.0", "id": 5, "method": "ping"}"#;
        assert!(check(ping).is_ok() && client_message(ping).is_ok());
        // One reading of every call: a key named twice is refused, not resolved to the last.
        let twice = br#"{"jsonrpc": "2.0", "id": 6, "method": "tools/call",
            "params": {"name": "pay", "arguments": {"cents": 1, "cents": 90000}}}"#;
        let error = check(twice).unwrap_err();
        assert_eq!(error["id"], 6);
        assert_eq!(error["error"]["code"], -32602);
        assert_eq!(error["error"]["data"]["code"], "duplicate_key");
        assert_eq!(error["error"]["data"]["pointer"], "/params/arguments/cents");
    }

    #[test]
    fn a_message_too_large_is_answered_with_the_id_it_begins_with() {
        let cases: [(&[u8], Value); 6] = [
            (
                br#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"a"#,
                json!(7),
            ),
            (
                br#"{"method": "x", "params": {"id": 3}, "id" : "r-1", "pa"#,
                json!("r-1"),
            ),
            (br#"{"params": {"note": "\"id\": 5"}, "id": 9"#, Value::Null),
            (
                br#"{"params": ["id", {"id": 4}], "jsonrpc": "2.0", "id": 12}"#,
                json!(12),
            ),
            (
                br#"{"jsonrpc": "2.0", "params": {"text": "abc"#,
                Value::Null,
            ),
            (br#"{"id": null, "method": "x""#, Value::Null),
        ];
        for (head, id) in cases {
            let error = too_large(head, 10);
            assert_eq!(error["id"], id, "{}", String::from_utf8_lossy(head));
            assert_eq!(error["error"]["code"], -32600);
            assert_eq!(error["error"]["data"]["code"], "message_too_large");
        }
    }
}
