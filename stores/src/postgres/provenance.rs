//! A task's sources in PostgreSQL, for every worker on the database.
//!
//! Numbering: a global sequence would not do, since a transaction given a later id can commit
//! before one given an earlier id, and a reader given the later one would never look back
//! for the earlier. So a source takes its number from its task's row in `provenance_tasks`,
//! in the transaction that inserts it: the upsert that raises the task's number locks that
//! row until the transaction ends. A second writer of the task waits on the lock, and then
//! (`ON CONFLICT DO UPDATE` acts on the row's latest committed version, whatever the
//! statement's snapshot) takes the number after the one just committed. So number `n + 1` is
//! taken only once `n` is committed, and a reader whose snapshot holds `n + 1` holds every
//! number below it: no source appears later below one a reader was given. A writer that
//! fails rolls its number back with it, and the next writer takes the same number: no gap.
//! Writers of different tasks lock different rows and do not wait for each other.

use portcullis_core::{BoxFuture, CallContext, ProvenanceStore, Rejection, SourceRecord};
use tokio_postgres::IsolationLevel;

use super::{PostgresStore, failed};
use crate::sources::{StoredSource, read_sources, task_of, unreadable, unrecorded};
use crate::values::{Failure, as_sql};

impl PostgresStore {
    async fn record_source(
        &self,
        (tenant, task): (&str, &str),
        source: &SourceRecord,
    ) -> Result<u64, Failure> {
        let mut client = self.client().await?;
        // Read committed whatever the server's default: the upsert below must see the number
        // the writer before it committed, where a stricter level would refuse to.
        let transaction = client
            .build_transaction()
            .isolation_level(IsolationLevel::ReadCommitted)
            .start()
            .await?;
        let taken = transaction
            .query_one(
                "INSERT INTO provenance_tasks (task, tenant, number, text_bytes)
                 VALUES ($1, $2, 1, 0)
                 ON CONFLICT (task, tenant) DO UPDATE SET number = provenance_tasks.number + 1
                 RETURNING number, text_bytes",
                &[&task, &tenant],
            )
            .await?;
        let (number, kept_bytes): (i64, i64) = (taken.try_get(0)?, taken.try_get(1)?);
        let stored = StoredSource::of(&self.sealing, (tenant, task), number, source, kept_bytes)?;
        transaction
            .execute(
                "WITH counted AS (
                     UPDATE provenance_tasks SET text_bytes = text_bytes + $6
                     WHERE task = $1 AND tenant = $2
                 )
                 INSERT INTO provenance_sources (task, tenant, number, origin, text)
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    &task,
                    &tenant,
                    &number,
                    &stored.origin,
                    &stored.text,
                    &stored.text_bytes,
                ],
            )
            .await?;
        transaction.commit().await?;
        Ok(u64::try_from(number)?)
    }

    async fn sources_since(
        &self,
        (tenant, task): (&str, &str),
        after: u64,
    ) -> Result<Vec<(i64, String, String)>, Failure> {
        let rows = self
            .client()
            .await?
            .query(
                "SELECT number, origin, text FROM provenance_sources
                 WHERE task = $1 AND tenant = $2 AND number > $3 ORDER BY number",
                &[&task, &tenant, &as_sql(after)],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
            .collect::<Result<_, tokio_postgres::Error>>()?)
    }

    async fn forget_sources(&self, task: &str) -> Result<(), Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        // The tasks' rows first: a writer still recording into the task holds its row, so
        // its source is committed, and deleted below, before this goes on.
        transaction
            .execute("DELETE FROM provenance_tasks WHERE task = $1", &[&task])
            .await?;
        transaction
            .execute("DELETE FROM provenance_sources WHERE task = $1", &[&task])
            .await?;
        transaction.commit().await?;
        Ok(())
    }
}

/// The sources of every task, shared by the workers on the database and kept across
/// restarts; texts sealed when the store was given keys ([`PostgresStore::sealed_with`]).
/// A source is refused (`sources_unavailable`, and the output withheld) when the database
/// cannot be written, and a task's sources when they cannot be read: a sealed one without its
/// key, a changed one, or one missing from the numbers.
///
/// Bounded per task as the gate reads a task: a source's text is cut to
/// [`SOURCE_TEXT_LIMIT`](portcullis_core::SOURCE_TEXT_LIMIT) bytes, and once the task keeps
/// [`TASK_TEXT_LIMIT`](portcullis_core::TASK_TEXT_LIMIT) bytes of text a source is kept
/// without its text (its values are found nowhere, so a call using one is refused), under its
/// origin, so that the task still counts as having read it. Tasks are not bounded in number:
/// the database's disk is; [`Registry::end_task`](portcullis_core::Registry::end_task) forgets
/// one.
impl ProvenanceStore for PostgresStore {
    fn record<'a>(
        &'a self,
        ctx: &'a CallContext,
        source: &'a SourceRecord,
    ) -> BoxFuture<'a, Result<u64, Rejection>> {
        Box::pin(async move {
            let task = task_of(ctx);
            self.record_source(task, source)
                .await
                .map_err(|error| unrecorded(task.1, &error))
        })
    }

    fn since<'a>(
        &'a self,
        ctx: &'a CallContext,
        after: u64,
    ) -> BoxFuture<'a, Result<Vec<(u64, SourceRecord)>, Rejection>> {
        Box::pin(async move {
            let task = task_of(ctx);
            let rows = self
                .sources_since(task, after)
                .await
                .map_err(|error| unreadable(task.1, &error))?;
            read_sources(&self.sealing, task, after, rows)
        })
    }

    fn forget_task<'a>(&'a self, task: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(error) = self.forget_sources(task).await {
                failed(&format!("forget the sources of task {task}"), &error);
            }
        })
    }
}
