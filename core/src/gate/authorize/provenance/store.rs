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
    /// (`sources_unavailable`, or `output_unrecorded` from a bounded store that has no room
    /// for the task) withholds the output from the model: what was not recorded must not be
    /// read.
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

/// One task's sources, and the bytes of text they keep.
#[derive(Default)]
struct Held {
    sources: Vec<SourceRecord>,
    text_bytes: usize,
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
/// found without copying its keys; and how many tasks that is.
#[derive(Default)]
struct Tasks {
    by_id: HashMap<String, HashMap<String, Held, RandomState>, RandomState>,
    held: usize,
}

/// A [`ProvenanceStore`] in memory, for one process, holding at most `tasks` tasks at once
/// (10,000 by default). A task it does not hold when it is full is refused
/// (`output_unrecorded`: the output is withheld from the model) until
/// [`end_task`](crate::Registry::end_task) forgets one: forgetting a task's sources on its own
/// could let a tool that needs a human after untrusted content run without one.
#[derive(Clone)]
pub struct InMemoryProvenanceStore {
    tasks: Arc<Mutex<Tasks>>,
    capacity: usize,
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
            .finish_non_exhaustive()
    }
}

impl InMemoryProvenanceStore {
    /// A store holding at most `tasks` tasks at once.
    pub fn with_capacity(tasks: usize) -> Self {
        InMemoryProvenanceStore {
            tasks: Arc::default(),
            capacity: tasks,
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
            None if tasks.held >= self.capacity => Err(Rejection::new(
                RejectionCode::OutputUnrecorded,
                "the store of the tasks' sources is full, so this output could not be recorded and is withheld",
            )
            .with_hint("tell the user the tool's output could not be shown")),
            None => {
                tasks.held += 1;
                let mut held = Held::default();
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
        if let Some(tenants) = tasks.by_id.remove(task) {
            tasks.held -= tenants.len();
        }
        Box::pin(ready(()))
    }
}
