//! Repeated call ids: a model that repeats a call (a retry after a timeout, a duplicated tool
//! call in one response) must not run a tool that is not idempotent twice. The outcome of a
//! call that ran is kept under its task, tool and call id, and a repeat gets it back.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Mutex, PoisonError};

use crate::{CallContext, Gate, Outcome, ToolCall};

/// A call's identity: its task, tool and call id.
type Key = (String, String, String);

/// The outcomes of the latest calls that ran, at most `capacity` of them, found by a hash of
/// their identity so that a lookup copies nothing. The hasher's keys are random: call ids come
/// from the model, and must not be able to pick their buckets.
pub(crate) struct RanCalls {
    hasher: RandomState,
    state: Mutex<Remembered>,
    capacity: usize,
}

#[derive(Default)]
struct Remembered {
    outcomes: HashMap<u64, Vec<(Key, Outcome)>>,
    order: VecDeque<(u64, Key)>,
}

impl RanCalls {
    pub(crate) fn new(capacity: usize) -> Self {
        RanCalls {
            hasher: RandomState::new(),
            state: Mutex::new(Remembered::default()),
            capacity,
        }
    }

    fn hash(&self, ctx: &CallContext, call: &ToolCall) -> u64 {
        self.hasher
            .hash_one((ctx.task_id(), call.name.as_str(), call.id.as_str()))
    }

    fn is(key: &Key, ctx: &CallContext, call: &ToolCall) -> bool {
        key.0 == ctx.task_id() && key.1 == call.name && key.2 == call.id
    }

    /// The outcome of an earlier run of the same call in the same task, if any.
    pub(crate) fn earlier(&self, ctx: &CallContext, call: &ToolCall) -> Option<Outcome> {
        if self.capacity == 0 {
            return None;
        }
        let hash = self.hash(ctx, call);
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .outcomes
            .get(&hash)?
            .iter()
            .find(|(key, _)| Self::is(key, ctx, call))
            .map(|(_, outcome)| outcome.clone())
    }

    /// Keeps `outcome` if the tool ran (it completed, or failed while running).
    pub(crate) fn remember(&self, ctx: &CallContext, call: &ToolCall, outcome: &Outcome) {
        let ran = match outcome {
            Outcome::Completed(_) => true,
            Outcome::Rejected(rejection) => rejection.gate() == Gate::Execute,
            _ => false,
        };
        if !ran || self.capacity == 0 {
            return;
        }
        let hash = self.hash(ctx, call);
        let key: Key = (ctx.task_id().to_owned(), call.name.clone(), call.id.clone());
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Remembered { outcomes, order } = &mut *state;
        let bucket = outcomes.entry(hash).or_default();
        match bucket.iter_mut().find(|(known, _)| *known == key) {
            Some((_, kept)) => *kept = outcome.clone(),
            None => {
                bucket.push((key.clone(), outcome.clone()));
                order.push_back((hash, key));
            }
        }
        while order.len() > self.capacity {
            let Some((hash, oldest)) = order.pop_front() else {
                break;
            };
            if let Some(bucket) = outcomes.get_mut(&hash) {
                bucket.retain(|(known, _)| *known != oldest);
                if bucket.is_empty() {
                    outcomes.remove(&hash);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Rejection, RejectionCode};
    use serde_json::json;

    #[test]
    fn remembers_calls_that_ran_within_capacity() {
        let calls = RanCalls::new(2);
        let ctx = CallContext::new("a").with_task_id("t");
        let call = |id: &str| ToolCall::new(id, "pay", "{}");
        calls.remember(&ctx, &call("1"), &Outcome::Completed(json!(1)));
        calls.remember(
            &ctx,
            &call("2"),
            &Outcome::Rejected(Rejection::new(RejectionCode::InvalidType, "x")),
        );
        assert_eq!(
            calls.earlier(&ctx, &call("1")),
            Some(Outcome::Completed(json!(1)))
        );
        assert_eq!(
            calls.earlier(&ctx, &call("2")),
            None,
            "a call refused before it ran"
        );
        let other_task = CallContext::new("a").with_task_id("u");
        assert_eq!(calls.earlier(&other_task, &call("1")), None);
        calls.remember(&ctx, &call("3"), &Outcome::Completed(json!(3)));
        calls.remember(&ctx, &call("4"), &Outcome::Completed(json!(4)));
        assert_eq!(
            calls.earlier(&ctx, &call("1")),
            None,
            "the oldest is forgotten"
        );
        assert_eq!(
            calls.earlier(&ctx, &call("4")),
            Some(Outcome::Completed(json!(4)))
        );
    }
}
