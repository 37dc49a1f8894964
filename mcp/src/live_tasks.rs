//! The stateless protocol's tasks that outlive their request (2026-07-28): a handle-less
//! request is a task of its own that ends with it, unless the client asks for a continuable
//! task (`_meta["dev.portcullis/continuable"]: true`) or its call still waits for a human.
//! Such a task lives until its absolute lifetime, and each caller (actor and tenant) holds at
//! most so many: starting one more ends the caller's oldest.
//!
//! A task's per-task state in the stores (its budget, its sources) is forgotten
//! ([`Registry::end_task`](portcullis_core::Registry::end_task)) only once no instance can
//! continue it: a one-request task when its request ends (no handle was given), a continuable
//! one a grace ([`FORGET_AFTER_EXPIRY`]) after the end of its lifetime, which its handle carries sealed,
//! so that every instance refuses it (`task_expired`) whatever its own clock and settings. A
//! task the cap ends is refused here (`task_ended`) and its state kept: another instance, or
//! this one after a restart, does not know it ended, and a task whose sources were forgotten
//! would no longer count as having read untrusted text. Per-caller limits (a rate limit, cost
//! per window) are counted per actor in the stores, whatever task a call claims.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use portcullis_core::CallContext;
use portcullis_core::encoding::random_id;
use serde::{Deserialize, Serialize};

/// The request `_meta` key by which a request without a task handle asks for a continuable
/// task.
pub(crate) const CONTINUABLE_META: &str = "dev.portcullis/continuable";

/// How often, at most, the tasks of every caller are looked at for their lifetime; a caller's
/// own are looked at whenever it starts one.
const SWEEP_EVERY_MS: u64 = 60_000;

/// How long after a task's lifetime its state is forgotten, at most: room for the clocks of
/// the instances to differ, so that none still honours its handle when the state goes. A
/// shorter lifetime (a test's) waits as long as the lifetime.
const FORGET_AFTER_EXPIRY: u64 = 10 * 60_000;

/// When and where a stateless task started, as its handle (and a confirmation asked in it)
/// carries it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskStart {
    /// When its lifetime ends, as the instance that started it set it.
    pub(crate) expires_ms: u64,
    /// The instance that started it, and counts it under its caller's cap.
    pub(crate) instance: String,
}

/// The continuable tasks this instance started, per caller.
pub(crate) struct LiveTasks {
    instance: String,
    lifetime: Duration,
    per_caller: usize,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    /// Each caller's live tasks, oldest first, at most `per_caller`.
    callers: HashMap<Owner, VecDeque<Live>>,
    last_sweep_ms: u64,
}

/// Whose tasks count together: the caller's actor and tenant.
type Owner = (String, Option<String>);

struct Live {
    task: String,
    expires_ms: u64,
}

impl LiveTasks {
    pub(crate) fn new(lifetime: Duration, per_caller: usize) -> Self {
        LiveTasks {
            instance: random_id("instance"),
            lifetime,
            per_caller: per_caller.max(1),
            held: Mutex::new(Held::default()),
        }
    }

    /// How long a continuable task lives, from its start.
    pub(crate) fn lifetime(&self) -> Duration {
        self.lifetime
    }

    /// The start of a task that starts now, here.
    pub(crate) fn start_now(&self) -> TaskStart {
        TaskStart {
            expires_ms: now_ms().saturating_add(millis(self.lifetime)),
            instance: self.instance.clone(),
        }
    }

    /// Whether a task that started at `start` is past its lifetime.
    pub(crate) fn expired(start: &TaskStart) -> bool {
        now_ms() >= start.expires_ms
    }

    /// Whether the task `task` of `ctx`'s caller, started at `start`, was ended here (by the
    /// cap or its lifetime). A task another instance started is that instance's to count.
    pub(crate) fn ended(&self, ctx: &CallContext, task: &str, start: &TaskStart) -> bool {
        start.instance == self.instance
            && !self
                .held()
                .callers
                .get(&owner(ctx))
                .is_some_and(|tasks| tasks.iter().any(|live| live.task == task))
    }

