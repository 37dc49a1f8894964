//! What the durable stores keep of each task, for how long, and how much of it each caller may
//! hold: the callers' shares of the provenance and budget stores ([`Shares`]), the tasks'
//! lifetime ([`TaskLifetime`]: a task idle or old enough is ended by the store itself), and
//! the retention of what is not a task ([`Retention`]: runs, settled claims, expired pending
//! calls, the rate and refusal windows; never the audit log).
//!
//! A caller is an actor in its tenant (none and the empty tenant are one). A task is held in
//! the share of the caller whose call began it (in the budget store, whose call a per-task
//! limit counted first) from its first source or counted call until it ends: until
//! [`Registry::end_task`](portcullis_core::Registry::end_task) forgets it, or the store ends
//! it on its own. Each store keeps one row per caller holding a task (`task_callers`: its
//! live tasks and its ended tasks' records) and the store's own totals (`task_totals`, in
//! parts), and a new task takes its place in both in the transaction that records it, by a
//! conditional update: two workers never both take a caller's last place.
//!
//! What ending a task keeps, so that ending it never allows what it refused:
//! - **provenance**: a task that read no untrusted source (no
//!   [`Origin::ToolOutput`](portcullis_core::Origin::ToolOutput) with `trusted: false`) is deleted with its sources. A task that
//!   did keeps its taint: its sources' texts are deleted, and one source stands for them, the
//!   first untrusted source it read, without its text, numbered after every source it had.
//!   Its record is deleted [`TaskLifetime::remembered`] after it ended; resumed before, the
//!   task goes on after that source, tainted. The numbers of a task's sources never go back:
//!   a task ended and deleted comes back numbered after every number the store gave a task
//!   it deleted (a high-water mark kept in parts, `provenance_marks`), so that a worker that
//!   read "after n" reads the new life's sources too.
//! - **budget**: a task whose calls a per-task limit counted is kept as ended (its calls and
//!   cost, its calls per tool deleted): its calls are refused `task_expired`, never given a
//!   fresh budget, until [`TaskLifetime::remembered`] after it ended; after that its id is a
//!   new task.
//!
//! Each caller may hold a share of the ended tasks' records too; a tainted task (a counted
//! budget task) whose caller holds all the records it may is not ended: it keeps its place,
//! as the in-memory stores do.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use portcullis_core::{
    Rejection, TaskLifetime, budget_share_full, budget_store_full, output_unrecorded,
    sources_share_full,
};

/// How much of a durable store each caller (its actor in its tenant) may hold, and how much
/// the store holds in all: the tasks of its provenance and budget stores, the records of the
/// tasks it ended on its own ([`TaskLifetime::remembered`]), the calls a caller has claimed and
/// not settled, and its agent runs going on.
///
/// ```
/// use portcullis_stores::Shares;
///
/// let shares = Shares::default();
/// assert_eq!((shares.tasks, shares.tasks_per_caller()), (100_000, 1_000));
/// assert_eq!((shares.ended, shares.ended_per_caller()), (1_000_000, 10_000));
/// assert_eq!((shares.open_claims_per_caller, shares.runs_per_caller), (100, 100));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// Live tasks the store holds at once, all callers together: the last resort, when many
    /// callers fill it (`output_unrecorded`, `budget_store_full`). PostgreSQL counts them in
    /// 16 parts of a sixteenth each (rounded up), so that new tasks of different callers
    /// rarely wait for each other: a new task may be refused a little before the store holds
    /// `tasks`, never after.
    pub tasks: u64,
    /// Live tasks one caller holds at once; `None`: a hundredth of `tasks` (at least one), so
    /// that at least 100 callers use the store at once. A caller at its share is refused a
    /// new task (`sources_share_full`, `budget_share_full`), its own tasks go on. The tasks
    /// whose calls were refused within the refusal limit's window count in the same share of
    /// the budget store: a caller holding it has its new tasks refused rather than its
    /// refusals left uncounted.
    pub tasks_per_caller: Option<u64>,
    /// Records of ended tasks the store keeps at once, all callers together.
    pub ended: u64,
    /// Records of ended tasks kept at once for one caller; `None`: a hundredth of `ended`.
    pub ended_per_caller: Option<u64>,
    /// Calls one caller has claimed and not settled (running within their lease, or waiting
    /// for a decision) at once: one more is refused `claim_share_full`, and runs when one of
    /// them ends. At least one.
    pub open_claims_per_caller: u64,
    /// Agent runs one caller has going on (running or paused) at once: one more is refused
    /// `run_share_full`. At least one.
    pub runs_per_caller: u64,
}

