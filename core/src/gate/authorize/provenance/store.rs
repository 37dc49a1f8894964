//! Where a task's sources are kept: [`ProvenanceStore`], and [`InMemoryProvenanceStore`] for one
//! process. The stores crate keeps them in SQLite and PostgreSQL, so that every worker serving
//! a task judges its calls against the same sources, across restarts.

use std::collections::HashMap;
use std::fmt;
use std::future::ready;
use std::sync::{Arc, Mutex};

use foldhash::fast::RandomState;
use serde::{Deserialize, Serialize};

use crate::future::BoxFuture;
use crate::share::{Shares, caller_key};
use crate::{CallContext, Origin, Rejection, RejectionCode};

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Request => f.write_str("the user's request"),
            Origin::UserMessage { number } => write!(f, "user message {number}"),
            Origin::Edit { reviewer, ticket } => {
                write!(f, "the edit of reviewer `{reviewer}` on ticket `{ticket}`")
            }
            Origin::ToolOutput {
                tool,
                call_id,
                trusted,
                prose,
            } => {
                let trust = match (*trusted, *prose) {
                    (true, true) => "trusted prose",
                    (true, false) => "trusted",
                    (false, _) => "untrusted",
                };
                write!(
                    f,
                    "the output of tool `{tool}` in call `{call_id}` ({trust})"
                )
            }
        }
    }
}

/// One source of a task: where it came from, and the text its values are found in (a
/// message, or an output's strings and numbers, one per line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    /// Where it came from.
    pub origin: Origin,
    /// Its text, at most [`SOURCE_TEXT_LIMIT`] bytes; empty when the task's sources held
    /// [`TASK_TEXT_LIMIT`] bytes already (its values are then found nowhere, and the task
    /// still counts as having read it).
    pub text: String,
}

/// The most bytes of one source's text that are kept: values beyond are found nowhere, so a
/// call that uses one is refused (`unsourced_value`), never allowed.
pub const SOURCE_TEXT_LIMIT: usize = 64 * 1024;

/// The most bytes of text one task's sources keep in all; a source recorded after is kept
/// without its text, so that the task still counts as having read it.
pub const TASK_TEXT_LIMIT: usize = 4 * 1024 * 1024;

/// Keeps each task's sources, in the order they entered it, for every worker serving it.
///
/// A task is its tenant and its task id ([`CallContext::tenant`], [`CallContext::task_id`]).
/// Sources are numbered from 1 within their task, in the order they were recorded: a worker
/// that read a task's sources up to number `n` asks only for those after it. A store numbers
/// them so that no source numbered below one a reader was given can appear later: the next
/// number is taken only once the previous one is visible.
pub trait ProvenanceStore: Send + Sync + 'static {
    /// Appends `source` to the task of `ctx`; returns its number. A refusal
    /// (`sources_unavailable`; from a bounded store that has no room for the task,
    /// `sources_share_full` when its caller holds its whole share, `output_unrecorded` when
    /// the store is full) withholds the output from the model: what was not recorded must not
    /// be read.
    fn record<'a>(
        &'a self,
        ctx: &'a CallContext,
        source: &'a SourceRecord,
    ) -> BoxFuture<'a, Result<u64, Rejection>>;

    /// The sources of the task of `ctx` numbered after `after`, in order, with their numbers;
    /// `sources_unavailable` when they cannot be read.
    fn since<'a>(
        &'a self,
        ctx: &'a CallContext,
        after: u64,
    ) -> BoxFuture<'a, Result<Vec<(u64, SourceRecord)>, Rejection>>;

    /// Forgets the sources of `task` (under every tenant), which ended and whose id is never
    /// used again ([`Registry::end_task`](crate::Registry::end_task)). The default keeps them.
    fn forget_task<'a>(&'a self, task: &'a str) -> BoxFuture<'a, ()> {
        let _ = task;
        Box::pin(ready(()))
    }
}

