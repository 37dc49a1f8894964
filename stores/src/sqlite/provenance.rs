//! A task's sources in SQLite, for every worker on the file.
//!
//! Numbering: a source is recorded in one `IMMEDIATE` transaction, which holds the file's
//! write lock from its first statement: it reads the task's last number, writes the next
//! and the source, and commits, before any other writer of any process reads the number.
//! A reader's statements read one committed state of the file (one read transaction), so a
//! source it is given has every lower number of its task's life beside it, and none appears
//! later. A task the store ended on its own, when its id comes back, numbers its sources
//! after every number it had (its row kept, or the high-water mark of the tasks deleted).
//!
//! Shares and lifetimes: see [`crate::tasks`]. A new task (or a new life of one) takes its
//! place in its caller's share in the transaction that records its first source.

use std::future::ready;

use portcullis_core::{BoxFuture, CallContext, ProvenanceStore, Rejection, SourceRecord};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::tasks::{Cached, adjust, ended_room, room};
use super::{SqliteStore, as_sql, failed};
use crate::seal::Sealing;
use crate::sources::{StoredSource, read_sources, task_of, unreadable, unrecorded};
use crate::tasks::{Bounds, Full, Kind, Life, Pruned, SWEEP_BATCH};
use crate::values::Failure;

const KIND: Kind = Kind::Provenance;

/// A task's row: its caller's actor, its last number, the number its kept sources begin at,
/// the bytes of text it keeps, when it began, was last used, and ended.
struct TaskRow {
    actor: String,
    number: i64,
    first: i64,
    text_bytes: i64,
    started_ms: i64,
    used_ms: i64,
    ended_ms: Option<i64>,
}

fn task_row(
    connection: &Connection,
    (tenant, task): (&str, &str),
) -> rusqlite::Result<Option<TaskRow>> {
    connection
        .one(
            "SELECT actor, number, first_number, text_bytes, started_ms, used_ms, ended_ms
             FROM provenance_tasks WHERE task = ?1 AND tenant = ?2",
            [task, tenant],
            |row| {
                Ok(TaskRow {
                    actor: row.get(0)?,
                    number: row.get(1)?,
                    first: row.get(2)?,
                    text_bytes: row.get(3)?,
                    started_ms: row.get(4)?,
                    used_ms: row.get(5)?,
                    ended_ms: row.get(6)?,
                })
            },
        )
        .optional()
}

/// The stored sources of a task numbered after `after`, as rows.
fn source_rows(
    connection: &Connection,
    (tenant, task): (&str, &str),
    after: i64,
) -> rusqlite::Result<Vec<(i64, String, String)>> {
    let mut statement = connection.prepare_cached(
        "SELECT number, origin, text FROM provenance_sources
         WHERE task = ?1 AND tenant = ?2 AND number > ?3 ORDER BY number",
    )?;
    let rows = statement.query_map(params![task, tenant, after], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
    })?;
    rows.collect()
}

/// The number every task the store deleted on its own stayed below.
fn mark(connection: &Connection) -> rusqlite::Result<i64> {
    Ok(connection
        .one("SELECT max(number) FROM provenance_marks", [], |row| {
            row.get::<_, Option<i64>>(0)
        })?
        .unwrap_or(0))
}

/// Raises the mark to `number`, the last of a task deleted.
fn raise_mark(connection: &Connection, number: i64) -> rusqlite::Result<()> {
    connection.run(
        "INSERT INTO provenance_marks (part, number) VALUES (0, ?1)
         ON CONFLICT (part) DO UPDATE SET number = max(number, ?1)",
        [number],
    )?;
    Ok(())
}

/// How ending a task went.
enum Ending {
    /// Deleted, with its sources: it read nothing untrusted.
    Deleted(u64),
    /// Ended, its taint kept by the source standing for its sources: number `marker`.
    Tainted { marker: i64, deleted: u64 },
    /// Left as it is: its caller holds all the records it may.
    Kept,
    /// Left as it is: its sources do not read (a sealed one without its key, a changed one,
    /// one missing), so nothing is forgotten that could not be judged.
    Unreadable(Rejection),
}

