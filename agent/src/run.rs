//! A run: its state as the store keeps it, the steps it took, and how it ended or waits.

use std::collections::BTreeMap;
use std::fmt;

use portcullis_core::{CallContext, RejectionCode, Ticket, ToolCall};
use serde::{Deserialize, Serialize};

use crate::model::{Message, ToolResult, Usage};

/// Where a run stands after [`Agent::run`](crate::Agent::run),
/// [`Agent::message`](crate::Agent::message) or [`Agent::resume`](crate::Agent::resume).
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The run's id, for [`Agent::resume`](crate::Agent::resume) and
    /// [`Agent::message`](crate::Agent::message).
    pub id: String,
    /// How it ended, or what it waits for.
    pub outcome: RunOutcome,
    /// Every step it took, from its first message.
    pub steps: Vec<Step>,
    /// What the model used over the whole run.
    pub usage: Usage,
}

impl Run {
    /// The answer of a finished run.
    pub fn answer(&self) -> Option<&str> {
        match &self.outcome {
            RunOutcome::Finished { answer } => Some(answer),
            _ => None,
        }
    }

    /// The tickets a paused run waits for; empty otherwise.
    pub fn tickets(&self) -> &[Ticket] {
        match &self.outcome {
            RunOutcome::Paused { tickets } => tickets,
            _ => &[],
        }
    }

    /// Why a stopped run stopped.
    pub fn stop_reason(&self) -> Option<&StopReason> {
        match &self.outcome {
            RunOutcome::Stopped { reason } => Some(reason),
            _ => None,
        }
    }
}

/// How a run ended, or what it waits for.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// The model answered without calling a tool. Another message of the user continues the
    /// run ([`Agent::message`](crate::Agent::message)).
    Finished {
        /// The model's answer.
        answer: String,
    },
    /// Calls of the last turn wait for a human; [`Agent::resume`](crate::Agent::resume)
    /// continues once they are decided.
    Paused {
        /// The tickets the run waits for.
        tickets: Vec<Ticket>,
    },
    /// The run stopped and will not go on.
    Stopped {
        /// Why.
        reason: StopReason,
    },
    /// A worker is taking the run forward ([`Agent::get`](crate::Agent::get) of a run another
    /// worker holds, or one whose worker died before its lease ended).
    Running,
}

/// Why a run stopped. Each has a stable snake_case [`code`](StopReason::code).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// The model took as many turns as the run may (`step_limit`).
    StepLimit {
        /// The limit.
        turns: u32,
    },
    /// The model read and wrote more tokens than the run may (`token_limit`).
    TokenLimit {
        /// The limit.
        tokens: u64,
    },
    /// The model cost more than the run may (`cost_limit`).
    CostLimit {
        /// The limit.
        cost: u64,
    },
    /// The model sent a call that was refused, the same call, as many times as the run allows
    /// (`stalled`).
    Stalled {
        /// The tool it kept calling.
        tool: String,
        /// The code the call was last refused with.
        refusal: RejectionCode,
    },
    /// A call was refused with a code the model cannot act on (a policy's denial, a spent
    /// budget); the stop's code is the refusal's.
    Refused {
        /// The tool.
        tool: String,
        /// The refusal's code.
        refusal: RejectionCode,
        /// The refusal's message.
        message: String,
    },
    /// The model made more calls in one turn than the run allows; none ran (`too_many_calls`).
    TooManyCalls {
        /// The calls it made.
        calls: usize,
        /// The limit.
        limit: usize,
    },
    /// The model gave no turn (`model_failed`).
    ModelFailed {
        /// Why, as its adapter said.
        message: String,
    },
    /// The tool list could not be exported in the model's format (`export_failed`).
    ExportFailed {
        /// Why.
        message: String,
    },
}

impl StopReason {
    /// The stop's stable snake_case code; for a refusal, the refusal's code.
    pub fn code(&self) -> &'static str {
        match self {
            StopReason::StepLimit { .. } => "step_limit",
            StopReason::TokenLimit { .. } => "token_limit",
            StopReason::CostLimit { .. } => "cost_limit",
            StopReason::Stalled { .. } => "stalled",
            StopReason::Refused { refusal, .. } => refusal.as_str(),
            StopReason::TooManyCalls { .. } => "too_many_calls",
            StopReason::ModelFailed { .. } => "model_failed",
            StopReason::ExportFailed { .. } => "export_failed",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::StepLimit { turns } => {
                write!(f, "the model took {turns} turns, the run's limit")
            }
            StopReason::TokenLimit { tokens } => write!(
                f,
                "the model used more than {tokens} tokens, the run's limit"
            ),
            StopReason::CostLimit { cost } => {
                write!(f, "the model cost more than {cost}, the run's limit")
            }
            StopReason::Stalled { tool, refusal } => {
                write!(
                    f,
                    "the model kept sending the same call of `{tool}`, refused with {refusal}"
                )
            }
            StopReason::Refused {
                tool,
                refusal,
                message,
            } => {
                write!(
                    f,
                    "a call of `{tool}` was refused with {refusal}: {message}"
                )
            }
            StopReason::TooManyCalls { calls, limit } => {
                write!(
                    f,
                    "the model made {calls} calls in one turn; the run allows {limit}"
                )
            }
            StopReason::ModelFailed { message } => write!(f, "the model gave no turn: {message}"),
            StopReason::ExportFailed { message } => {
                write!(f, "the tools could not be shown to the model: {message}")
            }
        }
    }
}

