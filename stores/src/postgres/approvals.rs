//! Pending approvals in PostgreSQL: a ticket takes one decision and is taken by one worker,
//! whichever machine asks.

use portcullis_core::{
    ApprovalStore, BoxFuture, Lease, PendingCall, PendingLimits, Recorded, Rejection,
    SignedDecision, Ticket,
};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::{Failure, PostgresStore, failed};
use crate::refusals::{approvals_failed, approvals_unavailable};
use crate::seal::Sealing;
use crate::values::{
    StoredCall, as_sql, from_sql, now_ms, read_call, read_ticket, stored_decision,
};

/// The columns a pending call is read from.
const CALL: &str = "ticket_id, call, decision, ticket";

/// Reads a pending call and its decision from `row`.
fn call_of(sealing: &Sealing, row: &Row) -> Result<PendingCall, Failure> {
    read_call(sealing, row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)
}

/// Reads the ticket of a pending call from `row`.
fn ticket_of(sealing: &Sealing, row: &Row) -> Result<Ticket, Failure> {
    read_ticket(sealing, row.try_get(0)?, row.try_get(1)?, row.try_get(3)?)
}

impl PostgresStore {
    /// Keeps `pending` if `limits` admit it; `Ok(Err(_))` is the limits' refusal.
    async fn insert_call(
        &self,
        pending: &PendingCall,
        limits: PendingLimits,
    ) -> Result<Result<(), Rejection>, Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        let task = pending.ctx.task_id();
        let actor = pending.ticket.actor.as_str();
        let tenant = pending.ctx.tenant().unwrap_or_default();
        // Counted and kept under the task's and the caller's locks: no two workers both see
        // room.
        self.lock(
            &transaction,
            &[
                &format!("pending-task:{task}"),
                &format!("pending-caller:{}:{tenant}{actor}", tenant.len()),
            ],
        )
        .await?;
        let now = now_ms();
        let of_task: i64 = transaction
            .query_one(
                "SELECT count(*) FROM pending_calls WHERE task = $1 AND expires_ms > $2",
                &[&task, &now],
            )
            .await?
            .try_get(0)?;
        let of_actor: i64 = transaction
            .query_one(
                "SELECT count(*) FROM pending_calls
                 WHERE actor = $1 AND tenant = $2 AND expires_ms > $3",
                &[&actor, &tenant, &now],
            )
            .await?
            .try_get(0)?;
        if let Err(full) = limits.admit(from_sql(of_task), from_sql(of_actor)) {
            return Ok(Err(full));
        }
        let stored = StoredCall::of(&self.sealing, pending)?;
        transaction
            .execute(
                "INSERT INTO pending_calls
                     (ticket_id, task, actor, tenant, created_ms, expires_ms, call, decision, ticket)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &[
                    &pending.ticket.id,
                    &task,
                    &actor,
                    &tenant,
                    &as_sql(pending.ticket.created_ms),
                    &as_sql(pending.ticket.expires_ms),
                    &stored.call,
                    &stored.decision,
                    &stored.ticket,
                ],
            )
            .await?;
        transaction.commit().await?;
        Ok(Ok(()))
    }

    async fn decide_call(
        &self,
        id: &str,
        decision: &SignedDecision,
        now_ms: u64,
    ) -> Result<Recorded, Failure> {
        let client = self.client().await?;
        let now = as_sql(now_ms);
        // One statement: of two decisions at once, one finds the ticket undecided.
        let recorded = client
            .query_opt(
                "UPDATE pending_calls SET decision = $2
                 WHERE ticket_id = $1 AND decision IS NULL AND expires_ms > $3
                 RETURNING ticket_id",
                &[&id, &stored_decision(&self.sealing, id, decision)?, &now],
            )
            .await?;
        if recorded.is_some() {
            return Ok(Recorded::Recorded);
        }
        let held = client
            .query_opt(
                "SELECT decision IS NOT NULL FROM pending_calls WHERE ticket_id = $1",
                &[&id],
            )
            .await?;
        Ok(match held {
            None => Recorded::NotPending,
            Some(row) if row.try_get::<_, bool>(0)? => Recorded::AlreadyDecided,
            Some(_) => Recorded::Expired,
        })
    }

    /// The stored calls `condition` selects with `parameters`, oldest first.
    async fn rows(
        &self,
        condition: &str,
        parameters: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Rejection> {
        let read = async {
            let client = self.client().await?;
            let statement = format!(
                "SELECT {CALL} FROM pending_calls WHERE {condition}
                 ORDER BY created_ms, ticket_id"
            );
            Ok::<_, Failure>(client.query(&statement, parameters).await?)
        };
        read.await.map_err(|error| {
            failed("read pending calls", &error);
            approvals_failed(error.as_ref(), "the pending calls could not be read")
        })
    }

    /// Takes every call whose ticket expired at `now_ms` and that reads back; one that does
    /// not (or that this store cannot open without its seal key) is reported and left for an
    /// operator. Rows another worker is taking are skipped.
    async fn take_expired_calls(&self, now_ms: u64) -> Result<Vec<PendingCall>, Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        let rows = transaction
            .query(
                &format!(
                    "SELECT {CALL} FROM pending_calls
                     WHERE expires_ms <= $1 AND leased_until_ms <= $1
                     FOR UPDATE SKIP LOCKED"
                ),
                &[&as_sql(now_ms)],
            )
            .await?;
        let mut taken = Vec::with_capacity(rows.len());
        for row in &rows {
            match call_of(&self.sealing, row) {
                Ok(call) => {
                    let id: &str = row.try_get(0)?;
                    transaction
                        .execute("DELETE FROM pending_calls WHERE ticket_id = $1", &[&id])
                        .await?;
                    taken.push(call);
                }
                Err(error) => failed("read an expired pending call", &error),
            }
        }
        transaction.commit().await?;
        Ok(taken)
    }

    /// Leases the decided call of ticket `id`, unless another lease on it holds: given only
    /// once it reads back, so that a row this build cannot read (or cannot open without its
    /// seal key) is reported rather than leased.
    async fn lease_call(&self, id: &str, lease: &Lease) -> Result<Option<PendingCall>, Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        // Of two workers leasing at once, one locks the row; the other finds it leased.
        let row = transaction
            .query_opt(
                &format!(
                    "SELECT {CALL} FROM pending_calls
                     WHERE ticket_id = $1 AND decision IS NOT NULL AND leased_until_ms <= $2
                     FOR UPDATE"
                ),
                &[&id, &as_sql(lease.now_ms)],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let call = call_of(&self.sealing, &row)?;
        transaction
            .execute(
                "UPDATE pending_calls SET lease_id = $2, leased_until_ms = $3 WHERE ticket_id = $1",
                &[&id, &lease.id, &as_sql(lease.until_ms)],
            )
            .await?;
        transaction.commit().await?;
        Ok(Some(call))
    }
}

