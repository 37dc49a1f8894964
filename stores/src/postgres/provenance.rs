//! A task's sources in PostgreSQL, for every worker on the database.
//!
//! Numbering: a global sequence would not do, since a transaction given a later id can commit
//! before one given an earlier id, and a reader given the later one would never look back
//! for the earlier. So a source takes its number from its task's row in `provenance_tasks`,
//! in the transaction that inserts it: the upsert that raises the task's number locks that
//! row until the transaction ends. A second writer of the task waits on the lock, and then
//! (`ON CONFLICT DO UPDATE` acts on the row's latest committed version, whatever the
//! statement's snapshot) takes the number after the one just committed. So number `n + 1` is
//! taken only once `n` is committed, and a reader whose snapshot holds `n + 1` holds every
//! number below it: no source appears later below one a reader was given. A writer that
//! fails rolls its number back with it, and the next writer takes the same number: no gap.
//! Writers of different tasks lock different rows and do not wait for each other.

use std::collections::BTreeMap;

use deadpool_postgres::Transaction;
use portcullis_core::{BoxFuture, CallContext, ProvenanceStore, Rejection, SourceRecord};
use tokio_postgres::IsolationLevel;

use super::prepared::Prepared;
use super::tasks::{Counts, Filter, PARTS, adjust, part_of, take_place};
use super::{PostgresStore, failed};
use crate::sources::{StoredSource, read_sources, task_of, unreadable, unrecorded};
use crate::tasks::{Full, Kind, Life, Pruned, SWEEP_BATCH};
use crate::values::{Failure, as_sql, now_ms};

const KIND: Kind = Kind::Provenance;

/// A source as its row holds it: number, origin, text.
type SourceRow = (i64, String, String);

/// The sources of a task as read: the number its kept sources begin at, where it is in its
/// life and when it was last used, and its sources after the number asked for, as rows.
type Read = Option<(i64, Life, i64, Vec<SourceRow>)>;

