//! Budgets in SQLite: a charge is judged and recorded in one IMMEDIATE transaction, so that
//! workers sharing the file never overspend. The rules are core's ([`judge_charge`]), the
//! same as the in-memory store's.

use std::future::ready;

use portcullis_core::{
    BoxFuture, BudgetLimits, BudgetStore, BudgetUsage, Charge, RefusalLimit, Rejection,
    RejectionCode, Usage, judge_charge,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{SqliteStore, as_sql, failed, from_sql, now_ms};
use crate::seal::Sealing;
use crate::values::{refusals_unknown, usage_unknown, window_start};

/// A task's row: calls, cost, and its last call's tool, arguments and times in a row.
type TaskRow = (i64, i64, Option<String>, Option<String>, i64);

/// Judges `charge` and records it if admitted; `Ok(Err(_))` is the budget's refusal.
fn reserve(
    connection: &mut Connection,
    sealing: &Sealing,
    charge: &Charge<'_>,
    limits: &BudgetLimits,
) -> Result<Result<(), Rejection>, rusqlite::Error> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now_ms();
    let open_until: Option<i64> = transaction
        .query_row(
            "SELECT open_until_ms FROM budget_circuits WHERE tool = ?1",
            [charge.tool],
            |row| row.get(0),
        )
        .optional()?
        .flatten();
    let calls_in_window: i64 = match limits.rate_limit {
        Some(rate) => {
            let since = now.saturating_sub(as_sql(rate.per.as_millis() as u64));
            transaction.execute(
                "DELETE FROM budget_actor_calls WHERE actor = ?1 AND at_ms <= ?2",
                params![charge.actor, since],
            )?;
            transaction.query_row(
                "SELECT count(*) FROM budget_actor_calls WHERE actor = ?1",
                [charge.actor],
                |row| row.get(0),
            )?
        }
        None => 0,
    };
    let task: Option<TaskRow> = transaction
        .query_row(
            "SELECT calls, cost, last_tool, last_arguments, last_times FROM budget_tasks
             WHERE task = ?1",
            [charge.task],
            |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                ))
            },
        )
        .optional()?;
    let tool_calls: i64 = transaction
        .query_row(
            "SELECT calls FROM budget_tool_calls WHERE task = ?1 AND tool = ?2",
            [charge.task, charge.tool],
            |row| row.get(0),
        )
        .optional()?
        .unwrap_or(0);
    let (task_calls, task_cost, last_tool, last_arguments, last_times) =
        task.unwrap_or((0, 0, None, None, 0));
    // The stalled-loop breaker compares arguments: kept as a keyed digest with seal keys.
    let arguments = charge
        .canonical_arguments
        .map(|text| sealing.comparable(text, last_arguments.as_deref()));
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
            .as_deref()
            .zip(last_arguments.as_deref())
            .map(|(tool, arguments)| (tool, arguments, u32::try_from(last_times).unwrap_or(0))),
    };
    let admitted = match judge_charge(charge, limits, &usage) {
        Ok(admitted) => admitted,
        Err(refusal) => return Ok(Err(refusal)),
    };
    transaction.execute(
        "INSERT INTO budget_tasks (task, calls, cost, last_tool, last_arguments, last_times)
         VALUES (?1, 1, ?2, ?3, ?4, ?5)
         ON CONFLICT (task) DO UPDATE SET calls = calls + 1, cost = ?2, last_tool = ?3,
             last_arguments = ?4, last_times = ?5",
        params![
            charge.task,
            as_sql(admitted.task_cost),
            charge.canonical_arguments.map(|_| charge.tool),
            charge.canonical_arguments,
            admitted.times_in_a_row,
        ],
    )?;
    transaction.execute(
        "INSERT INTO budget_tool_calls (task, tool, calls) VALUES (?1, ?2, 1)
         ON CONFLICT (task, tool) DO UPDATE SET calls = calls + 1",
        [charge.task, charge.tool],
    )?;
    if limits.rate_limit.is_some() {
        transaction.execute(
            "INSERT INTO budget_actor_calls (actor, at_ms) VALUES (?1, ?2)",
            params![charge.actor, now],
        )?;
    }
    transaction.commit()?;
    Ok(Ok(()))
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
        connection.execute("DELETE FROM budget_circuits WHERE tool = ?1", [tool])?;
        return Ok(());
    }
    let open_until = now_ms().saturating_add(as_sql(breaker.cool_down.as_millis() as u64));
    connection.execute(
        "INSERT INTO budget_circuits (tool, failures_in_a_row, open_until_ms)
         VALUES (?1, 1, CASE WHEN ?2 <= 1 THEN ?3 END)
         ON CONFLICT (tool) DO UPDATE SET
             failures_in_a_row = failures_in_a_row + 1,
             open_until_ms = CASE WHEN failures_in_a_row + 1 >= ?2 THEN ?3 ELSE open_until_ms END",
        params![tool, breaker.failures, open_until],
    )?;
    Ok(())
}

