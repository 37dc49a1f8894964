//! Budgets in SQLite: a charge is judged and recorded in one IMMEDIATE transaction, so that
//! workers sharing the file never overspend. The rules are core's ([`judge_charge`]), the
//! same as the in-memory store's.

use std::future::ready;

use portcullis_core::{
    BoxFuture, BudgetLimits, BudgetStore, BudgetUsage, CallContext, Charge, RefusalLimit,
    Rejection, RejectionCode, Usage, judge_charge, task_expired,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::tasks::{Cached, adjust, ended_room, room};
use super::{SqliteStore, as_sql, failed, from_sql, now_ms};
use crate::seal::Sealing;
use crate::tasks::{Bounds, Full, Kind, Life, Pruned, SWEEP_BATCH};
use crate::values::{refusals_unknown, usage_unknown, window_start};

/// A task's row: calls, cost, and its last call's tool, arguments and times in a row; its
/// caller's actor and tenant; when it began, was last used, and ended.
struct TaskRow {
    calls: i64,
    cost: i64,
    last_tool: Option<String>,
    last_arguments: Option<String>,
    last_times: i64,
    actor: String,
    tenant: String,
    started_ms: i64,
    used_ms: i64,
    ended_ms: Option<i64>,
}

const KIND: Kind = Kind::Budget;

fn task_row(connection: &Connection, task: &str) -> rusqlite::Result<Option<TaskRow>> {
    connection
        .one(
            "SELECT calls, cost, last_tool, last_arguments, last_times, actor, tenant,
                 started_ms, used_ms, ended_ms
             FROM budget_tasks WHERE task = ?1",
            [task],
            |row| {
                Ok(TaskRow {
                    calls: row.get(0)?,
                    cost: row.get(1)?,
                    last_tool: row.get(2)?,
                    last_arguments: row.get(3)?,
                    last_times: row.get(4)?,
                    actor: row.get(5)?,
                    tenant: row.get(6)?,
                    started_ms: row.get(7)?,
                    used_ms: row.get(8)?,
                    ended_ms: row.get(9)?,
                })
            },
        )
        .optional()
}

/// Ends the live task `task` of `caller`: kept as ended, its calls per tool deleted, if its
/// caller has room for one more record; `false` (and left as it is) if not.
fn end_task(
    connection: &Connection,
    bounds: &Bounds,
    task: &str,
    caller: (&str, &str),
    now: i64,
) -> rusqlite::Result<bool> {
    if !ended_room(connection, bounds, KIND, caller)? {
        return Ok(false);
    }
    connection.run(
        "UPDATE budget_tasks SET ended_ms = ?2 WHERE task = ?1",
        params![task, now],
    )?;
    connection.run("DELETE FROM budget_tool_calls WHERE task = ?1", [task])?;
    adjust(connection, KIND, caller, -1, 1)?;
    Ok(true)
}

/// Deletes the task `task` of `caller`, live (`live`) or ended, with its calls per tool.
fn delete_task(
    connection: &Connection,
    task: &str,
    caller: (&str, &str),
    live: bool,
) -> rusqlite::Result<()> {
    connection.run("DELETE FROM budget_tasks WHERE task = ?1", [task])?;
    connection.run("DELETE FROM budget_tool_calls WHERE task = ?1", [task])?;
    let (live, ended) = if live { (-1, 0) } else { (0, -1) };
    adjust(connection, KIND, caller, live, ended)
}

/// Ends the counted tasks past their lifetime at `now` (those of `caller` only, if given; at
/// most `limit`), and deletes the records of ended tasks past their time.
pub(super) fn end_tasks(
    connection: &Connection,
    bounds: &Bounds,
    now: i64,
    caller: Option<(&str, &str)>,
    limit: i64,
) -> rusqlite::Result<Pruned> {
    let cuts = bounds.cuts(now);
    let (tenant, actor) = caller.unwrap_or_default();
    let select = |condition: &str, cut: i64, other_cut: i64| {
        let mut statement = connection.prepare_cached(&format!(
            "SELECT task, tenant, actor FROM budget_tasks
             WHERE {condition} AND (?3 = 0 OR (tenant = ?4 AND actor = ?5)) LIMIT ?6"
        ))?;
        let rows = statement.query_map(
            params![cut, other_cut, caller.is_some(), tenant, actor, limit],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )?;
        rows.collect::<rusqlite::Result<Vec<(String, String, String)>>>()
    };
    let mut pruned = Pruned::default();
    // The records past their time are deleted first: the room they give back is there for the
    // tasks ended after them, which would otherwise keep their places.
    let forgotten = select("ended_ms <= ?1 AND ?2 = ?2", cuts.remembered, 0)?;
    for (task, tenant, actor) in &forgotten {
        delete_task(connection, task, (tenant, actor), false)?;
        pruned.budget_forgotten += 1;
    }
    let over = select(
        "ended_ms IS NULL AND (used_ms <= ?1 OR started_ms <= ?2)",
        cuts.idle,
        cuts.absolute,
    )?;
    for (task, tenant, actor) in &over {
        if end_task(connection, bounds, task, (tenant, actor), now)? {
            pruned.budget_ended += 1;
        }
    }
    Ok(pruned)
}

/// Whether a per-task limit reads the task's calls for `charge`: only then is the task
/// counted, and held in its caller's share.
fn counts_task(charge: &Charge<'_>, limits: &BudgetLimits) -> bool {
    limits.max_calls_per_task.is_some()
        || limits.max_cost_per_task.is_some()
        || limits.stalled_loop_after.is_some()
        || charge.tool_max_calls_per_task.is_some()
}

/// Judges `charge` and records it if admitted; `Ok(Ok(Err(_)))` is the budget's refusal,
/// `Ok(Err(full))` a new task without a place (nothing recorded).
fn reserve(
    connection: &mut Connection,
    sealing: &Sealing,
    bounds: &Bounds,
    charge: &Charge<'_>,
    limits: &BudgetLimits,
) -> Result<Result<Result<(), Rejection>, Full>, rusqlite::Error> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now_ms();
    let caller = (charge.tenant.unwrap_or_default(), charge.actor);
    let counts = counts_task(charge, limits);
    // The task's row, if counted and live; `None` for a task new to the budget (or whose
    // record was forgotten).
    let mut task = None;
    if counts && let Some(row) = task_row(&transaction, charge.task)? {
        let held = (row.tenant.as_str(), row.actor.as_str());
        match bounds.life(row.started_ms, row.used_ms, row.ended_ms, now) {
            Life::Live => task = Some(row),
            Life::Over => {
                if end_task(&transaction, bounds, charge.task, held, now)? {
                    transaction.commit()?;
                    return Ok(Ok(Err(task_expired())));
                }
                // Its caller holds all the records it may: it goes on, in its place.
                task = Some(row);
            }
            Life::Ended => return Ok(Ok(Err(task_expired()))),
            Life::Forgotten => delete_task(&transaction, charge.task, held, false)?,
        }
    }
    let new = counts && task.is_none();
    if new && let Some(full) = room(&transaction, bounds, KIND, caller)? {
        return Ok(Err(full));
    }
    let open_until: Option<i64> = transaction
        .one(
            "SELECT open_until_ms FROM budget_circuits WHERE tool = ?1",
            [charge.tool],
            |row| row.get(0),
        )
        .optional()?
        .flatten();
    let calls_in_window: i64 = match limits.rate_limit {
        Some(rate) => {
            let since = now.saturating_sub(as_sql(rate.per.as_millis() as u64));
            transaction.run(
                "DELETE FROM budget_actor_calls WHERE actor = ?1 AND at_ms <= ?2",
                params![charge.actor, since],
            )?;
            transaction.one(
                "SELECT count(*) FROM budget_actor_calls WHERE actor = ?1",
                [charge.actor],
                |row| row.get(0),
            )?
        }
        None => 0,
    };
    let tool_calls: i64 = if task.is_some() {
        transaction
            .one(
                "SELECT calls FROM budget_tool_calls WHERE task = ?1 AND tool = ?2",
                [charge.task, charge.tool],
                |row| row.get(0),
            )
            .optional()?
            .unwrap_or(0)
    } else {
        0
    };
    let (task_calls, task_cost, last_tool, last_arguments, last_times) = match &task {
        Some(row) => (
            row.calls,
            row.cost,
            row.last_tool.as_deref(),
            row.last_arguments.as_deref(),
            row.last_times,
        ),
        None => (0, 0, None, None, 0),
    };
    // The stalled-loop breaker compares arguments: kept as a keyed digest with seal keys.
    let arguments = charge
        .canonical_arguments
        .map(|text| sealing.comparable(text, last_arguments));
    let charge = &Charge {
        canonical_arguments: arguments.as_deref(),
        ..*charge
    };
    let usage = Usage {
        circuit_open: open_until.is_some_and(|until| now < until),
        calls_in_window: from_sql(calls_in_window),
        task_calls: from_sql(task_calls),
        task_cost: from_sql(task_cost),
        tool_calls: from_sql(tool_calls),
        last: last_tool
            .zip(last_arguments)
            .map(|(tool, arguments)| (tool, arguments, u32::try_from(last_times).unwrap_or(0))),
    };
    let admitted = match judge_charge(charge, limits, &usage) {
        Ok(admitted) => admitted,
        Err(refusal) => return Ok(Ok(Err(refusal))),
    };
    if counts {
        transaction.run(
            "INSERT INTO budget_tasks (task, calls, cost, last_tool, last_arguments, last_times,
                 actor, tenant, started_ms, used_ms, ended_ms)
             VALUES (?1, 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, NULL)
             ON CONFLICT (task) DO UPDATE SET calls = calls + 1, cost = ?2, last_tool = ?3,
                 last_arguments = ?4, last_times = ?5, used_ms = ?8",
            params![
                charge.task,
                as_sql(admitted.task_cost),
                charge.canonical_arguments.map(|_| charge.tool),
                charge.canonical_arguments,
                admitted.times_in_a_row,
                charge.actor,
                caller.0,
                now,
            ],
        )?;
        transaction.run(
            "INSERT INTO budget_tool_calls (task, tool, calls) VALUES (?1, ?2, 1)
             ON CONFLICT (task, tool) DO UPDATE SET calls = calls + 1",
            [charge.task, charge.tool],
        )?;
        if new {
            adjust(&transaction, KIND, caller, 1, 0)?;
        }
    }
    if limits.rate_limit.is_some() {
        transaction.run(
            "INSERT INTO budget_actor_calls (actor, at_ms) VALUES (?1, ?2)",
            params![charge.actor, now],
        )?;
    }
    transaction.commit()?;
    Ok(Ok(Ok(())))
}