impl Default for Shares {
    /// 100,000 live tasks, 1,000 for each caller; 1,000,000 records of ended tasks, 10,000
    /// for each caller; 100 open claims and 100 runs going on for each caller.
    fn default() -> Self {
        Shares {
            tasks: 100_000,
            tasks_per_caller: None,
            ended: 1_000_000,
            ended_per_caller: None,
            open_claims_per_caller: 100,
            runs_per_caller: 100,
        }
    }
}

impl Shares {
    /// The live tasks one caller may hold: `tasks_per_caller`, or a hundredth of `tasks`; at
    /// least one.
    pub fn tasks_per_caller(&self) -> u64 {
        self.tasks_per_caller.unwrap_or(self.tasks / 100).max(1)
    }

    /// The records of ended tasks one caller may hold: `ended_per_caller`, or a hundredth of
    /// `ended`; at least one.
    pub fn ended_per_caller(&self) -> u64 {
        self.ended_per_caller.unwrap_or(self.ended / 100).max(1)
    }
}

/// How long a durable store keeps what is not a task, once it can decide nothing any more
/// (`portcullis prune` deletes it; a worker never deletes it on its own). The audit log is
/// never deleted.
///
/// ```
/// use std::time::Duration;
/// use portcullis_stores::Retention;
///
/// let day = Duration::from_secs(24 * 60 * 60);
/// assert_eq!(Retention::default().runs, 30 * day);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// An agent run not changed for this long, and not held by a worker, is deleted.
    pub runs: Duration,
    /// A settled claim claimed this long ago is deleted: a call sent again under its id
    /// after that runs again, as a new call. Never less than a task may still be resumed
    /// ([`TaskLifetime::absolute`] and [`TaskLifetime::remembered`]). A claim whose call is not
    /// settled (running, or waiting for a decision, or abandoned with its outcome unknown) is
    /// never deleted.
    pub claims: Duration,
    /// A pending call that expired this long ago, and that no worker took meanwhile
    /// ([`ApprovalStore::take_expired`](portcullis_core::ApprovalStore::take_expired)), is
    /// deleted.
    pub approvals: Duration,
    /// The calls in the actors' rate windows and the tasks' refusals older than this are
    /// deleted: a rate or refusal window longer than this counts only the calls within it.
    /// Never less than a task may still be resumed, so that a refusal limit over a task's
    /// whole life holds for all of it.
    pub windows: Duration,
}

impl Default for Retention {
    /// 30 days each.
    fn default() -> Self {
        let month = Duration::from_secs(30 * 24 * 60 * 60);
        Retention {
            runs: month,
            claims: month,
            approvals: month,
            windows: month,
        }
    }
}

/// What a durable store was told of its shares, lifetimes and retention, shared by its clones,
/// with the time each kind's next sweep is due.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bounds {
    pub(crate) shares: Shares,
    pub(crate) lifetime: TaskLifetime,
    pub(crate) retention: Retention,
    next_sweep_ms: Arc<SweepClocks>,
}

/// When each kind's next sweep is due: a kind's sweep never takes another's turn.
#[derive(Debug, Default)]
struct SweepClocks {
    provenance: AtomicI64,
    budget: AtomicI64,
}

impl SweepClocks {
    fn of(&self, kind: Kind) -> &AtomicI64 {
        match kind {
            Kind::Provenance => &self.provenance,
            Kind::Budget => &self.budget,
        }
    }
}

/// The tables a kind of task is kept in: its name in `task_callers` and `task_totals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Provenance,
    Budget,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Provenance => "provenance",
            Kind::Budget => "budget",
        }
    }
}

/// Where a task is in its life at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Life {
    /// Live, within its lifetime.
    Live,
    /// Live, but idle past its lifetime or older than it: the store ends it at its next use.
    Over,
    /// Ended by the store, and remembered.
    Ended,
    /// Ended longer ago than it is remembered: its record goes, and its id is a new task.
    Forgotten,
}