impl PostgresStore {
    /// Records `source`, or refuses it: `Ok(Err(full))` when the task is new (or begins a new
    /// life) and has no place; the transaction is then rolled back.
    async fn try_record(
        &self,
        ctx: &CallContext,
        source: &SourceRecord,
    ) -> Result<Result<u64, Full>, Failure> {
        let task = task_of(ctx);
        let (tenant, id) = task;
        let actor = ctx.actor();
        let bounds = &self.bounds;
        let mut client = self.client().await?;
        // Read committed whatever the server's default: the upsert below must see the number
        // the writer before it committed, where a stricter level would refuse to.
        let transaction = client
            .build_transaction()
            .isolation_level(IsolationLevel::ReadCommitted)
            .start()
            .await?;
        let now = now_ms();
        let cuts = bounds.cuts(now);
        // A live task takes its next number here; a new one is inserted, ended at -1 until
        // it has a place; any other is locked, unchanged.
        let taken = transaction
            .query_opt_prepared(
                "INSERT INTO provenance_tasks (task, tenant, actor, number, first_number,
                     text_bytes, started_ms, used_ms, ended_ms)
                 VALUES ($1, $2, $3, 0, 0, 0, $4, $4, -1)
                 ON CONFLICT (task, tenant) DO UPDATE SET number = provenance_tasks.number + 1,
                     used_ms = $4
                 WHERE provenance_tasks.ended_ms IS NULL AND provenance_tasks.used_ms > $5
                     AND provenance_tasks.started_ms > $6
                 RETURNING number, text_bytes, ended_ms",
                &[&id, &tenant, &actor, &now, &cuts.idle, &cuts.absolute],
            )
            .await?;
        // The source's number, the bytes the task keeps before it, and, for a new life, the
        // number its kept sources begin at.
        let (number, kept, new_life) = match taken {
            Some(row) if row.try_get::<_, Option<i64>>(2)?.is_none() => {
                (row.try_get(0)?, row.try_get(1)?, None)
            }
            Some(_) => {
                let mark: i64 = transaction
                    .query_one_prepared(
                        &format!(
                            "SELECT coalesce(max(number), 0) FROM provenance_marks
                             WHERE part = {}",
                            part_of("$1")
                        ),
                        &[&id],
                    )
                    .await?
                    .try_get(0)?;
                (mark + 1, 0, Some(mark + 1))
            }
            None => {
                let row = transaction
                    .query_one_prepared(
                        "SELECT actor, number, first_number, started_ms, used_ms, ended_ms
                         FROM provenance_tasks WHERE task = $1 AND tenant = $2 FOR UPDATE",
                        &[&id, &tenant],
                    )
                    .await?;
                let held: String = row.try_get(0)?;
                let (last, first): (i64, i64) = (row.try_get(1)?, row.try_get(2)?);
                let ended: Option<i64> = row.try_get(5)?;
                let life = bounds.life(row.try_get(3)?, row.try_get(4)?, ended, now);
                let caller = (tenant, held.as_str());
                match life {
                    Life::Live => (last + 1, self.kept_bytes(&transaction, task).await?, None),
                    Life::Over => {
                        // Ended now, and begun again at once: its place goes back first.
                        adjust(&transaction, KIND, caller, id, -1, 0).await?;
                        match self.end_now(&transaction, task, first).await? {
                            Some(marker) => (marker + 1, 0, Some(marker)),
                            None => (last + 1, 0, Some(last + 1)),
                        }
                    }
                    Life::Ended => {
                        adjust(&transaction, KIND, caller, id, 0, -1).await?;
                        (last + 1, 0, Some(first))
                    }
                    Life::Forgotten => {
                        adjust(&transaction, KIND, caller, id, 0, -1).await?;
                        transaction
                            .execute_prepared(
                                "DELETE FROM provenance_sources WHERE task = $1 AND tenant = $2",
                                &[&id, &tenant],
                            )
                            .await?;
                        (last + 1, 0, Some(last + 1))
                    }
                }
            }
        };
        if new_life.is_some()
            && let Some(full) = take_place(&transaction, bounds, KIND, (tenant, actor), id).await?
        {
            return Ok(Err(full));
        }
        let stored = StoredSource::of(&self.sealing, task, number, source, kept)?;
        let (first, restart) = match new_life {
            Some(first) => (first, true),
            None => (0, false),
        };
        transaction
            .execute_prepared(
                "WITH counted AS (
                     UPDATE provenance_tasks SET number = $3, used_ms = $7,
                         text_bytes = CASE WHEN $9::BOOLEAN THEN $6::BIGINT ELSE text_bytes + $6::BIGINT END,
                         actor = CASE WHEN $9::BOOLEAN THEN $8::TEXT ELSE actor END,
                         first_number = CASE WHEN $9::BOOLEAN THEN $10::BIGINT ELSE first_number END,
                         started_ms = CASE WHEN $9::BOOLEAN THEN $7::BIGINT ELSE started_ms END,
                         ended_ms = NULL
                     WHERE task = $1 AND tenant = $2
                 )
                 INSERT INTO provenance_sources (task, tenant, number, origin, text)
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    &id,
                    &tenant,
                    &number,
                    &stored.origin,
                    &stored.text,
                    &stored.text_bytes,
                    &now,
                    &actor,
                    &restart,
                    &first,
                ],
            )
            .await?;
        transaction.commit().await?;
        Ok(Ok(u64::try_from(number)?))
    }

    /// The bytes of text the task keeps.
    async fn kept_bytes(
        &self,
        transaction: &Transaction<'_>,
        (tenant, task): (&str, &str),
    ) -> Result<i64, Failure> {
        Ok(transaction
            .query_one_prepared(
                "SELECT text_bytes FROM provenance_tasks WHERE task = $1 AND tenant = $2",
                &[&task, &tenant],
            )
            .await?
            .try_get(0)?)
    }

    /// Ends the task, locked, whose kept sources begin at `first`, to begin it again at once:
    /// its sources read and checked, then deleted; a tainted task's first untrusted source
    /// stands for them, its number returned. Its row is left for the caller to write.
    async fn end_now(
        &self,
        transaction: &Transaction<'_>,
        task: (&str, &str),
        first: i64,
    ) -> Result<Option<i64>, Failure> {
        let (tenant, id) = task;
        let rows = transaction
            .query_prepared(
                "SELECT number, origin, text FROM provenance_sources
                 WHERE task = $1 AND tenant = $2 ORDER BY number",
                &[&id, &tenant],
            )
            .await?;
        let rows = rows
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()?;
        let last = rows.last().map_or(first - 1, |row| row.0);
        let sources = read_sources(&self.sealing, task, 0, first, rows)
            .map_err(|refusal| Failure::from(refusal.message().to_owned()))?;
        let untrusted = sources
            .iter()
            .map(|(_, source)| &source.origin)
            .find(|origin| !origin.is_trusted())
            .cloned();
        transaction
            .execute_prepared(
                "DELETE FROM provenance_sources WHERE task = $1 AND tenant = $2",
                &[&id, &tenant],
            )
            .await?;
        let Some(origin) = untrusted else {
            return Ok(None);
        };
        let marker = last + 1;
        let stored = StoredSource::standing_for(&self.sealing, task, marker, &origin)?;
        transaction
            .execute_prepared(
                "INSERT INTO provenance_sources (task, tenant, number, origin, text)
                 VALUES ($1, $2, $3, $4, $5)",
                &[&id, &tenant, &marker, &stored.origin, &stored.text],
            )
            .await?;
        Ok(Some(marker))
    }

    /// Ends the tasks past their lifetime at `now` that `filter` names (at most `limit`; the
    /// ones another transaction holds are left for later), and deletes the records of ended
    /// tasks past their time: see [`crate::tasks`].
    pub(super) async fn end_sources(
        &self,
        transaction: &Transaction<'_>,
        now: i64,
        filter: Filter<'_>,
        limit: i64,
    ) -> Result<Pruned, Failure> {
        let bounds = &self.bounds;
        let cuts = bounds.cuts(now);
        let part = part_of("task");
        // The live tasks past their lifetime, then the records past their time: at most
        // `limit` of each.
        let mut rows = Vec::new();
        for (ended, condition) in [
            (
                false,
                "ended_ms IS NULL AND (used_ms <= $1 OR started_ms <= $2) AND $3::BIGINT = $3",
            ),
            (
                true,
                "ended_ms >= 0 AND ended_ms <= $3 AND $1::BIGINT = $1 AND $2::BIGINT = $2",
            ),
        ] {
            // A text statement, planned for its values: a plan made once for any filter would
            // read the whole table where the filter names one caller or one task.
            rows.extend(
                transaction
                    .query(
                        &format!(
                            "SELECT task, tenant, actor, number, first_number, {ended}, {part}
                             FROM provenance_tasks
                             WHERE {condition}
                                 AND ($4::TEXT IS NULL OR tenant = $4)
                                 AND ($5::TEXT IS NULL OR actor = $5)
                                 AND ($6::TEXT IS NULL OR task = $6)
                             ORDER BY tenant, actor LIMIT $7 FOR UPDATE SKIP LOCKED"
                        ),
                        &[
                            &cuts.idle,
                            &cuts.absolute,
                            &cuts.remembered,
                            &filter.tenant,
                            &filter.actor,
                            &filter.task,
                            &limit,
                        ],
                    )
                    .await?,
            );
        }
        let mut pruned = Pruned::default();
        if rows.is_empty() {
            return Ok(pruned);
        }
        struct Found {
            task: String,
            tenant: String,
            caller: (String, String),
            number: i64,
            first: i64,
            ended: bool,
            part: i32,
        }
        let mut found = rows
            .iter()
            .map(|row| {
                let tenant: String = row.try_get(1)?;
                Ok(Found {
                    task: row.try_get(0)?,
                    caller: (tenant.clone(), row.try_get(2)?),
                    tenant,
                    number: row.try_get(3)?,
                    first: row.try_get(4)?,
                    ended: row.try_get(5)?,
                    part: row.try_get(6)?,
                })
            })
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()?;
        // The records past their time are deleted first: the room they give back is there
        // for the tasks ended after them, which would otherwise keep their places.
        found.sort_by_key(|found| !found.ended);
        let mut counts = Counts::lock(
            transaction,
            KIND,
            found.iter().map(|found| found.caller.clone()),
        )
        .await?;
        let (over_tasks, over_tenants): (Vec<&str>, Vec<&str>) = found
            .iter()
            .filter(|found| !found.ended)
            .map(|found| (found.task.as_str(), found.tenant.as_str()))
            .unzip();
        let mut sources: BTreeMap<(String, String), Vec<SourceRow>> = BTreeMap::new();
        for row in transaction
            .query_prepared(
                "SELECT task, tenant, number, origin, text FROM provenance_sources
                 WHERE (task, tenant) IN (SELECT * FROM unnest($1::TEXT[], $2::TEXT[]))
                 ORDER BY task, tenant, number",
                &[&over_tasks, &over_tenants],
            )
            .await?
        {
            sources
                .entry((row.try_get(0)?, row.try_get(1)?))
                .or_default()
                .push((row.try_get(2)?, row.try_get(3)?, row.try_get(4)?));
        }
        // What to delete (task, tenant), the records to write (task, tenant, number, origin,
        // text), the marks to raise (part → number).
        let (mut deleted, mut marked) = (Vec::new(), Vec::new());
        let mut marks: BTreeMap<i32, i64> = BTreeMap::new();
        for found in &found {
            let key = (found.task.clone(), found.tenant.clone());
            if found.ended {
                counts.add(&found.caller, found.part, 0, -1);
                deleted.push(key);
                pruned.provenance_forgotten += 1;
                let mark = marks.entry(found.part).or_default();
                *mark = (*mark).max(found.number);
                continue;
            }
            let rows = sources.remove(&key).unwrap_or_default();
            let task = (found.tenant.as_str(), found.task.as_str());
            let read = match read_sources(&self.sealing, task, 0, found.first, rows) {
                Ok(read) => read,
                Err(refusal) => {
                    failed(&format!("end task {}", found.task), &refusal.message());
                    continue;
                }
            };
            let untrusted = read
                .iter()
                .map(|(_, source)| &source.origin)
                .find(|origin| !origin.is_trusted());
            match untrusted {
                None => {
                    counts.add(&found.caller, found.part, -1, 0);
                    deleted.push(key);
                    pruned.provenance_deleted += 1;
                    let mark = marks.entry(found.part).or_default();
                    *mark = (*mark).max(found.number);
                }
                Some(origin) if counts.ended_room(bounds, &found.caller, found.part) => {
                    counts.add(&found.caller, found.part, -1, 1);
                    let marker = found.number + 1;
                    let stored = StoredSource::standing_for(&self.sealing, task, marker, origin)?;
                    marked.push((key, marker, stored));
                    pruned.provenance_ended += 1;
                }
                // Its caller holds all the records it may: it keeps its place.
                Some(_) => {}
            }
        }
        let (tasks, tenants): (Vec<&str>, Vec<&str>) = deleted
            .iter()
            .chain(marked.iter().map(|(key, _, _)| key))
            .map(|(task, tenant)| (task.as_str(), tenant.as_str()))
            .unzip();
        pruned.sources_deleted += transaction
            .execute_prepared(
                "DELETE FROM provenance_sources
                 WHERE (task, tenant) IN (SELECT * FROM unnest($1::TEXT[], $2::TEXT[]))",
                &[&tasks, &tenants],
            )
            .await?;
        let (tasks, tenants): (Vec<&str>, Vec<&str>) = deleted
            .iter()
            .map(|(task, tenant)| (task.as_str(), tenant.as_str()))
            .unzip();
        transaction
            .execute_prepared(
                "DELETE FROM provenance_tasks
                 WHERE (task, tenant) IN (SELECT * FROM unnest($1::TEXT[], $2::TEXT[]))",
                &[&tasks, &tenants],
            )
            .await?;
        if !marked.is_empty() {
            let tasks: Vec<&str> = marked
                .iter()
                .map(|((task, _), _, _)| task.as_str())
                .collect();
            let tenants: Vec<&str> = marked
                .iter()
                .map(|((_, tenant), _, _)| tenant.as_str())
                .collect();
            let numbers: Vec<i64> = marked.iter().map(|(_, number, _)| *number).collect();
            let origins: Vec<&str> = marked
                .iter()
                .map(|(_, _, stored)| stored.origin.as_str())
                .collect();
            let texts: Vec<&str> = marked
                .iter()
                .map(|(_, _, stored)| stored.text.as_str())
                .collect();
            transaction
                .execute_prepared(
                    "INSERT INTO provenance_sources (task, tenant, number, origin, text)
                     SELECT * FROM unnest($1::TEXT[], $2::TEXT[], $3::BIGINT[], $4::TEXT[],
                         $5::TEXT[])",
                    &[&tasks, &tenants, &numbers, &origins, &texts],
                )
                .await?;
            transaction
                .execute_prepared(
                    "UPDATE provenance_tasks AS t SET number = m.number, first_number = m.number,
                         text_bytes = 0, ended_ms = $4
                     FROM unnest($1::TEXT[], $2::TEXT[], $3::BIGINT[]) AS m (task, tenant, number)
                     WHERE t.task = m.task AND t.tenant = m.tenant",
                    &[&tasks, &tenants, &numbers, &now],
                )
                .await?;
        }
        counts.write(transaction).await?;
        for (part, number) in marks {
            transaction
                .execute_prepared(
                    "INSERT INTO provenance_marks (part, number) VALUES ($1, $2)
                     ON CONFLICT (part) DO UPDATE SET
                         number = greatest(provenance_marks.number, $2)",
                    &[&part, &number],
                )
                .await?;
        }
        Ok(pruned)
    }

    /// Ends, in a transaction of its own, the tasks past their lifetime `filter` names.
    async fn sweep_sources(&self, filter: Filter<'_>, limit: i64) -> Result<(), Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        self.end_sources(&transaction, now_ms(), filter, limit)
            .await?;
        transaction.commit().await?;
        Ok(())
    }

    /// Ends the tasks past their lifetime that hold the places a new task of `ctx` found
    /// `full`: a batch of its caller's, or (the store full) of anyone's.
    async fn make_room(&self, ctx: &CallContext, full: Full) -> Result<(), Failure> {
        let filter = match full {
            Full::Share => Filter {
                tenant: Some(task_of(ctx).0),
                actor: Some(ctx.actor()),
                task: None,
            },
            Full::Store => Filter::default(),
        };
        self.sweep_sources(filter, SWEEP_BATCH).await
    }

    /// Whether the task of `ctx` holds a place, or a new one fits: `Err(full)` if not. It
    /// takes nothing.
    async fn try_admit(&self, ctx: &CallContext) -> Result<Result<(), Full>, Failure> {
        let (tenant, id) = task_of(ctx);
        let row = self
            .client()
            .await?
            .query_one_prepared(
                &format!(
                    "SELECT EXISTS (SELECT 1 FROM provenance_tasks
                         WHERE task = $1 AND tenant = $2 AND ended_ms IS NULL),
                     coalesce((SELECT live FROM task_callers
                         WHERE store = $4 AND tenant = $2 AND actor = $3), 0),
                     coalesce((SELECT live FROM task_totals
                         WHERE store = $4 AND part = {}), 0)",
                    part_of("$1")
                ),
                &[&id, &tenant, &ctx.actor(), &KIND.name()],
            )
            .await?;
        let (held, callers, part): (bool, i64, i64) =
            (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
        Ok(if held {
            Ok(())
        } else if callers >= self.bounds.per_caller() {
            Err(Full::Share)
        } else if part >= self.bounds.per_part(PARTS) {
            Err(Full::Store)
        } else {
            Ok(())
        })
    }

    async fn admit_task(&self, ctx: &CallContext) -> Result<Result<(), Rejection>, Failure> {
        let mut admitted = self.try_admit(ctx).await?;
        if let Err(full) = admitted {
            self.make_room(ctx, full).await?;
            admitted = self.try_admit(ctx).await?;
        }
        Ok(admitted.map_err(|full| full.refusal(KIND, &self.bounds)))
    }

    async fn record_source(
        &self,
        ctx: &CallContext,
        source: &SourceRecord,
    ) -> Result<Result<u64, Rejection>, Failure> {
        let bounds = &self.bounds;
        let mut recorded = self.try_record(ctx, source).await?;
        if let Err(full) = recorded {
            self.make_room(ctx, full).await?;
            recorded = self.try_record(ctx, source).await?;
        }
        if bounds.sweep_due(KIND, now_ms())
            && let Err(error) = self.sweep_sources(Filter::default(), SWEEP_BATCH).await
        {
            failed("end the tasks past their lifetime", &error);
        }
        Ok(recorded.map_err(|full| full.refusal(KIND, bounds)))
    }

    async fn read_since(&self, (tenant, task): (&str, &str), after: u64) -> Result<Read, Failure> {
        let rows = self
            .client()
            .await?
            .query_prepared(
                "SELECT t.first_number, t.started_ms, t.used_ms, t.ended_ms,
                     s.number, s.origin, s.text
                 FROM provenance_tasks t LEFT JOIN provenance_sources s
                     ON s.task = t.task AND s.tenant = t.tenant AND s.number > $3
                 WHERE t.task = $1 AND t.tenant = $2 ORDER BY s.number",
                &[&task, &tenant, &as_sql(after)],
            )
            .await?;
        let Some(head) = rows.first() else {
            return Ok(None);
        };
        let used: i64 = head.try_get(2)?;
        let life = self
            .bounds
            .life(head.try_get(1)?, used, head.try_get(3)?, now_ms());
        let mut sources = Vec::with_capacity(rows.len());
        for row in &rows {
            if let Some(number) = row.try_get::<_, Option<i64>>(4)? {
                sources.push((number, row.try_get(5)?, row.try_get(6)?));
            }
        }
        Ok(Some((head.try_get(0)?, life, used, sources)))
    }

    async fn sources_since(
        &self,
        task: (&str, &str),
        after: u64,
    ) -> Result<Vec<(u64, SourceRecord)>, Rejection> {
        let unreadable_now = |error: &Failure| unreadable(task.1, error);
        let mut read = self
            .read_since(task, after)
            .await
            .map_err(|error| unreadable_now(&error))?;
        if let Some((_, Life::Over | Life::Forgotten, _, _)) = read {
            let filter = Filter {
                tenant: Some(task.0),
                actor: None,
                task: Some(task.1),
            };
            self.sweep_sources(filter, 1)
                .await
                .map_err(|error| unreadable_now(&error))?;
            read = self
                .read_since(task, after)
                .await
                .map_err(|error| unreadable_now(&error))?;
        }
        let Some((first, life, used, rows)) = read else {
            return Ok(Vec::new());
        };
        // A task in use stays in use: its last use is written when it is older than an
        // eighth of its idle lifetime, not at every read.
        let idle = i64::try_from(self.bounds.lifetime.idle.as_millis()).unwrap_or(i64::MAX);
        let now = now_ms();
        if life == Life::Live && now.saturating_sub(used) >= idle / 8 {
            let noted = async {
                self.client()
                    .await?
                    .execute_prepared(
                        "UPDATE provenance_tasks SET used_ms = greatest(used_ms, $3)
                         WHERE task = $1 AND tenant = $2 AND ended_ms IS NULL",
                        &[&task.1, &task.0, &now],
                    )
                    .await?;
                Ok::<_, Failure>(())
            };
            if let Err(error) = noted.await {
                failed("note a task's use", &error);
            }
        }
        read_sources(&self.sealing, task, after, first, rows)
    }

    async fn forget_sources(&self, task: &str) -> Result<(), Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        // The tasks' rows first: a writer still recording into the task holds its row, so
        // its source is committed, and deleted below, before this goes on.
        let mut held: Vec<(String, String, bool)> = transaction
            .query_prepared(
                "DELETE FROM provenance_tasks WHERE task = $1
                 RETURNING tenant, actor, ended_ms IS NOT NULL",
                &[&task],
            )
            .await?
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
            .collect::<Result<_, tokio_postgres::Error>>()?;
        held.sort();
        for (tenant, actor, ended) in &held {
            let (live, records) = if *ended { (0, -1) } else { (-1, 0) };
            adjust(&transaction, KIND, (tenant, actor), task, live, records).await?;
        }
        transaction
            .execute_prepared("DELETE FROM provenance_sources WHERE task = $1", &[&task])
            .await?;
        transaction.commit().await?;
        Ok(())
    }
}

