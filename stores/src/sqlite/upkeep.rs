//! What `portcullis usage` reads of a SQLite store (each caller's holdings against its share)
//! and what `portcullis prune` deletes (tasks past their lifetime, records past their
//! retention).

use std::collections::BTreeMap;

use rusqlite::{Connection, TransactionBehavior, params};

use super::tasks::Cached;
use super::{SqliteStore, budget, failed, from_sql, now_ms, provenance};
use crate::tasks::{Bounds, CallerUsage, Pruned, caller_entry, caller_of_json};
use crate::values::Failure;

/// Sums `select`'s rows (tenant, actor, count) into the callers' `field`.
fn add_up(
    connection: &Connection,
    callers: &mut BTreeMap<(String, String), CallerUsage>,
    select: &str,
    field: fn(&mut CallerUsage) -> &mut u64,
) -> rusqlite::Result<()> {
    let mut statement = connection.prepare(select)?;
    let rows = statement.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, i64>(2)?,
        ))
    })?;
    for row in rows {
        let (tenant, actor, count) = row?;
        *field(caller_entry(callers, &tenant, &actor)) += from_sql(count);
    }
    Ok(())
}

/// Counts the rows of `select` (one JSON column holding an actor and a tenant) per caller.
fn add_up_json(
    connection: &Connection,
    callers: &mut BTreeMap<(String, String), CallerUsage>,
    select: &str,
    field: fn(&mut CallerUsage) -> &mut u64,
) -> Result<(), Failure> {
    let mut statement = connection.prepare(select)?;
    let rows = statement.query_map([], |row| row.get::<_, Option<String>>(0))?;
    for row in rows {
        let (tenant, actor) = row?.as_deref().and_then(caller_of_json).unwrap_or_default();
        *field(caller_entry(callers, &tenant, &actor)) += 1;
    }
    Ok(())
}

/// What every caller holds.
fn usage(connection: &mut Connection) -> Result<Vec<CallerUsage>, Failure> {
    // One read of one state of the file.
    let transaction = connection.transaction()?;
    let mut callers = BTreeMap::new();
    add_up(
        &transaction,
        &mut callers,
        "SELECT tenant, actor, count(*) FROM provenance_tasks WHERE ended_ms IS NULL
         GROUP BY tenant, actor",
        |usage| &mut usage.provenance_tasks,
    )?;
    add_up(
        &transaction,
        &mut callers,
        "SELECT tenant, actor, count(*) FROM provenance_tasks WHERE ended_ms IS NOT NULL
         GROUP BY tenant, actor",
        |usage| &mut usage.provenance_ended,
    )?;
    add_up(
        &transaction,
        &mut callers,
        "SELECT tenant, actor, sum(text_bytes) FROM provenance_tasks GROUP BY tenant, actor",
        |usage| &mut usage.source_bytes,
    )?;
    add_up(
        &transaction,
        &mut callers,
        "SELECT tenant, actor, count(*) FROM budget_tasks WHERE ended_ms IS NULL
         GROUP BY tenant, actor",
        |usage| &mut usage.budget_tasks,
    )?;
    add_up(
        &transaction,
        &mut callers,
        "SELECT tenant, actor, count(*) FROM budget_tasks WHERE ended_ms IS NOT NULL
         GROUP BY tenant, actor",
        |usage| &mut usage.budget_ended,
    )?;
    add_up(
        &transaction,
        &mut callers,
        "SELECT coalesce(tenant, ''), actor, count(*) FROM runs GROUP BY tenant, actor",
        |usage| &mut usage.runs,
    )?;
    add_up_json(
        &transaction,
        &mut callers,
        "SELECT call_key FROM claims WHERE settled = 0",
        |usage| &mut usage.open_claims,
    )?;
    add_up_json(
        &transaction,
        &mut callers,
        "SELECT ticket FROM pending_calls",
        |usage| &mut usage.pending_approvals,
    )?;
    Ok(callers.into_values().collect())
}

/// Deletes what the retention allows: runs, settled claims, expired pending calls, old
/// window rows.
fn prune_retained(connection: &Connection, bounds: &Bounds, now: i64) -> rusqlite::Result<Pruned> {
    let cut = bounds.retained(now);
    let runs = connection.run(
        "DELETE FROM runs WHERE updated_ms <= ?1 AND held_until_ms <= ?2",
        params![cut.runs, now],
    )?;
    let claims = connection.run(
        "DELETE FROM claims WHERE settled = 1 AND claimed_ms <= ?1",
        [cut.claims],
    )?;
    let approvals = connection.run(
        "DELETE FROM pending_calls WHERE expires_ms <= ?1 AND leased_until_ms <= ?2",
        params![cut.approvals, now],
    )?;
    let windows = connection.run(
        "DELETE FROM budget_actor_calls WHERE at_ms <= ?1",
        [cut.windows],
    )? + connection.run(
        "DELETE FROM budget_refusals WHERE at_ms <= ?1",
        [cut.windows],
    )?;
    // Whose share of the tasks holding refusals is full is judged again at their next refusal.
    connection.run("DELETE FROM refusal_shares", [])?;
    Ok(Pruned {
        runs: runs as u64,
        claims: claims as u64,
        approvals: approvals as u64,
        window_rows: windows as u64,
        ..Pruned::default()
    })
}

impl SqliteStore {
    /// What each caller (tenant, actor) holds in the store.
    pub fn usage(&self) -> std::io::Result<Vec<CallerUsage>> {
        usage(&mut self.lock()).map_err(std::io::Error::other)
    }

    /// Ends the tasks past their lifetime, forgets the records past their time, and deletes
    /// what the retention allows, in one transaction; with `dry_run`, rolls it back and only
    /// tells what it would have done.
    pub fn prune(&self, dry_run: bool) -> std::io::Result<Pruned> {
        let pruned = (|| -> Result<Pruned, Failure> {
            let mut connection = self.lock();
            let transaction =
                connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = now_ms();
            let mut pruned = provenance::end_tasks(
                &transaction,
                &self.sealing,
                &self.bounds,
                now,
                None,
                i64::MAX,
            )?;
            pruned.add(&budget::end_tasks(
                &transaction,
                &self.bounds,
                now,
                None,
                i64::MAX,
            )?);
            pruned.add(&prune_retained(&transaction, &self.bounds, now)?);
            if dry_run {
                transaction.rollback()?;
            } else {
                transaction.commit()?;
            }
            Ok(pruned)
        })();
        pruned.map_err(|error| {
            failed("prune", &error);
            std::io::Error::other(error)
        })
    }
}
