//! Budgets in PostgreSQL: a charge is judged and recorded in one transaction, under the
//! advisory locks of its task and (with a rate limit) its actor, so that workers on several
//! machines never overspend. The rules are core's ([`judge_charge`]), the same as in memory.

use portcullis_core::{
    BoxFuture, BudgetLimits, BudgetStore, BudgetUsage, Charge, RefusalLimit, Rejection,
    RejectionCode, Usage, judge_charge,
};

use super::{Failure, PostgresStore, failed};
use crate::values::{as_sql, from_sql, now_ms, refusals_unknown, usage_unknown, window_start};

impl PostgresStore {
    /// Judges `charge` and records it if admitted; `Ok(Err(_))` is the budget's refusal.
    async fn reserve_charge(
        &self,
        charge: &Charge<'_>,
        limits: &BudgetLimits,
    ) -> Result<Result<(), Rejection>, Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        let task_lock = format!("budget-task:{}", charge.task);
        let actor_lock = format!("budget-actor:{}", charge.actor);
        if limits.rate_limit.is_some() {
            self.lock(&transaction, &[&task_lock, &actor_lock]).await?;
        } else {
            self.lock(&transaction, &[&task_lock]).await?;
        }
        let now = now_ms();
        let open_until: Option<i64> = match transaction
            .query_opt(
                "SELECT open_until_ms FROM budget_circuits WHERE tool = $1",
                &[&charge.tool],
            )
            .await?
        {
            Some(row) => row.try_get(0)?,
            None => None,
        };
        let calls_in_window: i64 = match limits.rate_limit {
            Some(rate) => {
                let since = now.saturating_sub(as_sql(rate.per.as_millis() as u64));
                transaction
                    .execute(
                        "DELETE FROM budget_actor_calls WHERE actor = $1 AND at_ms <= $2",
                        &[&charge.actor, &since],
                    )
                    .await?;
                transaction
                    .query_one(
                        "SELECT count(*) FROM budget_actor_calls WHERE actor = $1",
                        &[&charge.actor],
                    )
                    .await?
                    .try_get(0)?
            }
            None => 0,
        };
        let task = transaction
            .query_opt(
                "SELECT calls, cost, last_tool, last_arguments, last_times FROM budget_tasks
                 WHERE task = $1",
                &[&charge.task],
            )
            .await?;
        let tool_calls: i64 = match transaction
            .query_opt(
                "SELECT calls FROM budget_tool_calls WHERE task = $1 AND tool = $2",
                &[&charge.task, &charge.tool],
            )
            .await?
        {
            Some(row) => row.try_get(0)?,
            None => 0,
        };
        let (task_calls, task_cost, last_tool, last_arguments, last_times) = match &task {
            Some(row) => (
                row.try_get::<_, i64>(0)?,
                row.try_get::<_, i64>(1)?,
                row.try_get::<_, Option<&str>>(2)?,
                row.try_get::<_, Option<&str>>(3)?,
                row.try_get::<_, i64>(4)?,
            ),
            None => (0, 0, None, None, 0),
        };
        // The stalled-loop breaker compares arguments: kept as a keyed digest with seal keys.
        let arguments = charge
            .canonical_arguments
            .map(|text| self.sealing.comparable(text, last_arguments));
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
            Err(refusal) => return Ok(Err(refusal)),
        };
        transaction
            .execute(
                "INSERT INTO budget_tasks (task, calls, cost, last_tool, last_arguments, last_times)
                 VALUES ($1, 1, $2, $3, $4, $5)
                 ON CONFLICT (task) DO UPDATE SET calls = budget_tasks.calls + 1, cost = $2,
                     last_tool = $3, last_arguments = $4, last_times = $5",
                &[
                    &charge.task,
                    &as_sql(admitted.task_cost),
                    &charge.canonical_arguments.map(|_| charge.tool),
                    &charge.canonical_arguments,
                    &i64::from(admitted.times_in_a_row),
                ],
            )
            .await?;
        transaction
            .execute(
                "INSERT INTO budget_tool_calls (task, tool, calls) VALUES ($1, $2, 1)
                 ON CONFLICT (task, tool) DO UPDATE SET calls = budget_tool_calls.calls + 1",
                &[&charge.task, &charge.tool],
            )
            .await?;
        if limits.rate_limit.is_some() {
            transaction
                .execute(
                    "INSERT INTO budget_actor_calls (actor, at_ms) VALUES ($1, $2)",
                    &[&charge.actor, &now],
                )
                .await?;
        }
        transaction.commit().await?;
        Ok(Ok(()))
    }

    async fn settle_tool(
        &self,
        tool: &str,
        failed_now: bool,
        limits: &BudgetLimits,
    ) -> Result<(), Failure> {
        let Some(breaker) = limits.circuit_breaker else {
            return Ok(());
        };
        let client = self.client().await?;
        if !failed_now {
            client
                .execute("DELETE FROM budget_circuits WHERE tool = $1", &[&tool])
                .await?;
            return Ok(());
        }
        let open_until = now_ms().saturating_add(as_sql(breaker.cool_down.as_millis() as u64));
        client
            .execute(
                "INSERT INTO budget_circuits (tool, failures_in_a_row, open_until_ms)
                 VALUES ($1, 1, CASE WHEN $2::BIGINT <= 1 THEN $3::BIGINT END)
                 ON CONFLICT (tool) DO UPDATE SET
                     failures_in_a_row = budget_circuits.failures_in_a_row + 1,
                     open_until_ms = CASE
                         WHEN budget_circuits.failures_in_a_row + 1 >= $2::BIGINT THEN $3::BIGINT
                         ELSE budget_circuits.open_until_ms
                     END",
                &[&tool, &i64::from(breaker.failures), &open_until],
            )
            .await?;
        Ok(())
    }

    async fn release_charge(&self, charge: &Charge<'_>) -> Result<(), Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        self.lock(&transaction, &[&format!("budget-task:{}", charge.task)])
            .await?;
        transaction
            .execute(
                "UPDATE budget_tasks
                 SET calls = greatest(calls - 1, 0), cost = greatest(cost - $2, 0)
                 WHERE task = $1",
                &[&charge.task, &as_sql(charge.cost)],
            )
            .await?;
        transaction
            .execute(
                "UPDATE budget_tool_calls SET calls = greatest(calls - 1, 0)
                 WHERE task = $1 AND tool = $2",
                &[&charge.task, &charge.tool],
            )
            .await?;
        transaction.commit().await?;
        Ok(())
    }

    /// Counts a refusal of `task` now, under the task's advisory lock, forgets its refusals
    /// outside the window and all but its latest `limit.refusals`, and returns how many it has
    /// within the window.
    async fn count_refusal_now(&self, task: &str, limit: &RefusalLimit) -> Result<i64, Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        self.lock(&transaction, &[&format!("budget-task:{task}")])
            .await?;
        let now = now_ms();
        transaction
            .execute(
                "DELETE FROM budget_refusals WHERE task = $1 AND at_ms <= $2",
                &[&task, &window_start(now, limit)],
            )
            .await?;
        transaction
            .execute(
                "INSERT INTO budget_refusals (task, at_ms) VALUES ($1, $2)",
                &[&task, &now],
            )
            .await?;
        transaction
            .execute(
                "DELETE FROM budget_refusals WHERE task = $1 AND ctid NOT IN (
                     SELECT ctid FROM budget_refusals WHERE task = $1
                     ORDER BY at_ms DESC LIMIT $2)",
                &[&task, &as_sql(limit.refusals)],
            )
            .await?;
        let refusals: i64 = transaction
            .query_one(
                "SELECT count(*) FROM budget_refusals WHERE task = $1",
                &[&task],
            )
            .await?
            .try_get(0)?;
        transaction.commit().await?;
        Ok(refusals)
    }

    async fn spent(&self, task: &str) -> Result<BudgetUsage, Failure> {
        let row = self
            .client()
            .await?
            .query_opt(
                "SELECT calls, cost FROM budget_tasks WHERE task = $1",
                &[&task],
            )
            .await?;
        Ok(match row {
            Some(row) => BudgetUsage {
                calls: from_sql(row.try_get::<_, i64>(0)?),
                cost: from_sql(row.try_get::<_, i64>(1)?),
            },
            None => BudgetUsage::default(),
        })
    }

    async fn refusals_within(&self, task: &str, limit: &RefusalLimit) -> Result<i64, Failure> {
        let row = self
            .client()
            .await?
            .query_one(
                "SELECT count(*) FROM budget_refusals WHERE task = $1 AND at_ms > $2",
                &[&task, &window_start(now_ms(), limit)],
            )
            .await?;
        Ok(row.try_get(0)?)
    }
}