/// The sources of every task, shared by the workers on the database and kept across
/// restarts; texts sealed when the store was given keys ([`PostgresStore::sealed_with`]).
/// A source is refused (`sources_unavailable`, and the output withheld) when the database
/// cannot be written, and a task's sources when they cannot be read: a sealed one without its
/// key, a changed one, or one missing from the numbers.
///
/// Bounded per task as the gate reads a task: a source's text is cut to
/// [`SOURCE_TEXT_LIMIT`](portcullis_core::SOURCE_TEXT_LIMIT) bytes, and once the task keeps
/// [`TASK_TEXT_LIMIT`](portcullis_core::TASK_TEXT_LIMIT) bytes of text a source is kept
/// without its text (its values are found nowhere, so a call using one is refused), under its
/// origin, so that the task still counts as having read it. Bounded in tasks by the callers'
/// shares ([`Shares`](crate::Shares): a caller at its share is refused a new task,
/// `sources_share_full`), and tasks end on their own
/// ([`TaskLifetime`](portcullis_core::TaskLifetime)), a tainted one remembered as tainted:
/// see [`PostgresStore::with_shares`].
impl ProvenanceStore for PostgresStore {
    fn record<'a>(
        &'a self,
        ctx: &'a CallContext,
        source: &'a SourceRecord,
    ) -> BoxFuture<'a, Result<u64, Rejection>> {
        Box::pin(async move {
            self.record_source(ctx, source)
                .await
                .unwrap_or_else(|error| Err(unrecorded(ctx.task_id(), &error)))
        })
    }

    fn admit<'a>(&'a self, ctx: &'a CallContext) -> BoxFuture<'a, Result<(), Rejection>> {
        Box::pin(async move {
            self.admit_task(ctx)
                .await
                .unwrap_or_else(|error| Err(unrecorded(ctx.task_id(), &error)))
        })
    }

    fn since<'a>(
        &'a self,
        ctx: &'a CallContext,
        after: u64,
    ) -> BoxFuture<'a, Result<Vec<(u64, SourceRecord)>, Rejection>> {
        Box::pin(self.sources_since(task_of(ctx), after))
    }

    fn forget_task<'a>(&'a self, task: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(error) = self.forget_sources(task).await {
                failed(&format!("forget the sources of task {task}"), &error);
            }
        })
    }
}
