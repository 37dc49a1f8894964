//! Tool calls and results on the wire: reading each provider's tool calls into
//! [`ToolCall`](crate::ToolCall)s, rendering each [`Outcome`] as the provider's
//! result message, and the providers' `tool_choice` values.
//!
//! One module per provider, each with a `parse` side (the provider's response in, the calls
//! out) and a `reply` side (a call and its outcome in, the provider's result out):
//!
//! | provider | parse | reply | several replies |
//! |---|---|---|---|
//! | OpenAI Chat Completions | [`openai::parse_chat`] | [`openai::reply_chat`] | one `tool` message each |
//! | OpenAI Responses | [`openai::parse_responses`] | [`openai::reply_responses`] | one input item each |
//! | Anthropic Messages | [`anthropic::parse`] | [`anthropic::reply`] | [`anthropic::user_message`] |
//! | Gemini | [`gemini::parse`] | [`gemini::reply`] | [`gemini::user_content`] |
//! | MCP `tools/call` | [`mcp::parse`] | [`mcp::reply`] | one response per request |
//!
//! Parsing reads the shape of the document only: a call to an unknown tool, or arguments that
//! are not valid JSON, still parse, so that the registry's gates refuse them with a code the
//! model can act on. A document of the wrong shape is a [`WireError`], never a panic.
//!
//! ```
//! use portcullis_core::wire::openai;
//! use portcullis_core::{Outcome, Rejection, RejectionCode};
//! use serde_json::json;
//!
//! let response = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
//!     {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{\"q\":\"rust\"}"}}
//! ]}}]});
//! let calls = openai::parse_chat(&response).unwrap();
//! assert_eq!(calls[0].name, "search");
//!
//! // let outcome = registry.dispatch(&ctx, &calls[0]).await;
//! let outcome = Outcome::Rejected(Rejection::new(RejectionCode::UnknownArgument, "`q` is not an accepted argument"));
//! let reply = openai::reply_chat(&calls[0], &outcome);
//! assert_eq!(reply["tool_call_id"], "call_1");
//! assert!(reply["content"].as_str().unwrap().starts_with(r#"{"error":"unknown_argument""#));
//! ```

pub use crate::context::ToolChoice;
use std::fmt;

use serde_json::{Map, Value, json};

use crate::outcome::{Outcome, Ticket};
use crate::rejection::Rejection;
use crate::rejection::shorten;

pub mod anthropic;
pub mod gemini;
pub mod mcp;
pub mod openai;

/// What is wrong with a provider's document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WireErrorKind {
    /// The document is none of the forms the parser reads (for OpenAI Chat Completions: neither
    /// a completion nor an assistant message).
    MalformedResponse,
    /// A field the format requires is absent.
    MissingField,
    /// A field has the wrong JSON type: a number for a string, an object for the arguments text.
    WrongType,
    /// A field has the right type but a value the format does not allow (a JSON-RPC version
    /// other than `2.0`, a tool call of a kind portcullis does not run).
    InvalidValue,
    /// The MCP request asks for another method than `tools/call`.
    NotAToolCall,
    /// The message is not JSON.
    MalformedJson,
    /// A key appears twice in one object of the message.
    DuplicateKey,
    /// The message nests deeper than a reader follows.
    TooDeep,
}

impl WireErrorKind {
    /// The stable snake_case code, e.g. `"missing_field"`.
    pub fn as_str(self) -> &'static str {
        match self {
            WireErrorKind::MalformedResponse => "malformed_response",
            WireErrorKind::MissingField => "missing_field",
            WireErrorKind::WrongType => "wrong_type",
            WireErrorKind::InvalidValue => "invalid_value",
            WireErrorKind::NotAToolCall => "not_a_tool_call",
            WireErrorKind::MalformedJson => "malformed_json",
            WireErrorKind::DuplicateKey => "duplicate_key",
            WireErrorKind::TooDeep => "too_deep",
        }
    }
}

