//! What the gates learn of one call, for its audit record and for its caller.

use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, OnceLock, PoisonError};

use serde_json::Value;

use crate::contract::{Origin, ValueSource};
use crate::gate::authorize::provenance::store::SourceRecord;
use crate::policy::Ruling;

/// What the gates learn of one call.
#[derive(Default)]
pub(crate) struct Facts {
    /// The canonical arguments, where a gate, the audit or the caller reads them.
    pub(crate) canonical: OnceLock<Value>,
    /// The canonical arguments as the audit records them (sensitive values redacted), written
    /// once for the call's two records: the first copies them, its last takes them.
    pub(crate) recorded: Mutex<Option<Value>>,
    /// The caller needs the canonical arguments whatever the gates need: a transaction keeps
    /// them for the compensation.
    pub(crate) keep_canonical: bool,
    pub(crate) snapshots: Snapshots,
    /// The outcome is that of an earlier call with the same id: nothing ran now.
    pub(crate) repeated: AtomicBool,
    /// The lease on the decided call being carried out (its ticket's id and the lease's),
    /// released from the store just before the call runs.
    pub(crate) lease: OnceLock<(String, String)>,
    /// Where each value the contract declares `#[from(...)]` was found.
    pub(crate) sources: OnceLock<Vec<ValueSource>>,
    /// The first untrusted source the task read, when that makes the call wait for a human
    /// (`after_untrusted = "approve"`): the reviewer is told.
    pub(crate) tainted_by: OnceLock<Origin>,
    /// The source of a reviewer's edit, for the edited call's provenance.
    pub(crate) edit: OnceLock<SourceRecord>,
    /// What the versioned rule sets among the policies ruled.
    pub(crate) rulings: Mutex<Vec<Ruling>>,
    /// The digest of the fields the call's audit records share, computed for its first record
    /// that holds the canonical arguments and read for the next.
    pub(crate) shared_digest: OnceLock<[u8; 32]>,
}

impl Facts {
    /// Where the digest of the fields the call's records share is kept, once the canonical
    /// arguments are known: a record built after this is asked holds them, as the call's
    /// later records do. Before, a record holds the arguments as sent, and is digested alone.
    pub(crate) fn shared_digest(&self) -> Option<&OnceLock<[u8; 32]>> {
        self.canonical.get().map(|_| &self.shared_digest)
    }
}

/// The snapshots a call's hook took before and after it ran, for its record.
#[derive(Default)]
pub(crate) struct Snapshots {
    pub(crate) before: Mutex<Option<Value>>,
    pub(crate) after: Mutex<Option<Value>>,
    /// Why `after` could not be taken.
    pub(super) missing: Mutex<Option<String>>,
}

impl Snapshots {
    pub(crate) fn keep<T>(slot: &Mutex<Option<T>>, snapshot: T) {
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(snapshot);
    }

    pub(crate) fn keep_missing(&self, why: String) {
        Self::keep(&self.missing, why);
    }

    pub(super) fn taken<T>(slot: &Mutex<Option<T>>) -> Option<T> {
        slot.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}