/// Ends, in a transaction of its own, a batch of the counted tasks past their lifetime:
/// `caller`'s, or (with `None`) every caller's.
fn sweep(
    connection: &mut Connection,
    bounds: &Bounds,
    caller: Option<(&str, &str)>,
) -> rusqlite::Result<()> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    end_tasks(&transaction, bounds, now_ms(), caller, SWEEP_BATCH)?;
    transaction.commit()
}

/// Reserves `charge`, a caller at its share (or a full store) first having its tasks past
/// their lifetime ended (or a batch of every caller's), and then judged again.
fn reserve_with_room(
    store: &SqliteStore,
    charge: &Charge<'_>,
    limits: &BudgetLimits,
) -> Result<Result<(), Rejection>, rusqlite::Error> {
    let bounds = &store.bounds;
    let mut connection = store.lock();
    let mut reserved = reserve(&mut connection, &store.sealing, bounds, charge, limits)?;
    if let Err(full) = reserved {
        let caller =
            (full == Full::Share).then_some((charge.tenant.unwrap_or_default(), charge.actor));
        sweep(&mut connection, bounds, caller)?;
        reserved = reserve(&mut connection, &store.sealing, bounds, charge, limits)?;
    }
    if bounds.sweep_due(KIND, now_ms())
        && let Err(error) = sweep(&mut connection, bounds, None)
    {
        failed("end the tasks past their lifetime", &error);
    }
    Ok(reserved.unwrap_or_else(|full| Err(full.refusal(KIND, bounds))))
}