/// The refusal of a store that cannot read or write a task's sources.
pub fn sources_unavailable(error: impl fmt::Display) -> Rejection {
    tracing::error!(%error, "the task's sources could not be read or written");
    Rejection::new(
        RejectionCode::SourcesUnavailable,
        "the sources of this task could not be read, so where the call's values came from cannot be told",
    )
    .with_hint("try again later")
}

/// One task's sources, the bytes of text they keep, and the caller whose share holds it.
#[derive(Default)]
struct Held {
    sources: Vec<SourceRecord>,
    text_bytes: usize,
    caller: String,
}

impl Held {
    /// Keeps `source`, without its text once the task holds [`TASK_TEXT_LIMIT`] bytes: as the
    /// durable stores do, and as the gate's index reads it.
    fn keep(&mut self, source: &SourceRecord) -> u64 {
        let mut kept = source.clone();
        if self.text_bytes + kept.text.len() > TASK_TEXT_LIMIT {
            kept.text = String::new();
        }
        self.text_bytes += kept.text.len();
        self.sources.push(kept);
        self.sources.len() as u64
    }
}

/// The sources of each task: by task id, then by tenant (empty for none), so that a task is
/// found without copying its keys; how many tasks that is; and how many each caller's share
/// holds (a caller with none is not kept).
#[derive(Default)]
struct Tasks {
    by_id: HashMap<String, HashMap<String, Held, RandomState>, RandomState>,
    held: usize,
    per_caller: Shares,
}

/// A [`ProvenanceStore`] in memory, for one process, holding at most `tasks` tasks at once
/// (10,000 by default), and at most a share of them for each caller: its actor in its tenant
/// ([`CallContext::actor`], [`CallContext::tenant`]), a hundredth of `tasks` by default (at
/// least one), so that at least 100 callers use the store at once
/// ([`per_caller`](Self::per_caller)).
///
/// A task is held from its first source on, in the share of the caller that recorded it,
/// until [`end_task`](crate::Registry::end_task) forgets it and gives its place back to that
/// share. A caller whose share is full is refused a new task (`sources_share_full`: the
/// output is withheld from the model), while its tasks held go on being served and other
/// callers are not affected; a store full of every caller's tasks refuses any new task
/// (`output_unrecorded`), the last resort.
///
/// Nothing is evicted to make room, for a caller or for the store: refusing is the only safe
/// way. Forgetting a task's sources on its own could let a tool that needs a human after
/// untrusted content (`after_untrusted`) run without one, since the task would no longer be
/// known to have read it.
#[derive(Clone)]
pub struct InMemoryProvenanceStore {
    tasks: Arc<Mutex<Tasks>>,
    capacity: usize,
    per_caller: usize,
}

impl Default for InMemoryProvenanceStore {
    fn default() -> Self {
        InMemoryProvenanceStore::with_capacity(10_000)
    }
}

impl fmt::Debug for InMemoryProvenanceStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryProvenanceStore")
            .field("capacity", &self.capacity)
            .field("per_caller", &self.per_caller)
            .finish_non_exhaustive()
    }
}

impl InMemoryProvenanceStore {
    /// A store holding at most `tasks` tasks at once, and at most a hundredth of them (at
    /// least one) for each caller.
    pub fn with_capacity(tasks: usize) -> Self {
        InMemoryProvenanceStore {
            tasks: Arc::default(),
            capacity: tasks,
            per_caller: (tasks / 100).max(1),
        }
    }

    /// This store, holding at most `tasks` tasks (at least one) for each caller: its actor in
    /// its tenant. Call it as the store is made.
    pub fn per_caller(self, tasks: usize) -> Self {
        InMemoryProvenanceStore {
            per_caller: tasks.max(1),
            ..self
        }
    }

