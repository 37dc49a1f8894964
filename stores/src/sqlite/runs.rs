//! Agent runs in SQLite: of two processes taking one run at one version, one takes it.

use std::future::ready;

use portcullis_agent::{RunStore, RunStoreError, StoredRun};
use portcullis_core::BoxFuture;
use rusqlite::{Connection, OptionalExtension, ToSql, TransactionBehavior, params};

use super::{SqliteStore, as_sql};
use crate::runs::{
    RUN_COLUMNS, RunColumns, RunRow, RunSummary, SUMMARY_COLUMNS, SummaryRow, database_failed,
    exists, going_on_of_caller, read_run, read_summary, share_full,
};
use crate::seal::Sealing;
use crate::tasks::Bounds;
use crate::values::Failure;

fn run_row(row: &rusqlite::Row<'_>) -> Result<RunRow, rusqlite::Error> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
}

fn summary_row(row: &rusqlite::Row<'_>) -> Result<SummaryRow, rusqlite::Error> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
        row.get(9)?,
        row.get(10)?,
        row.get(11)?,
        row.get(12)?,
    ))
}

/// The columns of `run` in the order the statements below name them (`?1` to `?14`).
fn values(run: &RunColumns) -> [&dyn ToSql; 14] {
    [
        &run.id,
        &run.version,
        &run.held_until_ms,
        &run.status,
        &run.stop_code,
        &run.actor,
        &run.tenant,
        &run.task_id,
        &run.created_ms,
        &run.updated_ms,
        &run.tickets,
        &run.steps,
        &run.usage,
        &run.state,
    ]
}

/// Stores `run`: `Ok(false)` if a run of its id is there, `Err(ShareFull)` if its caller holds
/// its whole share of the runs going on.
fn insert(
    connection: &mut Connection,
    sealing: &Sealing,
    bounds: &Bounds,
    run: &StoredRun,
) -> Result<Result<bool, RunStoreError>, Failure> {
    let run = RunColumns::of(sealing, run)?;
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let going_on: i64 = transaction.query_row(
        &going_on_of_caller('?'),
        params![run.actor, run.tenant],
        |row| row.get(0),
    )?;
    if going_on >= bounds.runs_per_caller() {
        return Ok(Err(share_full(bounds.runs_per_caller())));
    }
    let inserted = transaction.execute(
        "INSERT INTO runs (id, version, held_until_ms, status, stop_code, actor, tenant, task_id,
             created_ms, updated_ms, tickets, steps, usage, state)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
         ON CONFLICT (id) DO NOTHING",
        rusqlite::params_from_iter(values(&run)),
    )?;
    transaction.commit()?;
    Ok(Ok(inserted == 1))
}

/// Replaces the run of `run`'s id with `run` if its version is `read`: one conditional update,
/// which changes one row or none.
fn replace(
    connection: &Connection,
    sealing: &Sealing,
    run: &StoredRun,
    read: u64,
) -> Result<bool, Failure> {
    let run = RunColumns::of(sealing, run)?;
    let read = as_sql(read);
    let replaced = connection.execute(
        "UPDATE runs SET version = ?2, held_until_ms = ?3, status = ?4, stop_code = ?5,
             actor = ?6, tenant = ?7, task_id = ?8, created_ms = ?9, updated_ms = ?10,
             tickets = ?11, steps = ?12, usage = ?13, state = ?14
         WHERE id = ?1 AND version = ?15",
        rusqlite::params_from_iter(values(&run).into_iter().chain([&read as &dyn ToSql])),
    )?;
    Ok(replaced == 1)
}

fn get(connection: &Connection, id: &str) -> Result<Option<RunRow>, rusqlite::Error> {
    connection
        .query_row(
            &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
            [id],
            run_row,
        )
        .optional()
}

fn list(connection: &Connection) -> Result<Vec<RunRow>, rusqlite::Error> {
    let mut statement = connection.prepare(&format!(
        "SELECT {RUN_COLUMNS} FROM runs ORDER BY updated_ms DESC, id"
    ))?;
    let rows = statement.query_map([], run_row)?;
    rows.collect()
}

fn summaries(connection: &Connection) -> Result<Vec<SummaryRow>, rusqlite::Error> {
    let mut statement = connection.prepare(&format!(
        "SELECT {SUMMARY_COLUMNS} FROM runs ORDER BY updated_ms DESC, id"
    ))?;
    let rows = statement.query_map([], summary_row)?;
    rows.collect()
}

impl SqliteStore {
    /// Every run's summary, most recently changed first, read from what the store keeps in
    /// clear: for an operator's list, with or without the seal keys.
    pub fn run_summaries(&self) -> Result<Vec<RunSummary>, RunStoreError> {
        summaries(&self.lock())
            .map_err(|error| database_failed("list the runs", &error))?
            .into_iter()
            .map(read_summary)
            .collect()
    }
}

/// The runs of every worker on the file, kept across restarts; their states sealed when the
/// store was given keys ([`SqliteStore::sealed_with`]). A run whose state does not open (no
/// key, another key, changed, or moved from another run's row) is refused and left as it is.
/// Each caller (its actor in its tenant) has at most its share of runs going on
/// ([`Shares::runs_per_caller`](crate::Shares)): one more is refused `run_share_full`.
/// Finished and stopped runs are kept for [`Retention::runs`](crate::Retention).
impl RunStore for SqliteStore {
    fn insert(&self, run: StoredRun) -> BoxFuture<'_, Result<(), RunStoreError>> {
        let inserted = match insert(&mut self.lock(), &self.sealing, &self.bounds, &run) {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) => Err(exists(&run.state.id)),
            Ok(Err(share_full)) => Err(share_full),
            Err(error) => Err(database_failed("store a run", &error)),
        };
        Box::pin(ready(inserted))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<StoredRun>, RunStoreError>> {
        let run = get(&self.lock(), id)
            .map_err(|error| database_failed("read a run", &error))
            .and_then(|row| row.map(|row| read_run(&self.sealing, &row)).transpose());
        Box::pin(ready(run))
    }

    fn replace(&self, run: StoredRun, read: u64) -> BoxFuture<'_, Result<bool, RunStoreError>> {
        let replaced = replace(&self.lock(), &self.sealing, &run, read)
            .map_err(|error| database_failed("write a run", &error));
        Box::pin(ready(replaced))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredRun>, RunStoreError>> {
        let runs = list(&self.lock())
            .map_err(|error| database_failed("list the runs", &error))
            .and_then(|rows| {
                rows.iter()
                    .map(|row| read_run(&self.sealing, row))
                    .collect()
            });
        Box::pin(ready(runs))
    }
}
