//! Google Gemini: `generateContent` (REST JSON, camelCase field names).
//!
//! A call is a `functionCall` part whose `args` is a parsed object, so the calls carry
//! [`Arguments::Json`]. Two things of a part matter beyond the call itself, and a
//! [`GeminiCall`] keeps them next to it:
//!
//! - The id is optional: older models send none and match results by name and order. A call
//!   without one gets an id made up for it, unique in the process (`gemini_call_...`), so that
//!   the registry can tell its calls apart; it is never sent back to Gemini. It is not derived
//!   from the name and the part's position: the registry returns the first outcome of a
//!   repeated call id within a task, and the first call of a tool in the next turn would
//!   repeat it.
//! - A part may carry a `thoughtSignature` that must go back to Gemini with the model's turn in
//!   the history. Appending the model's `content` as received keeps it; a caller that rebuilds
//!   the turn uses [`GeminiCall::call_part`].

use serde_json::{Map, Value, json};

use super::{Node, WireError, WireErrorKind, model_message, pending_result};
use crate::call::{Arguments, ToolCall};
use crate::context::fresh_id;
use crate::outcome::Outcome;

/// One `functionCall` part: the call to dispatch, whether its id came from the model, and the
/// part's thought signature.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GeminiCall {
    /// The call, for [`Registry::dispatch`](crate::Registry::dispatch). Its id is the model's,
    /// or one made up when the model sent none.
    pub call: ToolCall,
    /// Whether the model sent the id; a made-up id is not sent back.
    pub id_from_model: bool,
    /// The part's `thoughtSignature`, which Gemini wants back with the model's turn.
    pub thought_signature: Option<String>,
}

impl GeminiCall {
    /// The model's part as it came, signature included: `{"functionCall":{"id"?,"name","args"},
    /// "thoughtSignature"?}`, for a caller that rebuilds the model's turn for the history
    /// instead of appending the `content` it received.
    pub fn call_part(&self) -> Value {
        let args = match &self.call.arguments {
            Arguments::Json(value) => value.clone(),
            // Only set by hand: parse always gives the parsed object.
            Arguments::Text(text) => {
                serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
            }
        };
        let mut function_call = Map::new();
        if self.id_from_model {
            function_call.insert("id".into(), self.call.id.clone().into());
        }
        function_call.insert("name".into(), self.call.name.clone().into());
        function_call.insert("args".into(), args);
        let mut part = Map::new();
        part.insert("functionCall".into(), function_call.into());
        if let Some(signature) = &self.thought_signature {
            part.insert("thoughtSignature".into(), signature.clone().into());
        }
        part.into()
    }
}

/// Reads the function calls of a `generateContent` response (`candidates[0].content.parts`), or
/// of a `content` object alone, in order. Text and thought parts are skipped, and so is a
/// response without content (a blocked prompt, a candidate stopped for safety): it has no
/// calls. Missing `args` are an empty object.
///
/// ```
/// use portcullis_core::wire::gemini;
/// use portcullis_core::Outcome;
/// use serde_json::json;
///
/// let response = json!({"candidates": [{"content": {"role": "model", "parts": [
///     {"functionCall": {"name": "list_tables", "args": {}}, "thoughtSignature": "c2ln"},
/// ]}}]});
/// let calls = gemini::parse(&response).unwrap();
/// assert!(!calls[0].id_from_model);
/// assert_eq!(calls[0].thought_signature.as_deref(), Some("c2ln"));
///
/// // let outcome = registry.dispatch(&ctx, &calls[0].call).await;
/// let outcome = Outcome::Completed(json!(["users"]));
/// let part = gemini::reply(&calls[0], &outcome);
/// assert_eq!(
///     gemini::user_content([part]),
///     json!({"role": "user", "parts": [
///         {"functionResponse": {"name": "list_tables", "response": {"output": ["users"]}}}
///     ]})
/// );
/// ```
pub fn parse(response: &Value) -> Result<Vec<GeminiCall>, WireError> {
    let root = Node::root(response);
    root.object()?;
    let content = if root.has("candidates") {
        let Some(candidate) = root.field("candidates")?.items()?.next() else {
            return Ok(Vec::new());
        };
        match candidate.optional("content")? {
            Some(content) => content,
            None => return Ok(Vec::new()),
        }
    } else if root.has("parts") {
        root
    } else if root.has("promptFeedback") {
        return Ok(Vec::new());
    } else {
        return Err(root.error(
            WireErrorKind::MalformedResponse,
            "expected a generateContent response (with `candidates`) or a content (with `parts`)",
        ));
    };
    content.check_role("model")?;
    let Some(parts) = content.optional("parts")? else {
        return Ok(Vec::new());
    };
    let mut calls = Vec::new();
    for part in parts.items()? {
        let Some(function_call) = part.optional("functionCall")? else {
            continue;
        };
        let name = function_call.field("name")?.string()?;
        let model_id = match function_call.optional("id")? {
            Some(id) => Some(id.string()?),
            None => None,
        };
        let args = match function_call.optional("args")? {
            Some(args) => {
                args.object()?;
                args.value().clone()
            }
            None => json!({}),
        };
        let thought_signature = match part.optional("thoughtSignature")? {
            Some(signature) => Some(signature.string()?.to_owned()),
            None => None,
        };
        let id = model_id.map_or_else(|| fresh_id("gemini_call"), str::to_owned);
        calls.push(GeminiCall {
            call: ToolCall::new(id, name, args),
            id_from_model: model_id.is_some(),
            thought_signature,
        });
    }
    Ok(calls)
}

