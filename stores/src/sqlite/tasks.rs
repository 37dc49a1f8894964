//! The callers' shares of the provenance and budget stores in SQLite: one row per caller
//! holding a task (`task_callers`), the store's totals in one part (`task_totals`); a writer
//! changes them in the `IMMEDIATE` transaction that changes the tasks, so that the counts and
//! the tasks agree, and two writers never both take a caller's last place. Also what
//! `portcullis usage` and `portcullis prune` read and delete.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, Params, Row, TransactionBehavior, params};

use super::{SqliteStore, failed, from_sql, now_ms};
use crate::tasks::{Bounds, CallerUsage, Full, Kind, Pruned, caller_entry, caller_of_json};
use crate::values::Failure;

/// Statements run from the connection's cache of prepared statements: the store runs the
/// same few at every call.
pub(super) trait Cached {
    /// Runs `sql`, as [`Connection::execute`].
    fn run<P: Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;

    /// Reads the one row of `sql`, as [`Connection::query_row`].
    fn one<T, P: Params, F: FnOnce(&Row<'_>) -> rusqlite::Result<T>>(
        &self,
        sql: &str,
        params: P,
        read: F,
    ) -> rusqlite::Result<T>;
}

impl Cached for Connection {
    fn run<P: Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }

    fn one<T, P: Params, F: FnOnce(&Row<'_>) -> rusqlite::Result<T>>(
        &self,
        sql: &str,
        params: P,
        read: F,
    ) -> rusqlite::Result<T> {
        self.prepare_cached(sql)?.query_row(params, read)
    }
}

/// The parts the totals are kept in: SQLite has one writer at a time, so one.
const PARTS: i64 = 1;

/// How many live tasks and records of ended tasks `caller` (tenant, actor) holds in `kind`.
fn held(
    connection: &Connection,
    kind: Kind,
    (tenant, actor): (&str, &str),
) -> rusqlite::Result<(i64, i64)> {
    Ok(connection
        .one(
            "SELECT live, ended FROM task_callers WHERE store = ?1 AND tenant = ?2 AND actor = ?3",
            params![kind.name(), tenant, actor],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?
        .unwrap_or((0, 0)))
}

/// How many live tasks and records the store holds in `kind`.
fn total(connection: &Connection, kind: Kind) -> rusqlite::Result<(i64, i64)> {
    Ok(connection
        .one(
            "SELECT coalesce(sum(live), 0), coalesce(sum(ended), 0) FROM task_totals
             WHERE store = ?1",
            [kind.name()],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?
        .unwrap_or((0, 0)))
}

/// Whether a new task of `caller` fits in `kind`: `None` if it does.
pub(super) fn room(
    connection: &Connection,
    bounds: &Bounds,
    kind: Kind,
    caller: (&str, &str),
) -> rusqlite::Result<Option<Full>> {
    let (held, total): (i64, i64) = connection.one(
        "SELECT coalesce((SELECT live FROM task_callers
                 WHERE store = ?1 AND tenant = ?2 AND actor = ?3), 0),
             coalesce((SELECT sum(live) FROM task_totals WHERE store = ?1), 0)",
        params![kind.name(), caller.0, caller.1],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    if held >= bounds.per_caller() {
        return Ok(Some(Full::Share));
    }
    if total >= bounds.per_part(PARTS) {
        return Ok(Some(Full::Store));
    }
    Ok(None)
}

/// Whether one more record of an ended task of `caller` fits in `kind`.
pub(super) fn ended_room(
    connection: &Connection,
    bounds: &Bounds,
    kind: Kind,
    caller: (&str, &str),
) -> rusqlite::Result<bool> {
    Ok(
        held(connection, kind, caller)?.1 < bounds.ended_per_caller()
            && total(connection, kind)?.1 < bounds.ended_per_part(PARTS),
    )
}

/// Adds `live` live tasks and `ended` records to `caller`'s count in `kind` and to the
/// totals (either may be negative); a caller left holding nothing is not kept.
pub(super) fn adjust(
    connection: &Connection,
    kind: Kind,
    (tenant, actor): (&str, &str),
    live: i64,
    ended: i64,
) -> rusqlite::Result<()> {
    if live == 0 && ended == 0 {
        return Ok(());
    }
    connection.run(
        "INSERT INTO task_callers (store, tenant, actor, live, ended)
         VALUES (?1, ?2, ?3, max(?4, 0), max(?5, 0))
         ON CONFLICT (store, tenant, actor) DO UPDATE SET
             live = max(live + ?4, 0), ended = max(ended + ?5, 0)",
        params![kind.name(), tenant, actor, live, ended],
    )?;
    if live < 0 || ended < 0 {
        connection.run(
            "DELETE FROM task_callers
             WHERE store = ?1 AND tenant = ?2 AND actor = ?3 AND live = 0 AND ended = 0",
            params![kind.name(), tenant, actor],
        )?;
    }
    connection.run(
        "INSERT INTO task_totals (store, part, live, ended) VALUES (?1, 0, max(?2, 0), max(?3, 0))
         ON CONFLICT (store, part) DO UPDATE SET
             live = max(live + ?2, 0), ended = max(ended + ?3, 0)",
        params![kind.name(), live, ended],
    )?;
    Ok(())
}

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
            let mut pruned = super::provenance::end_tasks(
                &transaction,
                &self.sealing,
                &self.bounds,
                now,
                None,
                i64::MAX,
            )?;
            pruned.add(&super::budget::end_tasks(
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
