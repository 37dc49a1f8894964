//! Callers' shares of a bounded store: how many tasks each caller (its actor in its tenant)
//! holds, so that a store refuses a caller at its own share rather than fill up for everyone.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;

use foldhash::fast::RandomState;

/// The key of a caller's share in a bounded store: its actor in its tenant (none and the empty
/// tenant are one), the tenant's length first so that no two callers share a key.
pub(crate) fn caller_key(actor: &str, tenant: &str) -> String {
    format!("{}:{tenant}{actor}", tenant.len())
}

/// Runs `read` with the key of the caller `actor` in `tenant` ([`caller_key`]), written into a
/// buffer of the thread's own, so that reading a share allocates nothing (a `read` that asks
/// for a key in turn gets one of its own).
pub(crate) fn with_caller_key<R>(actor: &str, tenant: &str, read: impl FnOnce(&str) -> R) -> R {
    thread_local!(static KEY: RefCell<String> = const { RefCell::new(String::new()) });
    KEY.with(|buffer| match buffer.try_borrow_mut() {
        Ok(mut key) => {
            key.clear();
            let _ = write!(key, "{}:{tenant}{actor}", tenant.len());
            read(&key)
        }
        Err(_) => read(&caller_key(actor, tenant)),
    })
}

/// How many tasks each caller holds; a caller holding none is not kept.
#[derive(Debug, Default)]
pub(crate) struct Shares(HashMap<String, usize, RandomState>);

impl Shares {
    /// How many tasks `caller` holds.
    pub(crate) fn held(&self, caller: &str) -> usize {
        self.0.get(caller).copied().unwrap_or(0)
    }

    /// One more task for `caller`.
    pub(crate) fn take(&mut self, caller: &str) {
        match self.0.get_mut(caller) {
            Some(held) => *held += 1,
            None => {
                self.0.insert(caller.to_owned(), 1);
            }
        }
    }

    /// One task of `caller`'s given back.
    pub(crate) fn give_back(&mut self, caller: &str) {
        if let Some(held) = self.0.get_mut(caller) {
            *held -= 1;
            if *held == 0 {
                self.0.remove(caller);
            }
        }
    }

    /// How many callers hold a task.
    #[cfg(test)]
    pub(crate) fn callers(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_read_from_the_threads_buffer_is_the_callers_key() {
        for (actor, tenant) in [("alice", ""), ("alice", "acme"), ("", "3:a"), ("a", "")] {
            let read = with_caller_key(actor, tenant, str::to_owned);
            assert_eq!(read, caller_key(actor, tenant));
        }
        let twice = with_caller_key("bob", "x", |first| {
            format!("{first} {}", with_caller_key("bob", "y", str::to_owned))
        });
        assert_eq!(twice, "1:xbob 1:ybob");
    }
}