/// Ends the live task (`tenant`, `task`), whose row is `row`: its sources read and checked
/// first (a task whose sources do not read is not ended: nothing is forgotten that could not
/// be judged). A tainted task is remembered if `remember` (and its caller has room for a
/// record), or made to go on at once as a new life (`remember` false); a clean one is
/// deleted, or emptied for a new life. Counts nothing in the shares: the caller does.
fn end_task(
    connection: &Connection,
    sealing: &Sealing,
    bounds: &Bounds,
    task: (&str, &str),
    row: &TaskRow,
    now: i64,
    remember: bool,
) -> Result<Ending, Failure> {
    let (tenant, id) = task;
    let rows = source_rows(connection, task, 0)?;
    let sources = match read_sources(sealing, task, 0, row.first, rows) {
        Ok(sources) => sources,
        // Nothing written yet: the task is left as it is.
        Err(refusal) => return Ok(Ending::Unreadable(refusal)),
    };
    let untrusted = sources
        .iter()
        .map(|(_, source)| &source.origin)
        .find(|origin| !origin.is_trusted());
    let Some(origin) = untrusted else {
        let deleted = connection.run(
            "DELETE FROM provenance_sources WHERE task = ?1 AND tenant = ?2",
            [id, tenant],
        )?;
        if remember {
            connection.run(
                "DELETE FROM provenance_tasks WHERE task = ?1 AND tenant = ?2",
                [id, tenant],
            )?;
            raise_mark(connection, row.number)?;
        }
        return Ok(Ending::Deleted(deleted as u64));
    };
    if remember && !ended_room(connection, bounds, KIND, (tenant, &row.actor))? {
        return Ok(Ending::Kept);
    }
    let origin = origin.clone();
    let deleted = connection.run(
        "DELETE FROM provenance_sources WHERE task = ?1 AND tenant = ?2",
        [id, tenant],
    )?;
    let marker = row.number + 1;
    let stored = StoredSource::standing_for(sealing, task, marker, &origin)?;
    connection.run(
        "INSERT INTO provenance_sources (task, tenant, number, origin, text)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![id, tenant, marker, stored.origin, stored.text],
    )?;
    connection.run(
        "UPDATE provenance_tasks SET number = ?3, first_number = ?3, text_bytes = 0,
             ended_ms = ?4
         WHERE task = ?1 AND tenant = ?2",
        params![id, tenant, marker, remember.then_some(now)],
    )?;
    Ok(Ending::Tainted {
        marker,
        deleted: deleted as u64,
    })
}

/// Ends the tasks past their lifetime at `now` (those of `caller` only, if given; at most
/// `limit`), and deletes the records of ended tasks past their time.
pub(super) fn end_tasks(
    connection: &Connection,
    sealing: &Sealing,
    bounds: &Bounds,
    now: i64,
    caller: Option<(&str, &str)>,
    limit: i64,
) -> Result<Pruned, Failure> {
    let cuts = bounds.cuts(now);
    let (tenant, actor) = caller.unwrap_or_default();
    let mut pruned = Pruned::default();
    // The records past their time are deleted first: the room they give back is there for the
    // tasks ended after them, which would otherwise keep their places.
    let forgotten: Vec<(String, String, String, i64)> = {
        let mut statement = connection.prepare_cached(
            "SELECT task, tenant, actor, number FROM provenance_tasks
             WHERE ended_ms <= ?1 AND (?2 = 0 OR (tenant = ?3 AND actor = ?4))
             LIMIT ?5",
        )?;
        let rows = statement.query_map(
            params![cuts.remembered, caller.is_some(), tenant, actor, limit],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for (task, tenant, actor, number) in &forgotten {
        pruned.sources_deleted += connection.run(
            "DELETE FROM provenance_sources WHERE task = ?1 AND tenant = ?2",
            [task, tenant],
        )? as u64;
        connection.run(
            "DELETE FROM provenance_tasks WHERE task = ?1 AND tenant = ?2",
            [task, tenant],
        )?;
        raise_mark(connection, *number)?;
        adjust(connection, KIND, (tenant, actor), 0, -1)?;
        pruned.provenance_forgotten += 1;
    }
    let over: Vec<(String, String, TaskRow)> = {
        let mut statement = connection.prepare_cached(
            "SELECT task, tenant, actor, number, first_number, text_bytes, started_ms, used_ms
             FROM provenance_tasks
             WHERE ended_ms IS NULL AND (used_ms <= ?1 OR started_ms <= ?2)
                 AND (?3 = 0 OR (tenant = ?4 AND actor = ?5))
             LIMIT ?6",
        )?;
        let rows = statement.query_map(
            params![
                cuts.idle,
                cuts.absolute,
                caller.is_some(),
                tenant,
                actor,
                limit
            ],
            |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    TaskRow {
                        actor: row.get(2)?,
                        number: row.get(3)?,
                        first: row.get(4)?,
                        text_bytes: row.get(5)?,
                        started_ms: row.get(6)?,
                        used_ms: row.get(7)?,
                        ended_ms: None,
                    },
                ))
            },
        )?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for (task, tenant, row) in &over {
        let key = (tenant.as_str(), task.as_str());
        match end_task(connection, sealing, bounds, key, row, now, true)? {
            Ending::Deleted(deleted) => {
                adjust(connection, KIND, (tenant, &row.actor), -1, 0)?;
                pruned.provenance_deleted += 1;
                pruned.sources_deleted += deleted;
            }
            Ending::Tainted { deleted, .. } => {
                adjust(connection, KIND, (tenant, &row.actor), -1, 1)?;
                pruned.provenance_ended += 1;
                pruned.sources_deleted += deleted;
            }
            Ending::Kept => {}
            Ending::Unreadable(refusal) => {
                failed(&format!("end task {task}"), &refusal.message());
            }
        }
    }
    Ok(pruned)
}