/// The `functionResponse` part that answers a call:
/// `{"functionResponse":{"id"?,"name","response":{"output":...}}}`, or `{"error":...}` in the
/// response for a refusal (the model message as a JSON object). A call waiting for approval
/// has the [`pending_result`] as its output. The id is sent back only
/// if the model sent it.
pub fn reply(call: &GeminiCall, outcome: &Outcome) -> Value {
    let response = match outcome {
        Outcome::Completed(output) => json!({ "output": output }),
        Outcome::Rejected(rejection) => json!({ "error": model_message(rejection) }),
        Outcome::Pending(ticket) => json!({ "output": pending_result(ticket) }),
    };
    let mut function_response = Map::new();
    if call.id_from_model {
        function_response.insert("id".into(), call.call.id.clone().into());
    }
    function_response.insert("name".into(), call.call.name.clone().into());
    function_response.insert("response".into(), response);
    json!({ "functionResponse": function_response })
}

/// The user content that carries `parts` (from [`reply`]): `{"role":"user","parts":[...]}`, one
/// part per call of the model's turn.
pub fn user_content(parts: impl IntoIterator<Item = Value>) -> Value {
    json!({
        "role": "user",
        "parts": parts.into_iter().collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Rejection, RejectionCode};

    fn code(response: Value) -> (&'static str, String) {
        let error = parse(&response).unwrap_err();
        (error.code(), error.pointer().to_owned())
    }

    fn parts(parts: Value) -> Value {
        json!({"candidates": [{"content": {"role": "model", "parts": parts}}]})
    }

    #[test]
    fn ids_are_kept_or_made_up() {
        let response = parts(json!([
            {"text": "Looking."},
            {"functionCall": {"id": "fc_1", "name": "a", "args": {"x": 1}}, "thoughtSignature": "sig"},
            {"functionCall": {"name": "a"}},
        ]));
        let calls = parse(&response).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].call.id, "fc_1");
        assert!(calls[0].id_from_model);
        assert_eq!(calls[0].thought_signature.as_deref(), Some("sig"));
        assert_eq!(calls[0].call.arguments, Arguments::Json(json!({"x": 1})));
        assert!(!calls[1].id_from_model);
        assert!(calls[1].call.id.starts_with("gemini_call_"));
        assert_eq!(calls[1].call.arguments, Arguments::Json(json!({})));
        let again = parse(&response).unwrap();
        assert_ne!(
            again[1].call.id, calls[1].call.id,
            "made-up ids never repeat"
        );
    }

    #[test]
    fn the_call_part_echoes_the_signature() {
        let content = json!({"role": "model", "parts": [
            {"functionCall": {"id": "fc_1", "name": "a", "args": {"x": 1}}, "thoughtSignature": "sig"},
            {"functionCall": {"name": "b", "args": {}}},
        ]});
        let calls = parse(&content).unwrap();
        assert_eq!(calls[0].call_part(), content["parts"][0]);
        assert_eq!(calls[1].call_part(), content["parts"][1]);
    }

    #[test]
    fn responses_without_content_have_no_calls() {
        assert_eq!(parse(&json!({"candidates": []})).unwrap(), vec![]);
        assert_eq!(
            parse(&json!({"candidates": [{"finishReason": "SAFETY"}]})).unwrap(),
            vec![]
        );
        assert_eq!(
            parse(&json!({"candidates": [{"content": {"role": "model"}}]})).unwrap(),
            vec![]
        );
        assert_eq!(
            parse(&json!({"promptFeedback": {"blockReason": "SAFETY"}})).unwrap(),
            vec![]
        );
    }

    #[test]
    fn malformed_responses_are_typed_errors() {
        assert_eq!(
            code(json!({"text": "hi"})),
            ("malformed_response", "".into())
        );
        assert_eq!(
            code(json!({"role": "user", "parts": [{"functionCall": {"name": "a", "args": {}}}]})),
            ("invalid_value", "/role".into())
        );
        assert_eq!(
            code(json!({"candidates": {}})),
            ("wrong_type", "/candidates".into())
        );
        assert_eq!(
            code(json!({"candidates": ["x"]})),
            ("wrong_type", "/candidates/0".into())
        );
        assert_eq!(
            code(parts(json!([{"functionCall": {"args": {}}}]))),
            (
                "missing_field",
                "/candidates/0/content/parts/0/functionCall/name".into()
            )
        );
        assert_eq!(
            code(parts(
                json!([{"functionCall": {"name": "a", "args": "{}"}}])
            )),
            (
                "wrong_type",
                "/candidates/0/content/parts/0/functionCall/args".into()
            )
        );
        assert_eq!(
            code(parts(json!([{"functionCall": {"name": "a", "id": 3}}]))),
            (
                "wrong_type",
                "/candidates/0/content/parts/0/functionCall/id".into()
            )
        );
        assert_eq!(
            code(parts(
                json!([{"functionCall": {"name": "a"}, "thoughtSignature": 1}])
            )),
            (
                "wrong_type",
                "/candidates/0/content/parts/0/thoughtSignature".into()
            )
        );
    }

    #[test]
    fn refusals_are_errors_and_ids_go_back_only_if_sent() {
        let calls = parse(&parts(json!([
            {"functionCall": {"id": "fc_1", "name": "a", "args": {}}},
            {"functionCall": {"name": "b", "args": {}}},
        ])))
        .unwrap();
        let rejection = Rejection::new(RejectionCode::MissingArgument, "`x` is missing");
        let refused = reply(&calls[0], &Outcome::Rejected(rejection));
        assert_eq!(refused["functionResponse"]["id"], "fc_1");
        assert_eq!(
            refused["functionResponse"]["response"]["error"]["error"],
            "missing_argument"
        );
        let done = reply(&calls[1], &Outcome::Completed(json!(5)));
        assert_eq!(
            done,
            json!({"functionResponse": {"name": "b", "response": {"output": 5}}})
        );
    }
}
