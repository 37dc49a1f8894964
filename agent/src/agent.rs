//! The agent: its settings, and the loop that takes a run from the user's message to an
//! answer, a pause for a human, or a stop.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use portcullis_core::audit::RunStep;
use portcullis_core::encoding::random_id;
use portcullis_core::json::canonical;
use portcullis_core::{
    Arguments, CallContext, Outcome, Progress, Registry, RejectionCode, ToolCall,
};
use serde_json::Value;

use crate::builder::AgentBuilder;
use crate::error::{AgentBuildError, RunError};
use crate::model::{Message, Model, ModelRequest, ToolResult};
use crate::run::{Run, RunState, RunStatus, Step, StepEvent, StopReason, TurnCall};
use crate::store::{InMemoryRunStore, StoredRun};

impl AgentBuilder {
    /// The agent, once the registry serves the model's profile.
    pub fn build(self) -> Result<Agent, AgentBuildError> {
        let profile = self.model.profile();
        if !self.registry.serves(profile) {
            return Err(AgentBuildError::ProfileNotServed(profile));
        }
        Ok(Agent { settings: self })
    }
}

/// The loop around the gates: the model's turn, each call it makes dispatched through the
/// registry, each outcome sent back, until the model answers, a call waits for a human, or a
/// limit stops the run.
///
/// ```
/// use portcullis::prelude::*;
/// use portcullis_agent::{Agent, ScriptedModel};
/// use portcullis_core::export::Profile;
/// use serde_json::json;
///
/// /// Look up an order.
/// #[tool(read_only)]
/// fn find_order(order_id: u64) -> Result<String, ToolError> {
///     Ok(format!("order {order_id}: shipped"))
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let registry = Registry::builder()
///     .tool(FindOrder)
///     .profile(Profile::OpenAiChat { strict: false })
///     .build()
///     .unwrap();
/// let model = ScriptedModel::new()
///     .call("find_order", json!({"order_id": "7"}))  // a string: refused, invalid_type
///     .call("find_order", json!({"order_id": 7}))    // corrected
///     .answer("Your order has shipped.");
/// let agent = Agent::builder(registry, model).build().unwrap();
///
/// let run = agent.run(&CallContext::new("alice"), "Where is order 7?").await.unwrap();
/// assert_eq!(run.answer(), Some("Your order has shipped."));
/// # });
/// ```
pub struct Agent {
    settings: AgentBuilder,
}

impl Agent {
    /// An agent over `registry`'s tools, talking to `model`.
    pub fn builder(registry: Registry, model: impl Model) -> AgentBuilder {
        AgentBuilder {
            registry,
            model: Arc::new(model),
            store: Arc::new(InMemoryRunStore::default()),
            max_turns: 20,
            max_tokens: None,
            max_cost: None,
            stall_after: 3,
            max_calls_per_turn: 16,
            told: HashSet::new(),
            choice: None,
            lease: Duration::from_secs(300),
        }
    }

    /// The registry the agent dispatches through.
    pub fn registry(&self) -> &Registry {
        &self.settings.registry
    }

    /// Starts a run for `ctx` with the user's first message, and takes it as far as it goes.
    /// The message is the task's request ([`CallContext::with_request`]) unless `ctx` has
    /// one; then it is a later message of the user.
    pub async fn run(&self, ctx: &CallContext, user_message: &str) -> Result<Run, RunError> {
        let now = now_ms();
        let ctx = if ctx.request().is_none() {
            ctx.clone().with_request(user_message)
        } else {
            self.record_user_message(ctx, user_message).await?;
            ctx.clone()
        };
        let state = RunState {
            id: random_id("run"),
            ctx,
            status: RunStatus::Running,
            transcript: Vec::new(),
            turn: Vec::new(),
            steps: Vec::new(),
            usage: Default::default(),
            turns: 0,
            refused: BTreeMap::new(),
            created_ms: now,
            updated_ms: now,
        };
        let stored = StoredRun {
            version: 0,
            held_until_ms: now.saturating_add(millis(self.settings.lease)),
            state,
        };
        self.settings.store.insert(stored.clone()).await?;
        let mut held = Held {
            agent: self,
            stored,
            previous: RunStatus::Running,
        };
        held.add_user_message(user_message).await;
        self.drive(held).await
    }

