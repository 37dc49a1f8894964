//! A task's sources in SQLite, for every worker on the file.
//!
//! Numbering: a source is recorded in one `IMMEDIATE` transaction, which holds the file's
//! write lock from its first statement: it reads the task's last number, writes the next
//! and the source, and commits, before any other writer of any process reads the number.
//! A reader's statement reads one committed state of the file, so a source it is given has
//! every lower number beside it, and none appears later.

use std::future::ready;

use portcullis_core::{BoxFuture, CallContext, ProvenanceStore, Rejection, SourceRecord};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{SqliteStore, as_sql, failed};
use crate::seal::Sealing;
use crate::sources::{StoredSource, read_sources, task_of, unreadable, unrecorded};
use crate::values::Failure;

fn record(
    connection: &mut Connection,
    sealing: &Sealing,
    (tenant, task): (&str, &str),
    source: &SourceRecord,
) -> Result<u64, Failure> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (last, kept_bytes): (i64, i64) = transaction
        .query_row(
            "SELECT number, text_bytes FROM provenance_tasks WHERE task = ?1 AND tenant = ?2",
            [task, tenant],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?
        .unwrap_or((0, 0));
    let number = last + 1;
    let stored = StoredSource::of(sealing, (tenant, task), number, source, kept_bytes)?;
    transaction.execute(
        "INSERT INTO provenance_tasks (task, tenant, number, text_bytes) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (task, tenant) DO UPDATE SET number = ?3, text_bytes = ?4",
        params![task, tenant, number, kept_bytes + stored.text_bytes],
    )?;
    transaction.execute(
        "INSERT INTO provenance_sources (task, tenant, number, origin, text)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![task, tenant, number, stored.origin, stored.text],
    )?;
    transaction.commit()?;
    Ok(u64::try_from(number)?)
}

fn since(
    connection: &Connection,
    (tenant, task): (&str, &str),
    after: u64,
) -> Result<Vec<(i64, String, String)>, rusqlite::Error> {
    let mut statement = connection.prepare_cached(
        "SELECT number, origin, text FROM provenance_sources
         WHERE task = ?1 AND tenant = ?2 AND number > ?3 ORDER BY number",
    )?;
    let rows = statement.query_map(params![task, tenant, as_sql(after)], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
    })?;
    rows.collect()
}

fn forget(connection: &mut Connection, task: &str) -> Result<(), rusqlite::Error> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    transaction.execute("DELETE FROM provenance_sources WHERE task = ?1", [task])?;
    transaction.execute("DELETE FROM provenance_tasks WHERE task = ?1", [task])?;
    transaction.commit()
}

/// The sources of every task, shared by the workers on the file and kept across restarts;
/// texts sealed when the store was given keys ([`SqliteStore::sealed_with`]). A source is
/// refused (`sources_unavailable`, and the output withheld) when the file cannot be written,
/// and a task's sources when they cannot be read: a sealed one without its key, a changed
/// one, or one missing from the numbers.
///
/// Bounded per task as the gate reads a task: a source's text is cut to
/// [`SOURCE_TEXT_LIMIT`](portcullis_core::SOURCE_TEXT_LIMIT) bytes, and once the task keeps
/// [`TASK_TEXT_LIMIT`](portcullis_core::TASK_TEXT_LIMIT) bytes of text a source is kept
/// without its text (its values are found nowhere, so a call using one is refused), under its
/// origin, so that the task still counts as having read it. Tasks are not bounded in number:
/// the file's disk is; [`Registry::end_task`](portcullis_core::Registry::end_task) forgets one.
impl ProvenanceStore for SqliteStore {
    fn record<'a>(
        &'a self,
        ctx: &'a CallContext,
        source: &'a SourceRecord,
    ) -> BoxFuture<'a, Result<u64, Rejection>> {
        let task = task_of(ctx);
        let recorded = record(&mut self.lock(), &self.sealing, task, source)
            .map_err(|error| unrecorded(task.1, &error));
        Box::pin(ready(recorded))
    }

    fn since<'a>(
        &'a self,
        ctx: &'a CallContext,
        after: u64,
    ) -> BoxFuture<'a, Result<Vec<(u64, SourceRecord)>, Rejection>> {
        let task = task_of(ctx);
        let read = since(&self.lock(), task, after)
            .map_err(|error| unreadable(task.1, &error))
            .and_then(|rows| read_sources(&self.sealing, task, after, rows));
        Box::pin(ready(read))
    }

    fn forget_task<'a>(&'a self, task: &'a str) -> BoxFuture<'a, ()> {
        if let Err(error) = forget(&mut self.lock(), task) {
            failed(&format!("forget the sources of task {task}"), &error);
        }
        Box::pin(ready(()))
    }
}