/// Forgets the task `task`: its counted calls, its calls per tool, its refusals; its place
/// goes back to its caller's share.
fn forget(connection: &mut Connection, task: &str) -> rusqlite::Result<()> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let held: Option<(String, String, bool)> = transaction
        .one(
            "SELECT tenant, actor, ended_ms IS NULL FROM budget_tasks WHERE task = ?1",
            [task],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?;
    if let Some((tenant, actor, live)) = held {
        delete_task(&transaction, task, (&tenant, &actor), live)?;
    }
    // Its caller's share of the tasks holding refusals has room again.
    transaction.run(
        "DELETE FROM refusal_shares WHERE (tenant, actor) IN (
             SELECT tenant, actor FROM budget_refusals WHERE task = ?1)",
        [task],
    )?;
    transaction.run("DELETE FROM budget_refusals WHERE task = ?1", [task])?;
    transaction.commit()
}

fn settle(
    connection: &Connection,
    tool: &str,
    failed: bool,
    limits: &BudgetLimits,
) -> Result<(), rusqlite::Error> {
    let Some(breaker) = limits.circuit_breaker else {
        return Ok(());
    };
    if !failed {
        connection.run("DELETE FROM budget_circuits WHERE tool = ?1", [tool])?;
        return Ok(());
    }
    let open_until = now_ms().saturating_add(as_sql(breaker.cool_down.as_millis() as u64));
    connection.run(
        "INSERT INTO budget_circuits (tool, failures_in_a_row, open_until_ms)
         VALUES (?1, 1, CASE WHEN ?2 <= 1 THEN ?3 END)
         ON CONFLICT (tool) DO UPDATE SET
             failures_in_a_row = failures_in_a_row + 1,
             open_until_ms = CASE WHEN failures_in_a_row + 1 >= ?2 THEN ?3 ELSE open_until_ms END",
        params![tool, breaker.failures, open_until],
    )?;
    Ok(())
}

