//! Pending approvals in SQLite: a ticket is taken by exactly one decision, whichever process
//! makes it.

use std::future::ready;

use portcullis_core::{
    ApprovalStore, BoxFuture, PendingCall, PendingLimits, Recorded, Rejection, SignedDecision,
    Ticket,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{SqliteStore, as_sql, failed, from_sql, now_ms};
use crate::refusals::approvals_unavailable;

/// A stored call and its decision, as two texts.
type Row = (String, Option<String>);

/// The columns a [`Row`] is read from.
const ROW: &str = "call, decision";

fn row(row: &rusqlite::Row<'_>) -> Result<Row, rusqlite::Error> {
    Ok((row.get(0)?, row.get(1)?))
}

/// A database or reading failure.
type Failure = Box<dyn std::error::Error + Send + Sync>;

/// The pending call stored in `row`.
fn call_of((call, decision): Row) -> Result<PendingCall, serde_json::Error> {
    let mut call: PendingCall = serde_json::from_str(&call)?;
    call.decision = decision.as_deref().map(serde_json::from_str).transpose()?;
    Ok(call)
}

/// Takes the call of ticket `id`: removed only once it reads back, so that a row this build
/// cannot read stays for an operator rather than vanishing.
fn take(connection: &mut Connection, id: &str) -> Result<Option<PendingCall>, Failure> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let stored = transaction
        .query_row(
            &format!("SELECT {ROW} FROM pending_calls WHERE ticket_id = ?1"),
            [id],
            row,
        )
        .optional()?;
    let Some(stored) = stored else {
        return Ok(None);
    };
    let call = call_of(stored)?;
    transaction.execute("DELETE FROM pending_calls WHERE ticket_id = ?1", [id])?;
    transaction.commit()?;
    Ok(Some(call))
}

fn to_text<T: serde::Serialize>(value: &T) -> Result<String, rusqlite::Error> {
    serde_json::to_string(value)
        .map_err(|error| rusqlite::Error::ToSqlConversionFailure(Box::new(error)))
}

/// Keeps `pending` if `limits` admit it; `Ok(Err(_))` is the limits' refusal.
fn insert(
    connection: &mut Connection,
    pending: &PendingCall,
    limits: PendingLimits,
) -> Result<Result<(), Rejection>, rusqlite::Error> {
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
    if let Err(full) = limits.admit(from_sql(of_task), from_sql(of_actor)) {
        return Ok(Err(full));
    }
    let decision = pending.decision.as_ref().map(to_text).transpose()?;
    transaction.execute(
        "INSERT INTO pending_calls
             (ticket_id, task, actor, created_ms, expires_ms, call, decision)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            pending.ticket.id,
            task,
            actor,
            as_sql(pending.ticket.created_ms),
            as_sql(pending.ticket.expires_ms),
            to_text(pending)?,
            decision
        ],
    )?;
    transaction.commit()?;
    Ok(Ok(()))
}

