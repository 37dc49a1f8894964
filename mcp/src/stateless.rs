//! The stateless lifecycle (2026-07-28), which rmcp serves with one handler per request: the
//! caller from the request's credentials; the task from the sealed handle the client passes
//! back in `_meta["dev.portcullis/task"]`, returned in the results of a continuable task;
//! without one, a new task that ends with the request unless the client asks for a
//! continuable one or its call waits for a human ([`live_tasks`](crate::live_tasks)). A
//! caller confirms a call in two requests: the first answers `InputRequiredResult` with a
//! sealed `requestState`, the retry carries the answer.

use portcullis_core::encoding::random_id;
use portcullis_core::{CallContext, Outcome, Ticket, ToolCall};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, ElicitationAction, InputRequest,
    InputRequiredResult, ListToolsResult, MetaObject,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use crate::approval;
use crate::live_tasks::{CONTINUABLE_META, LiveTasks, TaskStart};
use crate::reply::{tool_list, tool_result};
use crate::sealed::{CALL_META, Confirmation, StillWaiting, TASK_META, TaskHandle, refusal};
use crate::server::Shared;
use crate::user_message::{self, USER_MESSAGE_META};
use crate::waiting::{Waited, call_for, remember, wait};

/// The key of the confirmation in an `InputRequiredResult`'s requests and its retry's responses.
const CONFIRMATION: &str = "confirm";

/// A stateless request's task: when and where it started, and whether it goes on after the
/// request (its handle handed back) or ends with it.
struct Task {
    start: TaskStart,
    life: Life,
}

/// What becomes of a stateless task when its request ends.
#[derive(Clone, Copy, PartialEq)]
enum Life {
    /// Started by the request, which asked for no continuable task: it ends with the request,
    /// unless its call still waits for a human.
    OneRequest,
    /// Started by the request, which asked for a continuable task: counted among its caller's
    /// live tasks once the request answers.
    Continuable,
    /// A live task that an earlier request started.
    Continued,
}

/// The tools `identity`'s caller sees, with the handle of the request's task where it goes
/// on.
pub(crate) async fn list_tools(
    shared: &Shared,
    identity: &CallContext,
    context: &RequestContext<RoleServer>,
) -> Result<ListToolsResult, ErrorData> {
    let (ctx, waiting, task) = task_of(shared, identity, context)?;
    let tools = shared.tools_for(&ctx)?;
    let mut result = tool_list(&tools)?;
    // Each caller sees its own tools: no cache may share them with another.
    result.cache_scope = Some(CacheScope::Private);
    result.ttl_ms = Some(shared.tools_ttl_ms());
    // A one-request task listed tools only: nothing of it is in the stores to forget.
    if task.life == Life::OneRequest {
        return Ok(result);
    }
    if task.life == Life::Continuable {
        keep(shared, &ctx, &task.start).await;
    }
    hand_back(shared, &ctx, &waiting, &task.start, &mut result.meta);
    Ok(result)
}

/// A call of `identity`'s caller in the request's task, which ends with the request unless
/// something of it goes on: a continuable task, or a call still waiting for a human.
pub(crate) async fn call_tool(
    shared: &Shared,
    identity: &CallContext,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let (ctx, mut waiting, task) = task_of(shared, identity, context)?;
    let words = user_message::relayed(context.meta.0.get(USER_MESSAGE_META), identity)?;
    let (ctx, call, asked) = call_of(shared, ctx, &mut waiting, request, context)?;
    // A retry that answers a confirmation goes on in the task the confirmation was asked in,
    // which went on past its request as its call waited.
    let task = match &asked {
        Some(asked) => Task {
            start: asked.start.clone(),
            life: Life::Continued,
        },
        None => task,
    };
    let answer = asked.and_then(|asked| Some((asked.ticket, confirmation_answer(request)?)));
    let answered = match user_message::record(shared, &ctx, words).await {
        Ok(()) => {
            dispatch(
                shared,
                &ctx,
                &task.start,
                &mut waiting,
                call,
                answer,
                context,
            )
            .await
        }
        Err(refused) => tool_result(&refused).map(CallToolResponse::from),
    };
    let still_waits = !waiting.is_empty()
        || matches!(
            answered,
            Ok(CallToolResponse::InputRequired(_) | CallToolResponse::Task(_))
        );
    // A call waiting for a human goes on in its task, as its handle resumes it.
    let goes_on = task.life == Life::Continued
        || (answered.is_ok() && (task.life == Life::Continuable || still_waits));
    if !goes_on {
        // No handle of the task was given nor will be: nothing can go on in it, so what the
        // stores hold for it can go.
        shared.registry.end_task(ctx.task_id()).await;
        return answered;
    }
    if task.life != Life::Continued {
        keep(shared, &ctx, &task.start).await;
    }
    let mut response = answered?;
    let meta = match &mut response {
        CallToolResponse::Complete(result) => &mut result.meta,
        CallToolResponse::InputRequired(result) => &mut result.meta,
        CallToolResponse::Task(result) => &mut result.meta,
        _ => return Ok(response),
    };
    hand_back(shared, &ctx, &waiting, &task.start, meta);
    Ok(response)
}