/// Counts a refusal of the task of `ctx` now, forgets its refusals outside the window and all
/// but its latest `limit.refusals`, and returns how many it has within the window. A task
/// holding no refusals yet takes a place in its caller's share of the tasks holding refusals
/// (its caller's refusals outside the window are deleted first): a caller at its share counts
/// nothing, and is marked full (`refusal_shares`) until its oldest task's latest refusal
/// leaves the window, so that [`refusals`] refuses its new tasks with one lookup.
fn count_refusal(
    connection: &mut Connection,
    bounds: &Bounds,
    ctx: &CallContext,
    limit: &RefusalLimit,
) -> Result<i64, rusqlite::Error> {
    let (task, tenant, actor) = (ctx.task_id(), ctx.tenant().unwrap_or_default(), ctx.actor());
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now_ms();
    let start = window_start(now, limit);
    transaction.run(
        "DELETE FROM budget_refusals WHERE task = ?1 AND at_ms <= ?2",
        params![task, start],
    )?;
    let held: i64 = transaction.one(
        "SELECT count(*) FROM budget_refusals WHERE task = ?1",
        [task],
        |row| row.get(0),
    )?;
    if held == 0 {
        transaction.run(
            "DELETE FROM budget_refusals WHERE tenant = ?1 AND actor = ?2 AND at_ms <= ?3",
            params![tenant, actor, start],
        )?;
        let (tasks, oldest): (i64, Option<i64>) = transaction.one(
            "SELECT count(*), min(latest) FROM (
                 SELECT max(at_ms) AS latest FROM budget_refusals
                 WHERE tenant = ?1 AND actor = ?2 GROUP BY task)",
            params![tenant, actor],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        if tasks >= bounds.per_caller() {
            let full_until = oldest
                .unwrap_or(now)
                .saturating_add(now.saturating_sub(start));
            transaction.run(
                "INSERT INTO refusal_shares (tenant, actor, full_until_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (tenant, actor) DO UPDATE SET full_until_ms = ?3",
                params![tenant, actor, full_until],
            )?;
            transaction.commit()?;
            return Ok(0);
        }
        transaction.run(
            "DELETE FROM refusal_shares WHERE tenant = ?1 AND actor = ?2",
            params![tenant, actor],
        )?;
    }
    transaction.run(
        "INSERT INTO budget_refusals (task, at_ms, tenant, actor) VALUES (?1, ?2, ?3, ?4)",
        params![task, now, tenant, actor],
    )?;
    transaction.run(
        "DELETE FROM budget_refusals WHERE task = ?1 AND rowid NOT IN (
             SELECT rowid FROM budget_refusals WHERE task = ?1
             ORDER BY at_ms DESC, rowid DESC LIMIT ?2)",
        params![task, as_sql(limit.refusals)],
    )?;
    let refusals = transaction.one(
        "SELECT count(*) FROM budget_refusals WHERE task = ?1",
        [task],
        |row| row.get(0),
    )?;
    transaction.commit()?;
    Ok(refusals)
}