impl fmt::Display for WireErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provider's document that cannot be read: what is wrong, where (a JSON pointer into the
/// document), and a sentence.
///
/// ```
/// use portcullis_core::wire::openai;
/// use serde_json::json;
///
/// let error = openai::parse_chat(&json!({"choices": []})).unwrap_err();
/// assert_eq!(error.code(), "missing_field");
/// assert_eq!(error.pointer(), "/choices/0");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    kind: WireErrorKind,
    pointer: String,
    message: String,
}

impl WireError {
    fn new(kind: WireErrorKind, pointer: impl Into<String>, message: impl Into<String>) -> Self {
        WireError {
            kind,
            pointer: pointer.into(),
            message: message.into(),
        }
    }

    /// What is wrong.
    pub fn kind(&self) -> WireErrorKind {
        self.kind
    }

    /// The stable snake_case code of the kind, e.g. `"wrong_type"`.
    pub fn code(&self) -> &'static str {
        self.kind.as_str()
    }

    /// The JSON pointer to the offending place; empty for the document itself.
    pub fn pointer(&self) -> &str {
        &self.pointer
    }

    /// A sentence saying what is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = if self.pointer.is_empty() {
            "the root"
        } else {
            &self.pointer
        };
        write!(f, "{} at {place}: {}", self.kind, self.message)
    }
}

impl std::error::Error for WireError {}

impl ToolChoice {
    /// The `tool_choice` of an OpenAI Chat Completions request:
    /// `"none"`, `"auto"`, `"required"` or `{"type":"function","function":{"name"}}`.
    pub fn openai_chat(&self) -> Value {
        match self {
            ToolChoice::None => json!("none"),
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        }
    }

    /// The `tool_choice` of an OpenAI Responses request:
    /// `"none"`, `"auto"`, `"required"` or `{"type":"function","name"}`.
    pub fn openai_responses(&self) -> Value {
        match self {
            ToolChoice::None => json!("none"),
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({"type": "function", "name": name}),
        }
    }

    /// The `tool_choice` of an Anthropic Messages request:
    /// `{"type":"none"|"auto"|"any"}` or `{"type":"tool","name"}`.
    pub fn anthropic(&self) -> Value {
        match self {
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
        }
    }

    /// The `toolConfig` of a Gemini request:
    /// `{"functionCallingConfig":{"mode":"NONE"|"AUTO"|"ANY","allowedFunctionNames"?:[name]}}`.
    pub fn gemini(&self) -> Value {
        let config = match self {
            ToolChoice::None => json!({"mode": "NONE"}),
            ToolChoice::Auto => json!({"mode": "AUTO"}),
            ToolChoice::Required => json!({"mode": "ANY"}),
            ToolChoice::Tool(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
        };
        json!({ "functionCallingConfig": config })
    }
}

/// What the model is told while a call waits for a reviewer. It must not try again: the retry
/// would wait for approval too, or, once approved, run twice.
const PENDING_MESSAGE: &str = "This call is awaiting human approval and has not run. \
     Do not call it again: its outcome will be reported once a reviewer decides.";

/// The result of a call waiting for approval, as JSON: the status, the ticket's id, its expiry
/// (milliseconds since the Unix epoch) and a sentence for the model. The arguments are left
/// out: the model sent them, and sensitive ones must not travel back.
pub fn pending_result(ticket: &Ticket) -> Value {
    json!({
        "status": "awaiting_approval",
        "ticket": ticket.id,
        "expires_ms": ticket.expires_ms,
        "message": PENDING_MESSAGE,
    })
}

/// An outcome as the text the model reads, for providers whose results are text: a completed
/// call's output (a string as it is, any other value as JSON text), a refusal's
/// [`to_model_message`](crate::Rejection::to_model_message), or the [`pending_result`] as JSON
/// text.
///
/// ```
/// use portcullis_core::Outcome;
/// use portcullis_core::wire::outcome_text;
/// use serde_json::json;
///
/// assert_eq!(outcome_text(&Outcome::Completed(json!("done"))), "done");
/// assert_eq!(outcome_text(&Outcome::Completed(json!({"rows": 2}))), r#"{"rows":2}"#);
/// ```
pub fn outcome_text(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Completed(Value::String(text)) => text.clone(),
        Outcome::Completed(output) => output.to_string(),
        Outcome::Rejected(rejection) => rejection.to_model_message(),
        Outcome::Pending(ticket) => pending_result(ticket).to_string(),
    }
}

