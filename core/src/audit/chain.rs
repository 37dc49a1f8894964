//! A record on its way into a log, and the sinks that chain and store it.

use super::digest;
use super::key::AuditKey;
use super::record::{AuditRecord, Checkpoint, V2};
use crate::encoding::hex;
use crate::future::BoxFuture;

/// A record ready to join a log: everything but its place in the chain, which the sink gives
/// it, in the order its writers append, with [`Unchained::chain_after`].
pub struct Unchained {
    pub(super) record: AuditRecord,
    pub(super) digest: [u8; 32],
    pub(super) key: Option<AuditKey>,
}

impl Unchained {
    /// `record`, to be chained under `key` (the application's
    /// [`audit_key`](crate::RegistryBuilder::audit_key), or none): for a writer beside the
    /// registries, such as the operator's command line. It is written in the current format;
    /// its `sequence`, `previous_hash` and `hash` are set when the sink chains it.
    pub fn new(record: AuditRecord, key: Option<AuditKey>) -> Self {
        let record = AuditRecord {
            version: V2,
            sequence: 0,
            previous_hash: String::new(),
            hash: String::new(),
            ..record
        };
        Unchained {
            digest: record.digest(),
            record,
            key,
        }
    }

    /// The record, as the next after `head`.
    pub fn chain_after(self, head: &Checkpoint) -> AuditRecord {
        let Unchained {
            mut record,
            digest,
            key,
        } = self;
        record.sequence = head.length;
        // A head that is no hash (a log broken before this record) gives no link: the
        // record then fails verification where the log broke.
        record.hash = digest::link(key.as_ref(), head.length, &head.head, &digest)
            .map(|link| hex(&link))
            .unwrap_or_default();
        record.previous_hash = head.head.clone();
        record
    }
}

/// Where records go: a sink is one log, and orders what its writers append.
///
/// `append` must, as one step that no other writer of the same log interleaves with: find the
/// log's head (its last record, as stored: a sink shared by several processes reads it from
/// the storage), chain the entry after it with [`Unchained::chain_after`], and store the
/// record. Its future completes once the record is stored (durably, if the sink promises
/// durability): a call that must be audited first runs only after that. A sink that talks to
/// a database may gather the entries of concurrent calls into one transaction, as long as each
/// future completes only once its own record is stored.
pub trait AuditSink: Send + Sync + 'static {
    /// Chains `entry` after the log's last record and stores it.
    fn append(&self, entry: Unchained) -> BoxFuture<'_, std::io::Result<()>>;
}