/// Records `source` in the task of `ctx`, or refuses it: `Ok(Err(full))` when the task is new
/// (or begins a new life) and has no place; the transaction then changed nothing.
fn try_record(
    connection: &mut Connection,
    sealing: &Sealing,
    bounds: &Bounds,
    ctx: &CallContext,
    source: &SourceRecord,
) -> Result<Result<u64, Full>, Failure> {
    let task = task_of(ctx);
    let (tenant, id) = task;
    let caller = (tenant, ctx.actor());
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = super::now_ms();
    let row = task_row(&transaction, task)?;
    let life = row
        .as_ref()
        .map(|row| bounds.life(row.started_ms, row.used_ms, row.ended_ms, now));
    // The last number before this source, the bytes kept, and, for a new life, the number
    // its kept sources begin at.
    let (last, kept, new_life) = match (&row, life) {
        (Some(row), Some(Life::Live)) => (row.number, row.text_bytes, None),
        (None, _) => {
            let mark = mark(&transaction)?;
            (mark, 0, Some(mark + 1))
        }
        (Some(row), Some(Life::Over)) => {
            // Ended now, and begun again at once: its place goes back to its caller first.
            adjust(&transaction, KIND, (tenant, &row.actor), -1, 0)?;
            match end_task(&transaction, sealing, bounds, task, row, now, false)? {
                Ending::Tainted { marker, .. } => (marker, 0, Some(marker)),
                Ending::Deleted(_) | Ending::Kept => (row.number, 0, Some(row.number + 1)),
                Ending::Unreadable(refusal) => return Err(refusal.message().into()),
            }
        }
        (Some(row), _) => {
            adjust(&transaction, KIND, (tenant, &row.actor), 0, -1)?;
            if life == Some(Life::Ended) {
                // Resumed: it goes on after the source that keeps its taint.
                (row.number, 0, Some(row.first))
            } else {
                transaction.run(
                    "DELETE FROM provenance_sources WHERE task = ?1 AND tenant = ?2",
                    [id, tenant],
                )?;
                (row.number, 0, Some(row.number + 1))
            }
        }
    };
    if new_life.is_some() {
        if let Some(full) = room(&transaction, bounds, KIND, caller)? {
            return Ok(Err(full));
        }
        adjust(&transaction, KIND, caller, 1, 0)?;
    }
    let number = last + 1;
    let stored = StoredSource::of(sealing, task, number, source, kept)?;
    match new_life {
        Some(first) => transaction.run(
            "INSERT INTO provenance_tasks (task, tenant, actor, number, first_number, text_bytes,
                 started_ms, used_ms, ended_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, NULL)
             ON CONFLICT (task, tenant) DO UPDATE SET actor = ?3, number = ?4,
                 first_number = ?5, text_bytes = ?6, started_ms = ?7, used_ms = ?7,
                 ended_ms = NULL",
            params![
                id,
                tenant,
                ctx.actor(),
                number,
                first,
                stored.text_bytes,
                now
            ],
        )?,
        None => transaction.run(
            "UPDATE provenance_tasks SET number = ?3, text_bytes = ?4, used_ms = ?5
             WHERE task = ?1 AND tenant = ?2",
            params![id, tenant, number, kept + stored.text_bytes, now],
        )?,
    };
    transaction.run(
        "INSERT INTO provenance_sources (task, tenant, number, origin, text)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![id, tenant, number, stored.origin, stored.text],
    )?;
    transaction.commit()?;
    Ok(Ok(u64::try_from(number)?))
}

/// Ends, in a transaction of its own, a batch of the tasks past their lifetime: `caller`'s, or
/// (with `None`) every caller's.
fn sweep(
    connection: &mut Connection,
    sealing: &Sealing,
    bounds: &Bounds,
    caller: Option<(&str, &str)>,
) -> Result<(), Failure> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    end_tasks(
        &transaction,
        sealing,
        bounds,
        super::now_ms(),
        caller,
        SWEEP_BATCH,
    )?;
    transaction.commit()?;
    Ok(())
}

