//! Pending approvals in SQLite: a ticket is taken by exactly one decision, whichever process
//! makes it.

use std::future::ready;

use portcullis_core::{
    ApprovalStore, BoxFuture, PendingCall, PendingLimits, Rejection, RejectionCode, Ticket,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{SqliteStore, as_sql, failed, now_ms};

/// Reads the stored calls of `rows`; a row that does not read back is reported and left out.
fn calls(rows: Vec<String>) -> Vec<PendingCall> {
    rows.into_iter()
        .filter_map(|text| match serde_json::from_str(&text) {
            Ok(call) => Some(call),
            Err(error) => {
                failed("read a pending call", &error);
                None
            }
        })
        .collect()
}

fn insert(
    connection: &mut Connection,
    pending: &PendingCall,
    limits: PendingLimits,
) -> Result<Option<String>, rusqlite::Error> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now_ms();
    let task = pending.ctx.task_id();
    let actor = &pending.ticket.actor;
    let count = |column: &str, value: &str| -> Result<i64, rusqlite::Error> {
        transaction.query_row(
            &format!("SELECT count(*) FROM pending_calls WHERE {column} = ?1 AND expires_ms > ?2"),
            params![value, now],
            |row| row.get(0),
        )
    };
    let (of_task, of_actor) = (count("task", task)?, count("actor", actor)?);
    let limit = |limit: usize| i64::try_from(limit).unwrap_or(i64::MAX);
    if of_task >= limit(limits.per_task) {
        return Ok(Some(format!(
            "this task has {of_task} calls waiting for approval"
        )));
    }
    if of_actor >= limit(limits.per_actor) {
        return Ok(Some(format!(
            "{of_actor} calls of this actor wait for approval"
        )));
    }
    let call = serde_json::to_string(pending)
        .map_err(|error| rusqlite::Error::ToSqlConversionFailure(Box::new(error)))?;
    transaction.execute(
        "INSERT INTO pending_calls (ticket_id, task, actor, created_ms, expires_ms, call)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            pending.ticket.id,
            task,
            actor,
            as_sql(pending.ticket.created_ms),
            as_sql(pending.ticket.expires_ms),
            call
        ],
    )?;
    transaction.commit()?;
    Ok(None)
}

impl SqliteStore {
    /// The pending call `statement` returns for ticket `id`, if any; a failure to `operation`
    /// is reported and reads as no call.
    fn one_call(&self, statement: &str, id: &str, operation: &str) -> Option<PendingCall> {
        let row = self
            .lock()
            .query_row(statement, [id], |row| row.get::<_, String>(0))
            .optional();
        match row {
            Ok(row) => calls(row.into_iter().collect()).pop(),
            Err(error) => {
                failed(operation, &error);
                None
            }
        }
    }
}

impl ApprovalStore for SqliteStore {
    fn insert(
        &self,
        pending: PendingCall,
        limits: PendingLimits,
    ) -> BoxFuture<'_, Result<(), Rejection>> {
        let result = match insert(&mut self.lock(), &pending, limits) {
            Ok(None) => Ok(()),
            Ok(Some(full)) => Err(Rejection::new(RejectionCode::TooManyPending, full)
                .with_hint("wait for a reviewer to decide the calls already waiting")
                .with_retryable(false)),
            Err(error) => {
                failed("keep a pending call", &error);
                Err(Rejection::new(
                    RejectionCode::ApprovalsUnavailable,
                    "the call could not be kept for approval, so it did not run",
                )
                .with_hint("try again later"))
            }
        };
        Box::pin(ready(result))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Option<PendingCall>> {
        let call = self.one_call(
            "SELECT call FROM pending_calls WHERE ticket_id = ?1",
            id,
            "read a pending call",
        );
        Box::pin(ready(call))
    }

    fn take<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Option<PendingCall>> {
        // One statement: of two processes taking the ticket at once, one gets the row.
        let call = self.one_call(
            "DELETE FROM pending_calls WHERE ticket_id = ?1 RETURNING call",
            id,
            "take a pending call",
        );
        Box::pin(ready(call))
    }

    fn take_expired(&self, now_ms: u64) -> BoxFuture<'_, Vec<PendingCall>> {
        let taken = (|| {
            let connection = self.lock();
            let mut statement = connection
                .prepare("DELETE FROM pending_calls WHERE expires_ms <= ?1 RETURNING call")?;
            let rows = statement.query_map([as_sql(now_ms)], |row| row.get::<_, String>(0))?;
            rows.collect::<Result<Vec<String>, _>>()
        })();
        let expired = match taken {
            Ok(rows) => calls(rows),
            Err(error) => {
                failed("take expired pending calls", &error);
                Vec::new()
            }
        };
        Box::pin(ready(expired))
    }

    fn pending(&self) -> BoxFuture<'_, Vec<Ticket>> {
        let read = (|| {
            let connection = self.lock();
            let mut statement = connection
                .prepare("SELECT call FROM pending_calls ORDER BY created_ms, ticket_id")?;
            let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
            rows.collect::<Result<Vec<String>, _>>()
        })();
        let tickets = match read {
            Ok(rows) => calls(rows).into_iter().map(|call| call.ticket).collect(),
            Err(error) => {
                failed("list pending calls", &error);
                Vec::new()
            }
        };
        Box::pin(ready(tickets))
    }
}
