//! A model that plays a script: for tests and examples, and for a run that must go the same
//! way every time.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use portcullis_core::export::Profile;
use portcullis_core::{BoxFuture, ToolCall};
use serde_json::Value;

use crate::model::{Message, Model, ModelError, ModelRequest, ModelTurn, Usage};

type Play = Box<dyn FnOnce(ModelRequest<'_>) -> ModelTurn + Send>;

/// A model that answers each turn with the next one of its script, and keeps every transcript
/// it was shown.
///
/// The calls of a scripted turn get ids of the run's transcript (`call_{messages}_{n}`), so
/// that a script played again after a restart sends the ids the first one sent. Once the
/// script is played out, a turn fails (`model_failed`).
///
/// ```
/// use portcullis_agent::ScriptedModel;
/// use serde_json::json;
///
/// let model = ScriptedModel::new()
///     .call("refund", json!({"payment_id": "pay_7", "amount_cents": 500}))
///     .answer("Refunded.");
/// assert_eq!(model.remaining(), 2);
/// ```
pub struct ScriptedModel {
    profile: Profile,
    script: Mutex<VecDeque<Play>>,
    shown: Mutex<Vec<Vec<Message>>>,
}

impl Default for ScriptedModel {
    fn default() -> Self {
        ScriptedModel::new()
    }
}

impl ScriptedModel {
    /// An empty script, reading tools in OpenAI Chat Completions' format.
    pub fn new() -> Self {
        ScriptedModel {
            profile: Profile::OpenAiChat { strict: false },
            script: Mutex::new(VecDeque::new()),
            shown: Mutex::new(Vec::new()),
        }
    }

    /// Reads the tools in `profile`'s format instead.
    pub fn with_profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self
    }

    /// A turn that calls `tool` with `arguments`.
    pub fn call(self, tool: &str, arguments: Value) -> Self {
        self.calls([(tool, arguments)])
    }

    /// A turn that calls several tools at once, in this order.
    pub fn calls<'t>(self, calls: impl IntoIterator<Item = (&'t str, Value)>) -> Self {
        let calls: Vec<(String, Value)> = calls
            .into_iter()
            .map(|(tool, arguments)| (tool.to_owned(), arguments))
            .collect();
        self.turn(move |request| ModelTurn {
            calls: calls
                .into_iter()
                .enumerate()
                .map(|(index, (tool, arguments))| {
                    let id = format!("call_{}_{}", request.transcript.len(), index + 1);
                    ToolCall::new(id, tool, arguments.to_string())
                })
                .collect(),
            usage: Usage {
                input_tokens: 100,
                output_tokens: 20,
                cost: 0,
            },
            ..ModelTurn::default()
        })
    }

    /// A turn that answers with `text` and calls nothing: the run's answer.
    pub fn answer(self, text: &str) -> Self {
        let text = text.to_owned();
        self.turn(move |_| ModelTurn {
            text: Some(text),
            usage: Usage {
                input_tokens: 100,
                output_tokens: 10,
                cost: 0,
            },
            ..ModelTurn::default()
        })
    }

    /// A turn written by `play`, which sees what the model is shown.
    pub fn turn(self, play: impl FnOnce(ModelRequest<'_>) -> ModelTurn + Send + 'static) -> Self {
        self.script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(Box::new(play));
        self
    }

    /// How many turns are left to play.
    pub fn remaining(&self) -> usize {
        self.script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Every transcript the model was shown, one per turn played.
    pub fn transcripts(&self) -> Vec<Vec<Message>> {
        self.shown
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Model for ScriptedModel {
    fn name(&self) -> &str {
        "scripted"
    }

    fn profile(&self) -> Profile {
        self.profile
    }

    fn complete<'a>(
        &'a self,
        request: ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelTurn, ModelError>> {
        let play = self
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        self.shown
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request.transcript.to_vec());
        let turn = match play {
            Some(play) => Ok(play(request)),
            None => Err(ModelError::new(
                "the scripted model has no turn left to play",
            )),
        };
        Box::pin(async move { turn })
    }
}
