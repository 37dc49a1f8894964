//! The callers' shares of the provenance and budget stores in PostgreSQL: one row per caller
//! holding a task (`task_callers`), the store's totals in 16 parts (`task_totals`, a task's
//! part taken from its id), so that new tasks of different callers rarely wait for each
//! other. A new task takes its place with conditional updates (`… WHERE live < share`) in the
//! transaction that records it: the caller's row, then its part's row, each locked until the
//! transaction ends, so two workers never both take a caller's last place.
//!
//! Locks are taken in one order: a task's row (or its advisory lock), its caller's row, a part
//! of the totals, a part of the marks. A sweep that ends tasks takes the tasks' rows it can
//! without waiting (`SKIP LOCKED`, `pg_try_advisory_xact_lock`), then the callers' rows in
//! the order of their keys, then every part in order: no two transactions wait for each other
//! in a circle.

use std::collections::BTreeMap;

use deadpool_postgres::Transaction;

use super::prepared::Prepared;
use super::{PostgresStore, failed};
use crate::tasks::{Bounds, CallerUsage, Full, Kind, Pruned, caller_entry, caller_of_json};
use crate::values::{Failure, now_ms};

/// The parts the totals are kept in.
pub(super) const PARTS: i64 = 16;

/// Which tasks a sweep ends: those of a tenant, an actor, a task id, where given.
#[derive(Default, Clone, Copy)]
pub(super) struct Filter<'a> {
    pub(super) tenant: Option<&'a str>,
    pub(super) actor: Option<&'a str>,
    pub(super) task: Option<&'a str>,
}

/// The part of the totals (and of the marks) the task in `$n` falls in, as SQL.
pub(super) fn part_of(parameter: &str) -> String {
    format!("(hashtextextended({parameter}, 0) & 15)::INTEGER")
}

/// Takes a place for a new task `task` of `caller` in `kind`: in its caller's share, then
/// in the totals; `Some(full)` when there is none (the transaction must then be rolled back:
/// it may have taken the caller's place).
pub(super) async fn take_place(
    transaction: &Transaction<'_>,
    bounds: &Bounds,
    kind: Kind,
    (tenant, actor): (&str, &str),
    task: &str,
) -> Result<Option<Full>, Failure> {
    let taken = transaction
        .query_opt_prepared(
            "INSERT INTO task_callers (store, tenant, actor, live, ended) VALUES ($1, $2, $3, 1, 0)
             ON CONFLICT (store, tenant, actor) DO UPDATE SET live = task_callers.live + 1
                 WHERE task_callers.live < $4
             RETURNING live",
            &[&kind.name(), &tenant, &actor, &bounds.per_caller()],
        )
        .await?;
    if taken.is_none() {
        return Ok(Some(Full::Share));
    }
    let part = part_of("$2");
    let counted = transaction
        .execute_prepared(
            &format!(
                "UPDATE task_totals SET live = live + 1
                 WHERE store = $1 AND part = {part} AND live < $3"
            ),
            &[&kind.name(), &task, &bounds.per_part(PARTS)],
        )
        .await?;
    Ok((counted == 0).then_some(Full::Store))
}

/// Adds `live` live tasks and `ended` records to `caller`'s count in `kind`, and to the part
/// of the totals of `task` (either may be negative); a caller left holding nothing is not
/// kept.
pub(super) async fn adjust(
    transaction: &Transaction<'_>,
    kind: Kind,
    (tenant, actor): (&str, &str),
    task: &str,
    live: i64,
    ended: i64,
) -> Result<(), Failure> {
    adjust_caller(transaction, kind, (tenant, actor), live, ended).await?;
    let part = part_of("$2");
    transaction
        .execute_prepared(
            &format!(
                "UPDATE task_totals SET live = greatest(live + $3::BIGINT, 0),
                     ended = greatest(ended + $4::BIGINT, 0)
                 WHERE store = $1 AND part = {part}"
            ),
            &[&kind.name(), &task, &live, &ended],
        )
        .await?;
    Ok(())
}

/// Adds `live` and `ended` to `caller`'s count in `kind`.
pub(super) async fn adjust_caller(
    transaction: &Transaction<'_>,
    kind: Kind,
    (tenant, actor): (&str, &str),
    live: i64,
    ended: i64,
) -> Result<(), Failure> {
    if live == 0 && ended == 0 {
        return Ok(());
    }
    transaction
        .execute_prepared(
            "INSERT INTO task_callers (store, tenant, actor, live, ended)
             VALUES ($1, $2, $3, greatest($4::BIGINT, 0), greatest($5::BIGINT, 0))
             ON CONFLICT (store, tenant, actor) DO UPDATE SET
                 live = greatest(task_callers.live + $4::BIGINT, 0),
                 ended = greatest(task_callers.ended + $5::BIGINT, 0)",
            &[&kind.name(), &tenant, &actor, &live, &ended],
        )
        .await?;
    transaction
        .execute_prepared(
            "DELETE FROM task_callers
             WHERE store = $1 AND tenant = $2 AND actor = $3 AND live = 0 AND ended = 0",
            &[&kind.name(), &tenant, &actor],
        )
        .await?;
    Ok(())
}