/// One transition of a run, as its log and the audit record it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Its place in the run, from 1.
    pub number: u32,
    /// When, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub event: StepEvent,
}

/// What happened in one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepEvent {
    /// The user wrote.
    UserMessage {
        /// What.
        text: String,
    },
    /// The model took a turn.
    ModelTurn {
        /// What it said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// The tools it called, in order.
        calls: Vec<String>,
        /// What the turn used.
        usage: Usage,
    },
    /// A call went through the gates.
    ToolCall {
        /// The call's id.
        call_id: String,
        /// The tool.
        tool: String,
        /// `completed`, `refused` or `waiting`.
        result: String,
        /// The refusal's code.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<RejectionCode>,
        /// The refusal's message, after the path of the argument it is about: what the model
        /// read (never a sensitive value).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// The run waits for these tickets.
    Paused {
        /// Their ids.
        tickets: Vec<String>,
    },
    /// The run went on after its tickets were decided.
    Resumed,
    /// The model answered.
    Finished {
        /// Its answer.
        answer: String,
    },
    /// The run stopped.
    Stopped {
        /// Why.
        reason: StopReason,
    },
}

impl StepEvent {
    /// The step's kind in snake_case, as the audit records it (`run_{kind}`).
    pub fn kind(&self) -> &'static str {
        match self {
            StepEvent::UserMessage { .. } => "user_message",
            StepEvent::ModelTurn { .. } => "model_turn",
            StepEvent::ToolCall { .. } => "tool_call",
            StepEvent::Paused { .. } => "paused",
            StepEvent::Resumed => "resumed",
            StepEvent::Finished { .. } => "finished",
            StepEvent::Stopped { .. } => "stopped",
        }
    }
}

/// Where a run stands, as its store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RunStatus {
    /// A worker is taking it forward.
    Running,
    /// Calls of its last turn wait for a human.
    Paused,
    /// The model answered.
    Finished {
        /// The answer.
        answer: String,
    },
    /// It stopped.
    Stopped {
        /// Why.
        reason: StopReason,
    },
}

impl RunStatus {
    /// `running`, `paused`, `finished` or `stopped`.
    pub fn as_str(&self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Finished { .. } => "finished",
            RunStatus::Stopped { .. } => "stopped",
        }
    }
}

/// One call of the model's last turn, until every call of the turn has a result: results go
/// back to the model together, in the order of the calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnCall {
    /// The call, as the model sent it.
    pub call: ToolCall,
    /// Its result, once it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ToolResult>,
    /// The ticket it waits under, while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<Ticket>,
}

/// Everything a run is, as its store keeps it: any worker holding it can take it forward.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunState {
    /// The run's id.
    pub id: String,
    /// The caller, as every call of the run is made (its extensions are not kept).
    pub ctx: CallContext,
    /// Where it stands.
    pub status: RunStatus,
    /// What the model has read and said.
    pub transcript: Vec<Message>,
    /// The calls of the last turn, while some wait for a human.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turn: Vec<TurnCall>,
    /// Its steps, in order.
    pub steps: Vec<Step>,
    /// What the model used.
    pub usage: Usage,
    /// The turns the model took.
    pub turns: u32,
    /// How many times each refused call was sent, by its tool and arguments.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused: BTreeMap<String, u32>,
    /// When it began, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When it last changed.
    pub updated_ms: u64,
}

impl RunState {
    /// What the caller sees of it.
    pub fn view(&self) -> Run {
        let outcome = match &self.status {
            RunStatus::Finished { answer } => RunOutcome::Finished {
                answer: answer.clone(),
            },
            RunStatus::Stopped { reason } => RunOutcome::Stopped {
                reason: reason.clone(),
            },
            RunStatus::Paused => RunOutcome::Paused {
                tickets: self.waiting().cloned().collect(),
            },
            RunStatus::Running => RunOutcome::Running,
        };
        Run {
            id: self.id.clone(),
            outcome,
            steps: self.steps.clone(),
            usage: self.usage,
        }
    }

    /// The tickets the run waits for.
    pub fn waiting(&self) -> impl Iterator<Item = &Ticket> {
        self.turn
            .iter()
            .filter(|call| call.result.is_none())
            .filter_map(|call| call.ticket.as_ref())
    }
}