/// A refusal's model message as a JSON object, for providers whose results are JSON.
pub(crate) fn model_message(rejection: &Rejection) -> Value {
    let text = rejection.to_model_message();
    // The text is serialized from a struct, so it parses; if it ever did not, the model still
    // gets the words.
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// A value inside a provider's document with the JSON pointer to it, so that every error names
/// the place where the document went wrong.
#[derive(Debug)]
pub(crate) struct Node<'a> {
    value: &'a Value,
    pointer: String,
}

impl<'a> Node<'a> {
    /// The document itself.
    pub(crate) fn root(value: &'a Value) -> Self {
        Node {
            value,
            pointer: String::new(),
        }
    }

    /// The value, without type checks.
    pub(crate) fn value(&self) -> &'a Value {
        self.value
    }

    /// An error about this place.
    pub(crate) fn error(&self, kind: WireErrorKind, message: impl Into<String>) -> WireError {
        WireError::new(kind, self.pointer.clone(), message)
    }

    fn child(&self, value: &'a Value, step: impl fmt::Display) -> Node<'a> {
        Node {
            value,
            pointer: format!("{}/{step}", self.pointer),
        }
    }

    fn wrong_type(&self, expected: &str) -> WireError {
        let found = match self.value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        };
        self.error(
            WireErrorKind::WrongType,
            format!("expected {expected}, found {found}"),
        )
    }

    /// The value as an object.
    pub(crate) fn object(&self) -> Result<&'a Map<String, Value>, WireError> {
        self.value
            .as_object()
            .ok_or_else(|| self.wrong_type("an object"))
    }

    /// Whether the value is an object with the field `key` (null or not).
    pub(crate) fn has(&self, key: &str) -> bool {
        self.value.get(key).is_some()
    }

    /// The field `key` of an object; it must be there (a null fails the caller's type check).
    pub(crate) fn field(&self, key: &str) -> Result<Node<'a>, WireError> {
        match self.object()?.get(key) {
            Some(value) => Ok(self.child(value, key)),
            None => Err(WireError::new(
                WireErrorKind::MissingField,
                format!("{}/{key}", self.pointer),
                format!("`{key}` is missing"),
            )),
        }
    }

    /// The field `key` of an object, or `None` when it is absent or null.
    pub(crate) fn optional(&self, key: &str) -> Result<Option<Node<'a>>, WireError> {
        match self.object()?.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => Ok(Some(self.child(value, key))),
        }
    }

    /// The value as a string.
    pub(crate) fn string(&self) -> Result<&'a str, WireError> {
        self.value
            .as_str()
            .ok_or_else(|| self.wrong_type("a string"))
    }

    /// The items of an array, each with its pointer.
    pub(crate) fn items(&self) -> Result<impl Iterator<Item = Node<'a>>, WireError> {
        let items = self
            .value
            .as_array()
            .ok_or_else(|| self.wrong_type("an array"))?;
        Ok(items
            .iter()
            .enumerate()
            .map(|(index, item)| self.child(item, index)))
    }

    /// Refuses a message whose `role`, when it has one, is not `model_role`: only the model
    /// asks for tool calls, and a user or tool message passed as its answer (a conversation
    /// history a client sent, say) must not be read as if it had.
    pub(crate) fn check_role(&self, model_role: &str) -> Result<(), WireError> {
        let Some(role) = self.optional("role")? else {
            return Ok(());
        };
        let role_name = role.string()?;
        if role_name == model_role {
            return Ok(());
        }
        Err(role.error(
            WireErrorKind::InvalidValue,
            format!(
                "expected the model's message (role `{model_role}`), not a {} message",
                quoted(role_name)
            ),
        ))
    }

    /// The first item of an array, which must have one.
    pub(crate) fn first(&self) -> Result<Node<'a>, WireError> {
        self.items()?.next().ok_or_else(|| {
            WireError::new(
                WireErrorKind::MissingField,
                format!("{}/0", self.pointer),
                "the array is empty",
            )
        })
    }
}

