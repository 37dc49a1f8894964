//! The model a run talks to: the transcript and the tools in, the assistant's turn out.
//!
//! [`Model`] is small on purpose: a client of any provider fits behind it in a few lines. The
//! transcript is in no provider's format ([`Message`]); an adapter writes it in its own, and
//! reads the tools in the format of the export profile it names ([`Model::profile`]).

use portcullis_core::export::Profile;
use portcullis_core::wire::{ToolChoice, outcome_text};
use portcullis_core::{BoxFuture, Outcome, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of a run's transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// What the user wrote.
    User {
        /// The text, as the user wrote it.
        text: String,
    },
    /// The assistant's turn: what it said and the tools it called.
    Assistant {
        /// Its text, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// The calls it made, in its order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        calls: Vec<ToolCall>,
    },
    /// The result of one call, as the model reads it.
    Tool(ToolResult),
}

/// The result of one call, as the model reads it: the same text every provider's reply carries
/// ([`outcome_text`]), and whether it is a refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the call it answers.
    pub call_id: String,
    /// The tool called.
    pub tool: String,
    /// The output as JSON text, or the refusal as the provider replies carry it: code, message,
    /// path, hint.
    pub content: String,
    /// Whether the call was refused (Anthropic's `is_error`).
    pub is_error: bool,
}

impl ToolResult {
    /// The result of `call`, whose outcome is `outcome` (completed or refused).
    pub fn of(call: &ToolCall, outcome: &Outcome) -> Self {
        ToolResult {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            content: outcome_text(outcome),
            is_error: matches!(outcome, Outcome::Rejected(_)),
        }
    }
}

/// What a model is asked for one turn.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    /// The whole transcript, oldest first.
    pub transcript: &'a [Message],
    /// The tools the caller may use, in the format of [`Model::profile`], sorted by name.
    pub tools: &'a [Value],
    /// Which tools the model may call this turn.
    pub tool_choice: &'a ToolChoice,
}

/// The assistant's turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelTurn {
    /// What it said.
    pub text: Option<String>,
    /// The calls it made; none: its text is the run's answer.
    pub calls: Vec<ToolCall>,
    /// What the turn used.
    pub usage: Usage,
}

/// What a model used: tokens, and cost in the unit the model's adapter counts in (micro-dollars,
/// say). Sums saturate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read.
    pub input_tokens: u64,
    /// Tokens written.
    pub output_tokens: u64,
    /// Cost.
    pub cost: u64,
}

impl Usage {
    /// Tokens read and written.
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// `self` and `other` together.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cost: self.cost.saturating_add(other.cost),
        }
    }
}

/// Why a model gave no turn: its provider refused or could not be reached, or it answered
/// with something that is not a turn. The run stops with `model_failed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    message: String,
}

impl ModelError {
    /// A failure, in words an operator can act on.
    pub fn new(message: impl Into<String>) -> Self {
        ModelError {
            message: message.into(),
        }
    }
}

/// A language model a run can talk to.
///
/// ```
/// use portcullis_agent::{Message, Model, ModelError, ModelRequest, ModelTurn};
/// use portcullis_core::BoxFuture;
/// use portcullis_core::export::Profile;
///
/// /// Answers every turn with the last thing the user said.
/// struct Echo;
///
/// impl Model for Echo {
///     fn name(&self) -> &str {
///         "echo"
///     }
///
///     fn profile(&self) -> Profile {
///         Profile::OpenAiChat { strict: false }
///     }
///
///     fn complete<'a>(&'a self, request: ModelRequest<'a>) -> BoxFuture<'a, Result<ModelTurn, ModelError>> {
///         let said = request.transcript.iter().rev().find_map(|message| match message {
///             Message::User { text } => Some(text.clone()),
///             _ => None,
///         });
///         Box::pin(async move { Ok(ModelTurn { text: said, ..ModelTurn::default() }) })
///     }
/// }
/// ```
pub trait Model: Send + Sync + 'static {
    /// The model's name, for the run's events (`gen_ai.request.model`).
    fn name(&self) -> &str;

    /// The export profile whose tool format [`complete`](Model::complete) reads. The registry
    /// must serve it ([`RegistryBuilder::profile`](portcullis_core::RegistryBuilder::profile)).
    fn profile(&self) -> Profile;

    /// The assistant's next turn.
    fn complete<'a>(
        &'a self,
        request: ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelTurn, ModelError>>;
}

/// A model shared: with the test that reads what it was shown, or between agents.
impl<M: Model> Model for std::sync::Arc<M> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn profile(&self) -> Profile {
        (**self).profile()
    }

    fn complete<'a>(
        &'a self,
        request: ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelTurn, ModelError>> {
        (**self).complete(request)
    }
}
