//! Pending approvals in SQLite: a ticket is taken by exactly one decision, whichever process
//! makes it.

use std::future::ready;

use portcullis_core::{
    ApprovalStore, BoxFuture, Lease, PendingCall, PendingLimits, Recorded, Rejection,
    SignedDecision, Ticket,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{SqliteStore, as_sql, failed, from_sql, now_ms};
use crate::refusals::{approvals_failed, approvals_unavailable};
use crate::seal::Sealing;
use crate::values::{Failure, StoredCall, read_call, read_ticket, stored_decision};

/// A stored call: its ticket's id, the call, its decision and its ticket, as texts.
type Row = (String, String, Option<String>, Option<String>);

/// The columns a [`Row`] is read from.
const ROW: &str = "ticket_id, call, decision, ticket";

fn row(row: &rusqlite::Row<'_>) -> Result<Row, rusqlite::Error> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
}

/// The pending call stored in `row`.
fn call_of(sealing: &Sealing, (id, call, decision, _): &Row) -> Result<PendingCall, Failure> {
    read_call(sealing, id, call, decision.as_deref())
}

/// Leases the decided call of ticket `id`, unless another lease on it holds: given only once
/// it reads back, so that a row this build cannot read (or cannot open without its seal key)
/// is reported rather than leased.
fn lease(
    connection: &mut Connection,
    sealing: &Sealing,
    id: &str,
    lease: &Lease,
) -> Result<Option<PendingCall>, Failure> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let stored = transaction
        .query_row(
            &format!(
                "SELECT {ROW} FROM pending_calls
                 WHERE ticket_id = ?1 AND decision IS NOT NULL AND leased_until_ms <= ?2"
            ),
            params![id, as_sql(lease.now_ms)],
            row,
        )
        .optional()?;
    let Some(stored) = stored else {
        return Ok(None);
    };
    let call = call_of(sealing, &stored)?;
    transaction.execute(
        "UPDATE pending_calls SET lease_id = ?2, leased_until_ms = ?3 WHERE ticket_id = ?1",
        params![id, lease.id, as_sql(lease.until_ms)],
    )?;
    transaction.commit()?;
    Ok(Some(call))
}

/// Gives back the call of ticket `id` held by `lease_id`, stored as `pending` again.
fn give_back(
    connection: &mut Connection,
    sealing: &Sealing,
    id: &str,
    lease_id: &str,
    pending: &PendingCall,
) -> Result<(), Failure> {
    let stored = StoredCall::of(sealing, pending)?;
    connection.execute(
        "UPDATE pending_calls SET call = ?3, lease_id = NULL, leased_until_ms = 0
         WHERE ticket_id = ?1 AND lease_id = ?2",
        params![id, lease_id, stored.call],
    )?;
    Ok(())
}

/// Takes every call whose ticket expired at `now_ms` and that reads back; one that does not
/// is reported and left for an operator.
fn take_expired(
    connection: &mut Connection,
    sealing: &Sealing,
    now_ms: u64,
) -> Result<Vec<PendingCall>, rusqlite::Error> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let rows: Vec<Row> = {
        let mut statement = transaction.prepare(&format!(
            "SELECT {ROW} FROM pending_calls WHERE expires_ms <= ?1 AND leased_until_ms <= ?1"
        ))?;
        let rows = statement.query_map([as_sql(now_ms)], row)?;
        rows.collect::<Result<_, _>>()?
    };
    let mut taken = Vec::with_capacity(rows.len());
    for stored in &rows {
        match call_of(sealing, stored) {
            Ok(call) => {
                transaction.execute(
                    "DELETE FROM pending_calls WHERE ticket_id = ?1",
                    [&stored.0],
                )?;
                taken.push(call);
            }
            Err(error) => failed("read an expired pending call", &error),
        }
    }
    transaction.commit()?;
    Ok(taken)
}

fn to_sql_error(error: serde_json::Error) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(error))
}

/// Keeps `pending` if `limits` admit it; `Ok(Err(_))` is the limits' refusal.
fn insert(
    connection: &mut Connection,
    sealing: &Sealing,
    pending: &PendingCall,
    limits: PendingLimits,
) -> Result<Result<(), Rejection>, rusqlite::Error> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now_ms();
    let task = pending.ctx.task_id();
    let actor = &pending.ticket.actor;
    let tenant = pending.ctx.tenant().unwrap_or_default();
    let of_task: i64 = transaction.query_row(
        "SELECT count(*) FROM pending_calls WHERE task = ?1 AND expires_ms > ?2",
        params![task, now],
        |row| row.get(0),
    )?;
    let of_actor: i64 = transaction.query_row(
        "SELECT count(*) FROM pending_calls
         WHERE actor = ?1 AND tenant = ?2 AND expires_ms > ?3",
        params![actor, tenant, now],
        |row| row.get(0),
    )?;
    if let Err(full) = limits.admit(from_sql(of_task), from_sql(of_actor)) {
        return Ok(Err(full));
    }
    let stored = StoredCall::of(sealing, pending).map_err(to_sql_error)?;
    transaction.execute(
        "INSERT INTO pending_calls
             (ticket_id, task, actor, tenant, created_ms, expires_ms, call, decision, ticket)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            pending.ticket.id,
            task,
            actor,
            tenant,
            as_sql(pending.ticket.created_ms),
            as_sql(pending.ticket.expires_ms),
            stored.call,
            stored.decision,
            stored.ticket,
        ],
    )?;
    transaction.commit()?;
    Ok(Ok(()))
}