/// The counts a sweep holds locked: the callers' records, the parts' live tasks and records,
/// and what it changes in them.
pub(super) struct Counts {
    kind: Kind,
    /// (tenant, actor) → (ended records held, live change, ended change).
    callers: BTreeMap<(String, String), (i64, i64, i64)>,
    /// part → (ended records held, live change, ended change).
    parts: BTreeMap<i32, (i64, i64, i64)>,
}

impl Counts {
    /// Locks the rows of `callers` (in the order of their keys) and every part of `kind`.
    pub(super) async fn lock(
        transaction: &Transaction<'_>,
        kind: Kind,
        callers: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, Failure> {
        let mut counts = Counts {
            kind,
            callers: callers
                .into_iter()
                .map(|caller| (caller, (0, 0, 0)))
                .collect(),
            parts: BTreeMap::new(),
        };
        let (tenants, actors): (Vec<&str>, Vec<&str>) = counts
            .callers
            .keys()
            .map(|(tenant, actor)| (tenant.as_str(), actor.as_str()))
            .unzip();
        let rows = transaction
            .query_prepared(
                "SELECT tenant, actor, ended FROM task_callers
                 WHERE store = $1 AND (tenant, actor) IN (
                     SELECT * FROM unnest($2::TEXT[], $3::TEXT[]))
                 ORDER BY tenant, actor FOR UPDATE",
                &[&kind.name(), &tenants, &actors],
            )
            .await?;
        for row in rows {
            let key = (row.try_get(0)?, row.try_get(1)?);
            if let Some(count) = counts.callers.get_mut(&key) {
                count.0 = row.try_get(2)?;
            }
        }
        let rows = transaction
            .query_prepared(
                "SELECT part, ended FROM task_totals WHERE store = $1 ORDER BY part FOR UPDATE",
                &[&kind.name()],
            )
            .await?;
        for row in rows {
            counts
                .parts
                .insert(row.try_get(0)?, (row.try_get(1)?, 0, 0));
        }
        Ok(counts)
    }

    /// Whether one more record fits for `caller` and in `part`.
    pub(super) fn ended_room(&self, bounds: &Bounds, caller: &(String, String), part: i32) -> bool {
        let held = self
            .callers
            .get(caller)
            .map_or(0, |count| count.0 + count.2);
        let in_part = self.parts.get(&part).map_or(0, |count| count.0 + count.2);
        held < bounds.ended_per_caller() && in_part < bounds.ended_per_part(PARTS)
    }

    /// Notes `live` and `ended` more for `caller` in `part`.
    pub(super) fn add(&mut self, caller: &(String, String), part: i32, live: i64, ended: i64) {
        let count = self.callers.entry(caller.clone()).or_default();
        count.1 += live;
        count.2 += ended;
        let count = self.parts.entry(part).or_default();
        count.1 += live;
        count.2 += ended;
    }

    /// Writes the changes noted.
    pub(super) async fn write(self, transaction: &Transaction<'_>) -> Result<(), Failure> {
        for ((tenant, actor), (_, live, ended)) in &self.callers {
            adjust_caller(transaction, self.kind, (tenant, actor), *live, *ended).await?;
        }
        for (part, (_, live, ended)) in &self.parts {
            if *live != 0 || *ended != 0 {
                transaction
                    .execute_prepared(
                        "UPDATE task_totals SET live = greatest(live + $3::BIGINT, 0),
                             ended = greatest(ended + $4::BIGINT, 0)
                         WHERE store = $1 AND part = $2",
                        &[&self.kind.name(), part, live, ended],
                    )
                    .await?;
            }
        }
        Ok(())
    }
}

/// The count of a caller's usage a query adds up.
type Field = fn(&mut CallerUsage) -> &mut u64;

/// Sums `select`'s rows (tenant, actor, count) into the callers' `field`.
async fn add_up(
    transaction: &Transaction<'_>,
    callers: &mut BTreeMap<(String, String), CallerUsage>,
    select: &str,
    field: Field,
) -> Result<(), Failure> {
    for row in transaction.query_prepared(select, &[]).await? {
        let (tenant, actor): (String, String) = (row.try_get(0)?, row.try_get(1)?);
        let count: i64 = row.try_get(2)?;
        *field(caller_entry(callers, &tenant, &actor)) += u64::try_from(count).unwrap_or(0);
    }
    Ok(())
}

/// Counts the rows of `select` (one JSON column holding an actor and a tenant) per caller.
async fn add_up_json(
    transaction: &Transaction<'_>,
    callers: &mut BTreeMap<(String, String), CallerUsage>,
    select: &str,
    field: Field,
) -> Result<(), Failure> {
    for row in transaction.query_prepared(select, &[]).await? {
        let json: Option<String> = row.try_get(0)?;
        let (tenant, actor) = json.as_deref().and_then(caller_of_json).unwrap_or_default();
        *field(caller_entry(callers, &tenant, &actor)) += 1;
    }
    Ok(())
}

impl PostgresStore {
    async fn usage_now(&self) -> Result<Vec<CallerUsage>, Failure> {
        let mut client = self.client().await?;
        // One snapshot for every count.
        let transaction = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let mut callers = BTreeMap::new();
        let counts: [(&str, Field); 6] = [
            (
                "SELECT tenant, actor, count(*) FROM provenance_tasks WHERE ended_ms IS NULL
                 GROUP BY tenant, actor",
                |usage| &mut usage.provenance_tasks,
            ),
            (
                "SELECT tenant, actor, count(*) FROM provenance_tasks WHERE ended_ms IS NOT NULL
                 GROUP BY tenant, actor",
                |usage| &mut usage.provenance_ended,
            ),
            (
                "SELECT tenant, actor, sum(text_bytes)::BIGINT FROM provenance_tasks
                 GROUP BY tenant, actor",
                |usage| &mut usage.source_bytes,
            ),
            (
                "SELECT tenant, actor, count(*) FROM budget_tasks WHERE ended_ms IS NULL
                 GROUP BY tenant, actor",
                |usage| &mut usage.budget_tasks,
            ),
            (
                "SELECT tenant, actor, count(*) FROM budget_tasks WHERE ended_ms IS NOT NULL
                 GROUP BY tenant, actor",
                |usage| &mut usage.budget_ended,
            ),
            (
                "SELECT coalesce(tenant, ''), actor, count(*) FROM runs GROUP BY tenant, actor",
                |usage| &mut usage.runs,
            ),
        ];
        for (select, field) in counts {
            add_up(&transaction, &mut callers, select, field).await?;
        }
        add_up_json(
            &transaction,
            &mut callers,
            "SELECT call_key FROM claims WHERE NOT settled",
            |usage| &mut usage.open_claims,
        )
        .await?;
        add_up_json(
            &transaction,
            &mut callers,
            "SELECT ticket FROM pending_calls",
            |usage| &mut usage.pending_approvals,
        )
        .await?;
        transaction.commit().await?;
        Ok(callers.into_values().collect())
    }

