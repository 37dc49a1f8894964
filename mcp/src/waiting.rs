//! Calls waiting for a human, as both lifecycles meet them: the call a request makes when the
//! same call of its task still waits, the waiting calls a session (or a task's handle)
//! remembers, and how a request waits for an operator.

use portcullis_core::{CallContext, Outcome, ToolCall};
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use crate::approval;
use crate::sealed::StillWaiting;
use crate::server::Shared;
use crate::task;

/// The waiting calls a session remembers. One it forgot still waits in the approval store and
/// runs if a reviewer approves it; the same call sent again is then a call of its own, through
/// every gate (and `too_many_pending` while the first waits).
const WAITING_CALLS: usize = 32;

/// The call to dispatch for `request`: for the same tool and arguments as a call of the task
/// still `waiting` for approval, that call again; otherwise a new one, of id `new_id`.
pub(crate) fn call_for(
    waiting: &[StillWaiting],
    request: &CallToolRequestParams,
    new_id: impl FnOnce() -> String,
) -> ToolCall {
    let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
    waiting
        .iter()
        .find_map(|earlier| earlier.again(&request.name, &arguments))
        .unwrap_or_else(|| ToolCall::new(new_id(), request.name.to_string(), arguments))
}

/// Remembers in `waiting` a call still waiting when its request answers, and forgets one that
/// ended; a retryable refusal (a store out of reach) ends nothing. At most [`WAITING_CALLS`],
/// the oldest forgotten first.
pub(crate) fn remember(waiting: &mut Vec<StillWaiting>, call: &ToolCall, outcome: &Outcome) {
    let known = waiting
        .iter()
        .position(|earlier| earlier.call_id() == call.id);
    match (outcome, known) {
        (Outcome::Pending(_), None) => {
            if waiting.len() >= WAITING_CALLS {
                waiting.remove(0);
            }
            waiting.push(StillWaiting::of(call));
        }
        (Outcome::Pending(_), Some(_)) => {}
        (Outcome::Rejected(refusal), _) if refusal.retryable() => {}
        (_, Some(index)) => {
            waiting.swap_remove(index);
        }
        (_, None) => {}
    }
}

/// How a call's request ends.
pub(crate) enum Waited {
    /// The client follows the call, waiting for an operator, through this MCP task.
    Task(CallToolResponse),
    /// The call's outcome: still pending when the wait for an operator ended first.
    Ended(Outcome),
}

/// The call's `outcome` once its request waited where it must, in a session or not
/// (`in_session`): a call waiting for an operator gets a task at once for a client that
/// declared the tasks extension; otherwise its request is held open until the call's outcome
/// or the end of the wait.
pub(crate) async fn wait(
    shared: &Shared,
    ctx: &CallContext,
    in_session: bool,
    call: &ToolCall,
    outcome: Outcome,
    context: &RequestContext<RoleServer>,
) -> Result<Waited, ErrorData> {
    let Outcome::Pending(ticket) = outcome else {
        return Ok(Waited::Ended(outcome));
    };
    if context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks())
    {
        return task::open(shared, ctx, in_session, call, &ticket).map(Waited::Task);
    }
    Ok(Waited::Ended(
        approval::await_decision(shared, ctx, call, ticket, context).await,
    ))
}
