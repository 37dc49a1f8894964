//! The follow road: where a waiting call stands, for the model or a client that asks again.

use crate::audit::Facts;
use crate::gate::approve::decision::Progress;
use crate::registry::Registry;
use crate::rejection::Rejection;
use crate::time::now_ms;

impl Registry {
    /// Moves the call waiting under `ticket_id` on, for a caller that waits for it (an MCP
    /// client holding its request open): carries out its decision when one is recorded and no
    /// worker took it yet, and ends it when it expired. Returns where it stands, or
    /// `approvals_unavailable` when the store cannot be read. Poll it; the call runs once,
    /// whoever polls.
    pub async fn follow(&self, ticket_id: &str) -> Result<Progress, Rejection> {
        let store = &self.settings().approvals.store;
        let Some(pending) = store.get(ticket_id).await? else {
            return Ok(Progress::Left);
        };
        if pending.decision.is_some() {
            return Ok(self
                .run_decision(ticket_id, &Facts::default())
                .await
                .map_or(Progress::Left, Progress::Ended));
        }
        if pending.ticket.is_expired(now_ms()) {
            self.expire_tickets().await;
            return Ok(Progress::Left);
        }
        Ok(Progress::Waiting)
    }
}