    /// Continues a finished run with another message of the user.
    pub async fn message(&self, run_id: &str, user_message: &str) -> Result<Run, RunError> {
        let mut held = self
            .take(run_id, |status| match status {
                RunStatus::Finished { .. } => Ok(()),
                // Paused, or left running by a worker that died: resume it first.
                RunStatus::Paused | RunStatus::Running => Err(RunError::Paused(run_id.to_owned())),
                RunStatus::Stopped { .. } => Err(RunError::Stopped(run_id.to_owned())),
            })
            .await?;
        let ctx = held.stored.state.ctx.clone();
        if let Err(error) = self.record_user_message(&ctx, user_message).await {
            held.release().await?;
            return Err(error);
        }
        held.add_user_message(user_message).await;
        self.drive(held).await
    }

    /// Takes a paused run forward once its tickets are decided: an approved call ran, an
    /// edited one ran as edited, a rejected one tells the model the reviewer's message, an
    /// expired one tells it the ticket expired. A run whose tickets still wait stays paused.
    /// Of several workers resuming one run at once, one takes it (`run_in_progress` for the
    /// others); a run left held by a worker that died is taken over once its lease ends.
    pub async fn resume(&self, run_id: &str) -> Result<Run, RunError> {
        let held = self
            .take(run_id, |status| match status {
                RunStatus::Paused | RunStatus::Running => Ok(()),
                other => Err(RunError::NotPaused {
                    id: run_id.to_owned(),
                    status: other.as_str(),
                }),
            })
            .await?;
        self.drive(held).await
    }

    /// The run of `id`, as it stands.
    pub async fn get(&self, id: &str) -> Result<Run, RunError> {
        match self.settings.store.get(id).await? {
            Some(stored) => Ok(stored.state.view()),
            None => Err(RunError::NotFound(id.to_owned())),
        }
    }

    /// The context the calls of turn `number` are made in: the run's, with the turn's tool
    /// choice.
    fn turn_ctx(&self, ctx: &CallContext, number: u32) -> CallContext {
        let choice = self
            .settings
            .choice
            .as_ref()
            .and_then(|choose| choose(number));
        match choice {
            Some(choice) => ctx.clone().with_tool_choice(choice),
            None => ctx.clone(),
        }
    }

    async fn record_user_message(&self, ctx: &CallContext, text: &str) -> Result<(), RunError> {
        self.settings
            .registry
            .add_user_message(ctx, text)
            .await
            .map_err(|refusal| RunError::SourcesUnavailable(refusal.message().to_owned()))
    }