    /// What each caller (tenant, actor) holds in the store.
    pub async fn usage(&self) -> std::io::Result<Vec<CallerUsage>> {
        self.usage_now().await.map_err(std::io::Error::other)
    }

    /// Deletes what the retention allows.
    async fn prune_retained(&self, transaction: &Transaction<'_>) -> Result<Pruned, Failure> {
        let now = now_ms();
        let cut = self.bounds.retained(now);
        let runs = transaction
            .execute_prepared(
                "DELETE FROM runs WHERE updated_ms <= $1 AND held_until_ms <= $2",
                &[&cut.runs, &now],
            )
            .await?;
        let claims = transaction
            .execute_prepared(
                "DELETE FROM claims WHERE settled AND claimed_ms <= $1",
                &[&cut.claims],
            )
            .await?;
        let approvals = transaction
            .execute_prepared(
                "DELETE FROM pending_calls WHERE expires_ms <= $1 AND leased_until_ms <= $2",
                &[&cut.approvals, &now],
            )
            .await?;
        let windows = transaction
            .execute_prepared(
                "DELETE FROM budget_actor_calls WHERE at_ms <= $1",
                &[&cut.windows],
            )
            .await?
            + transaction
                .execute_prepared(
                    "DELETE FROM budget_refusals WHERE at_ms <= $1",
                    &[&cut.windows],
                )
                .await?;
        // Whose share of the tasks holding refusals is full is judged again at their next
        // refusal.
        transaction
            .execute_prepared("DELETE FROM refusal_shares", &[])
            .await?;
        Ok(Pruned {
            runs,
            claims,
            approvals,
            window_rows: windows,
            ..Pruned::default()
        })
    }

    async fn prune_now(&self, dry_run: bool) -> Result<Pruned, Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        let now = now_ms();
        let mut pruned = self
            .end_sources(&transaction, now, Filter::default(), i64::MAX)
            .await?;
        // Under the budget sweeps' lock, as each of them: beside one, a prune would find its
        // tasks held and end none of them.
        self.lock(&transaction, &["budget-sweep"]).await?;
        pruned.add(
            &self
                .end_budgets(&transaction, now, Filter::default(), i64::MAX)
                .await?,
        );
        pruned.add(&self.prune_retained(&transaction).await?);
        if dry_run {
            transaction.rollback().await?;
        } else {
            transaction.commit().await?;
        }
        Ok(pruned)
    }

    /// Ends the tasks past their lifetime, forgets the records past their time, and deletes
    /// what the retention allows, in one transaction; with `dry_run`, rolls it back and only
    /// tells what it would have done.
    pub async fn prune(&self, dry_run: bool) -> std::io::Result<Pruned> {
        self.prune_now(dry_run).await.map_err(|error| {
            failed("prune", &error);
            std::io::Error::other(error)
        })
    }
}
