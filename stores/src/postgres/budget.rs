//! Budgets in PostgreSQL: a charge is judged and recorded in one transaction, under the
//! advisory locks of its task and (with a rate limit) its actor, so that workers on several
//! machines never overspend. The rules are core's ([`judge_charge`]), the same as in memory.

use portcullis_core::{
    BoxFuture, BudgetLimits, BudgetStore, BudgetUsage, CallContext, Charge, RefusalLimit,
    Rejection, RejectionCode, Usage, judge_charge, task_expired,
};

use deadpool_postgres::Transaction;

use super::prepared::Prepared;
use super::tasks::Filter;
use super::tasks::{Counts, PARTS, adjust, part_of, take_place};
use super::{Failure, PostgresStore, failed};
use crate::tasks::{Full, Kind, Life, Pruned, SWEEP_BATCH};
use crate::values::{as_sql, from_sql, now_ms, refusals_unknown, usage_unknown, window_start};

const KIND: Kind = Kind::Budget;

/// Whether a per-task limit reads the task's calls for `charge`: only then is the task
/// counted, and held in its caller's share.
fn counts_task(charge: &Charge<'_>, limits: &BudgetLimits) -> bool {
    limits.max_calls_per_task.is_some()
        || limits.max_cost_per_task.is_some()
        || limits.stalled_loop_after.is_some()
        || charge.tool_max_calls_per_task.is_some()
}