/// The context of a stateless request's caller and task, the task's calls still waiting (as
/// its handle carries them) and what becomes of the task. The task is the one the request's
/// handle names, refused past its lifetime (`task_expired`) or once ended here
/// (`task_ended`); without a handle, a new one, continuable if the client asks
/// (`_meta["dev.portcullis/continuable"]: true`).
fn task_of(
    shared: &Shared,
    identity: &CallContext,
    request: &RequestContext<RoleServer>,
) -> Result<(CallContext, Vec<StillWaiting>, Task), ErrorData> {
    let meta = &request.meta.0;
    let live = &shared.live_tasks;
    // Read even beside a handle (where it changes nothing), so that a bad one is refused.
    let continuable = continuable_asked(meta.get(CONTINUABLE_META))?;
    if let Some(handle) = meta.get(TASK_META) {
        let TaskHandle {
            task,
            waiting,
            start,
        } = shared.seals.open_task_handle(identity, handle)?;
        if LiveTasks::expired(&start) {
            return Err(refusal(
                "task_expired",
                "this task is past its lifetime and has ended: send no handle to start a new task",
            ));
        }
        if live.ended(identity, &task, &start) {
            return Err(refusal(
                "task_ended",
                "this task was ended to make room for a newer task of this caller: send no \
                 handle to start a new task",
            ));
        }
        let continued = Task {
            start,
            life: Life::Continued,
        };
        return Ok((identity.clone().with_task_id(task), waiting, continued));
    }
    let life = if continuable {
        Life::Continuable
    } else {
        Life::OneRequest
    };
    let task = Task {
        start: live.start_now(),
        life,
    };
    Ok((identity.clone().with_fresh_task_id(), Vec::new(), task))
}

/// The call a stateless request makes, and its task. Its id is the one the client gave in
/// `_meta["dev.portcullis/call"]` (a retry on any instance is then the same call), that of the
/// task's call still waiting with the same tool and arguments, or a new one. A retry that
/// answers a confirmation names its call and task in its sealed `requestState`, which opens
/// only for the same caller, tool and arguments.
fn call_of(
    shared: &Shared,
    ctx: CallContext,
    waiting: &mut Vec<StillWaiting>,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<(CallContext, ToolCall, Option<Confirmation>), ErrorData> {
    let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
    let Some(state) = &request.request_state else {
        let call = match client_call_id(context.meta.0.get(CALL_META))? {
            Some(id) => ToolCall::new(id, request.name.to_string(), arguments),
            None => call_for(waiting, request, || random_id("call")),
        };
        return Ok((ctx, call, None));
    };
    let asked = shared
        .seals
        .open_confirmation(&ctx, &request.name, &arguments, state)?;
    if asked.task != ctx.task_id() {
        // The calls the request's handle remembers are another task's.
        waiting.clear();
    }
    let ctx = ctx.with_task_id(asked.task.clone());
    let call = ToolCall::new(asked.call_id.clone(), request.name.to_string(), arguments);
    Ok((ctx, call, Some(asked)))
}

/// Dispatches `call` in the task of `ctx` started at `start`. The caller confirms in two
/// requests: the first answers `InputRequiredResult` with a sealed `requestState`; the retry
/// carries the `answer`, with the ticket its state named.
async fn dispatch(
    shared: &Shared,
    ctx: &CallContext,
    start: &TaskStart,
    waiting: &mut Vec<StillWaiting>,
    call: ToolCall,
    answer: Option<(String, ElicitationAction)>,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let mut outcome = shared.registry.dispatch(ctx, &call).await;
    if let Outcome::Pending(ticket) = &outcome
        && ticket.caller_confirms
    {
        let answer = answer
            .filter(|(asked, _)| *asked == ticket.id)
            .map(|(_, action)| action);
        match answer {
            Some(action) => {
                if let Some(decided) = approval::decide(shared, ctx, ticket, action).await {
                    outcome = decided;
                }
            }
            None if approval::can_confirm(context) => {
                // Sent again without its answer (the state expired, say), the call asks again
                // under the same ticket rather than opening another.
                remember(waiting, &call, &outcome);
                return ask_to_confirm(shared, ctx, start, &call, ticket);
            }
            None => {}
        }
    }
    let outcome = match wait(shared, ctx, false, &call, outcome, context).await? {
        Waited::Task(task) => return Ok(task),
        Waited::Ended(outcome) => outcome,
    };
    remember(waiting, &call, &outcome);
    tool_result(&outcome).map(CallToolResponse::from)
}

/// The `InputRequiredResult` that asks the caller to confirm `call`, waiting under `ticket`.
fn ask_to_confirm(
    shared: &Shared,
    ctx: &CallContext,
    start: &TaskStart,
    call: &ToolCall,
    ticket: &Ticket,
) -> Result<CallToolResponse, ErrorData> {
    let ask: InputRequest = serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": approval::confirmation_form(ticket),
    }))
    .map_err(|error| ErrorData::internal_error(format!("unrenderable form: {error}"), None))?;
    let state = shared
        .seals
        .confirmation(ctx, start, call, ticket, shared.approval_wait);
    Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
        Some([(CONFIRMATION.to_owned(), ask)].into()),
        Some(state),
    )))
}

