//! Where a transaction's completed steps are kept as they complete, so that the compensations
//! a crashed worker owed can still run: [`Registry::recover`](crate::Registry::recover).

use std::io;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::call::ToolCall;
use crate::context::CallContext;
use crate::future::BoxFuture;

/// A completed step as a store keeps it: the call, the canonical arguments the tool received,
/// and its output, all a compensation needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredStep {
    /// The call.
    pub call: ToolCall,
    /// The canonical arguments the tool received.
    pub canonical: Value,
    /// The tool's output.
    pub output: Value,
    /// Whether its compensation already ran.
    pub compensated: bool,
}

/// A transaction whose worker stopped holding it (it crashed, or its lease ran out) before
/// it was committed or rolled back.
#[derive(Debug, Clone)]
pub struct Abandoned {
    /// The transaction's id.
    pub id: String,
    /// The caller's context, as the transaction began (without its extensions).
    pub ctx: CallContext,
    /// Its completed steps, in the order they ran.
    pub steps: Vec<StoredStep>,
}

/// Keeps the steps of open transactions. Implementations must hand each abandoned transaction
/// to one recoverer at a time: [`take_abandoned`](Self::take_abandoned) leases it atomically.
pub trait TransactionStore: Send + Sync + 'static {
    /// Adds a completed step to transaction `id` (begun by `ctx`), and holds the transaction
    /// for its worker until `lease_until_ms` (milliseconds since the Unix epoch).
    fn record_step<'a>(
        &'a self,
        id: &'a str,
        ctx: &'a CallContext,
        step: &'a StoredStep,
        lease_until_ms: u64,
    ) -> BoxFuture<'a, io::Result<()>>;

    /// Marks step `index` of transaction `id` compensated.
    fn mark_compensated<'a>(&'a self, id: &'a str, index: usize) -> BoxFuture<'a, ()>;

    /// The transaction ended, committed or rolled back: nothing is owed.
    fn finish<'a>(&'a self, id: &'a str) -> BoxFuture<'a, ()>;

    /// Every transaction whose lease ended by `now_ms`, each now leased to the caller until
    /// `lease_until_ms`.
    fn take_abandoned(&self, now_ms: u64, lease_until_ms: u64) -> BoxFuture<'_, Vec<Abandoned>>;
}

/// The registry's transaction store, and how long a worker holds a transaction after its
/// latest step.
pub(crate) struct DurableTransactions {
    pub(crate) store: Box<dyn TransactionStore>,
    pub(crate) lease: std::time::Duration,
}

impl DurableTransactions {
    pub(crate) fn lease_ms(&self) -> u64 {
        u64::try_from(self.lease.as_millis()).unwrap_or(u64::MAX)
    }
}