impl PostgresStore {
    /// Judges `charge` and records it if admitted; `Ok(Ok(Err(_)))` is the budget's refusal,
    /// `Ok(Err(full))` a new task without a place (nothing recorded).
    async fn try_reserve(
        &self,
        charge: &Charge<'_>,
        limits: &BudgetLimits,
    ) -> Result<Result<Result<(), Rejection>, Full>, Failure> {
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
        let bounds = &self.bounds;
        let caller = (charge.tenant.unwrap_or_default(), charge.actor);
        let counts = counts_task(charge, limits);
        // The task, if counted and live; `None` for a task new to the budget (or whose
        // record was forgotten).
        let mut task = None;
        if counts
            && let Some(row) = transaction
                .query_opt_prepared(
                    "SELECT calls, cost, last_tool, last_arguments, last_times, tenant, actor,
                         started_ms, used_ms, ended_ms
                     FROM budget_tasks WHERE task = $1",
                    &[&charge.task],
                )
                .await?
        {
            let held: (String, String) = (row.try_get(5)?, row.try_get(6)?);
            let life = bounds.life(row.try_get(7)?, row.try_get(8)?, row.try_get(9)?, now);
            match life {
                Life::Live => task = Some(row),
                Life::Over => {
                    if self
                        .end_budget(&transaction, charge.task, &held, now)
                        .await?
                    {
                        transaction.commit().await?;
                        return Ok(Ok(Err(task_expired())));
                    }
                    // Its caller holds all the records it may: it goes on, in its place.
                    task = Some(row);
                }
                Life::Ended => return Ok(Ok(Err(task_expired()))),
                Life::Forgotten => {
                    self.delete_budget(&transaction, charge.task, (&held.0, &held.1), false)
                        .await?;
                }
            }
        }
        let new = counts && task.is_none();
        if new
            && let Some(full) = take_place(&transaction, bounds, KIND, caller, charge.task).await?
        {
            return Ok(Err(full));
        }
        let open_until: Option<i64> = match transaction
            .query_opt_prepared(
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
                    .execute_prepared(
                        "DELETE FROM budget_actor_calls WHERE actor = $1 AND at_ms <= $2",
                        &[&charge.actor, &since],
                    )
                    .await?;
                transaction
                    .query_one_prepared(
                        "SELECT count(*) FROM budget_actor_calls WHERE actor = $1",
                        &[&charge.actor],
                    )
                    .await?
                    .try_get(0)?
            }
            None => 0,
        };
        let tool_calls: i64 = match &task {
            Some(_) => match transaction
                .query_opt_prepared(
                    "SELECT calls FROM budget_tool_calls WHERE task = $1 AND tool = $2",
                    &[&charge.task, &charge.tool],
                )
                .await?
            {
                Some(row) => row.try_get(0)?,
                None => 0,
            },
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
            Err(refusal) => return Ok(Ok(Err(refusal))),
        };
        if counts {
            transaction
                .execute_prepared(
                    "INSERT INTO budget_tasks (task, calls, cost, last_tool, last_arguments,
                         last_times, tenant, actor, started_ms, used_ms, ended_ms)
                     VALUES ($1, 1, $2, $3, $4, $5, $6, $7, $8, $8, NULL)
                     ON CONFLICT (task) DO UPDATE SET calls = budget_tasks.calls + 1, cost = $2,
                         last_tool = $3, last_arguments = $4, last_times = $5, used_ms = $8",
                    &[
                        &charge.task,
                        &as_sql(admitted.task_cost),
                        &charge.canonical_arguments.map(|_| charge.tool),
                        &charge.canonical_arguments,
                        &i64::from(admitted.times_in_a_row),
                        &caller.0,
                        &caller.1,
                        &now,
                    ],
                )
                .await?;
            transaction
                .execute_prepared(
                    "INSERT INTO budget_tool_calls (task, tool, calls) VALUES ($1, $2, 1)
                     ON CONFLICT (task, tool) DO UPDATE SET calls = budget_tool_calls.calls + 1",
                    &[&charge.task, &charge.tool],
                )
                .await?;
        }
        if limits.rate_limit.is_some() {
            transaction
                .execute_prepared(
                    "INSERT INTO budget_actor_calls (actor, at_ms) VALUES ($1, $2)",
                    &[&charge.actor, &now],
                )
                .await?;
        }
        transaction.commit().await?;
        Ok(Ok(Ok(())))
    }

    /// Reserves `charge`, a caller at its share (or a full store) first having its tasks past
    /// their lifetime ended (or a batch of every caller's), and then judged again.
    async fn reserve_charge(
        &self,
        charge: &Charge<'_>,
        limits: &BudgetLimits,
    ) -> Result<Result<(), Rejection>, Failure> {
        let bounds = &self.bounds;
        let mut reserved = self.try_reserve(charge, limits).await?;
        if let Err(full) = reserved {
            let filter = match full {
                Full::Share => Filter {
                    tenant: Some(charge.tenant.unwrap_or_default()),
                    actor: Some(charge.actor),
                    task: None,
                },
                Full::Store => Filter::default(),
            };
            self.sweep_budgets(filter, SWEEP_BATCH).await?;
            reserved = self.try_reserve(charge, limits).await?;
        }
        if bounds.sweep_due(KIND, now_ms())
            && let Err(error) = self.sweep_budgets(Filter::default(), SWEEP_BATCH).await
        {
            failed("end the tasks past their lifetime", &error);
        }
        Ok(reserved.unwrap_or_else(|full| Err(full.refusal(KIND, bounds))))
    }

    /// Ends the live task `task` of `caller`, held under its advisory lock: kept as ended, its
    /// calls per tool deleted, if its caller has room for one more record; `false` (and left
    /// as it is) if not.
    async fn end_budget(
        &self,
        transaction: &Transaction<'_>,
        task: &str,
        caller: &(String, String),
        now: i64,
    ) -> Result<bool, Failure> {
        let held: i64 = transaction
            .query_opt_prepared(
                "SELECT ended FROM task_callers
                 WHERE store = $1 AND tenant = $2 AND actor = $3 FOR UPDATE",
                &[&KIND.name(), &caller.0, &caller.1],
            )
            .await?
            .map(|row| row.try_get(0))
            .transpose()?
            .unwrap_or(0);
        let in_part: i64 = transaction
            .query_opt_prepared(
                &format!(
                    "SELECT ended FROM task_totals WHERE store = $1 AND part = {} FOR UPDATE",
                    part_of("$2")
                ),
                &[&KIND.name(), &task],
            )
            .await?
            .map(|row| row.try_get(0))
            .transpose()?
            .unwrap_or(0);
        let bounds = &self.bounds;
        if held >= bounds.ended_per_caller() || in_part >= bounds.ended_per_part(PARTS) {
            return Ok(false);
        }
        transaction
            .execute_prepared(
                "UPDATE budget_tasks SET ended_ms = $2 WHERE task = $1",
                &[&task, &now],
            )
            .await?;
        transaction
            .execute_prepared("DELETE FROM budget_tool_calls WHERE task = $1", &[&task])
            .await?;
        adjust(transaction, KIND, (&caller.0, &caller.1), task, -1, 1).await?;
        Ok(true)
    }

    /// Deletes the task `task` of `caller`, live (`live`) or ended, with its calls per tool.
    async fn delete_budget(
        &self,
        transaction: &Transaction<'_>,
        task: &str,
        caller: (&str, &str),
        live: bool,
    ) -> Result<(), Failure> {
        transaction
            .execute_prepared("DELETE FROM budget_tasks WHERE task = $1", &[&task])
            .await?;
        transaction
            .execute_prepared("DELETE FROM budget_tool_calls WHERE task = $1", &[&task])
            .await?;
        let (live, ended) = if live { (-1, 0) } else { (0, -1) };
        adjust(transaction, KIND, caller, task, live, ended).await
    }

    /// Ends the counted tasks past their lifetime at `now` that `filter` names (at most
    /// `limit`; the ones another transaction holds are left for later), and deletes the
    /// records of ended tasks past their time.
    pub(super) async fn end_budgets(
        &self,
        transaction: &Transaction<'_>,
        now: i64,
        filter: Filter<'_>,
        limit: i64,
    ) -> Result<Pruned, Failure> {
        let bounds = &self.bounds;
        let cuts = bounds.cuts(now);
        // The live tasks past their lifetime, then the records past their time: at most
        // `limit` of each.
        let mut candidates: Vec<String> = Vec::new();
        for condition in [
            "ended_ms IS NULL AND (used_ms <= $1 OR started_ms <= $2) AND $3::BIGINT = $3",
            "ended_ms <= $3 AND $1::BIGINT = $1 AND $2::BIGINT = $2",
        ] {
            // A text statement, planned for its values: a plan made once for any filter would
            // read the whole table where the filter names one caller.
            for row in transaction
                .query(
                    &format!(
                        "SELECT task FROM budget_tasks
                         WHERE {condition}
                             AND ($4::TEXT IS NULL OR tenant = $4)
                             AND ($5::TEXT IS NULL OR actor = $5)
                         LIMIT $6"
                    ),
                    &[
                        &cuts.idle,
                        &cuts.absolute,
                        &cuts.remembered,
                        &filter.tenant,
                        &filter.actor,
                        &limit,
                    ],
                )
                .await?
            {
                candidates.push(row.try_get(0)?);
            }
        }
        let mut pruned = Pruned::default();
        if candidates.is_empty() {
            return Ok(pruned);
        }
        // Each task under its advisory lock, as a charge takes it; one another transaction
        // holds is left for later.
        let lock = self.lock_key("budget-task:");
        let part = part_of("task");
        let rows = transaction
            .query_prepared(
                &format!(
                    "SELECT task, tenant, actor, started_ms, used_ms, ended_ms, {part}
                     FROM budget_tasks
                     WHERE task IN (
                         SELECT task FROM unnest($1::TEXT[]) AS c (task)
                         WHERE pg_try_advisory_xact_lock(hashtextextended($2 || task, 0)))
                     ORDER BY tenant, actor"
                ),
                &[&candidates, &lock],
            )
            .await?;
        let mut found = Vec::with_capacity(rows.len());
        for row in &rows {
            let task: String = row.try_get(0)?;
            let caller: (String, String) = (row.try_get(1)?, row.try_get(2)?);
            let life = bounds.life(row.try_get(3)?, row.try_get(4)?, row.try_get(5)?, now);
            let part: i32 = row.try_get(6)?;
            found.push((task, caller, life, part));
        }
        // The records past their time are deleted first: the room they give back is there for
        // the tasks ended after them, which would otherwise keep their places.
        found.sort_by_key(|(_, _, life, _)| *life != Life::Forgotten);
        let mut counts = Counts::lock(
            transaction,
            KIND,
            found.iter().map(|(_, caller, _, _)| caller.clone()),
        )
        .await?;
        let (mut ended, mut deleted) = (Vec::new(), Vec::new());
        for (task, caller, life, part) in &found {
            match life {
                Life::Over if counts.ended_room(bounds, caller, *part) => {
                    counts.add(caller, *part, -1, 1);
                    ended.push(task.as_str());
                    pruned.budget_ended += 1;
                }
                Life::Forgotten => {
                    counts.add(caller, *part, 0, -1);
                    deleted.push(task.as_str());
                    pruned.budget_forgotten += 1;
                }
                _ => {}
            }
        }
        transaction
            .execute_prepared(
                "UPDATE budget_tasks SET ended_ms = $2 WHERE task = ANY($1)",
                &[&ended, &now],
            )
            .await?;
        transaction
            .execute_prepared("DELETE FROM budget_tasks WHERE task = ANY($1)", &[&deleted])
            .await?;
        let gone: Vec<&str> = ended.iter().chain(&deleted).copied().collect();
        transaction
            .execute_prepared(
                "DELETE FROM budget_tool_calls WHERE task = ANY($1)",
                &[&gone],
            )
            .await?;
        counts.write(transaction).await?;
        Ok(pruned)
    }

    /// Ends, in a transaction of its own, the counted tasks past their lifetime `filter`
    /// names.
    async fn sweep_budgets(&self, filter: Filter<'_>, limit: i64) -> Result<(), Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        // One sweep at a time: sweeps side by side pick the same candidates, and all but one
        // find them held and end nothing, so that the callers whose shares were full stay
        // refused. Waiting, a sweep then picks the tasks the one before it left.
        self.lock(&transaction, &["budget-sweep"]).await?;
        self.end_budgets(&transaction, now_ms(), filter, limit)
            .await?;
        transaction.commit().await?;
        Ok(())
    }

    /// Forgets the task `task`: its counted calls, its calls per tool, its refusals; its
    /// place goes back to its caller's share.
    async fn forget_budget(&self, task: &str) -> Result<(), Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        self.lock(&transaction, &[&format!("budget-task:{task}")])
            .await?;
        let held = transaction
            .query_opt_prepared(
                "SELECT tenant, actor, ended_ms IS NULL FROM budget_tasks WHERE task = $1",
                &[&task],
            )
            .await?;
        if let Some(row) = held {
            let (tenant, actor, live): (String, String, bool) =
                (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            self.delete_budget(&transaction, task, (&tenant, &actor), live)
                .await?;
        }
        // Its caller's share of the tasks holding refusals has room again.
        transaction
            .execute_prepared(
                "DELETE FROM refusal_shares WHERE (tenant, actor) IN (
                     SELECT tenant, actor FROM budget_refusals WHERE task = $1)",
                &[&task],
            )
            .await?;
        transaction
            .execute_prepared("DELETE FROM budget_refusals WHERE task = $1", &[&task])
            .await?;
        transaction.commit().await?;
        Ok(())
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
                .execute_prepared("DELETE FROM budget_circuits WHERE tool = $1", &[&tool])
                .await?;
            return Ok(());
        }
        let open_until = now_ms().saturating_add(as_sql(breaker.cool_down.as_millis() as u64));
        client
            .execute_prepared(
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
            .execute_prepared(
                "UPDATE budget_tasks
                 SET calls = greatest(calls - 1, 0), cost = greatest(cost - $2, 0)
                 WHERE task = $1 AND ended_ms IS NULL",
                &[&charge.task, &as_sql(charge.cost)],
            )
            .await?;
        transaction
            .execute_prepared(
                "UPDATE budget_tool_calls SET calls = greatest(calls - 1, 0)
                 WHERE task = $1 AND tool = $2",
                &[&charge.task, &charge.tool],
            )
            .await?;
        transaction.commit().await?;
        Ok(())
    }

    /// Counts a refusal of the task of `ctx` now, under the advisory locks of the task and of
    /// its caller's refusals, forgets its refusals outside the window and all but its latest
    /// `limit.refusals`, and returns how many it has within the window. A task holding no
    /// refusals yet takes a place in its caller's share of the tasks holding refusals (its
    /// caller's refusals outside the window are deleted first): a caller at its share counts
    /// nothing, and is marked full (`refusal_shares`) until its oldest task's latest refusal
    /// leaves the window, so that [`refusals_within`](Self::refusals_within) refuses its new
    /// tasks with one lookup.
    async fn count_refusal_now(
        &self,
        ctx: &CallContext,
        limit: &RefusalLimit,
    ) -> Result<i64, Failure> {
        let (task, tenant, actor) = (ctx.task_id(), ctx.tenant().unwrap_or_default(), ctx.actor());
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        self.lock(
            &transaction,
            &[
                &format!("budget-task:{task}"),
                &format!("refusals-of:{tenant}\n{actor}"),
            ],
        )
        .await?;
        let now = now_ms();
        let start = window_start(now, limit);
        transaction
            .execute_prepared(
                "DELETE FROM budget_refusals WHERE task = $1 AND at_ms <= $2",
                &[&task, &start],
            )
            .await?;
        let held: i64 = transaction
            .query_one_prepared(
                "SELECT count(*) FROM budget_refusals WHERE task = $1",
                &[&task],
            )
            .await?
            .try_get(0)?;
        if held == 0 {
            transaction
                .execute_prepared(
                    "DELETE FROM budget_refusals
                     WHERE tenant = $1 AND actor = $2 AND at_ms <= $3",
                    &[&tenant, &actor, &start],
                )
                .await?;
            let held = transaction
                .query_one_prepared(
                    "SELECT count(*), min(latest) FROM (
                         SELECT max(at_ms) AS latest FROM budget_refusals
                         WHERE tenant = $1 AND actor = $2 GROUP BY task) AS tasks",
                    &[&tenant, &actor],
                )
                .await?;
            let (tasks, oldest): (i64, Option<i64>) = (held.try_get(0)?, held.try_get(1)?);
            if tasks >= self.bounds.per_caller() {
                let full_until = oldest
                    .unwrap_or(now)
                    .saturating_add(now.saturating_sub(start));
                transaction
                    .execute_prepared(
                        "INSERT INTO refusal_shares (tenant, actor, full_until_ms)
                         VALUES ($1, $2, $3)
                         ON CONFLICT (tenant, actor) DO UPDATE SET full_until_ms = $3",
                        &[&tenant, &actor, &full_until],
                    )
                    .await?;
                transaction.commit().await?;
                return Ok(0);
            }
            transaction
                .execute_prepared(
                    "DELETE FROM refusal_shares WHERE tenant = $1 AND actor = $2",
                    &[&tenant, &actor],
                )
                .await?;
        }
        transaction
            .execute_prepared(
                "INSERT INTO budget_refusals (task, at_ms, tenant, actor) VALUES ($1, $2, $3, $4)",
                &[&task, &now, &tenant, &actor],
            )
            .await?;
        transaction
            .execute_prepared(
                "DELETE FROM budget_refusals WHERE task = $1 AND ctid NOT IN (
                     SELECT ctid FROM budget_refusals WHERE task = $1
                     ORDER BY at_ms DESC LIMIT $2)",
                &[&task, &as_sql(limit.refusals)],
            )
            .await?;
        let refusals: i64 = transaction
            .query_one_prepared(
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
            .query_opt_prepared(
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

    /// The refusals the task of `ctx` collected within `limit`'s window; for a task holding
    /// none, `budget_share_full` while its caller is marked as holding its whole share of the
    /// tasks holding refusals ([`count_refusal_now`](Self::count_refusal_now)).
    async fn refusals_within(
        &self,
        ctx: &CallContext,
        limit: &RefusalLimit,
    ) -> Result<Result<u64, Rejection>, Failure> {
        let now = now_ms();
        let row = self
            .client()
            .await?
            .query_one_prepared(
                "SELECT held, CASE WHEN held = 0 THEN (
                     SELECT full_until_ms FROM refusal_shares
                     WHERE tenant = $3 AND actor = $4) END
                 FROM (SELECT count(*) AS held FROM budget_refusals
                       WHERE task = $1 AND at_ms > $2) AS task",
                &[
                    &ctx.task_id(),
                    &window_start(now, limit),
                    &ctx.tenant().unwrap_or_default(),
                    &ctx.actor(),
                ],
            )
            .await?;
        let (refusals, full_until): (i64, Option<i64>) = (row.try_get(0)?, row.try_get(1)?);
        Ok(if full_until.is_some_and(|until| now < until) {
            Err(Full::Share.refusal(KIND, &self.bounds))
        } else {
            Ok(from_sql(refusals))
        })
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

    fn forget_task<'a>(&'a self, task: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(error) = self.forget_budget(task).await {
                failed(&format!("forget the budget of task {task}"), &error);
            }
        })
    }

    fn count_refusal<'a>(
        &'a self,
        ctx: &'a CallContext,
        limit: &'a RefusalLimit,
    ) -> BoxFuture<'a, u64> {
        Box::pin(async move {
            self.count_refusal_now(ctx, limit)
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
        ctx: &'a CallContext,
        limit: &'a RefusalLimit,
    ) -> BoxFuture<'a, Result<u64, Rejection>> {
        Box::pin(async move {
            self.refusals_within(ctx, limit)
                .await
                .unwrap_or_else(|error| {
                    failed("read a task's refusals", &error);
                    Err(refusals_unknown())
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
