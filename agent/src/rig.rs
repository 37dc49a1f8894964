//! A [`Model`] over rig's completion models: every provider rig supports (OpenAI, Anthropic,
//! Gemini, Mistral, Ollama, OpenRouter, ...) drives a run without a client of our own.
//!
//! The feature `rig` brings in `rig-core` with its reqwest transport and no TLS: a model served
//! over plain HTTP (Ollama, llama.cpp, a gateway on the same host) works as it is; a hosted
//! provider needs TLS: the feature `rig-rustls` turns on rig's `rustls` (its default, with the
//! aws-lc backend), or the application depends on `rig-core` with the TLS it chooses. rig-core
//! 0.44 needs Rust 1.95.
//!
//! ```no_run
//! use portcullis_agent::{Prices, RigModel};
//! use portcullis_core::export::Profile;
//! use rig_core::providers::openai::OpenAI;
//!
//! # fn model() -> Result<RigModel, Box<dyn std::error::Error>> {
//! let chat = OpenAI::from_env()?.chat("gpt-4o-mini");
//! let model = RigModel::new(chat, Profile::OpenAiChat { strict: false })
//!     .with_request(|request| request.preamble("You settle invoices for Acme."))
//!     // Micro-dollars per million tokens: the run's cost limit counts in micro-dollars.
//!     .with_prices(Prices { input_per_million: 150_000, output_per_million: 600_000 });
//! # Ok(model)
//! # }
//! ```

use std::error::Error as _;
use std::fmt;
use std::sync::Arc;

use portcullis_core::export::Profile;
use portcullis_core::wire::ToolChoice;
use portcullis_core::{Arguments, BoxFuture, ToolCall};
use rig_core::completion::{CompletionRequest, CompletionResponse, ToolDefinition};
use rig_core::message::{
    AssistantContent, AssistantMessage, CallId, Message as RigMessage, ToolChoice as RigChoice,
    ToolFunction, ToolName, ToolResult as RigResult, ToolResultContent, UserContent,
};
use rig_core::operation::Completion;
use rig_core::{DynModel, ProviderError};
use serde_json::Value;

use crate::model::{Message, Model, ModelError, ModelRequest, ModelTurn, ToolResult, Usage};

/// What a model's tokens cost, per million, in the unit the run's cost limit counts in
/// ([`AgentBuilder::max_cost`](crate::AgentBuilder::max_cost)): micro-dollars, say, so that
/// $0.15 per million input tokens is `150_000`.
///
/// Tokens read from a provider's cache are priced as any input token, so the cost a run counts
/// is never below what it was billed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prices {
    /// The price of a million tokens read.
    pub input_per_million: u64,
    /// The price of a million tokens written, reasoning included.
    pub output_per_million: u64,
}

impl Prices {
    /// What `input_tokens` read and `output_tokens` written cost, rounded up.
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> u64 {
        fn part(tokens: u64, per_million: u64) -> u64 {
            let cost = (u128::from(tokens) * u128::from(per_million)).div_ceil(1_000_000);
            u64::try_from(cost).unwrap_or(u64::MAX)
        }
        part(input_tokens, self.input_per_million)
            .saturating_add(part(output_tokens, self.output_per_million))
    }
}

type Shape = Arc<dyn Fn(CompletionRequest) -> CompletionRequest + Send + Sync>;

/// A rig completion model as a run's [`Model`].
///
/// The transcript goes to rig as its messages (the results of one turn in one message, which
/// each provider's wire lays out its own way: `tool` messages for OpenAI, `tool_result`
/// blocks for Anthropic), the exported tools as rig's tool definitions, the turn's tool
/// choice as rig's. A call's arguments reach the gates as the model wrote them where the
/// provider sends text (OpenAI's `arguments`), so the strict decode gate sees a duplicate key
/// that rig's parsed map would have dropped.
///
/// A provider's failure, or a turn the provider failed or cut before it said anything, is a
/// [`ModelError`]: the run stops with `model_failed` and the provider's words.
#[derive(Clone)]
pub struct RigModel {
    model: DynModel<Completion>,
    name: String,
    profile: Profile,
    prices: Option<Prices>,
    shape: Option<Shape>,
}