/// A time in milliseconds as a database keeps it.
fn ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl Bounds {
    /// The live tasks one caller may hold.
    pub(crate) fn per_caller(&self) -> i64 {
        i64::try_from(self.shares.tasks_per_caller()).unwrap_or(i64::MAX)
    }

    /// The records of ended tasks one caller may hold.
    pub(crate) fn ended_per_caller(&self) -> i64 {
        i64::try_from(self.shares.ended_per_caller()).unwrap_or(i64::MAX)
    }

    /// The calls one caller may have claimed and not settled at once.
    pub(crate) fn open_claims_per_caller(&self) -> i64 {
        i64::try_from(self.shares.open_claims_per_caller.max(1)).unwrap_or(i64::MAX)
    }

    /// The agent runs one caller may have going on at once.
    pub(crate) fn runs_per_caller(&self) -> i64 {
        i64::try_from(self.shares.runs_per_caller.max(1)).unwrap_or(i64::MAX)
    }

    /// The live tasks one of `parts` parts of the store's totals may hold.
    pub(crate) fn per_part(&self, parts: i64) -> i64 {
        i64::try_from(self.shares.tasks.div_ceil(parts.max(1) as u64)).unwrap_or(i64::MAX)
    }

    /// The records of ended tasks one of `parts` parts may hold.
    pub(crate) fn ended_per_part(&self, parts: i64) -> i64 {
        i64::try_from(self.shares.ended.div_ceil(parts.max(1) as u64)).unwrap_or(i64::MAX)
    }

    /// Where a task that began at `started_ms`, was last used at `used_ms` and ended at
    /// `ended_ms` (if it did) is at `now`.
    pub(crate) fn life(
        &self,
        started_ms: i64,
        used_ms: i64,
        ended_ms: Option<i64>,
        now: i64,
    ) -> Life {
        let lifetime = &self.lifetime;
        match ended_ms {
            Some(ended) if now.saturating_sub(ended) >= ms(lifetime.remembered) => Life::Forgotten,
            Some(_) => Life::Ended,
            None if now.saturating_sub(used_ms) >= ms(lifetime.idle)
                || now.saturating_sub(started_ms) >= ms(lifetime.absolute) =>
            {
                Life::Over
            }
            None => Life::Live,
        }
    }

    /// The times at and before which a live task's last use, or its beginning, ends it at
    /// `now`; and at and before which an ended task's record is forgotten.
    pub(crate) fn cuts(&self, now: i64) -> Cuts {
        let lifetime = &self.lifetime;
        Cuts {
            idle: now.saturating_sub(ms(lifetime.idle)),
            absolute: now.saturating_sub(ms(lifetime.absolute)),
            remembered: now.saturating_sub(ms(lifetime.remembered)),
        }
    }

    /// Whether a sweep of every caller's tasks of `kind` is due at `now`; if so, the next one
    /// is due a while after (the idle lifetime, at most a minute, at least a second), and this
    /// caller runs this one.
    pub(crate) fn sweep_due(&self, kind: Kind, now: i64) -> bool {
        let next_sweep_ms = self.next_sweep_ms.of(kind);
        let next = next_sweep_ms.load(Ordering::Relaxed);
        if now < next {
            return false;
        }
        let every = ms(self.lifetime.idle).clamp(1000, 60_000);
        next_sweep_ms
            .compare_exchange(
                next,
                now.saturating_add(every),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// The times at and before which what [`Retention`] keeps is deleted at `now`. A settled
    /// claim, a refusal and a call in a rate window are kept at least as long as a task may
    /// still be resumed (its absolute lifetime and the time it is remembered after): the
    /// repeat of a call in a task that goes on, or its refusal limit, never begins afresh.
    pub(crate) fn retained(&self, now: i64) -> Retained {
        let retention = &self.retention;
        let lifetime = &self.lifetime;
        let resumable = ms(lifetime.absolute).saturating_add(ms(lifetime.remembered));
        Retained {
            runs: now.saturating_sub(ms(retention.runs)),
            claims: now.saturating_sub(ms(retention.claims).max(resumable)),
            approvals: now.saturating_sub(ms(retention.approvals)),
            windows: now.saturating_sub(ms(retention.windows).max(resumable)),
        }
    }
}

/// See [`Bounds::cuts`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cuts {
    pub(crate) idle: i64,
    pub(crate) absolute: i64,
    pub(crate) remembered: i64,
}

/// See [`Bounds::retained`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retained {
    pub(crate) runs: i64,
    pub(crate) claims: i64,
    pub(crate) approvals: i64,
    pub(crate) windows: i64,
}

/// How many tasks a sweep run by a call ends at most (a caller's whose share is full, or
/// anyone's), so that the call that runs it, and the calls of the same caller that wait for
/// it, wait little: one place is all a new task needs.
pub(crate) const SWEEP_BATCH: i64 = 1000;

/// Why a new task was not given a place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// Its caller holds its whole share.
    Share,
    /// The store holds as many tasks as it may.
    Store,
}

impl Full {
    /// The refusal of a new task of `kind` for this reason, with the share of `bounds`: the
    /// in-memory stores' own.
    pub(crate) fn refusal(self, kind: Kind, bounds: &Bounds) -> Rejection {
        let share = usize::try_from(bounds.shares.tasks_per_caller()).unwrap_or(usize::MAX);
        match (kind, self) {
            (Kind::Provenance, Full::Share) => sources_share_full(share),
            (Kind::Provenance, Full::Store) => output_unrecorded(),
            (Kind::Budget, Full::Share) => budget_share_full(share),
            (Kind::Budget, Full::Store) => budget_store_full(),
        }
    }
}

