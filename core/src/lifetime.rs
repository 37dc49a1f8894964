//! How long a task lives in a bounded store that nobody tells it ended: a process that never
//! calls [`Registry::end_task`](crate::Registry::end_task) keeps serving within its bounds, and
//! what a store ends on its own is remembered so that ending it refuses what it refused before.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use foldhash::fast::RandomState;
use sha2::{Digest, Sha256};

/// How long a bounded store keeps a task without being told it ended.
///
/// A task that made no call for `idle`, or that began more than `absolute` ago, is ended by
/// the store itself. What it held that could refuse a later call is not simply dropped: the
/// store keeps a small record of the ended task for `remembered` after it ended (its taint in
/// the provenance store, its spent budget as a refusal in the budget store; see each store),
/// and a call under its id within that time is judged by that record. A call under the id of
/// a task ended longer ago than `remembered` starts a new task: end a conversation with its
/// task, and never resume one after that long.
///
/// ```
/// use std::time::Duration;
/// use portcullis_core::TaskLifetime;
///
/// let lifetime = TaskLifetime::default();
/// assert_eq!(lifetime.idle, Duration::from_secs(60 * 60));
/// assert_eq!(lifetime.absolute, Duration::from_secs(24 * 60 * 60));
/// assert_eq!(lifetime.remembered, Duration::from_secs(7 * 24 * 60 * 60));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskLifetime {
    /// A task that made no call for this long is ended.
    pub idle: Duration,
    /// A task that began this long ago is ended, however busy.
    pub absolute: Duration,
    /// How long the record of a task the store ended is kept.
    pub remembered: Duration,
}

impl Default for TaskLifetime {
    /// One hour idle, a day in all, remembered for a week.
    fn default() -> Self {
        TaskLifetime {
            idle: Duration::from_secs(60 * 60),
            absolute: Duration::from_secs(24 * 60 * 60),
            remembered: Duration::from_secs(7 * 24 * 60 * 60),
        }
    }
}

impl TaskLifetime {
    /// Whether a task that began at `started` and was last used at `used` has ended at `now`.
    pub(crate) fn ended(&self, started: Instant, used: Instant, now: Instant) -> bool {
        now.saturating_duration_since(used) >= self.idle
            || now.saturating_duration_since(started) >= self.absolute
    }

    /// When a task that began at `started` and was last used at `used` ends, unless used again.
    pub(crate) fn ends(&self, started: Instant, used: Instant) -> Option<Instant> {
        earlier(
            used.checked_add(self.idle),
            started.checked_add(self.absolute),
        )
    }
}