impl fmt::Debug for RigModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RigModel")
            .field("model", &self.name)
            .field("provider", &self.model.name())
            .field("profile", &self.profile)
            .field("prices", &self.prices)
            .finish_non_exhaustive()
    }
}

impl RigModel {
    /// `model` (any of rig's completion models: `OpenAI::chat`, `Anthropic::completion`, ...),
    /// shown the tools in `profile`'s format, which the registry must serve. Pick the profile
    /// of the provider's own tool format: `OpenAiChat` for Chat Completions (strict only with
    /// rig's `with_strict_tools` wire), `OpenAiResponses`, `Anthropic`, `Gemini`.
    pub fn new(model: impl Into<DynModel<Completion>>, profile: Profile) -> Self {
        let model = model.into();
        let name = model.id().unwrap_or(model.name()).to_owned();
        RigModel {
            model,
            name,
            profile,
            prices: None,
            shape: None,
        }
    }

    /// Counts each turn's cost at `prices` (no cost is counted by default).
    pub fn with_prices(mut self, prices: Prices) -> Self {
        self.prices = Some(prices);
        self
    }

    /// Passes every request through `shape` before it is sent: for a preamble, a temperature,
    /// an output cap, or any other of rig's settings.
    pub fn with_request(
        mut self,
        shape: impl Fn(CompletionRequest) -> CompletionRequest + Send + Sync + 'static,
    ) -> Self {
        self.shape = Some(Arc::new(shape));
        self
    }

    fn request(&self, request: ModelRequest<'_>) -> Result<CompletionRequest, ModelError> {
        let tools = definitions(request.tools, self.profile)?;
        let mut completion = CompletionRequest::from(messages(request.transcript)?)
            .tools(tools)
            .tool_choice(choice(request.tool_choice)?);
        if let Some(shape) = &self.shape {
            completion = shape(completion);
        }
        Ok(completion)
    }

    fn turn(&self, response: &CompletionResponse) -> Result<ModelTurn, ModelError> {
        let stop = response.stop();
        let finish = response.finish_reason();
        if let Some(failure) =
            rig_core::message::turn_failure(&response.choice, Some(&stop), finish.as_ref())
        {
            return Err(self.error(failure));
        }
        let text = response.text();
        let calls = response
            .choice
            .iter()
            .filter_map(|block| match block {
                AssistantContent::ToolCall(call) => Some(ToolCall::new(
                    call.id.wire().into_owned(),
                    call.function.name.as_str(),
                    argument_text(call, block.native_item()),
                )),
                _ => None,
            })
            .collect();
        let input_tokens = response.usage.input_tokens.unwrap_or(0);
        let output_tokens = response.usage.output_tokens.unwrap_or(0);
        Ok(ModelTurn {
            text: (!text.is_empty()).then_some(text),
            calls,
            usage: Usage {
                input_tokens,
                output_tokens,
                cost: self
                    .prices
                    .map_or(0, |prices| prices.cost(input_tokens, output_tokens)),
            },
        })
    }

    fn error(&self, message: impl fmt::Display) -> ModelError {
        ModelError::new(format!(
            "{} model `{}`: {message}",
            self.model.name(),
            self.name
        ))
    }
}

impl Model for RigModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn profile(&self) -> Profile {
        self.profile
    }

    fn complete<'a>(
        &'a self,
        request: ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelTurn, ModelError>> {
        let request = self.request(request);
        Box::pin(async move {
            let response = self
                .model
                .call(request?)
                .await
                .map_err(|error| self.error(provider_error(&error)))?;
            self.turn(&response)
        })
    }
}

