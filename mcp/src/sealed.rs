//! What the client carries for the server, sealed: the task handle of the stateless protocol
//! (2026-07-28), the `requestState` of a confirmation asked through `InputRequiredResult`, and
//! the id of an MCP task waiting for an operator.
//!
//! Each is an HMAC-sealed value ([`RequestStateCodec`]) that expires, with the caller it was
//! minted for (actor, tenant, roles, environment) and what it stands for (a confirmation's tool
//! and canonical arguments; a session's task) mixed into the seal but not written in it: a
//! value opens only for the request it was made for. A client cannot forge one, read another caller's task
//! with one, nor confirm other arguments with one. Their contents are signed, not encrypted:
//! the client that holds one can read what it sent.
//!
//! Every instance of a server opens what any other sealed when they share the keys
//! ([`McpServerBuilder::state_codec`](crate::McpServerBuilder::state_codec)); that is what
//! lets a request go to any instance.

use std::time::Duration;

use portcullis_core::encoding::{hex, random_id};
use portcullis_core::json::canonical;
use portcullis_core::{Arguments, CallContext, Ticket, ToolCall};
use rmcp::ErrorData;
use rmcp::model::{RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::identity::Caller;
use crate::live_tasks::TaskStart;

/// The request `_meta` key that carries the task handle, and the result `_meta` key that
/// returns it.
pub(crate) const TASK_META: &str = "dev.portcullis/task";

/// The request `_meta` key by which a client names a call, so that a retry of the same request
/// (on any instance) is the same call and runs at most once.
pub(crate) const CALL_META: &str = "dev.portcullis/call";

/// How long the id of an MCP task waiting for an operator stays good after its ticket expired,
/// to report that.
const WAITING_TASK_AFTER_EXPIRY: Duration = Duration::from_secs(24 * 60 * 60);

/// The server's sealing keys.
pub(crate) struct Seals {
    codec: RequestStateCodec,
}

/// A confirmation the client was asked for, as its `requestState` says.
#[derive(Serialize, Deserialize)]
pub(crate) struct Confirmation {
    /// The task of the call: the retry's, whatever task handle the retry carries.
    pub(crate) task: String,
    /// When and where that task started.
    pub(crate) start: TaskStart,
    /// The call waiting for it.
    pub(crate) call_id: String,
    /// The ticket it waits under.
    pub(crate) ticket: String,
}

/// A call waiting for an operator, as its MCP task id says.
#[derive(Serialize, Deserialize)]
pub(crate) struct WaitingCall {
    pub(crate) task: String,
    pub(crate) call_id: String,
    pub(crate) tool: String,
    pub(crate) arguments: Value,
    pub(crate) ticket: String,
    pub(crate) created_ms: u64,
}

impl WaitingCall {
    /// The call, as dispatched.
    pub(crate) fn call(&self) -> ToolCall {
        ToolCall::new(
            self.call_id.clone(),
            self.tool.clone(),
            self.arguments.clone(),
        )
    }
}

/// A stateless task as its handle names it.
#[derive(Serialize, Deserialize)]
pub(crate) struct TaskHandle {
    pub(crate) task: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) waiting: Vec<StillWaiting>,
    pub(crate) start: TaskStart,
}

/// A call that still waited for approval when its request answered: a later call of the same
/// tool with the same canonical arguments, in the same task, is that call again. A session
/// keeps these; under the stateless protocol the task handle carries them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct StillWaiting {
    tool: String,
    /// The SHA-256 of the canonical arguments, in hex.
    arguments: String,
    call_id: String,
}

impl StillWaiting {
    pub(crate) fn of(call: &ToolCall) -> Self {
        StillWaiting {
            tool: call.name.clone(),
            arguments: arguments_digest(&arguments_of(call)),
            call_id: call.id.clone(),
        }
    }

    /// The call again, if `tool` and `arguments` are its own.
    pub(crate) fn again(&self, tool: &str, arguments: &Value) -> Option<ToolCall> {
        (self.tool == tool && self.arguments == arguments_digest(arguments))
            .then(|| ToolCall::new(self.call_id.clone(), tool.to_owned(), arguments.clone()))
    }

    pub(crate) fn call_id(&self) -> &str {
        &self.call_id
    }
}

/// A call's arguments as JSON.
pub(crate) fn arguments_of(call: &ToolCall) -> Value {
    match &call.arguments {
        Arguments::Json(value) => value.clone(),
        Arguments::Text(text) => Value::String(text.clone()),
    }
}

fn arguments_digest(arguments: &Value) -> String {
    hex(&Sha256::digest(canonical(arguments).as_bytes()))
}

impl Seals {
    pub(crate) fn new(codec: RequestStateCodec) -> Self {
        Seals { codec }
    }