/// Counts the task of `ctx`, started at `start`, among its caller's live continuable tasks,
/// and forgets the state of the tasks no instance can continue any more.
async fn keep(shared: &Shared, ctx: &CallContext, start: &TaskStart) {
    for forgotten in shared.live_tasks.keep(ctx, ctx.task_id(), start) {
        shared.registry.end_task(&forgotten).await;
    }
}

/// Puts the handle of `ctx`'s task, started at `start`, in a result's `_meta`, for the client
/// to send back.
fn hand_back(
    shared: &Shared,
    ctx: &CallContext,
    waiting: &[StillWaiting],
    start: &TaskStart,
    meta: &mut Option<MetaObject>,
) {
    let lifetime = shared.live_tasks.lifetime();
    let handle = shared.seals.task_handle(ctx, waiting, start, lifetime);
    meta.get_or_insert_with(MetaObject::default)
        .0
        .insert(TASK_META.to_owned(), json!(handle));
}

/// The id the client gave its stateless call, `given` in `_meta["dev.portcullis/call"]`.
fn client_call_id(given: Option<&Value>) -> Result<Option<String>, ErrorData> {
    match given {
        None => Ok(None),
        Some(Value::String(id)) if !id.is_empty() && id.len() <= 128 => Ok(Some(id.clone())),
        Some(_) => Err(refusal(
            "call_id_invalid",
            format!("`_meta.{CALL_META}` must be a string of 1 to 128 characters"),
        )),
    }
}

/// Whether a handle-less request asks for a continuable task, `asked` in
/// `_meta["dev.portcullis/continuable"]`.
fn continuable_asked(asked: Option<&Value>) -> Result<bool, ErrorData> {
    match asked {
        None => Ok(false),
        Some(Value::Bool(asked)) => Ok(*asked),
        Some(_) => Err(refusal(
            "continuable_invalid",
            format!("`_meta.{CONTINUABLE_META}` must be true or false"),
        )),
    }
}

/// The caller's answer to the confirmation, from the retry's `inputResponses`.
fn confirmation_answer(request: &CallToolRequestParams) -> Option<ElicitationAction> {
    let answer = request.input_responses.as_ref()?.get(CONFIRMATION)?;
    serde_json::from_value(answer.get("action")?.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_id_the_client_gives_is_a_short_string_or_refused() {
        assert_eq!(client_call_id(None).unwrap(), None);
        assert_eq!(
            client_call_id(Some(&json!("pay-1"))).unwrap(),
            Some("pay-1".to_owned())
        );
        for refused in [json!(""), json!("c".repeat(129)), json!(7), json!(null)] {
            let error = client_call_id(Some(&refused)).unwrap_err();
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
            assert_eq!(error.data.unwrap()["code"], "call_id_invalid");
        }
    }
}