/// rig's error and what caused it, each cause once: a transport's error leaves the cause (a
/// refused connection, a certificate) to its sources, which rig does not name as its own.
fn provider_error(error: &ProviderError) -> String {
    let mut text = error.to_string();
    let mut source = match error {
        ProviderError::Http(http) => http.source(),
        other => other.source(),
    };
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        source = cause.source();
    }
    text
}

/// The transcript as rig's messages. The results of one turn go in one user message, as
/// Anthropic needs them; OpenAI's wire gives each its own `tool` message. An assistant turn
/// that said nothing and called nothing is left out: every provider refuses an empty message.
fn messages(transcript: &[Message]) -> Result<Vec<RigMessage>, ModelError> {
    let mut messages = Vec::with_capacity(transcript.len());
    let mut results: Vec<UserContent> = Vec::new();
    for message in transcript {
        if let Message::Tool(result) = message {
            results.push(UserContent::ToolResult(tool_result(result)?));
            continue;
        }
        if !results.is_empty() {
            messages.push(RigMessage::User {
                content: std::mem::take(&mut results),
            });
        }
        match message {
            Message::User { text } => messages.push(RigMessage::user(text.as_str())),
            Message::Assistant { text, calls } => {
                let mut content = Vec::with_capacity(calls.len() + 1);
                if let Some(text) = text.as_deref().filter(|text| !text.is_empty()) {
                    content.push(AssistantContent::text(text));
                }
                for call in calls {
                    content.push(AssistantContent::ToolCall(
                        rig_core::message::ToolCall::from_wire(call.id.as_str(), function(call)?),
                    ));
                }
                if !content.is_empty() {
                    messages.push(RigMessage::Assistant(AssistantMessage::new(content)));
                }
            }
            Message::Tool(_) => {}
        }
    }
    if !results.is_empty() {
        messages.push(RigMessage::User { content: results });
    }
    Ok(messages)
}

fn tool_name(name: &str) -> Result<ToolName, ModelError> {
    ToolName::new(name).map_err(|_| ModelError::new("a tool without a name cannot be sent to rig"))
}

/// A call of the transcript as rig holds it: its arguments as the model sent them, which rig
/// reads leniently and sends back as an object.
fn function(call: &ToolCall) -> Result<ToolFunction, ModelError> {
    let name = tool_name(&call.name)?;
    Ok(match &call.arguments {
        Arguments::Text(text) => ToolFunction::parse(name, text),
        Arguments::Json(value) => ToolFunction::new(name, value.clone()),
    })
}

fn tool_result(result: &ToolResult) -> Result<RigResult, ModelError> {
    Ok(RigResult {
        call: CallId::from_wire(result.call_id.as_str()),
        name: tool_name(&result.tool)?,
        content: vec![ToolResultContent::text(result.content.as_str())],
        is_error: result.is_error,
    })
}

/// The arguments of a call rig read, as the gates must see them: the model's own text where
/// rig kept it (arguments that are not an object, or the provider's `arguments` string, which
/// may hold a duplicate key rig's map dropped); rig's object otherwise (Anthropic and Gemini
/// send an object, and a gateway may send the object's text inside a string).
/// `native` is the provider's item the call was read from.
fn argument_text(call: &rig_core::message::ToolCall, native: Option<&Value>) -> String {
    if let Some(text) = &call.function.invalid_arguments {
        return text.clone();
    }
    let sent = native.and_then(|item| {
        ["/function/arguments", "/arguments"]
            .into_iter()
            .find_map(|pointer| item.pointer(pointer).and_then(Value::as_str))
    });
    if let Some(text) = sent
        && serde_json::from_str::<Value>(text).is_ok_and(|value| value.is_object())
    {
        return text.to_owned();
    }
    call.function.arguments_value().to_string()
}