impl ApprovalStore for PostgresStore {
    fn insert(
        &self,
        pending: PendingCall,
        limits: PendingLimits,
    ) -> BoxFuture<'_, Result<(), Rejection>> {
        Box::pin(async move {
            match self.insert_call(&pending, limits).await {
                Ok(admitted) => admitted,
                Err(error) => {
                    failed("keep a pending call", &error);
                    Err(approvals_unavailable(
                        "the call could not be kept for approval, so it did not run",
                    ))
                }
            }
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<PendingCall>, Rejection>> {
        Box::pin(async move {
            let rows = self.rows("ticket_id = $1", &[&id]).await?;
            let read = rows.first().map(|row| call_of(&self.sealing, row));
            read.transpose().map_err(|error| {
                failed("read a pending call", &error);
                approvals_failed(error.as_ref(), "the pending call could not be read")
            })
        })
    }

    fn decide<'a>(
        &'a self,
        id: &'a str,
        decision: &'a SignedDecision,
        now_ms: u64,
    ) -> BoxFuture<'a, Recorded> {
        Box::pin(async move {
            self.decide_call(id, decision, now_ms)
                .await
                .unwrap_or_else(|error| {
                    failed("record a decision", &error);
                    Recorded::Unavailable
                })
        })
    }

    fn lease<'a>(
        &'a self,
        id: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Option<PendingCall>, Rejection>> {
        Box::pin(async move {
            self.lease_call(id, lease).await.map_err(|error| {
                failed("lease a decided call", &error);
                approvals_failed(
                    error.as_ref(),
                    "the decided call could not be taken to run, so nothing ran",
                )
            })
        })
    }

    fn remove<'a>(
        &'a self,
        id: &'a str,
        lease_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, Rejection>> {
        Box::pin(async move {
            let removed = async {
                let rows = self
                    .client()
                    .await?
                    .execute(
                        "DELETE FROM pending_calls WHERE ticket_id = $1 AND lease_id = $2",
                        &[&id, &lease_id],
                    )
                    .await?;
                Ok::<_, Failure>(rows == 1)
            };
            removed.await.map_err(|error| {
                failed("remove a decided call", &error);
                approvals_unavailable(
                    "the decided call could not leave the store, so it did not run",
                )
            })
        })
    }

    fn give_back<'a>(
        &'a self,
        id: &'a str,
        lease_id: &'a str,
        pending: &'a PendingCall,
    ) -> BoxFuture<'a, Result<(), Rejection>> {
        Box::pin(async move {
            let released = async {
                let stored = StoredCall::of(&self.sealing, pending)?;
                self.client()
                    .await?
                    .execute(
                        "UPDATE pending_calls SET call = $3, lease_id = NULL, leased_until_ms = 0
                         WHERE ticket_id = $1 AND lease_id = $2",
                        &[&id, &lease_id, &stored.call],
                    )
                    .await?;
                Ok::<_, Failure>(())
            };
            released.await.map_err(|error| {
                failed("give back a decided call", &error);
                approvals_unavailable("the decided call could not be given back")
            })
        })
    }

    fn take_expired(&self, now_ms: u64) -> BoxFuture<'_, Vec<PendingCall>> {
        Box::pin(async move {
            self.take_expired_calls(now_ms)
                .await
                .unwrap_or_else(|error| {
                    failed("take expired pending calls", &error);
                    Vec::new()
                })
        })
    }

    fn pending(&self) -> BoxFuture<'_, Result<Vec<Ticket>, Rejection>> {
        Box::pin(async move {
            let rows = self.rows("decision IS NULL", &[]).await?;
            Ok(rows
                .iter()
                .filter_map(|row| {
                    // Reported, and left out of the queue: `get` refuses it by its id.
                    ticket_of(&self.sealing, row)
                        .map_err(|error| failed("read a pending call", &error))
                        .ok()
                })
                .collect())
        })
    }

    fn decided(&self) -> BoxFuture<'_, Result<Vec<String>, Rejection>> {
        Box::pin(async move {
            let listed = async {
                let rows = self
                    .client()
                    .await?
                    .query(
                        "SELECT ticket_id FROM pending_calls
                         WHERE decision IS NOT NULL AND leased_until_ms <= $1
                         ORDER BY created_ms, ticket_id",
                        &[&now_ms()],
                    )
                    .await?;
                rows.iter()
                    .map(|row| Ok(row.try_get(0)?))
                    .collect::<Result<Vec<String>, Failure>>()
            };
            listed.await.map_err(|error| {
                failed("list decided calls", &error);
                approvals_unavailable("the decided calls could not be listed")
            })
        })
    }
}