    /// Holds run `id` for this worker, if `allowed` accepts its status and no other worker
    /// holds it.
    async fn take(
        &self,
        id: &str,
        allowed: impl Fn(&RunStatus) -> Result<(), RunError>,
    ) -> Result<Held<'_>, RunError> {
        let store = &self.settings.store;
        let Some(mut stored) = store.get(id).await? else {
            return Err(RunError::NotFound(id.to_owned()));
        };
        let now = now_ms();
        if stored.held_until_ms > now {
            return Err(RunError::InProgress {
                id: id.to_owned(),
                until_ms: stored.held_until_ms,
            });
        }
        allowed(&stored.state.status)?;
        let previous = stored.state.status.clone();
        let read = stored.version;
        stored.version = read.saturating_add(1);
        stored.held_until_ms = now.saturating_add(millis(self.settings.lease));
        stored.state.status = RunStatus::Running;
        if !store.replace(stored.clone(), read).await? {
            let until_ms = match store.get(id).await? {
                Some(now_stored) => now_stored.held_until_ms,
                None => return Err(RunError::NotFound(id.to_owned())),
            };
            return Err(RunError::InProgress {
                id: id.to_owned(),
                until_ms,
            });
        }
        let mut held = Held {
            agent: self,
            stored,
            previous,
        };
        if !held.stored.state.turn.is_empty() {
            held.step(StepEvent::Resumed).await;
        }
        Ok(held)
    }

    /// Takes a held run as far as it goes.
    async fn drive(&self, mut held: Held<'_>) -> Result<Run, RunError> {
        let settings = &self.settings;
        loop {
            if !held.stored.state.turn.is_empty() {
                if let Some(reason) = held.settle_turn().await {
                    return held.stop(reason).await;
                }
                if held.stored.state.waiting().next().is_some() {
                    return held.pause().await;
                }
                held.close_turn();
            }
            let state = &held.stored.state;
            if state.turns >= settings.max_turns {
                let turns = settings.max_turns;
                return held.stop(StopReason::StepLimit { turns }).await;
            }
            let number = state.turns.saturating_add(1);
            let ctx = self.turn_ctx(&state.ctx, number);
            let tools = match settings.registry.export(&ctx, settings.model.profile()) {
                Ok(Value::Array(tools)) => tools,
                Ok(other) => vec![other],
                Err(error) => {
                    let message = error.to_string();
                    return held.stop(StopReason::ExportFailed { message }).await;
                }
            };
            let request = ModelRequest {
                transcript: &state.transcript,
                tools: &tools,
                tool_choice: ctx.tool_choice(),
            };
            let turn = match settings.model.complete(request).await {
                Ok(turn) => turn,
                Err(error) => {
                    let message = error.to_string();
                    return held.stop(StopReason::ModelFailed { message }).await;
                }
            };
            held.stored.state.turns = number;
            held.stored.state.usage = held.stored.state.usage.plus(turn.usage);
            held.stored.state.transcript.push(Message::Assistant {
                text: turn.text.clone(),
                calls: turn.calls.clone(),
            });
            held.step(StepEvent::ModelTurn {
                text: turn.text.clone(),
                calls: turn.calls.iter().map(|call| call.name.clone()).collect(),
                usage: turn.usage,
            })
            .await;
            if let Some(reason) = held.over_limits() {
                return held.stop(reason).await;
            }
            if turn.calls.is_empty() {
                return held.finish(turn.text.unwrap_or_default()).await;
            }
            let (calls, limit) = (turn.calls.len(), settings.max_calls_per_turn);
            if calls > limit {
                return held.stop(StopReason::TooManyCalls { calls, limit }).await;
            }
            // The turn is on record before any of its calls runs: a worker that takes the run
            // over sends the same calls again, and the registry's claims answer them with their
            // first outcome instead of running them twice.
            held.stored.state.turn = turn
                .calls
                .iter()
                .map(|call| TurnCall {
                    call: call.clone(),
                    result: None,
                    ticket: None,
                })
                .collect();
            held.save().await?;
            // The calls of one turn go through the gates at once; their results go back in
            // the model's order.
            let outcomes = join_all(
                turn.calls
                    .iter()
                    .map(|call| settings.registry.dispatch(&ctx, call)),
            )
            .await;
            for (index, outcome) in outcomes.into_iter().enumerate() {
                if let Some(reason) = held.judge(index, outcome, false).await {
                    return held.stop(reason).await;
                }
            }
            held.save().await?;
        }
    }
}

/// A run this worker holds, and the version it wrote last.
struct Held<'a> {
    agent: &'a Agent,
    stored: StoredRun,
    /// Its status before this worker took it.
    previous: RunStatus,
}

