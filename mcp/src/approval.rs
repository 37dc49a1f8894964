//! A call that needs a human, in the protocol: the caller's own confirmation through MCP
//! elicitation, for tools whose contract allows it, or an operator's decision through the
//! approval store, while the client's request waits.
//!
//! The two never stand in for each other. An elicitation is answered by the client, which may
//! be a program: its answer is recorded as the caller's own decision
//! ([`Reviewer`] = the actor), signed with the server's confirmation key where it has one, and
//! the registry accepts that only on a ticket of a tool that
//! [`caller_confirms`](portcullis_core::ToolContract::caller_confirms). Every other ticket
//! waits for a reviewer who may decide it, through the store.

use std::time::Instant;

use portcullis_core::{
    ApprovalDecision, CallContext, Outcome, Progress, Rejection, RejectionCode, Reviewer, Ticket,
    ToolCall,
};
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ProgressNotificationParam};
use rmcp::service::RequestContext;
use serde_json::json;

use crate::server::Shared;

/// What the model reads when a call still waits once its request answers.
pub(crate) const WAITING_MESSAGE: &str = "This call is awaiting a human's approval and has not \
     run. To learn its outcome later, call the same tool again with the same arguments: the \
     call runs at most once, and a repeat reports how it ended.";

/// Whether the client of `request` can be asked to confirm in a form: in its session's
/// capabilities, or, under the stateless protocol, in the request's own.
pub(crate) fn can_confirm(request: &RequestContext<RoleServer>) -> bool {
    request
        .client_capabilities()
        .and_then(|capabilities| capabilities.elicitation)
        .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none())
}

/// The form that asks the person at the client to confirm the call waiting under `ticket`.
pub(crate) fn confirmation_form(ticket: &Ticket) -> serde_json::Value {
    json!({
        "mode": "form",
        "message": format!("Confirm this call? {}", ticket.description),
        "requestedSchema": {"type": "object", "properties": {}},
    })
}

/// Asks the person at the client, over the session, to confirm the call; `None` when the
/// client cannot be asked (it has no form elicitation, or did not answer in time), so that the
/// call waits for an operator instead, or when another decision was taken first, so that the
/// call waits for its outcome.
pub(crate) async fn confirm(
    shared: &Shared,
    ctx: &CallContext,
    ticket: &Ticket,
    request: &RequestContext<RoleServer>,
) -> Option<Outcome> {
    if !can_confirm(request) {
        return None;
    }
    let params: ElicitRequestParams = serde_json::from_value(confirmation_form(ticket)).ok()?;
    let answer = request
        .peer
        .create_elicitation_with_timeout(params, Some(shared.approval_wait))
        .await;
    match answer {
        Ok(answer) => decide(shared, ctx, ticket, answer.action).await,
        Err(error) => {
            tracing::warn!(ticket = %ticket.id, %error, "the client did not confirm; the call waits for an operator");
            None
        }
    }
}

/// Records the caller's answer to the confirmation of the call waiting under `ticket` as the
/// caller's own decision, and carries it out: the call's outcome, or `None` when another
/// decision was taken first, so that the call waits for that one's outcome.
pub(crate) async fn decide(
    shared: &Shared,
    ctx: &CallContext,
    ticket: &Ticket,
    action: ElicitationAction,
) -> Option<Outcome> {
    let mut reviewer = Reviewer::new(ctx.actor());
    if let Some(tenant) = ctx.tenant() {
        reviewer = reviewer.with_tenant(tenant);
    }
    let decision = match action {
        ElicitationAction::Accept => ApprovalDecision::Approve { reviewer },
        ElicitationAction::Decline => ApprovalDecision::Reject {
            reviewer,
            message: "the user declined this call".to_owned(),
        },
        _ => ApprovalDecision::Reject {
            reviewer,
            message: "the user dismissed the confirmation without approving this call".to_owned(),
        },
    };
    let decision = match &shared.confirmation_key {
        Some(key) => key.sign(ticket, decision),
        None => decision.into(),
    };
    let outcome = shared.registry.resume(&ticket.id, decision).await;
    // Another decision came first (its call runs, or ran), or the server's worker took this one
    // to run between its recording and its run: the call's outcome is that run's, which the
    // caller then waits for as for any pending call's.
    let decided_elsewhere = matches!(
        outcome.code(),
        Some(RejectionCode::TicketDecided | RejectionCode::TicketNotPending)
    );
    (!decided_elsewhere).then_some(outcome)
}

/// One look at `call`, waiting under `ticket_id`: its outcome once its decision was carried
/// out (here, or by another worker), or, once its ticket left the store, the call dispatched
/// again (the repeat gate answers for a call that ran; one that still needs a human waits
/// under a new ticket, as `Outcome::Pending`); `None` while it waits (`Progress::Waiting`) or
/// runs on another worker.
pub(crate) async fn look(
    shared: &Shared,
    ctx: &CallContext,
    call: &ToolCall,
    ticket_id: &str,
) -> Result<Option<Outcome>, Rejection> {
    Ok(match shared.registry.follow(ticket_id).await? {
        Progress::Ended(outcome) => Some(outcome),
        // Another worker (the server's own `run_decided` loop, say) runs it now: its outcome
        // is the answer, read at a later look.
        Progress::Left => Some(shared.registry.dispatch(ctx, call).await)
            .filter(|outcome| outcome.code() != Some(RejectionCode::CallInProgress)),
        _ => None,
    })
}

/// Waits for an operator's decision on `ticket` while the request is open, telling a client
/// that asked for progress that the call still waits. Returns the call's outcome, or the
/// pending call when the wait ended or the client cancelled its request.
pub(crate) async fn await_decision(
    shared: &Shared,
    ctx: &CallContext,
    call: &ToolCall,
    mut ticket: Box<Ticket>,
    request: &RequestContext<RoleServer>,
) -> Outcome {
    let deadline = Instant::now() + shared.approval_wait;
    let progress_token = request.meta.get_progress_token();
    let mut beats = 0u32;
    loop {
        tokio::select! {
            () = request.ct.cancelled() => return Outcome::Pending(ticket),
            () = tokio::time::sleep(shared.poll_interval) => {}
        }
        match look(shared, ctx, call, &ticket.id).await {
            Ok(Some(Outcome::Pending(still))) => ticket = still,
            Ok(Some(outcome)) => return outcome,
            Ok(None) => {}
            Err(refusal) => return Outcome::Rejected(refusal),
        }
        if Instant::now() >= deadline {
            return Outcome::Pending(ticket);
        }
        if let Some(token) = &progress_token {
            beats += 1;
            let mut progress = ProgressNotificationParam::new(token.clone(), f64::from(beats));
            progress.message = Some(format!("awaiting approval of ticket {}", ticket.id));
            // A client that went away gets its outcome from a later call.
            let _ = request.peer.notify_progress(progress).await;
        }
    }
}