    /// Keys of this process alone: what it seals opens nowhere else, nor after a restart.
    pub(crate) fn of_this_process() -> Self {
        let key = format!("{}{}", random_id("state"), random_id("state"));
        Seals::new(
            RequestStateCodec::try_new(key.into_bytes())
                .expect("two random ids are longer than the shortest key"),
        )
    }

    /// The handle of `ctx`'s task, started at `start`, with its calls still `waiting`, for
    /// `ctx`'s caller only. The task is refused past its `lifetime`, from its start; the handle
    /// opens for twice that from now, so that a handle of a task past its lifetime is refused
    /// as such (`task_expired`) for a while rather than as no handle at all.
    pub(crate) fn task_handle(
        &self,
        ctx: &CallContext,
        waiting: &[StillWaiting],
        start: &TaskStart,
        lifetime: Duration,
    ) -> String {
        self.seal(
            &TaskHandle {
                task: ctx.task_id().to_owned(),
                waiting: waiting.to_vec(),
                start: start.clone(),
            },
            &binding("task", ctx, &[]),
            lifetime.saturating_mul(2),
        )
    }

    /// The task `handle` names, if this server sealed it for `identity`'s caller and it has
    /// not expired.
    pub(crate) fn open_task_handle(
        &self,
        identity: &CallContext,
        handle: &Value,
    ) -> Result<TaskHandle, ErrorData> {
        let opened = handle
            .as_str()
            .and_then(|handle| self.open::<TaskHandle>(handle, &binding("task", identity, &[])));
        match opened {
            Some(handle) => Ok(handle),
            None => Err(refusal(
                "task_handle_invalid",
                format!(
                    "`_meta.{TASK_META}` is not a task handle this server gave this caller, or it \
                     expired: send the handle from an earlier result, or none to start a new task"
                ),
            )),
        }
    }

    /// The `requestState` that asks for a confirmation of `call`, waiting under `ticket`.
    pub(crate) fn confirmation(
        &self,
        ctx: &CallContext,
        start: &TaskStart,
        call: &ToolCall,
        ticket: &Ticket,
        lifetime: Duration,
    ) -> String {
        self.seal(
            &Confirmation {
                task: ctx.task_id().to_owned(),
                start: start.clone(),
                call_id: call.id.clone(),
                ticket: ticket.id.clone(),
            },
            &binding(
                "confirmation",
                ctx,
                &[&call.name, &canonical(&arguments_of(call))],
            ),
            lifetime,
        )
    }

    /// The confirmation `state` asked for, if it was sealed for this caller, tool and
    /// arguments and has not expired.
    pub(crate) fn open_confirmation(
        &self,
        ctx: &CallContext,
        tool: &str,
        arguments: &Value,
        state: &str,
    ) -> Result<Confirmation, ErrorData> {
        self.open(
            state,
            &binding("confirmation", ctx, &[tool, &canonical(arguments)]),
        )
        .ok_or_else(|| {
            refusal(
                "confirmation_invalid",
                "this requestState was not issued for this caller, tool and arguments, or it \
                 expired: it confirms nothing. Call the tool again without it to be asked anew",
            )
        })
    }

