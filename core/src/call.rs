//! One model-produced request to run a tool.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The arguments of a call, as the provider delivered them.
///
/// OpenAI sends arguments as JSON text; Anthropic and Gemini send a parsed JSON object. Pass
/// the text whenever you have it: only the text still shows a key named twice, which a parsed
/// value has already collapsed into one.
///
/// Stored (a pending call in a durable store) as `{"text": "..."}` or `{"json": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arguments {
    /// Raw JSON text, parsed strictly by the decode gate.
    Text(String),
    /// An already parsed JSON value.
    Json(Value),
}

impl From<String> for Arguments {
    fn from(text: String) -> Self {
        Arguments::Text(text)
    }
}

impl From<&str> for Arguments {
    fn from(text: &str) -> Self {
        Arguments::Text(text.to_owned())
    }
}

impl From<Value> for Arguments {
    fn from(value: Value) -> Self {
        Arguments::Json(value)
    }
}

/// One model-produced request to run a tool: the provider's call id, the tool name and the raw
/// arguments. Nothing in it is trusted.
///
/// ```
/// use portcullis_core::ToolCall;
/// use serde_json::json;
///
/// let from_openai = ToolCall::new("call_1", "delete_record", r#"{"record_id": 7}"#);
/// let from_anthropic = ToolCall::new("toolu_1", "delete_record", json!({"record_id": 7}));
/// assert_eq!(from_openai.name, from_anthropic.name);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for this call, echoed in the result.
    pub id: String,
    /// The tool the model asked for.
    pub name: String,
    /// The arguments, as text or as a parsed value.
    pub arguments: Arguments,
}

impl ToolCall {
    /// A call of tool `name` with `arguments` (JSON text or a JSON value).
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<Arguments>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}
