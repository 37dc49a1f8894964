//! The registry's side of the audit: records kept while the sink failed, and the steps of an
//! agent's run.

use crate::audit::RunStep;
use crate::context::CallContext;
use crate::registry::Registry;

impl Registry {
    /// Stores the outcome records of calls that ran while the audit sink could not store them
    /// (its database was down, say), in order; returns how many. Each was kept in memory when
    /// its store failed, and the next record stores them first, so no call runs before they
    /// are on record; a worker's loop calls this too ([`run_decided`](Self::run_decided)
    /// does), so that they are stored once the sink is back even when no call comes. They are
    /// lost if the process stops first: its `about_to_run` records show which calls ran.
    pub async fn flush_audit(&self) -> std::io::Result<usize> {
        match &self.settings().audit {
            Some(log) => log.store_unstored().await,
            None => Ok(0),
        }
    }
    /// Records one step of an agent's run in the audit log, chained with the records of the
    /// calls the run made; `Ok` without a sink. The agent loop (`portcullis-agent`) calls it
    /// at every transition.
    pub async fn record_step(&self, ctx: &CallContext, step: RunStep<'_>) -> std::io::Result<()> {
        match &self.settings().audit {
            Some(log) => log.append_step(ctx, step).await,
            None => Ok(()),
        }
    }
}
