//! An agent's settings: the registry and the model, where runs are kept, and the limits of a
//! run.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use portcullis_core::wire::ToolChoice;
use portcullis_core::{Registry, RejectionCode};

use crate::model::Model;
use crate::store::RunStore;

pub(crate) type ChoiceForTurn = Box<dyn Fn(u32) -> Option<ToolChoice> + Send + Sync>;

/// Settings of an [`Agent`](crate::Agent), from [`Agent::builder`](crate::Agent::builder).
#[must_use]
pub struct AgentBuilder {
    pub(crate) registry: Registry,
    pub(crate) model: Arc<dyn Model>,
    pub(crate) store: Arc<dyn RunStore>,
    pub(crate) max_turns: u32,
    pub(crate) max_tokens: Option<u64>,
    pub(crate) max_cost: Option<u64>,
    pub(crate) stall_after: u32,
    pub(crate) max_calls_per_turn: usize,
    pub(crate) told: HashSet<RejectionCode>,
    pub(crate) choice: Option<ChoiceForTurn>,
    pub(crate) lease: Duration,
}

impl AgentBuilder {
    /// Keeps runs in `store` (an [`InMemoryRunStore`](crate::InMemoryRunStore) by default): the stores crate's SQLite
    /// and PostgreSQL stores let a paused run resume after a restart, on any worker.
    pub fn store(mut self, store: impl RunStore) -> Self {
        self.store = Arc::new(store);
        self
    }

    /// Stops a run once the model took `turns` turns (20 by default): `step_limit`.
    pub fn max_turns(mut self, turns: u32) -> Self {
        self.max_turns = turns;
        self
    }

    /// Stops a run once the model read and wrote more than `tokens` tokens: `token_limit`.
    pub fn max_tokens(mut self, tokens: u64) -> Self {
        self.max_tokens = Some(tokens);
        self
    }

    /// Stops a run once the model cost more than `cost`, in its adapter's unit: `cost_limit`.
    pub fn max_cost(mut self, cost: u64) -> Self {
        self.max_cost = Some(cost);
        self
    }

    /// Stops a run once the model sent one refused call (the same tool, the same arguments)
    /// this many times (3 by default, at least 1): `stalled`. Retrying what was refused as it
    /// was is a model that does not read its refusals.
    pub fn stall_after(mut self, times: u32) -> Self {
        self.stall_after = times.max(1);
        self
    }

    /// Stops a run whose model makes more than `calls` calls in one turn (16 by default), before
    /// any of them runs: `too_many_calls`.
    pub fn max_calls_per_turn(mut self, calls: usize) -> Self {
        self.max_calls_per_turn = calls;
        self
    }

    /// Sends a refusal with `code` back to the model even when it is not retryable, instead
    /// of stopping the run with it: for a code the model can act on by changing its plan
    /// (`policy_denied`: try another account). A reviewer's rejection and an expired ticket
    /// always go back to the model.
    pub fn tell_model(mut self, code: RejectionCode) -> Self {
        self.told.insert(code);
        self
    }

    /// The tool choice of each turn (numbered from 1), where `choose` returns one; the
    /// context's own choice otherwise. The registry holds the model to it: a call of another
    /// tool is refused with `tool_not_allowed`.
    pub fn tool_choice(
        mut self,
        choose: impl Fn(u32) -> Option<ToolChoice> + Send + Sync + 'static,
    ) -> Self {
        self.choice = Some(Box::new(choose));
        self
    }

    /// How long a worker holds a run it takes forward without writing it (5 minutes by
    /// default): another worker may take over a run held longer, as from a worker that died.
    /// Choose more than a model turn and a turn's calls take.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }
}
