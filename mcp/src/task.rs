//! MCP tasks (the `io.modelcontextprotocol/tasks` extension) for calls that wait for an
//! operator: a client that declares the extension gets a task at once instead of a request
//! held open, and `tasks/get` reports the call's outcome once a reviewer decided.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use portcullis_core::{CallContext, Outcome, Ticket, ToolCall};
use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, GetTaskResult};
use serde_json::{Value, json};

use crate::approval;
use crate::server::Shared;

/// The tasks a session remembers. When it has as many, opening one forgets the oldest that
/// completed, or else the oldest: a forgotten task's call still waits, and runs if a reviewer
/// approves it, but `tasks/get` no longer knows it.
const TASKS: usize = 100;

/// A session's tasks: calls that wait for an operator, by task id, at most [`TASKS`].
#[derive(Default)]
pub(crate) struct Tasks {
    tasks: Mutex<HashMap<String, Waiting>>,
}

/// One task: the call, as dispatched, and where it stands.
struct Waiting {
    ctx: CallContext,
    call: ToolCall,
    ticket: String,
    created: String,
    updated: String,
    /// The call's MCP result, once it has one.
    result: Option<Value>,
}

impl Tasks {
    /// Opens a task for `call`, waiting under `ticket`; its id is the ticket's, which the
    /// client already may know and which names nothing outside this session's tasks.
    pub(crate) fn open(
        &self,
        shared: &Shared,
        ctx: &CallContext,
        call: &ToolCall,
        ticket: &Ticket,
    ) -> Result<CallToolResponse, ErrorData> {
        let now = timestamp(now_ms());
        let waiting = Waiting {
            ctx: ctx.clone(),
            call: call.clone(),
            ticket: ticket.id.clone(),
            created: now.clone(),
            updated: now,
            result: None,
        };
        let mut task = wire_task(shared, &ticket.id, &waiting, ticket.expires_ms);
        task["resultType"] = json!("task");
        let mut tasks = self.lock();
        if tasks.len() >= TASKS {
            let oldest = tasks
                .iter()
                .min_by_key(|(id, task)| (task.result.is_none(), &task.created, *id))
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                tasks.remove(&oldest);
            }
        }
        tasks.insert(ticket.id.clone(), waiting);
        drop(tasks);
        serde_json::from_value(task)
            .map(CallToolResponse::Task)
            .map_err(|error| ErrorData::internal_error(format!("unrenderable task: {error}"), None))
    }

    /// The task `task_id` of this session, moved on as far as it goes: `completed` with the
    /// call's result once a reviewer's decision was carried out (here or by another worker),
    /// `working` while it waits.
    pub(crate) async fn get(
        &self,
        shared: &Shared,
        task_id: &str,
        render: impl Fn(&Outcome) -> Result<Value, ErrorData>,
    ) -> Result<GetTaskResult, ErrorData> {
        let (ctx, call, ticket, done) = {
            let tasks = self.lock();
            let waiting = tasks.get(task_id).ok_or_else(|| {
                ErrorData::invalid_params(format!("this session has no task {task_id}"), None)
            })?;
            let done = waiting.result.is_some();
            (
                waiting.ctx.clone(),
                waiting.call.clone(),
                waiting.ticket.clone(),
                done,
            )
        };
        if !done {
            // A store out of reach leaves the task working, for the client to ask again.
            let outcome = approval::look(shared, &ctx, &call, &ticket)
                .await
                .ok()
                .flatten();
            let mut tasks = self.lock();
            if let Some(waiting) = tasks.get_mut(task_id) {
                match outcome {
                    Some(Outcome::Pending(still)) => waiting.ticket = still.id.clone(),
                    Some(outcome) => {
                        waiting.result = Some(render(&outcome)?);
                        waiting.updated = timestamp(now_ms());
                    }
                    None => {}
                }
            }
        }
        let tasks = self.lock();
        let waiting = tasks
            .get(task_id)
            .ok_or_else(|| ErrorData::invalid_params("the task is gone", None))?;
        let mut task = wire_task(shared, task_id, waiting, 0);
        if let Some(result) = &waiting.result {
            task["status"] = json!("completed");
            task["result"] = result.clone();
        }
        serde_json::from_value(task)
            .map_err(|error| ErrorData::internal_error(format!("unrenderable task: {error}"), None))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A task's wire fields, `working` until said otherwise; `expires_ms` (when known) bounds its
/// time to live by the ticket's expiry.
fn wire_task(shared: &Shared, task_id: &str, waiting: &Waiting, expires_ms: u64) -> Value {
    let mut task = json!({
        "taskId": task_id,
        "status": "working",
        "statusMessage": format!("awaiting a reviewer's approval under ticket {}", waiting.ticket),
        "createdAt": waiting.created,
        "lastUpdatedAt": waiting.updated,
        "ttlMs": null,
        "pollIntervalMs": u64::try_from(shared.poll_interval.as_millis()).unwrap_or(u64::MAX),
    });
    if expires_ms > 0 {
        task["ttlMs"] = json!(expires_ms.saturating_sub(now_ms()));
    }
    task
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// `ms` since the Unix epoch as an ISO 8601 UTC timestamp.
fn timestamp(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
