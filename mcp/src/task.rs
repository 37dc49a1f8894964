//! MCP tasks (the `io.modelcontextprotocol/tasks` extension) for calls that wait for an
//! operator: a client that declares the extension gets a task at once instead of a request
//! held open, and `tasks/get` reports the call's outcome once a reviewer decided.
//!
//! A task's id is the waiting call itself, sealed for its caller (and, in a session, for the
//! session's task: [`Seals::waiting_task`](crate::sealed::Seals::waiting_task)); where the call stands is in
//! the stores. So the server remembers nothing per task: any instance on the same stores and
//! keys answers `tasks/get` for any task, after restarts, and a task ends with no clean-up.

use portcullis_core::{CallContext, Outcome, Ticket, ToolCall};
use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, GetTaskResult};
use serde_json::{Value, json};

use crate::approval;
use crate::live_tasks::now_ms;
use crate::reply::tool_result;
use crate::sealed::WaitingCall;
use crate::server::Shared;

/// Opens a task for `call`, waiting under `ticket`.
pub(crate) fn open(
    shared: &Shared,
    ctx: &CallContext,
    in_session: bool,
    call: &ToolCall,
    ticket: &Ticket,
) -> Result<CallToolResponse, ErrorData> {
    let now = now_ms();
    let task_id = shared
        .seals
        .waiting_task(ctx, in_session, call, ticket, now);
    let mut task = wire_task(shared, &task_id, &ticket.id, now, now);
    task["ttlMs"] = json!(ticket.expires_ms.saturating_sub(now));
    task["resultType"] = json!("task");
    serde_json::from_value(task)
        .map(CallToolResponse::Task)
        .map_err(|error| ErrorData::internal_error(format!("unrenderable task: {error}"), None))
}

/// The MCP task `task_id` of `identity`'s caller (in a session, of the session's task), moved
/// on as far as it goes: `completed` with the call's result once a reviewer's decision was
/// carried out (here or on another instance), `working` while it waits or while the store is
/// out of reach.
pub(crate) async fn get(
    shared: &Shared,
    identity: &CallContext,
    in_session: bool,
    task_id: &str,
) -> Result<GetTaskResult, ErrorData> {
    let waiting: WaitingCall = shared
        .seals
        .open_waiting_task(identity, in_session, task_id)?;
    let ctx = identity.clone().with_task_id(waiting.task.clone());
    let outcome = approval::look(shared, &ctx, &waiting.call(), &waiting.ticket)
        .await
        .ok()
        .flatten();
    let now = now_ms();
    let mut task = wire_task(shared, task_id, &waiting.ticket, waiting.created_ms, now);
    match outcome {
        Some(Outcome::Pending(still)) => {
            task["statusMessage"] = json!(waiting_message(&still.id));
        }
        Some(outcome) => {
            task["status"] = json!("completed");
            task["result"] = serde_json::to_value(tool_result(&outcome)?)
                .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        }
        None => {}
    }
    serde_json::from_value(task)
        .map_err(|error| ErrorData::internal_error(format!("unrenderable task: {error}"), None))
}

/// A task's wire fields, `working` until said otherwise.
fn wire_task(shared: &Shared, task_id: &str, ticket: &str, created_ms: u64, now: u64) -> Value {
    json!({
        "taskId": task_id,
        "status": "working",
        "statusMessage": waiting_message(ticket),
        "createdAt": timestamp(created_ms),
        "lastUpdatedAt": timestamp(now),
        "ttlMs": null,
        "pollIntervalMs": u64::try_from(shared.poll_interval.as_millis()).unwrap_or(u64::MAX),
    })
}

fn waiting_message(ticket: &str) -> String {
    format!("awaiting a reviewer's approval under ticket {ticket}")
}

/// `ms` since the Unix epoch as an ISO 8601 UTC timestamp.
fn timestamp(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
