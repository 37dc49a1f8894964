//! Open transactions in SQLite: their steps are stored as they complete, and an abandoned
//! transaction is leased to one recoverer at a time.

use std::future::ready;
use std::io;

use portcullis_core::{Abandoned, BoxFuture, CallContext, StoredStep, TransactionStore};
use rusqlite::{Connection, TransactionBehavior, params};

use super::{SqliteStore, as_sql, failed};
use crate::seal::Sealing;
use crate::values::{read_abandoned, stored_context, stored_step};

fn to_sql_error(error: serde_json::Error) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(error))
}

fn record_step(
    connection: &mut Connection,
    sealing: &Sealing,
    id: &str,
    ctx: &CallContext,
    step: &StoredStep,
    lease_until_ms: u64,
) -> Result<(), rusqlite::Error> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    transaction.execute(
        "INSERT INTO transactions (id, ctx, lease_until_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT (id) DO UPDATE SET lease_until_ms = ?3",
        params![
            id,
            stored_context(sealing, id, ctx).map_err(to_sql_error)?,
            as_sql(lease_until_ms)
        ],
    )?;
    let index: i64 = transaction.query_row(
        "SELECT count(*) FROM transaction_steps WHERE id = ?1",
        [id],
        |row| row.get(0),
    )?;
    transaction.execute(
        "INSERT INTO transaction_steps (id, step, payload) VALUES (?1, ?2, ?3)",
        params![
            id,
            index,
            stored_step(sealing, id, index, step).map_err(to_sql_error)?
        ],
    )?;
    transaction.commit()
}

fn take_abandoned(
    connection: &mut Connection,
    sealing: &Sealing,
    now_ms: u64,
    lease_until_ms: u64,
) -> Result<Vec<Abandoned>, rusqlite::Error> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let open: Vec<(String, String)> = {
        let mut statement = transaction
            .prepare("SELECT id, ctx FROM transactions WHERE lease_until_ms <= ?1 ORDER BY id")?;
        let rows = statement.query_map([as_sql(now_ms)], |row| Ok((row.get(0)?, row.get(1)?)))?;
        rows.collect::<Result<_, _>>()?
    };
    let mut abandoned = Vec::with_capacity(open.len());
    for (id, ctx) in open {
        transaction.execute(
            "UPDATE transactions SET lease_until_ms = ?2 WHERE id = ?1",
            params![id, as_sql(lease_until_ms)],
        )?;
        let steps: Vec<(i64, String, bool)> = {
            let mut statement = transaction.prepare(
                "SELECT step, payload, compensated FROM transaction_steps WHERE id = ?1
                 ORDER BY step",
            )?;
            let rows =
                statement.query_map([&id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        match read_abandoned(sealing, &id, &ctx, &steps) {
            Ok(open) => abandoned.push(open),
            // Left leased: an operator must look at a transaction that does not read back.
            Err(error) => failed(&format!("read abandoned transaction {id}"), &error),
        }
    }
    transaction.commit()?;
    Ok(abandoned)
}

impl TransactionStore for SqliteStore {
    fn record_step<'a>(
        &'a self,
        id: &'a str,
        ctx: &'a CallContext,
        step: &'a StoredStep,
        lease_until_ms: u64,
    ) -> BoxFuture<'a, io::Result<()>> {
        let recorded = record_step(
            &mut self.lock(),
            &self.sealing,
            id,
            ctx,
            step,
            lease_until_ms,
        )
        .map_err(io::Error::other);
        Box::pin(ready(recorded))
    }

    fn mark_compensated<'a>(&'a self, id: &'a str, index: usize) -> BoxFuture<'a, ()> {
        let marked = self.lock().execute(
            "UPDATE transaction_steps SET compensated = 1 WHERE id = ?1 AND step = ?2",
            params![id, as_sql(index as u64)],
        );
        if let Err(error) = marked {
            failed("mark a compensation done", &error);
        }
        Box::pin(ready(()))
    }

    fn finish<'a>(&'a self, id: &'a str) -> BoxFuture<'a, ()> {
        let finished = (|| {
            let mut connection = self.lock();
            let transaction =
                connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            transaction.execute("DELETE FROM transaction_steps WHERE id = ?1", [id])?;
            transaction.execute("DELETE FROM transactions WHERE id = ?1", [id])?;
            transaction.commit()
        })();
        if let Err(error) = finished {
            failed("end a transaction", &error);
        }
        Box::pin(ready(()))
    }

    fn take_abandoned(&self, now_ms: u64, lease_until_ms: u64) -> BoxFuture<'_, Vec<Abandoned>> {
        let taken = take_abandoned(&mut self.lock(), &self.sealing, now_ms, lease_until_ms)
            .unwrap_or_else(|error| {
                failed("take abandoned transactions", &error);
                Vec::new()
            });
        Box::pin(ready(taken))
    }
}