/// Ends the tasks past their lifetime that hold the places a new task of `ctx` found `full`:
/// its caller's, or (the store full) a batch of anyone's.
fn make_room(
    connection: &mut Connection,
    sealing: &Sealing,
    bounds: &Bounds,
    ctx: &CallContext,
    full: Full,
) -> Result<(), Failure> {
    let caller = (full == Full::Share).then_some((task_of(ctx).0, ctx.actor()));
    sweep(connection, sealing, bounds, caller)
}

/// Whether the task of `ctx` holds a place, or a new one fits: `Err(full)` if not. It takes
/// nothing.
fn try_admit(
    connection: &Connection,
    bounds: &Bounds,
    ctx: &CallContext,
) -> Result<Result<(), Full>, Failure> {
    let task = task_of(ctx);
    if task_row(connection, task)?.is_some_and(|row| row.ended_ms.is_none()) {
        return Ok(Ok(()));
    }
    Ok(
        match room(connection, bounds, KIND, (task.0, ctx.actor()))? {
            Some(full) => Err(full),
            None => Ok(()),
        },
    )
}

fn admit(store: &SqliteStore, ctx: &CallContext) -> Result<Result<(), Rejection>, Failure> {
    let bounds = &store.bounds;
    let mut connection = store.lock();
    let mut admitted = try_admit(&connection, bounds, ctx)?;
    if let Err(full) = admitted {
        make_room(&mut connection, &store.sealing, bounds, ctx, full)?;
        admitted = try_admit(&connection, bounds, ctx)?;
    }
    Ok(admitted.map_err(|full| full.refusal(KIND, bounds)))
}

fn record(
    store: &SqliteStore,
    ctx: &CallContext,
    source: &SourceRecord,
) -> Result<Result<u64, Rejection>, Failure> {
    let bounds = &store.bounds;
    let mut connection = store.lock();
    let mut recorded = try_record(&mut connection, &store.sealing, bounds, ctx, source)?;
    if let Err(full) = recorded {
        make_room(&mut connection, &store.sealing, bounds, ctx, full)?;
        recorded = try_record(&mut connection, &store.sealing, bounds, ctx, source)?;
    }
    if bounds.sweep_due(KIND, super::now_ms())
        && let Err(error) = sweep(&mut connection, &store.sealing, bounds, None)
    {
        failed("end the tasks past their lifetime", &error);
    }
    Ok(recorded.map_err(|full| full.refusal(KIND, bounds)))
}

/// The sources of the task after `after` as rows, and the number its kept sources begin at;
/// with where the task is in its life.
type Read = (Vec<(i64, String, String)>, i64, Option<(Life, i64)>);

fn read(
    connection: &mut Connection,
    bounds: &Bounds,
    task: (&str, &str),
    after: u64,
    now: i64,
) -> rusqlite::Result<Read> {
    // One read transaction: the row and the sources of one state of the file.
    let transaction = connection.transaction()?;
    let Some(row) = task_row(&transaction, task)? else {
        return Ok((Vec::new(), 1, None));
    };
    let rows = source_rows(&transaction, task, as_sql(after))?;
    let life = bounds.life(row.started_ms, row.used_ms, row.ended_ms, now);
    Ok((rows, row.first, Some((life, row.used_ms))))
}

/// Ends the task (`tenant`, `task`) if it is past its lifetime, or forgets its record if that
/// is past its time.
fn end_if_over(
    connection: &mut Connection,
    sealing: &Sealing,
    bounds: &Bounds,
    task: (&str, &str),
) -> Result<(), Failure> {
    let (tenant, id) = task;
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = super::now_ms();
    if let Some(row) = task_row(&transaction, task)? {
        match bounds.life(row.started_ms, row.used_ms, row.ended_ms, now) {
            Life::Over => match end_task(&transaction, sealing, bounds, task, &row, now, true)? {
                Ending::Deleted(_) => adjust(&transaction, KIND, (tenant, &row.actor), -1, 0)?,
                Ending::Tainted { .. } => adjust(&transaction, KIND, (tenant, &row.actor), -1, 1)?,
                Ending::Kept => {}
                Ending::Unreadable(refusal) => return Err(refusal.message().into()),
            },
            Life::Forgotten => {
                transaction.run(
                    "DELETE FROM provenance_sources WHERE task = ?1 AND tenant = ?2",
                    [id, tenant],
                )?;
                transaction.run(
                    "DELETE FROM provenance_tasks WHERE task = ?1 AND tenant = ?2",
                    [id, tenant],
                )?;
                raise_mark(&transaction, row.number)?;
                adjust(&transaction, KIND, (tenant, &row.actor), 0, -1)?;
            }
            Life::Live | Life::Ended => {}
        }
    }
    transaction.commit()?;
    Ok(())
}

