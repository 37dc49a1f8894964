//! Malformed JSON-RPC, answered as the specification says before rmcp sees it.

use portcullis_core::wire::mcp;
use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};

/// Checks that `body` is one JSON-RPC message, read as strictly as the decode gate reads
/// arguments, or returns the JSON-RPC error response for it: `-32700` for what is not JSON,
/// `-32602` for a key named twice under `params` (`-32600` elsewhere), with the code
/// `duplicate_key` and its pointer in `data`, and `-32600` for JSON that is no client message.
/// rmcp alone answers malformed text with a bare `415` over HTTP and with silence over stdio,
/// and keeps the last of two keys.
pub(crate) fn check(body: &[u8]) -> Result<(), Value> {
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(json!({"jsonrpc": "2.0", "id": null, "error": {
            "code": -32700, "message": "parse error: the message is not UTF-8"}}));
    };
    let message = mcp::read(text).map_err(|error| {
        let lenient = serde_json::from_str(text).unwrap_or(Value::Null);
        mcp::reply_error(&lenient, &error)
    })?;
    let id = match message.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    serde_json::from_value::<ClientJsonRpcMessage>(message).map_err(|error| {
        json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32600, "message": format!("invalid request: {error}")}})
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_bodies_get_json_rpc_errors() {
        let error = check(br#"{"jsonrpc": "2.0", "id": 3, "method": "#).unwrap_err();
        assert_eq!(error["error"]["code"], -32700);
        assert_eq!(error["id"], Value::Null);
        let error = check(br#"{"jsonrpc": "2.0", "id": 4, "method": 7}"#).unwrap_err();
        assert_eq!(error["error"]["code"], -32600);
        assert_eq!(error["id"], 4);
        assert!(check(br#"{"jsonrpc": "2.0", "id": 5, "method": "ping"}"#).is_ok());
        // One reading of every call: a key named twice is refused, not resolved to the last.
        let twice = br#"{"jsonrpc": "2.0", "id": 6, "method": "tools/call",
            "params": {"name": "pay", "arguments": {"cents": 1, "cents": 90000}}}"#;
        let error = check(twice).unwrap_err();
        assert_eq!(error["id"], 6);
        assert_eq!(error["error"]["code"], -32602);
        assert_eq!(error["error"]["data"]["code"], "duplicate_key");
        assert_eq!(error["error"]["data"]["pointer"], "/params/arguments/cents");
    }
}