impl BudgetStore for PostgresStore {
    fn reserve<'a>(
        &'a self,
        charge: Charge<'a>,
        limits: &'a BudgetLimits,
    ) -> BoxFuture<'a, Result<(), Rejection>> {
        Box::pin(async move {
            self.reserve_charge(&charge, limits)
                .await
                .unwrap_or_else(|error| {
                    failed("count a call against the budget", &error);
                    Err(Rejection::new(
                        RejectionCode::BudgetUnavailable,
                        "the budget could not count the call, so it did not run",
                    )
                    .with_hint("try again later"))
                })
        })
    }

    fn settle<'a>(
        &'a self,
        tool: &'a str,
        failed_now: bool,
        limits: &'a BudgetLimits,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(error) = self.settle_tool(tool, failed_now, limits).await {
                failed("record how a call ended", &error);
            }
        })
    }

    fn release<'a>(&'a self, charge: Charge<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(error) = self.release_charge(&charge).await {
                failed("give back a reservation", &error);
            }
        })
    }

    fn count_refusal<'a>(&'a self, task: &'a str, limit: &'a RefusalLimit) -> BoxFuture<'a, u64> {
        Box::pin(async move {
            self.count_refusal_now(task, limit)
                .await
                .map(from_sql)
                .unwrap_or_else(|error| {
                    failed("count a refusal", &error);
                    0
                })
        })
    }

    fn refusals<'a>(
        &'a self,
        task: &'a str,
        limit: &'a RefusalLimit,
    ) -> BoxFuture<'a, Result<u64, Rejection>> {
        Box::pin(async move {
            self.refusals_within(task, limit)
                .await
                .map(from_sql)
                .map_err(|error| {
                    failed("read a task's refusals", &error);
                    refusals_unknown()
                })
        })
    }

    fn task_usage<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<BudgetUsage, Rejection>> {
        Box::pin(async move {
            self.spent(task).await.map_err(|error| {
                failed("read what a task spent", &error);
                usage_unknown()
            })
        })
    }
}