/// A value from the document, cut short for an error message.
pub(crate) fn quoted(text: &str) -> String {
    format!("`{}`", shorten(text, 100))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RejectionCode, Risk};

    fn ticket() -> Ticket {
        Ticket {
            id: "tkt_1".into(),
            tool: "transfer".into(),
            call_id: "call_1".into(),
            arguments: json!({"pin": "123456"}),
            actor: "alice".into(),
            tenant: None,
            risk: Risk::Critical,
            irreversible: None,
            description: "alice wants to transfer".into(),
            created_ms: 1,
            expires_ms: 2,
            approvers: vec!["finance".into()],
            self_approval: false,
            caller_confirms: false,
            contract_hash: "0".repeat(64),
            call_digest: "1".repeat(64),
            sources: Vec::new(),
        }
    }

    #[test]
    fn outcomes_render_as_text() {
        assert_eq!(outcome_text(&Outcome::Completed(json!("plain"))), "plain");
        assert_eq!(outcome_text(&Outcome::Completed(json!(null))), "null");
        let rejection = Rejection::new(RejectionCode::UnknownTool, "no such tool");
        assert_eq!(
            outcome_text(&Outcome::Rejected(rejection.clone())),
            rejection.to_model_message()
        );
        assert_eq!(model_message(&rejection)["error"], "unknown_tool");
    }

    #[test]
    fn pending_results_name_the_ticket_and_not_the_arguments() {
        let text = outcome_text(&Outcome::Pending(Box::new(ticket())));
        let result: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(result["status"], "awaiting_approval");
        assert_eq!(result["ticket"], "tkt_1");
        assert_eq!(result["expires_ms"], 2);
        assert!(!text.contains("123456"));
    }

    #[test]
    fn choices_render_for_every_provider() {
        let none = ToolChoice::None;
        let one = ToolChoice::Tool("search".into());
        assert_eq!(none.openai_chat(), json!("none"));
        assert_eq!(ToolChoice::Auto.openai_responses(), json!("auto"));
        assert_eq!(
            one.openai_responses(),
            json!({"type": "function", "name": "search"})
        );
        assert_eq!(ToolChoice::Required.anthropic(), json!({"type": "any"}));
        assert_eq!(none.anthropic(), json!({"type": "none"}));
        assert_eq!(
            none.gemini(),
            json!({"functionCallingConfig": {"mode": "NONE"}})
        );
        assert_eq!(
            one.gemini(),
            json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["search"]}})
        );
        assert_eq!(ToolChoice::default(), ToolChoice::Auto);
    }

    #[test]
    fn choices_allow_their_tools() {
        assert!(!ToolChoice::None.allows("a"));
        assert!(ToolChoice::Auto.allows("a") && ToolChoice::Required.allows("a"));
        assert!(ToolChoice::Tool("a".into()).allows("a"));
        assert!(!ToolChoice::Tool("a".into()).allows("b"));
    }

    #[test]
    fn errors_name_the_place() {
        let document = json!({"a": [{"b": 1}]});
        let root = Node::root(&document);
        let item = root.field("a").unwrap().first().unwrap();
        let error = item.field("b").unwrap().string().unwrap_err();
        assert_eq!((error.code(), error.pointer()), ("wrong_type", "/a/0/b"));
        assert_eq!(
            error.to_string(),
            "wrong_type at /a/0/b: expected a string, found a number"
        );
        let error = item.field("c").unwrap_err();
        assert_eq!((error.code(), error.pointer()), ("missing_field", "/a/0/c"));
        let error = root.string().unwrap_err();
        assert_eq!(
            error.to_string(),
            "wrong_type at the root: expected a string, found an object"
        );
    }
}