impl Held<'_> {
    fn settings(&self) -> &AgentBuilder {
        &self.agent.settings
    }

    async fn add_user_message(&mut self, text: &str) {
        let state = &mut self.stored.state;
        state.status = RunStatus::Running;
        state.transcript.push(Message::User {
            text: text.to_owned(),
        });
        self.step(StepEvent::UserMessage {
            text: text.to_owned(),
        })
        .await;
    }

    /// Writes the run at the next version, holding it for another lease; `run_taken_over` if
    /// another worker wrote it since.
    async fn save(&mut self) -> Result<(), RunError> {
        let now = now_ms();
        let read = self.stored.version;
        self.stored.version = read.saturating_add(1);
        self.stored.state.updated_ms = now;
        self.stored.held_until_ms = match self.stored.state.status {
            RunStatus::Running => now.saturating_add(millis(self.settings().lease)),
            _ => 0,
        };
        if self
            .settings()
            .store
            .replace(self.stored.clone(), read)
            .await?
        {
            Ok(())
        } else {
            Err(RunError::TakenOver(self.stored.state.id.clone()))
        }
    }

    /// Lets go of a run taken for a message that could not be recorded, as it was.
    async fn release(mut self) -> Result<(), RunError> {
        self.stored.state.status = self.previous.clone();
        self.save().await
    }

    async fn step(&mut self, event: StepEvent) {
        let state = &mut self.stored.state;
        let number =
            u32::try_from(state.steps.len()).map_or(u32::MAX, |steps| steps.saturating_add(1));
        let step = Step {
            number,
            time_ms: now_ms(),
            event,
        };
        trace(&state.id, self.agent.settings.model.name(), &step);
        let (tool, code) = match &step.event {
            StepEvent::ToolCall { tool, code, .. } => {
                (Some(tool.as_str()), code.map(RejectionCode::as_str))
            }
            StepEvent::Stopped { reason } => (None, Some(reason.code())),
            _ => (None, None),
        };
        let summary = summary(&step.event);
        let recorded = self
            .agent
            .settings
            .registry
            .record_step(
                &state.ctx,
                RunStep {
                    run_id: &state.id,
                    step: step.event.kind(),
                    tool,
                    code,
                    summary: &summary,
                },
            )
            .await;
        if let Err(error) = recorded {
            tracing::error!(run = %state.id, %error, "a step of the run could not be recorded in the audit log");
        }
        state.steps.push(step);
    }

    /// Judges the outcome of call `index` of the turn: its result, the ticket it waits under,
    /// or why the run stops. `resumed`: the outcome of a decision on a waiting call.
    async fn judge(&mut self, index: usize, outcome: Outcome, resumed: bool) -> Option<StopReason> {
        let call = self.stored.state.turn[index].call.clone();
        let refusal = outcome.rejection().cloned();
        let result = match (&outcome, &refusal) {
            (Outcome::Pending(_), _) => "waiting",
            (_, Some(_)) => "refused",
            _ => "completed",
        };
        self.step(StepEvent::ToolCall {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            result: result.to_owned(),
            code: refusal.as_ref().map(|refusal| refusal.code()),
            message: refusal.as_ref().map(|refusal| match refusal.path() {
                Some(path) => format!("{path}: {}", refusal.message()),
                None => refusal.message().to_owned(),
            }),
        })
        .await;
        if let Outcome::Pending(ticket) = outcome {
            self.stored.state.turn[index].ticket = Some(*ticket);
            return None;
        }
        self.stored.state.turn[index].result = Some(ToolResult::of(&call, &outcome));
        let refusal = refusal?;
        let code = refusal.code();
        let (stall_after, told) = (
            self.settings().stall_after,
            self.settings().told.contains(&code),
        );
        let times = self
            .stored
            .state
            .refused
            .entry(fingerprint(&call))
            .or_insert(0);
        *times = times.saturating_add(1);
        // A reviewer's answer is for the model to read, whatever it is.
        let decided = resumed
            && matches!(
                code,
                RejectionCode::ApprovalRejected | RejectionCode::ApprovalExpired
            );
        if *times >= stall_after && !decided {
            Some(StopReason::Stalled {
                tool: call.name,
                refusal: code,
            })
        } else if refusal.retryable() || decided || told {
            None
        } else {
            Some(StopReason::Refused {
                tool: call.name,
                refusal: code,
                message: refusal.message().to_owned(),
            })
        }
    }

    /// Gives each call of the turn without a result its outcome, where it has one: a waiting
    /// call's decision, carried out here or read from the worker that did; and a call that a
    /// worker which stopped sent without recording what became of it, sent again (its first
    /// outcome comes back, or it runs now if it never reached the tool).
    async fn settle_turn(&mut self) -> Option<StopReason> {
        let agent = self.agent;
        let registry = &agent.settings.registry;
        for index in 0..self.stored.state.turn.len() {
            let state = &self.stored.state;
            let slot = &state.turn[index];
            if slot.result.is_some() {
                continue;
            }
            let outcome = match &slot.ticket {
                None => {
                    let ctx = agent.turn_ctx(&state.ctx, state.turns);
                    registry.dispatch(&ctx, &slot.call).await
                }
                Some(ticket) => match registry.follow(&ticket.id).await {
                    Ok(Progress::Waiting) => continue,
                    Ok(Progress::Ended(outcome)) => outcome,
                    // Another worker carried the decision out, or the ticket expired: the same
                    // call again reads the outcome it ended with.
                    Ok(Progress::Left) => registry.dispatch(&state.ctx, &slot.call).await,
                    Ok(_) => continue,
                    Err(refusal) => {
                        tracing::warn!(run = %state.id, ticket = %ticket.id, code = %refusal.code(), "a ticket could not be read; the run keeps waiting for it");
                        continue;
                    }
                },
            };
            let resumed = slot.ticket.is_some();
            if resumed && matches!(outcome, Outcome::Pending(_)) {
                continue;
            }
            if let Some(reason) = self.judge(index, outcome, resumed).await {
                return Some(reason);
            }
        }
        None
    }

    /// Sends the results of a turn whose calls all have one back to the model, in order.
    fn close_turn(&mut self) {
        let state = &mut self.stored.state;
        for call in state.turn.drain(..) {
            if let Some(result) = call.result {
                state.transcript.push(Message::Tool(result));
            }
        }
    }

    fn over_limits(&self) -> Option<StopReason> {
        let (settings, usage) = (self.settings(), self.stored.state.usage);
        if let Some(tokens) = settings.max_tokens.filter(|limit| usage.tokens() > *limit) {
            return Some(StopReason::TokenLimit { tokens });
        }
        if let Some(cost) = settings.max_cost.filter(|limit| usage.cost > *limit) {
            return Some(StopReason::CostLimit { cost });
        }
        None
    }

    async fn pause(mut self) -> Result<Run, RunError> {
        let tickets = self
            .stored
            .state
            .waiting()
            .map(|ticket| ticket.id.clone())
            .collect();
        self.step(StepEvent::Paused { tickets }).await;
        self.stored.state.status = RunStatus::Paused;
        self.save().await?;
        Ok(self.stored.state.view())
    }

    async fn finish(mut self, answer: String) -> Result<Run, RunError> {
        self.step(StepEvent::Finished {
            answer: answer.clone(),
        })
        .await;
        self.stored.state.status = RunStatus::Finished { answer };
        self.save().await?;
        Ok(self.stored.state.view())
    }

    async fn stop(mut self, reason: StopReason) -> Result<Run, RunError> {
        self.step(StepEvent::Stopped {
            reason: reason.clone(),
        })
        .await;
        self.stored.state.status = RunStatus::Stopped { reason };
        self.save().await?;
        Ok(self.stored.state.view())
    }
}

