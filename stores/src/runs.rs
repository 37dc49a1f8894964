//! Agent runs as the databases keep them ([`RunStore`](portcullis_agent::RunStore)): one row
//! per run. The run's state (the transcript: the user's messages, the model's words, the
//! tools' outputs) is sealed with keys, bound to the run's id, so that a state moved to
//! another run's row does not open. What an operator lists runs by is kept beside it in clear:
//! the status, who ran it for which tenant and task, when it changed, who holds it until when,
//! the tickets it waits for, its steps and what the model used. None of that holds what a user
//! or a tool wrote.
//!
//! A worker takes a run, and writes it, by replacing the version it read: one conditional
//! `UPDATE … WHERE id = ? AND version = ?` that changes one row or none, so of two workers
//! that read one version, one writes and the other finds the run changed.

use portcullis_agent::{RunState, RunStatus, RunStoreError, StoredRun, Usage};

use crate::seal::{Sealing, is_key_missing};
use crate::values::{Failure, as_sql, from_sql, place};

/// The columns a run is read from, in [`RunRow`]'s order.
pub(crate) const RUN_COLUMNS: &str = "id, version, held_until_ms, state";

/// The columns a run's summary is read from, in [`SummaryRow`]'s order.
pub(crate) const SUMMARY_COLUMNS: &str = "id, version, status, stop_code, actor, tenant, task_id, \
     created_ms, updated_ms, held_until_ms, tickets, steps, usage";

/// A run as its row holds it: id, version, held until, state as stored.
pub(crate) type RunRow = (String, i64, i64, String);

/// A run's summary as its row holds it, in [`SUMMARY_COLUMNS`]' order.
pub(crate) type SummaryRow = (
    String,
    i64,
    String,
    Option<String>,
    String,
    Option<String>,
    String,
    i64,
    i64,
    i64,
    String,
    i64,
    String,
);

/// What an operator lists a run by, read from the columns a store keeps in clear: it reads
/// without the seal keys, and holds nothing a user, the model or a tool wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunSummary {
    /// The run's id.
    pub id: String,
    /// Its version: how many times it was written after it was stored.
    pub version: u64,
    /// `running`, `paused`, `finished` or `stopped`.
    pub status: String,
    /// Why a stopped run stopped: its stop's code (`step_limit`, a refusal's code…).
    pub stop_code: Option<String>,
    /// Whom the run acts for.
    pub actor: String,
    /// Their tenant.
    pub tenant: Option<String>,
    /// The task its calls are made in.
    pub task_id: String,
    /// When it began, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When it last changed.
    pub updated_ms: u64,
    /// Until when a worker holds it; 0: no one.
    pub held_until_ms: u64,
    /// The tickets it waits for.
    pub tickets: Vec<String>,
    /// How many steps it took.
    pub steps: u64,
    /// What the model used.
    pub usage: Usage,
}

/// A run as a database keeps it: its state sealed with keys, and the columns it is listed by.
pub(crate) struct RunColumns {
    pub(crate) id: String,
    pub(crate) version: i64,
    pub(crate) held_until_ms: i64,
    pub(crate) status: &'static str,
    pub(crate) stop_code: Option<&'static str>,
    pub(crate) actor: String,
    pub(crate) tenant: Option<String>,
    pub(crate) task_id: String,
    pub(crate) created_ms: i64,
    pub(crate) updated_ms: i64,
    pub(crate) tickets: String,
    pub(crate) steps: i64,
    pub(crate) usage: String,
    pub(crate) state: String,
}

impl RunColumns {
    pub(crate) fn of(sealing: &Sealing, run: &StoredRun) -> Result<Self, serde_json::Error> {
        let state = &run.state;
        let tickets: Vec<&str> = state.waiting().map(|ticket| ticket.id.as_str()).collect();
        Ok(RunColumns {
            id: state.id.clone(),
            version: as_sql(run.version),
            held_until_ms: as_sql(run.held_until_ms),
            status: state.status.as_str(),
            stop_code: match &state.status {
                RunStatus::Stopped { reason } => Some(reason.code()),
                _ => None,
            },
            actor: state.ctx.actor().to_owned(),
            tenant: state.ctx.tenant().map(str::to_owned),
            task_id: state.ctx.task_id().to_owned(),
            created_ms: as_sql(state.created_ms),
            updated_ms: as_sql(state.updated_ms),
            tickets: serde_json::to_string(&tickets)?,
            steps: as_sql(state.steps.len() as u64),
            usage: serde_json::to_string(&state.usage)?,
            state: sealing.write(&state_place(&state.id), serde_json::to_string(state)?),
        })
    }
}