/// What one caller (an actor in a tenant) holds in a store: `portcullis usage`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallerUsage {
    /// The caller's tenant; empty for none.
    pub tenant: String,
    /// The caller's actor; empty for the tasks a store kept before it knew their callers.
    pub actor: String,
    /// Its live tasks in the provenance store.
    pub provenance_tasks: u64,
    /// Its tainted tasks the provenance store ended and remembers.
    pub provenance_ended: u64,
    /// The bytes of its sources' text the provenance store keeps.
    pub source_bytes: u64,
    /// Its live tasks counted in the budget store.
    pub budget_tasks: u64,
    /// Its tasks the budget store ended and remembers (refused `task_expired`).
    pub budget_ended: u64,
    /// Its claims whose calls are not settled.
    pub open_claims: u64,
    /// Its agent runs.
    pub runs: u64,
    /// Its calls waiting for a decision (or decided, not yet taken by a worker).
    pub pending_approvals: u64,
}

/// What `portcullis prune` ended and deleted, or would have (`--dry-run`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pruned {
    /// Clean provenance tasks past their lifetime, deleted with their sources.
    pub provenance_deleted: u64,
    /// Tainted provenance tasks past their lifetime, ended: their texts deleted, their taint
    /// remembered.
    pub provenance_ended: u64,
    /// Records of ended provenance tasks past their time, deleted.
    pub provenance_forgotten: u64,
    /// Source rows deleted, texts and records.
    pub sources_deleted: u64,
    /// Budget tasks past their lifetime, ended and remembered (refused `task_expired`).
    pub budget_ended: u64,
    /// Records of ended budget tasks past their time, deleted.
    pub budget_forgotten: u64,
    /// Agent runs past their retention.
    pub runs: u64,
    /// Settled claims past their retention.
    pub claims: u64,
    /// Expired pending calls past their retention.
    pub approvals: u64,
    /// Calls in rate windows and refusals past their retention.
    pub window_rows: u64,
}

impl Pruned {
    /// Adds what `other` pruned.
    pub(crate) fn add(&mut self, other: &Pruned) {
        self.provenance_deleted += other.provenance_deleted;
        self.provenance_ended += other.provenance_ended;
        self.provenance_forgotten += other.provenance_forgotten;
        self.sources_deleted += other.sources_deleted;
        self.budget_ended += other.budget_ended;
        self.budget_forgotten += other.budget_forgotten;
        self.runs += other.runs;
        self.claims += other.claims;
        self.approvals += other.approvals;
        self.window_rows += other.window_rows;
    }
}

/// A usage table's row being added up: by tenant, then actor.
pub(crate) fn caller_entry<'a>(
    callers: &'a mut std::collections::BTreeMap<(String, String), CallerUsage>,
    tenant: &str,
    actor: &str,
) -> &'a mut CallerUsage {
    callers
        .entry((tenant.to_owned(), actor.to_owned()))
        .or_insert_with(|| CallerUsage {
            tenant: tenant.to_owned(),
            actor: actor.to_owned(),
            ..CallerUsage::default()
        })
}

/// The caller (tenant, actor) of a claim's stored key, or of a pending call's ticket.
pub(crate) fn caller_of_json(json: &str) -> Option<(String, String)> {
    #[derive(serde::Deserialize)]
    struct Caller {
        actor: String,
        #[serde(default)]
        tenant: Option<String>,
    }
    let caller: Caller = serde_json::from_str(json).ok()?;
    Some((caller.tenant.unwrap_or_default(), caller.actor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_ends_idle_or_old_and_is_forgotten_after_remembered() {
        let bounds = Bounds {
            lifetime: TaskLifetime {
                idle: Duration::from_millis(10),
                absolute: Duration::from_millis(100),
                remembered: Duration::from_millis(1000),
            },
            ..Bounds::default()
        };
        assert_eq!(bounds.life(0, 0, None, 9), Life::Live);
        assert_eq!(bounds.life(0, 0, None, 10), Life::Over);
        assert_eq!(bounds.life(0, 95, None, 100), Life::Over);
        assert_eq!(bounds.life(0, 0, Some(5), 1004), Life::Ended);
        assert_eq!(bounds.life(0, 0, Some(5), 1005), Life::Forgotten);
        assert_eq!(bounds.per_part(16), 6250);
        assert_eq!(Shares::default().tasks_per_caller(), 1000);
    }
}
