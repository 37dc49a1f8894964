//! Agent runs in PostgreSQL: of two workers taking one run at one version, one takes it.

use portcullis_agent::{RunStore, RunStoreError, StoredRun};
use portcullis_core::BoxFuture;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::PostgresStore;
use crate::runs::{
    RUN_COLUMNS, RunColumns, RunRow, RunSummary, SUMMARY_COLUMNS, SummaryRow, database_failed,
    exists, going_on_of_caller, read_run, read_summary, share_full,
};
use crate::values::{Failure, as_sql};

/// The columns of `run` in the order the statements below name them (`$1` to `$14`).
fn values(run: &RunColumns) -> [&(dyn ToSql + Sync); 14] {
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

fn run_row(row: &Row) -> Result<RunRow, tokio_postgres::Error> {
    Ok((
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
    ))
}

fn summary_row(row: &Row) -> Result<SummaryRow, tokio_postgres::Error> {
    Ok((
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
        row.try_get(5)?,
        row.try_get(6)?,
        row.try_get(7)?,
        row.try_get(8)?,
        row.try_get(9)?,
        row.try_get(10)?,
        row.try_get(11)?,
        row.try_get(12)?,
    ))
}

impl PostgresStore {
    /// Every run's summary, most recently changed first, read from what the store keeps in
    /// clear: for an operator's list, with or without the seal keys.
    pub async fn run_summaries(&self) -> Result<Vec<RunSummary>, RunStoreError> {
        let rows = self
            .run_rows(&format!(
                "SELECT {SUMMARY_COLUMNS} FROM runs ORDER BY updated_ms DESC, id"
            ))
            .await
            .map_err(|error| database_failed("list the runs", &error))?;
        rows.iter()
            .map(|row| {
                summary_row(row)
                    .map_err(|error| database_failed("list the runs", &error))
                    .and_then(read_summary)
            })
            .collect()
    }

    async fn run_rows(&self, query: &str) -> Result<Vec<Row>, Failure> {
        Ok(self.client().await?.query(query, &[]).await?)
    }

    /// Stores `run`: `Ok(false)` if a run of its id is there, `Err(ShareFull)` if its caller
    /// holds its whole share of the runs going on. Counted and stored under the caller's
    /// advisory lock: two workers never both take a caller's last place.
    async fn insert_run(&self, run: &StoredRun) -> Result<Result<bool, RunStoreError>, Failure> {
        let run = RunColumns::of(&self.sealing, run)?;
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        let caller = format!(
            "runs-of:{}\n{}",
            run.tenant.as_deref().unwrap_or_default(),
            run.actor
        );
        self.lock(&transaction, &[&caller]).await?;
        let going_on: i64 = transaction
            .query_one(&going_on_of_caller('$'), &[&run.actor, &run.tenant])
            .await?
            .try_get(0)?;
        if going_on >= self.bounds.runs_per_caller() {
            return Ok(Err(share_full(self.bounds.runs_per_caller())));
        }
        let inserted = transaction
            .execute(
                "INSERT INTO runs (id, version, held_until_ms, status, stop_code, actor, tenant,
                     task_id, created_ms, updated_ms, tickets, steps, usage, state)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
                 ON CONFLICT (id) DO NOTHING",
                &values(&run),
            )
            .await?;
        transaction.commit().await?;
        Ok(Ok(inserted == 1))
    }

    /// Replaces the run of `run`'s id with `run` if its version is `read`: one conditional
    /// update, which changes one row or none (a second writer waits for the first's row lock,
    /// then finds the version changed).
    async fn replace_run(&self, run: &StoredRun, read: u64) -> Result<bool, Failure> {
        let run = RunColumns::of(&self.sealing, run)?;
        let replaced = self
            .client()
            .await?
            .execute(
                "UPDATE runs SET version = $2, held_until_ms = $3, status = $4, stop_code = $5,
                     actor = $6, tenant = $7, task_id = $8, created_ms = $9, updated_ms = $10,
                     tickets = $11, steps = $12, usage = $13, state = $14
                 WHERE id = $1 AND version = $15",
                &[values(&run).as_slice(), &[&as_sql(read)]].concat(),
            )
            .await?;
        Ok(replaced == 1)
    }

    async fn get_run(&self, id: &str) -> Result<Option<RunRow>, Failure> {
        let row = self
            .client()
            .await?
            .query_opt(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"),
                &[&id],
            )
            .await?;
        Ok(row.as_ref().map(run_row).transpose()?)
    }
}

/// The runs of every worker on the database, kept across restarts; their states sealed when
/// the store was given keys ([`PostgresStore::sealed_with`]). A run whose state does not open
/// (no key, another key, changed, or moved from another run's row) is refused and left as it
/// is. Each caller (its actor in its tenant) has at most its share of runs going on
/// ([`Shares::runs_per_caller`](crate::Shares)): one more is refused `run_share_full`.
/// Finished and stopped runs are kept for [`Retention::runs`](crate::Retention).
impl RunStore for PostgresStore {
    fn insert(&self, run: StoredRun) -> BoxFuture<'_, Result<(), RunStoreError>> {
        Box::pin(async move {
            match self.insert_run(&run).await {
                Ok(Ok(true)) => Ok(()),
                Ok(Ok(false)) => Err(exists(&run.state.id)),
                Ok(Err(share_full)) => Err(share_full),
                Err(error) => Err(database_failed("store a run", &error)),
            }
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<StoredRun>, RunStoreError>> {
        Box::pin(async move {
            let row = self
                .get_run(id)
                .await
                .map_err(|error| database_failed("read a run", &error))?;
            row.map(|row| read_run(&self.sealing, &row)).transpose()
        })
    }

    fn replace(&self, run: StoredRun, read: u64) -> BoxFuture<'_, Result<bool, RunStoreError>> {
        Box::pin(async move {
            self.replace_run(&run, read)
                .await
                .map_err(|error| database_failed("write a run", &error))
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredRun>, RunStoreError>> {
        Box::pin(async move {
            let rows = self
                .run_rows(&format!(
                    "SELECT {RUN_COLUMNS} FROM runs ORDER BY updated_ms DESC, id"
                ))
                .await
                .map_err(|error| database_failed("list the runs", &error))?;
            rows.iter()
                .map(|row| {
                    run_row(row)
                        .map_err(|error| database_failed("list the runs", &error))
                        .and_then(|row| read_run(&self.sealing, &row))
                })
                .collect()
        })
    }
}