/// The earlier of two times, either of which may be unknown.
pub(crate) fn earlier(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The records of the tasks a store ended on its own, each with what it still holds (`V`),
/// kept for [`TaskLifetime::remembered`]; at most `capacity` in all and a share of them for
/// each caller, so that one caller's ended tasks never crowd out another's.
///
/// A record is known by the digest of its task's tenant and id under a salt of this store's
/// own (16 bytes: what a record costs is that, its caller, its time and `V`).
pub(crate) struct Ended<V> {
    records: HashMap<[u8; 16], Record<V>, RandomState>,
    per_caller: HashMap<u64, usize, RandomState>,
    capacity: usize,
    per_caller_capacity: usize,
    /// When the first record may be forgotten, so that a sweep runs only when it frees one.
    next_forgotten: Option<Instant>,
    salt: [u8; 16],
}

struct Record<V> {
    caller: u64,
    forgotten: Instant,
    value: V,
}

impl<V> Ended<V> {
    /// Room for `capacity` records, and a hundredth of them (at least one) per caller.
    pub(crate) fn new(capacity: usize) -> Self {
        let mut salt = [0u8; 16];
        getrandom::fill(&mut salt).expect("the operating system's random source is available");
        Ended {
            records: HashMap::default(),
            per_caller: HashMap::default(),
            capacity,
            per_caller_capacity: (capacity / 100).max(1),
            next_forgotten: None,
            salt,
        }
    }

    /// The key of the task `task` of `tenant` (empty for none).
    pub(crate) fn key(&self, tenant: &str, task: &str) -> [u8; 16] {
        let mut digest = Sha256::new();
        digest.update(self.salt);
        digest.update((tenant.len() as u64).to_le_bytes());
        digest.update(tenant);
        digest.update(task);
        let mut key = [0; 16];
        key.copy_from_slice(&digest.finalize()[..16]);
        key
    }

    /// The id of a caller (its [`caller_key`](crate::share::caller_key)) among the records.
    fn caller(&self, caller: &str) -> u64 {
        let digest = Sha256::new()
            .chain_update(self.salt)
            .chain_update(caller)
            .finalize();
        let mut id = [0; 8];
        id.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(id)
    }

    /// Keeps `value` for the ended task `key` of `caller` until `forgotten`; `false`, keeping
    /// nothing, when the caller's share of records or the whole store is full (the task is
    /// then not ended: it goes on holding its place).
    pub(crate) fn remember(
        &mut self,
        key: [u8; 16],
        caller: &str,
        forgotten: Instant,
        value: V,
        now: Instant,
    ) -> bool {
        self.sweep(now);
        let caller = self.caller(caller);
        let held = self.per_caller.get(&caller).copied().unwrap_or(0);
        if held >= self.per_caller_capacity || self.records.len() >= self.capacity {
            return false;
        }
        let record = Record {
            caller,
            forgotten,
            value,
        };
        if let Some(replaced) = self.records.insert(key, record) {
            self.give_back(replaced.caller);
        }
        *self.per_caller.entry(caller).or_default() += 1;
        self.next_forgotten = Some(
            self.next_forgotten
                .map_or(forgotten, |at| at.min(forgotten)),
        );
        true
    }

    /// What the ended task `key` still holds, if it is remembered at `now`.
    pub(crate) fn get(&mut self, key: &[u8; 16], now: Instant) -> Option<&V> {
        self.sweep(now);
        self.records.get(key).map(|record| &record.value)
    }

    /// Takes the record of the ended task `key` out, if it is remembered at `now`: its task
    /// was resumed, and carries what the record held from now on.
    pub(crate) fn take(&mut self, key: &[u8; 16], now: Instant) -> Option<V> {
        self.sweep(now);
        let record = self.records.remove(key)?;
        self.give_back(record.caller);
        Some(record.value)
    }

    /// Forgets the record of `key` (its task was ended explicitly, under every tenant).
    pub(crate) fn forget(&mut self, key: &[u8; 16]) {
        if let Some(record) = self.records.remove(key) {
            self.give_back(record.caller);
        }
    }

    /// How many records are kept.
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    fn give_back(&mut self, caller: u64) {
        if let Some(held) = self.per_caller.get_mut(&caller) {
            *held -= 1;
            if *held == 0 {
                self.per_caller.remove(&caller);
            }
        }
    }

    /// Forgets the records whose time is up at `now`.
    fn sweep(&mut self, now: Instant) {
        if self.next_forgotten.is_none_or(|at| at > now) {
            return;
        }
        let mut freed = Vec::new();
        self.records.retain(|_, record| {
            let keep = record.forgotten > now;
            if !keep {
                freed.push(record.caller);
            }
            keep
        });
        for caller in freed {
            self.give_back(caller);
        }
        self.next_forgotten = self.records.values().map(|record| record.forgotten).min();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_kept_until_its_time_and_each_caller_has_its_share() {
        let start = Instant::now();
        let mut ended = Ended::<u8>::new(200);
        let later = start + Duration::from_secs(10);
        for task in 0..2 {
            let key = ended.key("", &format!("t{task}"));
            assert!(ended.remember(key, "mallory", later, 1, start));
        }
        let third = ended.key("", "t2");
        assert!(
            !ended.remember(third, "mallory", later, 1, start),
            "a caller holds a hundredth of the records"
        );
        let other = ended.key("", "t3");
        assert!(ended.remember(other, "alice", later, 2, start));
        assert_eq!(ended.get(&other, start), Some(&2));
        assert_eq!(ended.get(&ended.key("acme", "t2"), start), None);
        assert_eq!(ended.get(&other, later), None, "forgotten on time");
        assert_eq!(ended.len(), 0);
        assert!(ended.remember(
            third,
            "mallory",
            later + later.duration_since(start),
            1,
            later
        ));
    }

    #[test]
    fn a_task_ends_idle_or_old() {
        let lifetime = TaskLifetime {
            idle: Duration::from_secs(5),
            absolute: Duration::from_secs(60),
            remembered: Duration::from_secs(1),
        };
        let start = Instant::now();
        let busy = start + Duration::from_secs(59);
        assert!(!lifetime.ended(start, busy, busy + Duration::from_millis(999)));
        assert!(lifetime.ended(start, busy, start + Duration::from_secs(60)));
        assert!(lifetime.ended(start, start, start + Duration::from_secs(5)));
        assert_eq!(
            lifetime.ends(start, busy),
            Some(start + Duration::from_secs(60))
        );
    }
}