/// The exported tools as rig's definitions, read from `profile`'s format.
fn definitions(tools: &[Value], profile: Profile) -> Result<Vec<ToolDefinition>, ModelError> {
    // Where each format keeps the name, the description and the parameters.
    let (name, description, parameters) = match profile {
        Profile::OpenAiChat { .. } => (
            "/function/name",
            "/function/description",
            "/function/parameters",
        ),
        Profile::OpenAiResponses { .. } => ("/name", "/description", "/parameters"),
        Profile::Anthropic { .. } => ("/name", "/description", "/input_schema"),
        Profile::Gemini => ("/name", "/description", "/parameters"),
        Profile::GeminiJsonSchema => ("/name", "/description", "/parametersJsonSchema"),
        Profile::Mcp => ("/name", "/description", "/inputSchema"),
        other => {
            return Err(ModelError::new(format!(
                "rig cannot be shown tools in the `{other}` format"
            )));
        }
    };
    let gemini = matches!(profile, Profile::Gemini | Profile::GeminiJsonSchema);
    let declarations: Vec<&Value> = if gemini {
        tools
            .iter()
            .filter_map(|tool| tool.get("functionDeclarations").and_then(Value::as_array))
            .flatten()
            .collect()
    } else {
        tools.iter().collect()
    };
    declarations
        .into_iter()
        .map(|tool| {
            let field = |pointer: &str| tool.pointer(pointer);
            let missing = || {
                ModelError::new(format!(
                    "a tool exported as `{profile}` has no name at `{name}`"
                ))
            };
            let named = field(name).and_then(Value::as_str).ok_or_else(missing)?;
            Ok(ToolDefinition::new(
                tool_name(named)?,
                field(description)
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                field(parameters)
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
            ))
        })
        .collect()
}

