//! Callers' shares of a bounded store: how many tasks each caller (its actor in its tenant)
//! holds, so that a store refuses a caller at its own share rather than fill up for everyone.

use std::collections::HashMap;

use foldhash::fast::RandomState;

/// The key of a caller's share in a bounded store: its actor in its tenant (none and the empty
/// tenant are one), the tenant's length first so that no two callers share a key.
pub(crate) fn caller_key(actor: &str, tenant: &str) -> String {
    format!("{}:{tenant}{actor}", tenant.len())
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