fn since(
    store: &SqliteStore,
    task: (&str, &str),
    after: u64,
) -> Result<Vec<(u64, SourceRecord)>, Rejection> {
    let bounds = &store.bounds;
    let mut connection = store.lock();
    let now = super::now_ms();
    let unreadable_now = |error: &dyn std::fmt::Display| unreadable(task.1, error);
    let mut read_now =
        read(&mut connection, bounds, task, after, now).map_err(|error| unreadable_now(&error))?;
    if let Some((Life::Over | Life::Forgotten, _)) = read_now.2 {
        end_if_over(&mut connection, &store.sealing, bounds, task)
            .map_err(|error| unreadable_now(&error))?;
        read_now = read(&mut connection, bounds, task, after, now)
            .map_err(|error| unreadable_now(&error))?;
    }
    let (rows, first, life) = read_now;
    // A task in use stays in use: its last use is written when it is older than an eighth of
    // its idle lifetime, not at every read.
    if let Some((Life::Live, used_ms)) = life
        && now.saturating_sub(used_ms) >= idle_ms(bounds) / 8
        && let Err(error) = connection.run(
            "UPDATE provenance_tasks SET used_ms = max(used_ms, ?3)
             WHERE task = ?1 AND tenant = ?2 AND ended_ms IS NULL",
            params![task.1, task.0, now],
        )
    {
        failed("note a task's use", &error);
    }
    drop(connection);
    read_sources(&store.sealing, task, after, first, rows)
}

fn idle_ms(bounds: &Bounds) -> i64 {
    i64::try_from(bounds.lifetime.idle.as_millis()).unwrap_or(i64::MAX)
}

/// Forgets every life of the task `task` under every tenant, and gives back its places.
fn forget(connection: &mut Connection, task: &str) -> Result<(), Failure> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let held: Vec<(String, String, bool)> = {
        let mut statement = transaction.prepare(
            "SELECT tenant, actor, ended_ms IS NOT NULL FROM provenance_tasks WHERE task = ?1",
        )?;
        let rows =
            statement.query_map([task], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for (tenant, actor, ended) in &held {
        let (live, records) = if *ended { (0, -1) } else { (-1, 0) };
        adjust(&transaction, KIND, (tenant, actor), live, records)?;
    }
    transaction.run("DELETE FROM provenance_sources WHERE task = ?1", [task])?;
    transaction.run("DELETE FROM provenance_tasks WHERE task = ?1", [task])?;
    transaction.commit()?;
    Ok(())
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
/// origin, so that the task still counts as having read it. Bounded in tasks by the callers'
/// shares ([`Shares`](crate::Shares): a caller at its share is refused a new task,
/// `sources_share_full`), and tasks end on their own
/// ([`TaskLifetime`](portcullis_core::TaskLifetime)), a tainted one remembered as tainted:
/// see [`SqliteStore::with_shares`].
impl ProvenanceStore for SqliteStore {
    fn record<'a>(
        &'a self,
        ctx: &'a CallContext,
        source: &'a SourceRecord,
    ) -> BoxFuture<'a, Result<u64, Rejection>> {
        let recorded = record(self, ctx, source)
            .unwrap_or_else(|error| Err(unrecorded(ctx.task_id(), &error)));
        Box::pin(ready(recorded))
    }

    fn admit<'a>(&'a self, ctx: &'a CallContext) -> BoxFuture<'a, Result<(), Rejection>> {
        let admitted =
            admit(self, ctx).unwrap_or_else(|error| Err(unrecorded(ctx.task_id(), &error)));
        Box::pin(ready(admitted))
    }

    fn since<'a>(
        &'a self,
        ctx: &'a CallContext,
        after: u64,
    ) -> BoxFuture<'a, Result<Vec<(u64, SourceRecord)>, Rejection>> {
        Box::pin(ready(since(self, task_of(ctx), after)))
    }

    fn forget_task<'a>(&'a self, task: &'a str) -> BoxFuture<'a, ()> {
        if let Err(error) = forget(&mut self.lock(), task) {
            failed(&format!("forget the sources of task {task}"), &error);
        }
        Box::pin(ready(()))
    }
}