    fn tasks(&self) -> std::sync::MutexGuard<'_, Tasks> {
        // A panic while the lock was held cannot leave a task half-written: each change is
        // one push or one removal.
        self.tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A store shared by handle: give the registry one clone and keep another, to record what a
/// task read from outside the registry's tools (a test's injected text, say).
impl<S: ProvenanceStore> ProvenanceStore for Arc<S> {
    fn record<'a>(
        &'a self,
        ctx: &'a CallContext,
        source: &'a SourceRecord,
    ) -> BoxFuture<'a, Result<u64, Rejection>> {
        (**self).record(ctx, source)
    }

    fn since<'a>(
        &'a self,
        ctx: &'a CallContext,
        after: u64,
    ) -> BoxFuture<'a, Result<Vec<(u64, SourceRecord)>, Rejection>> {
        (**self).since(ctx, after)
    }

    fn forget_task<'a>(&'a self, task: &'a str) -> BoxFuture<'a, ()> {
        (**self).forget_task(task)
    }
}

impl ProvenanceStore for InMemoryProvenanceStore {
    fn record<'a>(
        &'a self,
        ctx: &'a CallContext,
        source: &'a SourceRecord,
    ) -> BoxFuture<'a, Result<u64, Rejection>> {
        let mut tasks = self.tasks();
        let tasks = &mut *tasks;
        let tenant = ctx.tenant().unwrap_or_default();
        let held = tasks
            .by_id
            .get_mut(ctx.task_id())
            .and_then(|tenants| tenants.get_mut(tenant));
        let recorded = match held {
            Some(held) => Ok(held.keep(source)),
            None => {
                let caller = caller_key(ctx.actor(), tenant);
                if tasks.per_caller.held(&caller) >= self.per_caller {
                    return Box::pin(ready(Err(share_full(self.per_caller))));
                }
                if tasks.held >= self.capacity {
                    return Box::pin(ready(Err(Rejection::new(
                        RejectionCode::OutputUnrecorded,
                        "the store of the tasks' sources is full, so this output could not be recorded and is withheld",
                    )
                    .with_hint("tell the user the tool's output could not be shown"))));
                }
                tasks.held += 1;
                tasks.per_caller.take(&caller);
                let mut held = Held {
                    caller,
                    ..Held::default()
                };
                let number = held.keep(source);
                tasks
                    .by_id
                    .entry(ctx.task_id().to_owned())
                    .or_default()
                    .insert(tenant.to_owned(), held);
                Ok(number)
            }
        };
        Box::pin(ready(recorded))
    }

    fn since<'a>(
        &'a self,
        ctx: &'a CallContext,
        after: u64,
    ) -> BoxFuture<'a, Result<Vec<(u64, SourceRecord)>, Rejection>> {
        let tasks = self.tasks();
        let sources = tasks
            .by_id
            .get(ctx.task_id())
            .and_then(|tenants| tenants.get(ctx.tenant().unwrap_or_default()))
            .map(|held| {
                held.sources
                    .iter()
                    .enumerate()
                    .skip(usize::try_from(after).unwrap_or(usize::MAX))
                    .map(|(at, source)| (at as u64 + 1, source.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Box::pin(ready(Ok(sources)))
    }

    fn forget_task<'a>(&'a self, task: &'a str) -> BoxFuture<'a, ()> {
        let mut tasks = self.tasks();
        let tasks = &mut *tasks;
        if let Some(tenants) = tasks.by_id.remove(task) {
            tasks.held -= tenants.len();
            for held in tenants.into_values() {
                tasks.per_caller.give_back(&held.caller);
            }
        }
        Box::pin(ready(()))
    }
}

/// The refusal of a caller whose share of `per_caller` tasks is full.
fn share_full(per_caller: usize) -> Rejection {
    Rejection::new(
        RejectionCode::SourcesShareFull,
        format!(
            "this caller has the sources of {per_caller} tasks kept, its whole share of the store, so nothing can be recorded for a new task of it"
        ),
    )
    .with_hint("go on in a task you started already, or end one of yours before starting another")
}

#[cfg(test)]
mod tests {
    use super::super::judged::block_on;
    use super::*;

    fn page() -> SourceRecord {
        SourceRecord {
            origin: Origin::Request,
            text: "a page".to_owned(),
        }
    }

    fn record(store: &InMemoryProvenanceStore, ctx: &CallContext) -> Option<RejectionCode> {
        block_on(store.record(ctx, &page()))
            .err()
            .map(|refusal| refusal.code())
    }

    /// One caller records a source in a task more than its share: its last is refused with
    /// its own share's code; its tasks go on; other callers (the same actor in another tenant
    /// among them) are served; a task it ends gives its place back, and nothing is evicted.
    #[test]
    fn one_caller_over_its_share_is_refused_and_others_are_served() {
        let store = InMemoryProvenanceStore::with_capacity(1000).per_caller(3);
        let task = |id: &str| CallContext::new("mallory").with_task_id(id);
        for id in ["t0", "t1", "t2"] {
            assert_eq!(record(&store, &task(id)), None);
        }
        let refused = block_on(store.record(&task("t3"), &page())).unwrap_err();
        assert_eq!(refused.code(), RejectionCode::SourcesShareFull);
        assert!(refused.retryable());
        assert!(
            refused.message().contains("3 tasks"),
            "{}",
            refused.message()
        );
        assert_eq!(record(&store, &task("t0")), None, "its tasks go on");
        assert_eq!(block_on(store.since(&task("t0"), 0)).unwrap().len(), 2);
        let bob = CallContext::new("bob").with_task_id("b0");
        assert_eq!(record(&store, &bob), None);
        let other_tenant = task("m0").with_tenant("acme");
        assert_eq!(record(&store, &other_tenant), None);
        // Nothing was evicted to make room.
        for id in ["t0", "t1", "t2"] {
            assert!(!block_on(store.since(&task(id), 0)).unwrap().is_empty());
        }
        block_on(store.forget_task("t1"));
        assert_eq!(record(&store, &task("t3")), None);
        assert_eq!(
            record(&store, &task("t4")),
            Some(RejectionCode::SourcesShareFull)
        );
        for id in ["t0", "t2", "t3", "b0", "m0"] {
            block_on(store.forget_task(id));
        }
        let tasks = store.tasks();
        assert_eq!((tasks.held, tasks.per_caller.callers()), (0, 0));
    }

    /// A task kept under two tenants counts in each tenant's caller, and forgetting it gives
    /// both places back.
    #[test]
    fn a_task_id_under_two_tenants_is_two_callers_tasks() {
        let store = InMemoryProvenanceStore::with_capacity(10).per_caller(1);
        let acme = CallContext::new("alice")
            .with_tenant("acme")
            .with_task_id("t");
        let globex = CallContext::new("alice")
            .with_tenant("globex")
            .with_task_id("t");
        assert_eq!(record(&store, &acme), None);
        assert_eq!(record(&store, &globex), None);
        block_on(store.forget_task("t"));
        let tasks = store.tasks();
        assert_eq!((tasks.held, tasks.per_caller.callers()), (0, 0));
    }

    /// The share is a hundredth of the store by default; the store's own bound stays, the
    /// last resort, when many callers fill it.
    #[test]
    fn the_default_share_and_the_store_bound() {
        assert_eq!(InMemoryProvenanceStore::default().per_caller, 100);
        assert_eq!(InMemoryProvenanceStore::with_capacity(5).per_caller, 1);
        let store = InMemoryProvenanceStore::with_capacity(4);
        for caller in 0..4 {
            let ctx = CallContext::new(format!("c{caller}")).with_task_id(format!("t{caller}"));
            assert_eq!(record(&store, &ctx), None);
        }
        let late = CallContext::new("late").with_task_id("t");
        assert_eq!(record(&store, &late), Some(RejectionCode::OutputUnrecorded));
    }
}