/// Counts a refusal of `task` now, forgets its refusals outside the window and all but its
/// latest `limit.refusals`, and returns how many it has within the window.
fn count_refusal(
    connection: &mut Connection,
    task: &str,
    limit: &RefusalLimit,
) -> Result<i64, rusqlite::Error> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now_ms();
    transaction.execute(
        "DELETE FROM budget_refusals WHERE task = ?1 AND at_ms <= ?2",
        params![task, window_start(now, limit)],
    )?;
    transaction.execute(
        "INSERT INTO budget_refusals (task, at_ms) VALUES (?1, ?2)",
        params![task, now],
    )?;
    transaction.execute(
        "DELETE FROM budget_refusals WHERE task = ?1 AND rowid NOT IN (
             SELECT rowid FROM budget_refusals WHERE task = ?1
             ORDER BY at_ms DESC, rowid DESC LIMIT ?2)",
        params![task, as_sql(limit.refusals)],
    )?;
    let refusals = transaction.query_row(
        "SELECT count(*) FROM budget_refusals WHERE task = ?1",
        [task],
        |row| row.get(0),
    )?;
    transaction.commit()?;
    Ok(refusals)
}

impl BudgetStore for SqliteStore {
    fn reserve<'a>(
        &'a self,
        charge: Charge<'a>,
        limits: &'a BudgetLimits,
    ) -> BoxFuture<'a, Result<(), Rejection>> {
        let result =
            reserve(&mut self.lock(), &self.sealing, &charge, limits).unwrap_or_else(|error| {
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
            transaction.execute(
                "UPDATE budget_tasks SET calls = max(calls - 1, 0), cost = max(cost - ?2, 0)
                 WHERE task = ?1",
                params![charge.task, as_sql(charge.cost)],
            )?;
            transaction.execute(
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

    fn count_refusal<'a>(&'a self, task: &'a str, limit: &'a RefusalLimit) -> BoxFuture<'a, u64> {
        let refusals = count_refusal(&mut self.lock(), task, limit)
            .map(from_sql)
            .unwrap_or_else(|error| {
                failed("count a refusal", &error);
                0
            });
        Box::pin(ready(refusals))
    }

    fn refusals<'a>(
        &'a self,
        task: &'a str,
        limit: &'a RefusalLimit,
    ) -> BoxFuture<'a, Result<u64, Rejection>> {
        let read = self.lock().query_row(
            "SELECT count(*) FROM budget_refusals WHERE task = ?1 AND at_ms > ?2",
            params![task, window_start(now_ms(), limit)],
            |row| row.get::<_, i64>(0),
        );
        let refusals = read.map(from_sql).map_err(|error| {
            failed("read a task's refusals", &error);
            refusals_unknown()
        });
        Box::pin(ready(refusals))
    }

    fn task_usage<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<BudgetUsage, Rejection>> {
        let read = self
            .lock()
            .query_row(
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
