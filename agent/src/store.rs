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

/// Why a store could not answer: it is unreachable, full, or holds what cannot be read.
/// [`Agent`](crate::Agent) refuses with `runs_unavailable`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RunStoreError(pub String);

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
/// when every run it holds is running or paused.
pub struct InMemoryRunStore {
    runs: Mutex<HashMap<String, StoredRun>>,
    capacity: usize,
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
        }
    }
}

impl RunStore for InMemoryRunStore {
    fn insert(&self, run: StoredRun) -> BoxFuture<'_, Result<(), RunStoreError>> {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let result = if runs.contains_key(&run.state.id) {
            Err(RunStoreError(format!(
                "a run `{}` exists already",
                run.state.id
            )))
        } else if runs.len() >= self.capacity && !forget_oldest_ended(&mut runs) {
            Err(RunStoreError(format!(
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
    use crate::run::RunStatus;
    let oldest = runs
        .values()
        .filter(|run| {
            matches!(
                run.state.status,
                RunStatus::Finished { .. } | RunStatus::Stopped { .. }
            )
        })
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
