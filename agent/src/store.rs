//! Where runs are kept: [`RunStore`], and [`InMemoryRunStore`] for one process. The stores
//! crate keeps them in SQLite and PostgreSQL, beside the approvals they wait for, so that a run
//! paused before a restart or a deploy resumes on any worker, once.
//!
//! A stored run carries a version. A worker takes a run by replacing the version it read with
//! the next, holding the run until a lease ends; a second worker that read the same version
//! finds it changed and leaves the run alone. Every later write of the holder replaces the
//! version it wrote last, so a worker whose lease ran out and whose run another took cannot
//! write over it.

use std::collections::HashMap;
use std::future::ready;
use std::sync::{Mutex, PoisonError};

use portcullis_core::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::run::RunState;

/// A run as a store keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredRun {
    /// Incremented by every write: the store replaces a run only at the version the writer
    /// read.
    pub version: u64,
    /// Until when (milliseconds since the Unix epoch) a worker holds the run; 0: no one.
    pub held_until_ms: u64,
    /// The run.
    pub state: RunState,
}

/// Why a store could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunStoreError {
    /// It is unreachable, full, or holds what cannot be read: [`Agent`](crate::Agent) refuses
    /// with `runs_unavailable`.
    #[error("{0}")]
    Failed(String),
    /// The run's caller (its actor in its tenant) holds as many runs going on (running or
    /// paused) as its share of a bounded store allows: [`Agent`](crate::Agent) refuses with
    /// `run_share_full`.
    #[error("this caller has {0} runs going on, its whole share of the store")]
    ShareFull(usize),
}

/// Where runs are kept.
pub trait RunStore: Send + Sync + 'static {
    /// Stores a new run; an error if a run of its id exists.
    fn insert(&self, run: StoredRun) -> BoxFuture<'_, Result<(), RunStoreError>>;

    /// The run of `id`, if there is one.
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<StoredRun>, RunStoreError>>;

    /// Replaces the run of `run.state.id` with `run` if the stored version is `read`, in one
    /// atomic step; `false` (and nothing written) if it is not, or if there is no such run.
    /// `run.version` is `read + 1`.
    fn replace(&self, run: StoredRun, read: u64) -> BoxFuture<'_, Result<bool, RunStoreError>>;

    /// Every run, most recently changed first: for an operator's list.
    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredRun>, RunStoreError>>;
}

/// Runs in this process's memory, lost when it stops: for tests, and for a single worker whose
/// paused runs need not outlive it. At most `capacity` runs (10,000 by default); a full store
/// first forgets the finished and stopped runs that changed longest ago, and refuses a new run
/// when every run it holds is running or paused. Each caller (its actor in its tenant) has at
/// most a hundredth of `capacity` runs going on (running or paused) at once
/// ([`per_caller`](Self::per_caller)): one more is refused (`run_share_full`), so that no
/// caller fills the store for the others.
pub struct InMemoryRunStore {
    runs: Mutex<HashMap<String, StoredRun>>,
    capacity: usize,
    per_caller: usize,
}

impl Default for InMemoryRunStore {
    fn default() -> Self {
        InMemoryRunStore::with_capacity(10_000)
    }
}

impl InMemoryRunStore {
    /// A store of at most `capacity` runs.
    pub fn with_capacity(capacity: usize) -> Self {
        InMemoryRunStore {
            runs: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
            per_caller: (capacity / 100).max(1),
        }
    }

    /// This store, with at most `runs` runs going on (at least one) for each caller.
    pub fn per_caller(self, runs: usize) -> Self {
        InMemoryRunStore {
            per_caller: runs.max(1),
            ..self
        }
    }
}

/// Whether `run` is going on: running, or paused for a human.
fn going_on(run: &StoredRun) -> bool {
    use crate::run::RunStatus;
    !matches!(
        run.state.status,
        RunStatus::Finished { .. } | RunStatus::Stopped { .. }
    )
}

impl RunStore for InMemoryRunStore {
    fn insert(&self, run: StoredRun) -> BoxFuture<'_, Result<(), RunStoreError>> {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let caller = &run.state.ctx;
        let of_caller = || {
            runs.values()
                .filter(|held| {
                    going_on(held)
                        && held.state.ctx.actor() == caller.actor()
                        && held.state.ctx.tenant() == caller.tenant()
                })
                .count()
        };
        let result = if runs.contains_key(&run.state.id) {
            Err(RunStoreError::Failed(format!(
                "a run `{}` exists already",
                run.state.id
            )))
        } else if of_caller() >= self.per_caller {
            Err(RunStoreError::ShareFull(self.per_caller))
        } else if runs.len() >= self.capacity && !forget_oldest_ended(&mut runs) {
            Err(RunStoreError::Failed(format!(
                "the store holds {} runs, each running or paused",
                runs.len()
            )))
        } else {
            runs.insert(run.state.id.clone(), run);
            Ok(())
        };
        Box::pin(ready(result))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<StoredRun>, RunStoreError>> {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        Box::pin(ready(Ok(runs.get(id).cloned())))
    }

    fn replace(&self, run: StoredRun, read: u64) -> BoxFuture<'_, Result<bool, RunStoreError>> {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let replaced = match runs.get_mut(&run.state.id) {
            Some(stored) if stored.version == read => {
                *stored = run;
                true
            }
            _ => false,
        };
        Box::pin(ready(Ok(replaced)))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredRun>, RunStoreError>> {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let mut listed: Vec<StoredRun> = runs.values().cloned().collect();
        listed.sort_by_key(|run| std::cmp::Reverse(run.state.updated_ms));
        Box::pin(ready(Ok(listed)))
    }
}

/// Forgets the ended run that changed longest ago; `false` if no run has ended.
fn forget_oldest_ended(runs: &mut HashMap<String, StoredRun>) -> bool {
    let oldest = runs
        .values()
        .filter(|run| !going_on(run))
        .min_by_key(|run| run.state.updated_ms)
        .map(|run| run.state.id.clone());
    oldest.is_some_and(|id| runs.remove(&id).is_some())
}

/// A store shared, as between the agents of two workers in one process (in tests).
impl<S: RunStore> RunStore for std::sync::Arc<S> {
    fn insert(&self, run: StoredRun) -> BoxFuture<'_, Result<(), RunStoreError>> {
        (**self).insert(run)
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<StoredRun>, RunStoreError>> {
        (**self).get(id)
    }

    fn replace(&self, run: StoredRun, read: u64) -> BoxFuture<'_, Result<bool, RunStoreError>> {
        (**self).replace(run, read)
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredRun>, RunStoreError>> {
        (**self).list()
    }
}
