//! State split into parts, each behind a lock of its own, for the in-memory stores: threads
//! working for different tasks, callers or calls take different locks, instead of all waiting
//! on one.

use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// `T` in parts; a key's part is chosen by a hash keyed at random when the parts are made, so
/// that no caller can steer keys of its choosing into one part.
pub(crate) struct LockedParts<T> {
    parts: Box<[Part<T>]>,
    spread: RandomState,
}

/// One part, on cache lines of its own, so that threads working on two parts do not take
/// each other's lines.
#[derive(Default)]
#[repr(align(128))]
struct Part<T>(Mutex<T>);

impl<T: Default> LockedParts<T> {
    /// `count` empty parts (at least one).
    pub(crate) fn new(count: usize) -> Self {
        LockedParts {
            parts: (0..count.max(1)).map(|_| Part::default()).collect(),
            spread: RandomState::new(),
        }
    }
}

impl<T> LockedParts<T> {
    /// The part that holds `key`, locked. The state of every store stays consistent between
    /// statements, so a panic elsewhere while a lock was held leaves nothing half-written.
    pub(crate) fn lock<K: Hash + ?Sized>(&self, key: &K) -> MutexGuard<'_, T> {
        let index = match self.parts.len() {
            1 => 0,
            count => (self.spread.hash_one(key) % count as u64) as usize,
        };
        self.parts[index]
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// How many parts there are.
    pub(crate) fn count(&self) -> usize {
        self.parts.len()
    }

    /// Every part, one after another, each locked while `change` changes it.
    pub(crate) fn each_mut(&self, mut change: impl FnMut(&mut T)) {
        for part in &self.parts {
            change(&mut part.0.lock().unwrap_or_else(PoisonError::into_inner));
        }
    }

    /// Every part, one after another, each locked while `visit` reads it.
    pub(crate) fn each(&self, mut visit: impl FnMut(&T)) {
        for part in &self.parts {
            visit(&part.0.lock().unwrap_or_else(PoisonError::into_inner));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_always_finds_its_part_and_keys_spread_over_the_parts() {
        let parts: LockedParts<Vec<u32>> = LockedParts::new(16);
        for key in 0..1600u32 {
            parts.lock(&key).push(key);
        }
        for key in 0..1600u32 {
            assert!(parts.lock(&key).contains(&key));
        }
        let mut used = 0;
        parts.each(|part| used += usize::from(!part.is_empty()));
        assert_eq!(used, 16);
        assert_eq!(LockedParts::<()>::new(0).count(), 1);
    }
}