/// The refusals the task of `ctx` collected within `limit`'s window; for a task holding none,
/// `budget_share_full` while its caller is marked as holding its whole share of the tasks
/// holding refusals ([`count_refusal`]).
fn refusals(
    connection: &Connection,
    bounds: &Bounds,
    ctx: &CallContext,
    limit: &RefusalLimit,
) -> Result<Result<u64, Rejection>, rusqlite::Error> {
    let now = now_ms();
    let (refusals, full_until): (i64, Option<i64>) = connection.one(
        "SELECT held, CASE WHEN held = 0 THEN (
             SELECT full_until_ms FROM refusal_shares WHERE tenant = ?3 AND actor = ?4) END
         FROM (SELECT count(*) AS held FROM budget_refusals WHERE task = ?1 AND at_ms > ?2)",
        params![
            ctx.task_id(),
            window_start(now, limit),
            ctx.tenant().unwrap_or_default(),
            ctx.actor()
        ],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    Ok(if full_until.is_some_and(|until| now < until) {
        Err(Full::Share.refusal(KIND, bounds))
    } else {
        Ok(from_sql(refusals))
    })
}

impl BudgetStore for SqliteStore {
    fn reserve<'a>(
        &'a self,
        charge: Charge<'a>,
        limits: &'a BudgetLimits,
    ) -> BoxFuture<'a, Result<(), Rejection>> {
        let result = reserve_with_room(self, &charge, limits).unwrap_or_else(|error| {
            failed("count a call against the budget", &error);
            Err(Rejection::new(
                RejectionCode::BudgetUnavailable,
                "the budget could not count the call, so it did not run",
            )
            .with_hint("try again later"))
        });
        Box::pin(ready(result))
    }

    fn settle<'a>(
        &'a self,
        tool: &'a str,
        failed_now: bool,
        limits: &'a BudgetLimits,
    ) -> BoxFuture<'a, ()> {
        if let Err(error) = settle(&self.lock(), tool, failed_now, limits) {
            failed("record how a call ended", &error);
        }
        Box::pin(ready(()))
    }

    fn release<'a>(&'a self, charge: Charge<'a>) -> BoxFuture<'a, ()> {
        let released = (|| {
            let mut connection = self.lock();
            let transaction =
                connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            transaction.run(
                "UPDATE budget_tasks SET calls = max(calls - 1, 0), cost = max(cost - ?2, 0)
                 WHERE task = ?1 AND ended_ms IS NULL",
                params![charge.task, as_sql(charge.cost)],
            )?;
            transaction.run(
                "UPDATE budget_tool_calls SET calls = max(calls - 1, 0)
                 WHERE task = ?1 AND tool = ?2",
                [charge.task, charge.tool],
            )?;
            transaction.commit()
        })();
        if let Err(error) = released {
            failed("give back a reservation", &error);
        }
        Box::pin(ready(()))
    }

    fn forget_task<'a>(&'a self, task: &'a str) -> BoxFuture<'a, ()> {
        if let Err(error) = forget(&mut self.lock(), task) {
            failed(&format!("forget the budget of task {task}"), &error);
        }
        Box::pin(ready(()))
    }

    fn count_refusal<'a>(
        &'a self,
        ctx: &'a CallContext,
        limit: &'a RefusalLimit,
    ) -> BoxFuture<'a, u64> {
        let refusals = count_refusal(&mut self.lock(), &self.bounds, ctx, limit)
            .map(from_sql)
            .unwrap_or_else(|error| {
                failed("count a refusal", &error);
                0
            });
        Box::pin(ready(refusals))
    }

    fn refusals<'a>(
        &'a self,
        ctx: &'a CallContext,
        limit: &'a RefusalLimit,
    ) -> BoxFuture<'a, Result<u64, Rejection>> {
        let refusals = refusals(&self.lock(), &self.bounds, ctx, limit).unwrap_or_else(|error| {
            failed("read a task's refusals", &error);
            Err(refusals_unknown())
        });
        Box::pin(ready(refusals))
    }

    fn task_usage<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<BudgetUsage, Rejection>> {
        let read = self
            .lock()
            .one(
                "SELECT calls, cost FROM budget_tasks WHERE task = ?1",
                [task],
                |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)),
            )
            .optional();
        let usage = match read {
            Ok(row) => Ok(
                row.map_or_else(BudgetUsage::default, |(calls, cost)| BudgetUsage {
                    calls: from_sql(calls),
                    cost: from_sql(cost),
                }),
            ),
            Err(error) => {
                failed("read what a task spent", &error);
                Err(usage_unknown())
            }
        };
        Box::pin(ready(usage))
    }
}
