//! What a request answers: an outcome as an MCP tool result, a tool list as a result.

use portcullis_core::Outcome;
use portcullis_core::wire::{self, mcp};
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ErrorCode, ListToolsResult, ResultType};
use serde_json::{Value, json};

use crate::approval::WAITING_MESSAGE;

/// The MCP result of `outcome`; a call still waiting tells the model how to learn its outcome.
pub(crate) fn tool_result(outcome: &Outcome) -> Result<CallToolResult, ErrorData> {
    let value = match outcome {
        Outcome::Pending(ticket) => {
            let mut waiting = wire::pending_result(ticket);
            waiting["message"] = json!(WAITING_MESSAGE);
            json!({"content": [{"type": "text", "text": waiting.to_string()}], "isError": true})
        }
        _ => match mcp::result(outcome) {
            Ok(result) => result,
            Err(error) => {
                return Err(ErrorData::new(
                    ErrorCode(error["code"].as_i64().unwrap_or(-32602) as i32),
                    error["message"].as_str().unwrap_or_default().to_owned(),
                    error.get("data").cloned(),
                ));
            }
        },
    };
    let mut result: CallToolResult = serde_json::from_value(value).map_err(|error| {
        ErrorData::internal_error(format!("unrenderable result: {error}"), None)
    })?;
    // Required from 2026-07-28; rmcp takes it off for older peers.
    result.result_type = Some(ResultType::COMPLETE);
    Ok(result)
}

/// A tool list as a result.
pub(crate) fn tool_list(tools: &Value) -> Result<ListToolsResult, ErrorData> {
    let mut result: ListToolsResult = serde_json::from_value(json!({ "tools": tools }))
        .map_err(|error| ErrorData::internal_error(format!("unrenderable tools: {error}"), None))?;
    result.result_type = Some(ResultType::COMPLETE);
    Ok(result)
}