fn choice(choice: &ToolChoice) -> Result<RigChoice, ModelError> {
    Ok(match choice {
        ToolChoice::None => RigChoice::None,
        ToolChoice::Auto => RigChoice::Auto,
        ToolChoice::Required => RigChoice::Required,
        ToolChoice::Tool(name) => RigChoice::Specific {
            function_names: vec![tool_name(name)?],
        },
        other => {
            return Err(ModelError::new(format!(
                "rig has no tool choice for {other:?}"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prices_round_up_and_saturate() {
        let prices = Prices {
            input_per_million: 150_000,
            output_per_million: 600_000,
        };
        assert_eq!(prices.cost(1_000_000, 0), 150_000);
        assert_eq!(prices.cost(1, 1), 1 + 1);
        assert_eq!(prices.cost(2_000, 500), 300 + 300);
        let dear = Prices {
            input_per_million: u64::MAX,
            output_per_million: u64::MAX,
        };
        assert_eq!(dear.cost(u64::MAX, u64::MAX), u64::MAX);
    }

    #[test]
    fn the_results_of_one_turn_go_in_one_message_after_it() {
        let transcript = [
            Message::User {
                text: "Pay inv_1 and inv_2".into(),
            },
            Message::Assistant {
                text: None,
                calls: vec![
                    ToolCall::new("call_a", "pay", r#"{"invoice": "inv_1"}"#),
                    ToolCall::new("call_b", "pay", json!({"invoice": "inv_2"})),
                ],
            },
            Message::Tool(ToolResult {
                call_id: "call_a".into(),
                tool: "pay".into(),
                content: "paid".into(),
                is_error: false,
            }),
            Message::Tool(ToolResult {
                call_id: "call_b".into(),
                tool: "pay".into(),
                content: r#"{"code":"invalid_type"}"#.into(),
                is_error: true,
            }),
            Message::Assistant {
                text: None,
                calls: Vec::new(),
            },
            Message::User {
                text: "Thanks".into(),
            },
        ];
        let messages = messages(&transcript).unwrap();
        assert_eq!(messages.len(), 4, "{messages:#?}");
        let RigMessage::Assistant(turn) = &messages[1] else {
            panic!("{messages:#?}");
        };
        let ids: Vec<String> = turn.tool_calls().map(|call| call.id.to_string()).collect();
        assert_eq!(ids, ["call_a", "call_b"]);
        let RigMessage::User { content } = &messages[2] else {
            panic!("{messages:#?}");
        };
        let results: Vec<(String, bool)> = content
            .iter()
            .map(|part| match part {
                UserContent::ToolResult(result) => (result.call.to_string(), result.is_error),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            results,
            [("call_a".to_owned(), false), ("call_b".to_owned(), true)]
        );
        assert_eq!(messages[3], RigMessage::user("Thanks"));
    }

    #[test]
    fn tools_are_read_from_each_profile_format() {
        let parameters = json!({"type": "object", "properties": {"id": {"type": "string"}}});
        let cases = [
            (
                Profile::OpenAiChat { strict: false },
                json!([{"type": "function", "function": {"name": "find", "description": "Find.", "parameters": parameters}}]),
            ),
            (
                Profile::OpenAiResponses { strict: true },
                json!([{"type": "function", "name": "find", "description": "Find.", "parameters": parameters, "strict": true}]),
            ),
            (
                Profile::Anthropic { strict: false },
                json!([{"name": "find", "description": "Find.", "input_schema": parameters}]),
            ),
            (
                Profile::Gemini,
                json!([{"functionDeclarations": [{"name": "find", "description": "Find.", "parameters": parameters}]}]),
            ),
            (
                Profile::GeminiJsonSchema,
                json!([{"functionDeclarations": [{"name": "find", "description": "Find.", "parametersJsonSchema": parameters}]}]),
            ),
            (
                Profile::Mcp,
                json!([{"name": "find", "description": "Find.", "inputSchema": parameters}]),
            ),
        ];
        for (profile, tools) in cases {
            let Value::Array(tools) = tools else {
                unreachable!()
            };
            let read = definitions(&tools, profile).unwrap();
            assert_eq!(
                read,
                [ToolDefinition::new(
                    ToolName::new("find").unwrap(),
                    "Find.",
                    parameters.clone()
                )],
                "{profile}"
            );
        }
        let misread = definitions(
            &[json!({"name": "find"})],
            Profile::OpenAiChat { strict: false },
        )
        .unwrap_err();
        assert!(misread.to_string().contains("/function/name"), "{misread}");
    }

    #[test]
    fn the_arguments_reach_the_gates_as_the_model_wrote_them() {
        let name = ToolName::new("pay").unwrap();
        let sent = r#"{"amount_cents": 1, "amount_cents": 100000}"#;
        let call = rig_core::message::ToolCall::from_wire(
            "call_1",
            ToolFunction::parse(name.clone(), sent),
        );
        let native = json!({"id": "call_1", "type": "function", "function": {"name": "pay", "arguments": sent}});
        assert_eq!(argument_text(&call, Some(&native)), sent);
        // Without the provider's text, rig's object (the duplicate already gone).
        assert_eq!(argument_text(&call, None), r#"{"amount_cents":100000}"#);

        let broken = rig_core::message::ToolCall::from_wire(
            "call_2",
            ToolFunction::parse(name.clone(), r#"{"amount_cents": "#),
        );
        assert_eq!(argument_text(&broken, None), r#"{"amount_cents": "#);

        // An object (Anthropic's `input`): rig's object, as JSON text.
        let object = rig_core::message::ToolCall::from_wire(
            "call_3",
            ToolFunction::new(name, json!({"amount_cents": 5})),
        );
        assert_eq!(argument_text(&object, None), r#"{"amount_cents":5}"#);
    }

    #[test]
    fn every_tool_choice_has_rig_s() {
        assert_eq!(choice(&ToolChoice::Auto).unwrap(), RigChoice::Auto);
        assert_eq!(choice(&ToolChoice::None).unwrap(), RigChoice::None);
        assert_eq!(choice(&ToolChoice::Required).unwrap(), RigChoice::Required);
        assert_eq!(
            choice(&ToolChoice::Tool("pay".into())).unwrap(),
            RigChoice::Specific {
                function_names: vec![ToolName::new("pay").unwrap()]
            }
        );
    }
}