    /// The MCP task id of `call`, waiting for an operator under `ticket`: for `ctx`'s caller,
    /// and, in a session, for the session's task only.
    pub(crate) fn waiting_task(
        &self,
        ctx: &CallContext,
        in_session: bool,
        call: &ToolCall,
        ticket: &Ticket,
        now_ms: u64,
    ) -> String {
        let lifetime = Duration::from_millis(ticket.expires_ms.saturating_sub(now_ms))
            .max(Duration::from_secs(1));
        self.seal(
            &WaitingCall {
                task: ctx.task_id().to_owned(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: arguments_of(call),
                ticket: ticket.id.clone(),
                created_ms: now_ms,
            },
            &binding("waiting", ctx, &session_task(ctx, in_session)),
            // Past the ticket's expiry the call is refused anyway; the task still reports that.
            lifetime + WAITING_TASK_AFTER_EXPIRY,
        )
    }

    /// The waiting call of MCP task `task_id`, if it was sealed for this caller (and, in a
    /// session, this session's task).
    pub(crate) fn open_waiting_task(
        &self,
        ctx: &CallContext,
        in_session: bool,
        task_id: &str,
    ) -> Result<WaitingCall, ErrorData> {
        self.open(
            task_id,
            &binding("waiting", ctx, &session_task(ctx, in_session)),
        )
        .ok_or_else(|| {
            refusal(
                "task_not_found",
                format!("this caller's task has no MCP task {task_id}"),
            )
        })
    }

    fn seal<T: Serialize>(&self, value: &T, binding: &[u8], lifetime: Duration) -> String {
        let payload = serde_json::to_vec(value).expect("sealed values serialise");
        self.codec.seal_with(
            &payload,
            &SealOptions::new().associated_data(binding).ttl(lifetime),
        )
    }

    fn open<T: for<'de> Deserialize<'de>>(&self, sealed: &str, binding: &[u8]) -> Option<T> {
        let payload = self.codec.open_with(sealed, binding).ok()?;
        serde_json::from_slice(&payload).ok()
    }
}

/// What a sealed value is bound to: its purpose, the caller, and `more`.
fn binding(purpose: &str, ctx: &CallContext, more: &[&str]) -> Vec<u8> {
    canonical(&json!([purpose, Caller::of(ctx), more])).into_bytes()
}

/// The session's task, which a session's MCP tasks are bound to; under the stateless protocol
/// a task is any request's of the same caller, as a task id is as unguessable as a handle.
fn session_task(ctx: &CallContext, in_session: bool) -> Vec<&str> {
    if in_session {
        vec![ctx.task_id()]
    } else {
        Vec::new()
    }
}

/// A request the server refuses: the specification's invalid params, with a stable code.
pub(crate) fn refusal(code: &str, message: impl Into<String>) -> ErrorData {
    ErrorData::invalid_params(message.into(), Some(json!({ "code": code })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann() -> CallContext {
        CallContext::new("ann")
            .with_roles(["finance"])
            .with_task_id("task-1")
    }

    fn start() -> TaskStart {
        TaskStart {
            expires_ms: 2,
            instance: "instance-1".into(),
        }
    }

    #[test]
    fn a_task_handle_opens_for_its_caller_only() {
        let seals = Seals::of_this_process();
        let waiting = StillWaiting::of(&ToolCall::new("c1", "pay", json!({"cents": 5})));
        let lifetime = Duration::from_secs(60);
        let handle =
            json!(seals.task_handle(&ann(), std::slice::from_ref(&waiting), &start(), lifetime));
        let identity = CallContext::new("ann").with_roles(["finance"]);
        let opened = seals.open_task_handle(&identity, &handle).unwrap();
        assert_eq!((opened.task.as_str(), opened.start), ("task-1", start()));
        let again = opened.waiting[0]
            .again("pay", &json!({"cents": 5.0}))
            .unwrap();
        assert_eq!(again.id, "c1");
        assert!(
            opened.waiting[0]
                .again("pay", &json!({"cents": 6}))
                .is_none()
        );
        for other in [
            CallContext::new("bob").with_roles(["finance"]),
            CallContext::new("ann").with_roles(["finance", "admin"]),
            CallContext::new("ann")
                .with_roles(["finance"])
                .with_tenant("acme"),
        ] {
            let refused = seals.open_task_handle(&other, &handle).err().unwrap();
            assert_eq!(refused.data.unwrap()["code"], "task_handle_invalid");
        }
        let elsewhere = Seals::of_this_process();
        assert!(elsewhere.open_task_handle(&identity, &handle).is_err());
        assert!(seals.open_task_handle(&identity, &json!(7)).is_err());
    }

    #[test]
    fn a_confirmation_opens_for_its_tool_and_canonical_arguments_only() {
        let seals = Seals::of_this_process();
        let call = ToolCall::new("c1", "cancel_order", json!({"order_id": 7}));
        let ticket: Ticket = serde_json::from_value(json!({
            "id": "t1", "tool": "cancel_order", "call_id": "c1", "arguments": {},
            "actor": "ann", "tenant": null, "risk": "high", "irreversible": null,
            "description": "", "created_ms": 0, "expires_ms": 0, "approvers": [],
            "self_approval": false, "caller_confirms": true, "contract_hash": ""
        }))
        .unwrap();
        let state = seals.confirmation(&ann(), &start(), &call, &ticket, Duration::from_secs(60));
        let opened = seals
            .open_confirmation(&ann(), "cancel_order", &json!({"order_id": 7.0}), &state)
            .unwrap();
        assert_eq!(
            (
                opened.task.as_str(),
                opened.call_id.as_str(),
                opened.ticket.as_str()
            ),
            ("task-1", "c1", "t1")
        );
        let bob = CallContext::new("bob").with_roles(["finance"]);
        for (ctx, tool, arguments) in [
            (ann(), "cancel_order", json!({"order_id": 8})),
            (ann(), "refund_payment", json!({"order_id": 7})),
            (bob, "cancel_order", json!({"order_id": 7})),
        ] {
            let refused = seals
                .open_confirmation(&ctx, tool, &arguments, &state)
                .err()
                .unwrap();
            assert_eq!(refused.data.unwrap()["code"], "confirmation_invalid");
        }
    }
}
