//! Malformed JSON-RPC, answered as the specification says before rmcp sees it.

use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};

/// Checks that `body` is a JSON-RPC message, or returns the JSON-RPC error response for it:
/// `-32700` for what is not JSON, `-32600` for JSON that is no client message. rmcp answers
/// both with a bare `415` over HTTP and with silence over stdio, which leaves a client
/// waiting.
pub(crate) fn check(body: &[u8]) -> Result<(), Value> {
    let message: Value = serde_json::from_slice(body).map_err(|error| {
        json!({"jsonrpc": "2.0", "id": null, "error": {
            "code": -32700, "message": format!("parse error: {error}")}})
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
    }
}