fn decide(
    connection: &mut Connection,
    id: &str,
    decision: &SignedDecision,
    now_ms: u64,
) -> Result<Recorded, rusqlite::Error> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let held: Option<(Option<String>, i64)> = transaction
        .query_row(
            "SELECT decision, expires_ms FROM pending_calls WHERE ticket_id = ?1",
            [id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?;
    let recorded = match held {
        None => Recorded::NotPending,
        Some((Some(_), _)) => Recorded::AlreadyDecided,
        Some((None, expires_ms)) if as_sql(now_ms) >= expires_ms => Recorded::Expired,
        Some((None, _)) => {
            transaction.execute(
                "UPDATE pending_calls SET decision = ?2 WHERE ticket_id = ?1",
                params![id, to_text(decision)?],
            )?;
            Recorded::Recorded
        }
    };
    transaction.commit()?;
    Ok(recorded)
}

impl ApprovalStore for SqliteStore {
    fn insert(
        &self,
        pending: PendingCall,
        limits: PendingLimits,
    ) -> BoxFuture<'_, Result<(), Rejection>> {
        let result = match insert(&mut self.lock(), &pending, limits) {
            Ok(admitted) => admitted,
            Err(error) => {
                failed("keep a pending call", &error);
                Err(approvals_unavailable(
                    "the call could not be kept for approval, so it did not run",
                ))
            }
        };
        Box::pin(ready(result))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<PendingCall>, Rejection>> {
        let call = self.rows("ticket_id = ?1", [id]).and_then(|rows| {
            let read = rows.into_iter().map(call_of).next().transpose();
            read.map_err(|error| {
                failed("read a pending call", &error);
                approvals_unavailable("the pending call could not be read")
            })
        });
        Box::pin(ready(call))
    }

    fn take<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<PendingCall>, Rejection>> {
        // One IMMEDIATE transaction: of two processes taking the ticket at once, one gets it.
        let taken = take(&mut self.lock(), id).map_err(|error| {
            failed("take a pending call", &error);
            approvals_unavailable("the pending call could not be taken, so nothing ran")
        });
        Box::pin(ready(taken))
    }

    fn take_expired(&self, now_ms: u64) -> BoxFuture<'_, Vec<PendingCall>> {
        let taken = (|| {
            let connection = self.lock();
            let mut statement = connection.prepare(&format!(
                "DELETE FROM pending_calls WHERE expires_ms <= ?1 RETURNING {ROW}"
            ))?;
            let rows = statement.query_map([as_sql(now_ms)], row)?;
            rows.collect::<Result<Vec<Row>, _>>()
        })();
        let expired = match taken {
            // An expired call that does not read back cannot be ended: reported, and dropped.
            Ok(rows) => rows
                .into_iter()
                .filter_map(|stored| {
                    call_of(stored)
                        .map_err(|error| failed("read an expired pending call", &error))
                        .ok()
                })
                .collect(),
            Err(error) => {
                failed("take expired pending calls", &error);
                Vec::new()
            }
        };
        Box::pin(ready(expired))
    }

    fn decide<'a>(
        &'a self,
        id: &'a str,
        decision: &'a SignedDecision,
        now_ms: u64,
    ) -> BoxFuture<'a, Recorded> {
        let recorded = decide(&mut self.lock(), id, decision, now_ms).unwrap_or_else(|error| {
            failed("record a decision", &error);
            Recorded::Unavailable
        });
        Box::pin(ready(recorded))
    }

    fn pending(&self) -> BoxFuture<'_, Result<Vec<Ticket>, Rejection>> {
        let tickets = self.rows("decision IS NULL", []).map(|rows| {
            rows.into_iter()
                .filter_map(|stored| {
                    // Reported, and left out of the queue: `get` refuses it by its id.
                    call_of(stored)
                        .map_err(|error| failed("read a pending call", &error))
                        .ok()
                })
                .map(|call| call.ticket)
                .collect()
        });
        Box::pin(ready(tickets))
    }

    fn decided(&self) -> BoxFuture<'_, Result<Vec<String>, Rejection>> {
        let ids = (|| {
            let connection = self.lock();
            let mut statement = connection.prepare(
                "SELECT ticket_id FROM pending_calls WHERE decision IS NOT NULL
                 ORDER BY created_ms, ticket_id",
            )?;
            let ids = statement.query_map([], |row| row.get::<_, String>(0))?;
            ids.collect::<Result<Vec<String>, _>>()
        })();
        Box::pin(ready(ids.map_err(|error| {
            failed("list decided calls", &error);
            approvals_unavailable("the decided calls could not be listed")
        })))
    }
}

impl SqliteStore {
    /// The stored calls `condition` selects with `parameters`, oldest first.
    fn rows(
        &self,
        condition: &str,
        parameters: impl rusqlite::Params,
    ) -> Result<Vec<Row>, Rejection> {
        let read = || -> Result<Vec<Row>, rusqlite::Error> {
            let connection = self.lock();
            let mut statement = connection.prepare(&format!(
                "SELECT {ROW} FROM pending_calls WHERE {condition} ORDER BY created_ms, ticket_id"
            ))?;
            let rows = statement.query_map(parameters, row)?;
            rows.collect()
        };
        read().map_err(|error| {
            failed("read pending calls", &error);
            approvals_unavailable("the pending calls could not be read")
        })
    }
}