/// Where a run's state is stored, as sealing binds it.
fn state_place(id: &str) -> String {
    place("runs.state", id)
}

/// The run stored in `row`. Its state must be the row's run: a state written into another
/// run's row is refused, sealed (it does not open there) or not.
pub(crate) fn read_run(sealing: &Sealing, row: &RunRow) -> Result<StoredRun, RunStoreError> {
    let (id, version, held_until_ms, state) = row;
    let read = || -> Result<RunState, Failure> {
        let state: RunState = serde_json::from_str(&sealing.read(&state_place(id), state)?)?;
        if state.id != *id {
            return Err(format!("the row holds the state of run `{}`", state.id).into());
        }
        Ok(state)
    };
    let state = read().map_err(|error| unreadable(id, error.as_ref()))?;
    Ok(StoredRun {
        version: from_sql(*version),
        held_until_ms: from_sql(*held_until_ms),
        state,
    })
}

/// The summary read from `row`.
pub(crate) fn read_summary(row: SummaryRow) -> Result<RunSummary, RunStoreError> {
    let (
        id,
        version,
        status,
        stop_code,
        actor,
        tenant,
        task_id,
        created_ms,
        updated_ms,
        held_until_ms,
        tickets,
        steps,
        usage,
    ) = row;
    let read = || -> Result<(Vec<String>, Usage), Failure> {
        Ok((
            serde_json::from_str(&tickets)?,
            serde_json::from_str(&usage)?,
        ))
    };
    let (tickets, usage) = read().map_err(|error| unreadable(&id, error.as_ref()))?;
    Ok(RunSummary {
        version: from_sql(version),
        status,
        stop_code,
        actor,
        tenant,
        task_id,
        created_ms: from_sql(created_ms),
        updated_ms: from_sql(updated_ms),
        held_until_ms: from_sql(held_until_ms),
        tickets,
        steps: from_sql(steps),
        usage,
        id,
    })
}

/// A run that could not be read: its row stays as it is.
fn unreadable(id: &str, error: &(dyn std::error::Error + 'static)) -> RunStoreError {
    tracing::error!(run = %id, %error, "a stored run could not be read");
    let hint = if is_key_missing(error) {
        " (seal_key_missing: open the store with its seal keys; SealKeys, --seal-key-file on \
         the command line)"
    } else {
        ""
    };
    RunStoreError::Failed(format!("run `{id}` could not be read: {error}{hint}"))
}

/// The error of a run store whose database failed at `operation`.
pub(crate) fn database_failed(operation: &str, error: &dyn std::fmt::Display) -> RunStoreError {
    tracing::error!(%error, "the store could not {operation}");
    RunStoreError::Failed(format!("the store could not {operation}: {error}"))
}

/// How many runs going on (running or paused) the caller of a new run holds: its actor in
/// its tenant, the parameters `1` and `2` (numbered `?` for SQLite, `$` for PostgreSQL).
pub(crate) fn going_on_of_caller(parameter: char) -> String {
    format!(
        "SELECT count(*) FROM runs
         WHERE actor = {parameter}1 AND status IN ('running', 'paused')
             AND tenant IS NOT DISTINCT FROM {parameter}2"
    )
}

/// The error of a new run whose caller holds its whole share of the runs going on.
pub(crate) fn share_full(share: i64) -> RunStoreError {
    RunStoreError::ShareFull(usize::try_from(share).unwrap_or(usize::MAX))
}

/// The error of a run inserted under an id another run has.
pub(crate) fn exists(id: &str) -> RunStoreError {
    RunStoreError::Failed(format!("a run `{id}` exists already"))
}
