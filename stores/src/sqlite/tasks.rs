//! The callers' shares of the provenance and budget stores in SQLite: one row per caller
//! holding a task (`task_callers`), the store's totals in one part (`task_totals`); a writer
//! changes them in the `IMMEDIATE` transaction that changes the tasks, so that the counts and
//! the tasks agree, and two writers never both take a caller's last place.

use rusqlite::{Connection, OptionalExtension, Params, Row, params};

use crate::tasks::{Bounds, Full, Kind};

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