fn decide(
    connection: &mut Connection,
    sealing: &Sealing,
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
            let decision = stored_decision(sealing, id, decision).map_err(to_sql_error)?;
            transaction.execute(
                "UPDATE pending_calls SET decision = ?2 WHERE ticket_id = ?1",
                params![id, decision],
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
        let result = match insert(&mut self.lock(), &self.sealing, &pending, limits) {
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
            let read = rows
                .first()
                .map(|stored| call_of(&self.sealing, stored))
                .transpose();
            read.map_err(|error| {
                failed("read a pending call", &error);
                approvals_failed(error.as_ref(), "the pending call could not be read")
            })
        });
        Box::pin(ready(call))
    }

    fn lease<'a>(
        &'a self,
        id: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Option<PendingCall>, Rejection>> {
        // One IMMEDIATE transaction: of two processes leasing the call at once, one gets it.
        let leased = self::lease(&mut self.lock(), &self.sealing, id, lease).map_err(|error| {
            failed("lease a decided call", &error);
            approvals_failed(
                error.as_ref(),
                "the decided call could not be taken to run, so nothing ran",
            )
        });
        Box::pin(ready(leased))
    }

    fn remove<'a>(
        &'a self,
        id: &'a str,
        lease_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, Rejection>> {
        let removed = self
            .lock()
            .execute(
                "DELETE FROM pending_calls WHERE ticket_id = ?1 AND lease_id = ?2",
                params![id, lease_id],
            )
            .map(|rows| rows == 1)
            .map_err(|error| {
                failed("remove a decided call", &error);
                approvals_unavailable(
                    "the decided call could not leave the store, so it did not run",
                )
            });
        Box::pin(ready(removed))
    }

    fn give_back<'a>(
        &'a self,
        id: &'a str,
        lease_id: &'a str,
        pending: &'a PendingCall,
    ) -> BoxFuture<'a, Result<(), Rejection>> {
        let released = self::give_back(&mut self.lock(), &self.sealing, id, lease_id, pending)
            .map_err(|error| {
                failed("give back a decided call", &error);
                approvals_unavailable("the decided call could not be given back")
            });
        Box::pin(ready(released))
    }

    fn take_expired(&self, now_ms: u64) -> BoxFuture<'_, Vec<PendingCall>> {
        let expired =
            take_expired(&mut self.lock(), &self.sealing, now_ms).unwrap_or_else(|error| {
                failed("take expired pending calls", &error);
                Vec::new()
            });
        Box::pin(ready(expired))
    }

    fn decide<'a>(
        &'a self,
        id: &'a str,
        decision: &'a SignedDecision,
        now_ms: u64,
    ) -> BoxFuture<'a, Recorded> {
        let recorded = decide(&mut self.lock(), &self.sealing, id, decision, now_ms)
            .unwrap_or_else(|error| {
                failed("record a decision", &error);
                Recorded::Unavailable
            });
        Box::pin(ready(recorded))
    }

    fn pending(&self) -> BoxFuture<'_, Result<Vec<Ticket>, Rejection>> {
        let tickets = self.rows("decision IS NULL", []).map(|rows| {
            rows.iter()
                .filter_map(|(id, call, _, ticket)| {
                    // Reported, and left out of the queue: `get` refuses it by its id.
                    read_ticket(&self.sealing, id, call, ticket.as_deref())
                        .map_err(|error| failed("read a pending call", &error))
                        .ok()
                })
                .collect()
        });
        Box::pin(ready(tickets))
    }

    fn decided(&self) -> BoxFuture<'_, Result<Vec<String>, Rejection>> {
        let ids = (|| {
            let connection = self.lock();
            let mut statement = connection.prepare(
                "SELECT ticket_id FROM pending_calls
                 WHERE decision IS NOT NULL AND leased_until_ms <= ?1
                 ORDER BY created_ms, ticket_id",
            )?;
            let ids = statement.query_map([now_ms()], |row| row.get::<_, String>(0))?;
            ids.collect::<Result<Vec<String>, _>>()
        })();
        Box::pin(ready(ids.map_err(|error| {
            failed("list decided calls", &error);
            approvals_failed(&error, "the decided calls could not be listed")
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
            approvals_failed(&error, "the pending calls could not be read")
        })
    }
}
