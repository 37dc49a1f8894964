//! Open transactions in PostgreSQL: their steps are stored as they complete, and an abandoned
//! transaction is leased to one recoverer at a time.

use std::io;

use portcullis_core::{Abandoned, BoxFuture, CallContext, StoredStep, TransactionStore};

use super::{PostgresStore, failed};
use crate::values::{Failure, as_sql, read_abandoned, stored_context, stored_step};

impl PostgresStore {
    async fn record(
        &self,
        id: &str,
        ctx: &CallContext,
        step: &StoredStep,
        lease_until_ms: u64,
    ) -> Result<(), Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        transaction
            .execute(
                "INSERT INTO transactions (id, ctx, lease_until_ms) VALUES ($1, $2, $3)
                 ON CONFLICT (id) DO UPDATE SET lease_until_ms = $3",
                &[
                    &id,
                    &stored_context(&self.sealing, id, ctx)?,
                    &as_sql(lease_until_ms),
                ],
            )
            .await?;
        let index: i64 = transaction
            .query_one(
                "SELECT count(*) FROM transaction_steps WHERE id = $1",
                &[&id],
            )
            .await?
            .try_get(0)?;
        transaction
            .execute(
                "INSERT INTO transaction_steps (id, step, payload) VALUES ($1, $2, $3)",
                &[&id, &index, &stored_step(&self.sealing, id, index, step)?],
            )
            .await?;
        transaction.commit().await?;
        Ok(())
    }

    async fn abandoned(&self, now_ms: u64, lease_until_ms: u64) -> Result<Vec<Abandoned>, Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        // Leased as they are read: a second recoverer skips what the first holds.
        let open = transaction
            .query(
                "SELECT id, ctx FROM transactions WHERE lease_until_ms <= $1
                 ORDER BY id FOR UPDATE SKIP LOCKED",
                &[&as_sql(now_ms)],
            )
            .await?;
        let mut abandoned = Vec::with_capacity(open.len());
        for row in open {
            let (id, ctx): (String, String) = (row.try_get(0)?, row.try_get(1)?);
            transaction
                .execute(
                    "UPDATE transactions SET lease_until_ms = $2 WHERE id = $1",
                    &[&id, &as_sql(lease_until_ms)],
                )
                .await?;
            let steps = transaction
                .query(
                    "SELECT step, payload, compensated FROM transaction_steps WHERE id = $1
                     ORDER BY step",
                    &[&id],
                )
                .await?;
            let steps = steps
                .iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
                .collect::<Result<Vec<(i64, String, bool)>, tokio_postgres::Error>>()?;
            match read_abandoned(&self.sealing, &id, &ctx, &steps) {
                Ok(open) => abandoned.push(open),
                // Left leased: an operator must look at a transaction that does not read back.
                Err(error) => failed(&format!("read abandoned transaction {id}"), &error),
            }
        }
        transaction.commit().await?;
        Ok(abandoned)
    }
}

impl TransactionStore for PostgresStore {
    fn record_step<'a>(
        &'a self,
        id: &'a str,
        ctx: &'a CallContext,
        step: &'a StoredStep,
        lease_until_ms: u64,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            self.record(id, ctx, step, lease_until_ms)
                .await
                .map_err(io::Error::other)
        })
    }

    fn mark_compensated<'a>(&'a self, id: &'a str, index: usize) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let marked = async {
                self.client()
                    .await?
                    .execute(
                        "UPDATE transaction_steps SET compensated = TRUE
                         WHERE id = $1 AND step = $2",
                        &[&id, &as_sql(index as u64)],
                    )
                    .await?;
                Ok::<_, Failure>(())
            };
            if let Err(error) = marked.await {
                failed("mark a compensation done", &error);
            }
        })
    }

    fn finish<'a>(&'a self, id: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let finished = async {
                let mut client = self.client().await?;
                let transaction = client.transaction().await?;
                transaction
                    .execute("DELETE FROM transaction_steps WHERE id = $1", &[&id])
                    .await?;
                transaction
                    .execute("DELETE FROM transactions WHERE id = $1", &[&id])
                    .await?;
                transaction.commit().await?;
                Ok::<_, Failure>(())
            };
            if let Err(error) = finished.await {
                failed("end a transaction", &error);
            }
        })
    }

    fn take_abandoned(&self, now_ms: u64, lease_until_ms: u64) -> BoxFuture<'_, Vec<Abandoned>> {
        Box::pin(async move {
            self.abandoned(now_ms, lease_until_ms)
                .await
                .unwrap_or_else(|error| {
                    failed("take abandoned transactions", &error);
                    Vec::new()
                })
        })
    }
}