    /// Counts task `task` of `ctx`'s caller, started at `start`, as live, ending the caller's
    /// oldest past the cap (here only: its state is kept, see the module's documentation);
    /// returns the tasks whose state the stores may forget: those past their lifetime by the
    /// grace.
    pub(crate) fn keep(&self, ctx: &CallContext, task: &str, start: &TaskStart) -> Vec<String> {
        let now = now_ms();
        let grace = millis(self.lifetime).min(FORGET_AFTER_EXPIRY);
        let mut held = self.held();
        let mut forgotten = Vec::new();
        // Callers that start no more tasks have theirs forgotten too, past their lifetime.
        if now >= held.last_sweep_ms.saturating_add(SWEEP_EVERY_MS) {
            held.last_sweep_ms = now;
            held.callers.retain(|_, tasks| {
                forget_expired(tasks, &mut forgotten, now, grace);
                !tasks.is_empty()
            });
        }
        let tasks = held.callers.entry(owner(ctx)).or_default();
        forget_expired(tasks, &mut forgotten, now, grace);
        while tasks.len() >= self.per_caller {
            tasks.pop_front();
        }
        tasks.push_back(Live {
            task: task.to_owned(),
            expires_ms: start.expires_ms,
        });
        forgotten
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Moves the tasks of `tasks` (oldest first) past their lifetime by `grace` at `now` into
/// `forgotten`.
fn forget_expired(tasks: &mut VecDeque<Live>, forgotten: &mut Vec<String>, now: u64, grace: u64) {
    while tasks
        .front()
        .is_some_and(|live| now >= live.expires_ms.saturating_add(grace))
        && let Some(live) = tasks.pop_front()
    {
        forgotten.push(live.task);
    }
}

fn owner(ctx: &CallContext) -> Owner {
    (ctx.actor().to_owned(), ctx.tenant().map(str::to_owned))
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_past_its_cap_ends_its_oldest_and_no_one_elses() {
        let live = LiveTasks::new(Duration::from_secs(60), 2);
        let (ann, bob) = (CallContext::new("ann"), CallContext::new("bob"));
        let start = live.start_now();
        assert!(live.keep(&ann, "a1", &start).is_empty());
        assert!(live.keep(&ann, "a2", &start).is_empty());
        assert!(live.keep(&bob, "b1", &start).is_empty());
        assert!(
            live.keep(&ann, "a3", &start).is_empty(),
            "the oldest is ended here, its state kept"
        );
        assert!(live.ended(&ann, "a1", &start));
        assert!(!live.ended(&ann, "a2", &start));
        assert!(!live.ended(&bob, "b1", &start));
        assert!(
            live.ended(&bob, "a2", &start),
            "another caller's task is not its own"
        );
        let elsewhere = TaskStart {
            instance: "instance-elsewhere".into(),
            ..start
        };
        assert!(
            !live.ended(&ann, "a1", &elsewhere),
            "another instance counts its own"
        );
    }

    #[test]
    fn a_task_past_its_lifetime_has_expired_and_is_forgotten_after_a_grace() {
        let live = LiveTasks::new(Duration::from_secs(60), 8);
        let ann = CallContext::new("ann");
        let now = live.start_now();
        let expired_at = |expires_ms| TaskStart {
            expires_ms,
            ..now.clone()
        };
        let just_expired = expired_at(now_ms() - 1_000);
        assert!(LiveTasks::expired(&just_expired));
        assert!(!LiveTasks::expired(&now));
        assert!(live.keep(&ann, "a1", &just_expired).is_empty());
        assert!(
            live.keep(&ann, "a2", &now).is_empty(),
            "within its grace, an expired task's state is kept"
        );
        let other = LiveTasks::new(Duration::from_secs(60), 8);
        let long_expired = expired_at(now_ms() - FORGET_AFTER_EXPIRY - 1_000);
        assert!(other.keep(&ann, "b1", &long_expired).is_empty());
        assert_eq!(other.keep(&ann, "b2", &now), ["b1"]);
    }
}