/// A call by its tool and its arguments, as JSON Schema compares them (keys in any order, `1`
/// and `1.0` alike): what makes two refused calls the same call.
fn fingerprint(call: &ToolCall) -> String {
    let arguments = match &call.arguments {
        Arguments::Json(value) => canonical(value),
        Arguments::Text(text) => serde_json::from_str::<Value>(text)
            .map_or_else(|_| text.clone(), |value| canonical(&value)),
    };
    format!("{}\n{arguments}", call.name)
}

/// One step as a `tracing` event, with the attribute names of OpenTelemetry's semantic
/// conventions for generative AI where they have one.
fn trace(run_id: &str, model: &str, step: &Step) {
    match &step.event {
        StepEvent::ModelTurn { calls, usage, .. } => tracing::info!(
            gen_ai.operation.name = "chat",
            gen_ai.conversation.id = run_id,
            gen_ai.request.model = model,
            gen_ai.usage.input_tokens = usage.input_tokens,
            gen_ai.usage.output_tokens = usage.output_tokens,
            portcullis.run.step = step.number,
            portcullis.run.calls = calls.len(),
            "model turn"
        ),
        StepEvent::ToolCall {
            call_id,
            tool,
            result,
            code,
            ..
        } => tracing::info!(
            gen_ai.operation.name = "execute_tool",
            gen_ai.conversation.id = run_id,
            gen_ai.tool.name = tool.as_str(),
            gen_ai.tool.call.id = call_id.as_str(),
            error.type = code.map(RejectionCode::as_str),
            portcullis.run.step = step.number,
            portcullis.run.result = result.as_str(),
            "tool call"
        ),
        event => tracing::info!(
            gen_ai.operation.name = "invoke_agent",
            gen_ai.conversation.id = run_id,
            portcullis.run.step = step.number,
            portcullis.run.event = event.kind(),
            error.type = match event {
                StepEvent::Stopped { reason } => Some(reason.code()),
                _ => None,
            },
            "{}",
            summary(event)
        ),
    }
}

/// A step in a sentence, for the audit log and the events.
fn summary(event: &StepEvent) -> String {
    match event {
        StepEvent::UserMessage { text } => {
            format!("the user wrote {} characters", text.chars().count())
        }
        StepEvent::ModelTurn { calls, usage, .. } if calls.is_empty() => {
            format!("the model answered ({} tokens)", usage.tokens())
        }
        StepEvent::ModelTurn { calls, usage, .. } => {
            format!(
                "the model called {} ({} tokens)",
                calls.join(", "),
                usage.tokens()
            )
        }
        StepEvent::ToolCall {
            tool, result, code, ..
        } => match code {
            Some(code) => format!("{tool}: {result} ({code})"),
            None => format!("{tool}: {result}"),
        },
        StepEvent::Paused { tickets } => format!("waiting for {}", tickets.join(", ")),
        StepEvent::Resumed => "resumed".to_owned(),
        StepEvent::Finished { .. } => "the model answered the user".to_owned(),
        StepEvent::Stopped { reason } => reason.to_string(),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
