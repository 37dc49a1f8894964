//! The MCP handler: its caller, its task, its tool list and its calls, every one of them
//! through [`Registry::dispatch`](portcullis_core::Registry::dispatch).
//!
//! It serves both lifecycles the specification defines, chosen by each request:
//! - 2025-11-25 and earlier: one handler per session; the session's caller (the first
//!   request's) and a task id made for the session.
//! - 2026-07-28, stateless: one handler per request; the caller from the request's
//!   credentials, the task from the sealed handle the client passes back in
//!   `_meta["dev.portcullis/task"]`, returned in the results of a continuable task; without
//!   one, a new task that ends with the request unless the client asks for a continuable one
//!   or its call waits for a human ([`live_tasks`](crate::live_tasks)); a caller's confirmation
//!   through `InputRequiredResult` and its retry.
//!
//! Under both, a `tools/call` from a host that relays its user's messages may carry the user's
//! latest message, recorded in the call's task before the call is judged (`user_message`).

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use portcullis_core::encoding::random_id;
use portcullis_core::export::Profile;
use portcullis_core::wire::{self, mcp};
use portcullis_core::{CallContext, Outcome, Ticket, ToolCall};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    ElicitationAction, ErrorCode, ExtensionCapabilities, GetTaskParams, GetTaskResult,
    Implementation, InitializeRequestParams, InitializeResult, InputRequest, InputRequiredResult,
    JsonObject, ListToolsResult, MetaObject, NumberOrString, PaginatedRequestParams,
    ProtocolVersion, ResultType, ServerCapabilities, ServerConfig, TASKS_EXTENSION_ID,
    ToolsCapability,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::approval::{self, WAITING_MESSAGE};
use crate::identity::{Authenticated, Caller};
use crate::limits::{self, OpenSession};
use crate::live_tasks::{CONTINUABLE_META, LiveTasks, TaskStart};
use crate::sealed::{CALL_META, Confirmation, StillWaiting, TASK_META, TaskHandle, refusal};
use crate::server::{Listener, Shared};
use crate::task;
use crate::user_message::{self, USER_MESSAGE_META};

/// Where a session's caller comes from.
pub(crate) enum Origin {
    /// The configuration: one caller for the session (stdio).
    Fixed,
    /// Each request's credentials, which must name the caller that opened the session.
    Requests,
}

/// The waiting calls a session remembers. One it forgot still waits in the approval store and
/// runs if a reviewer approves it; the same call sent again is then a call of its own, through
/// every gate (and `too_many_pending` while the first waits).
const WAITING_CALLS: usize = 32;

/// The key of the confirmation in an `InputRequiredResult`'s requests and its retry's responses.
const CONFIRMATION: &str = "confirm";

/// The state of one session; rmcp makes one per MCP session, and one per request of the
/// stateless protocol.
pub(crate) struct Session {
    shared: Arc<Shared>,
    origin: Origin,
    /// The caller's identity as authenticated, and its context with the session's task id.
    caller: OnceLock<(CallContext, CallContext)>,
    /// The session's calls still waiting for approval when their request answered: a later
    /// call of the same tool with the same arguments resumes one instead of asking again. At
    /// most [`WAITING_CALLS`], the oldest forgotten first. (Under the stateless protocol, the
    /// task handle carries them instead.)
    waiting: Mutex<Vec<StillWaiting>>,
    /// The session's place under the server's caps (over HTTP), given back when it drops.
    place: OnceLock<Arc<OpenSession>>,
}

impl Session {
    pub(crate) fn new(shared: Arc<Shared>, origin: Origin, fixed: Option<CallContext>) -> Self {
        let caller = OnceLock::new();
        if let Some(identity) = fixed {
            let session = identity.clone().with_fresh_task_id();
            let _ = caller.set((identity, session));
        }
        Session {
            shared,
            origin,
            caller,
            waiting: Mutex::new(Vec::new()),
            place: OnceLock::new(),
        }
    }

    /// The context of a request that names no task of its own (`initialize`, `tasks/get`,
    /// `tasks/cancel`): in a session, the session's ([`session_context`](Self::session_context));
    /// under the stateless protocol, the caller's identity, as an MCP task id names its call's
    /// task whatever handle the request carries.
    fn context(&self, request: &RequestContext<RoleServer>) -> Result<CallContext, ErrorData> {
        if stateless(request) {
            return self.identity(request);
        }
        self.session_context(request)
    }

    /// The context of the session's caller and task. Over HTTP the first request names the
    /// session's caller: a request with another caller's credentials is refused, as a session
    /// id alone does not make a caller.
    fn session_context(
        &self,
        request: &RequestContext<RoleServer>,
    ) -> Result<CallContext, ErrorData> {
        if let Origin::Requests = self.origin {
            let identity = self.identity(request)?;
            let (owner, _) = self.caller.get_or_init(|| {
                let session = identity.clone().with_fresh_task_id();
                (identity.clone(), session)
            });
            if Caller::of(owner) != Caller::of(&identity) {
                // Over HTTP the request is refused before it gets here (`admission`).
                return Err(ErrorData::invalid_request(
                    limits::SESSION_OF_ANOTHER_CALLER_MESSAGE,
                    Some(json!({"code": limits::SESSION_OF_ANOTHER_CALLER})),
                ));
            }
        }
        self.caller
            .get()
            .map(|(_, session)| session.clone())
            .ok_or_else(|| ErrorData::internal_error("the session has no caller", None))
    }

    /// The context of a stateless request's caller and task, the task's calls still waiting
    /// (as its handle carries them) and what becomes of the task. The task is the one the
    /// request's handle names, refused past its lifetime (`task_expired`) or once ended here
    /// (`task_ended`); without a handle, a new one, continuable if the client asks
    /// (`_meta["dev.portcullis/continuable"]: true`).
    fn stateless_task(
        &self,
        request: &RequestContext<RoleServer>,
    ) -> Result<(CallContext, Vec<StillWaiting>, Stateless), ErrorData> {
        let identity = self.identity(request)?;
        let meta = &request.meta.0;
        let live = &self.shared.live_tasks;
        // Read even beside a handle (where it changes nothing), so that a bad one is refused.
        let continuable = continuable_asked(meta.get(CONTINUABLE_META))?;
        if let Some(handle) = meta.get(TASK_META) {
            let TaskHandle {
                task,
                waiting,
                start,
            } = self.shared.seals.open_task_handle(&identity, handle)?;
            if LiveTasks::expired(&start) {
                return Err(refusal(
                    "task_expired",
                    "this task is past its lifetime and has ended: send no handle to start a new \
                     task",
                ));
            }
            if live.ended(&identity, &task, &start) {
                return Err(refusal(
                    "task_ended",
                    "this task was ended to make room for a newer task of this caller: send no \
                     handle to start a new task",
                ));
            }
            let task_ctx = identity.with_task_id(task);
            let continued = Stateless {
                start,
                life: Life::Continued,
            };
            return Ok((task_ctx, waiting, continued));
        }
        let life = if continuable {
            Life::Continuable
        } else {
            Life::OneRequest
        };
        let task = Stateless {
            start: live.start_now(),
            life,
        };
        Ok((identity.with_fresh_task_id(), Vec::new(), task))
    }

    /// Counts the task of `ctx`, started at `start`, among its caller's live continuable tasks,
    /// and forgets the state of the tasks no instance can continue any more.
    async fn keep(&self, ctx: &CallContext, start: &TaskStart) {
        for forgotten in self.shared.live_tasks.keep(ctx, ctx.task_id(), start) {
            self.shared.registry.end_task(&forgotten).await;
        }
    }

    /// The identity of the request's caller, as configured or as its credentials name it.
    fn identity(&self, request: &RequestContext<RoleServer>) -> Result<CallContext, ErrorData> {
        match self.origin {
            Origin::Fixed => self.caller.get().map(|(identity, _)| identity.clone()),
            Origin::Requests => authenticated(request),
        }
        .ok_or_else(|| ErrorData::invalid_request("the request is not authenticated", None))
    }

    /// Records the user's `words` in the task of `ctx`, before its call is judged; the
    /// refusal of the call when they could not be recorded, as the call must not be judged
    /// without the words it was sent with.
    async fn hear(&self, ctx: &CallContext, words: Option<&str>) -> Result<(), Outcome> {
        let Some(words) = words else {
            return Ok(());
        };
        self.shared
            .registry
            .add_user_message(ctx, words)
            .await
            .map_err(Outcome::Rejected)
    }
}

impl Drop for Session {
    /// The session's task ends with it: its id was made for the session, so no call comes in
    /// it again, and a bounded budget store may forget it; nor is it told of tool changes.
    fn drop(&mut self) {
        let Some((_, session)) = self.caller.get() else {
            return;
        };
        self.shared.unlisten(session.task_id());
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let registry = Arc::clone(&self.shared.registry);
        let task = session.task_id().to_owned();
        runtime.spawn(async move { registry.end_task(&task).await });
    }
}

/// The call to dispatch for `request`: for the same tool and arguments as a call of the task
/// still `waiting` for approval, that call again; otherwise a new one, of id `new_id`.
fn call_for(
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
/// ended; a retryable refusal (a store out of reach) ends nothing.
fn remember(waiting: &mut Vec<StillWaiting>, call: &ToolCall, outcome: &Outcome) {
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

/// The MCP result of `outcome`; a call still waiting tells the model how to learn its outcome.
fn tool_result(outcome: &Outcome) -> Result<CallToolResult, ErrorData> {
    let value = match outcome {
        Outcome::Pending(ticket) => {
            let mut waiting = wire::pending_result(ticket);
            waiting["message"] = json!(WAITING_MESSAGE);
            json!({"content": [{"type": "text", "text": waiting.to_string()}], "isError": true})
        }
        _ => match mcp::result(outcome) {
            Ok(result) => result,
            Err(error) => {
                return Err(ErrorData::new(
                    ErrorCode(error["code"].as_i64().unwrap_or(-32602) as i32),
                    error["message"].as_str().unwrap_or_default().to_owned(),
                    error.get("data").cloned(),
                ));
            }
        },
    };
    let mut result: CallToolResult = serde_json::from_value(value).map_err(|error| {
        ErrorData::internal_error(format!("unrenderable result: {error}"), None)
    })?;
    // Required from 2026-07-28; rmcp takes it off for older peers.
    result.result_type = Some(ResultType::COMPLETE);
    Ok(result)
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::default();
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(true);
        capabilities.tools = Some(tools);
        capabilities.extensions = Some(ExtensionCapabilities::from([(
            TASKS_EXTENSION_ID.to_owned(),
            JsonObject::new(),
        )]));
        let mut info = ServerConfig::new(capabilities);
        info.server_info = Implementation::new(
            self.shared.name.clone(),
            env!("CARGO_PKG_VERSION").to_owned(),
        );
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info.instructions = Some(
            "Every call passes portcullis's gates. A refused call is a result with isError and \
             a JSON message whose `error` is a stable code; a call that needs a human's approval \
             waits for it."
                .to_owned(),
        );
        info
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if let Some(place) = limits::claim(&context) {
            let _ = self.place.set(place);
        }
        // The caller who opens the session owns it.
        self.context(&context)?;
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let ctx = self.context(&context)?;
        let in_session = !stateless(&context);
        task::get(
            &self.shared,
            &ctx,
            in_session,
            &request.task_id,
            |outcome| {
                let result = tool_result(outcome)?;
                serde_json::to_value(result)
                    .map_err(|error| ErrorData::internal_error(error.to_string(), None))
            },
        )
        .await
    }

    async fn cancel_task(
        &self,
        _request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.context(&context)?;
        Err(ErrorData::invalid_request(
            "a call waiting for approval is decided by a reviewer or expires; the client cannot \
             cancel it",
            None,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if !stateless(&context) {
            let ctx = self.session_context(&context)?;
            let tools = self.shared.tools_for(&ctx)?;
            let result = tool_list(&tools)?;
            self.shared
                .listen(Listener::new(context.peer.clone(), ctx, tools));
            return Ok(result);
        }
        let (ctx, waiting, task) = self.stateless_task(&context)?;
        let tools = self.shared.tools_for(&ctx)?;
        let mut result = tool_list(&tools)?;
        // Each caller sees its own tools: no cache may share them with another.
        result.cache_scope = Some(CacheScope::Private);
        result.ttl_ms = Some(self.shared.tools_ttl_ms());
        // A one-request task listed tools only: nothing of it is in the stores to forget.
        if task.life == Life::OneRequest {
            return Ok(result);
        }
        if task.life == Life::Continuable {
            self.keep(&ctx, &task.start).await;
        }
        self.hand_back(&ctx, &waiting, &task.start, &mut result.meta);
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !stateless(&context) {
            let ctx = self.session_context(&context)?;
            let words = user_message::relayed(
                context.meta.0.get(USER_MESSAGE_META),
                &self.identity(&context)?,
            )?;
            if let Err(refused) = self.hear(&ctx, words).await {
                return tool_result(&refused).map(CallToolResponse::from);
            }
            return self.call_in_session(&ctx, &request, &context).await;
        }
        let (ctx, mut waiting, task) = self.stateless_task(&context)?;
        let words = user_message::relayed(
            context.meta.0.get(USER_MESSAGE_META),
            &self.identity(&context)?,
        )?;
        let (ctx, call, asked) = self.stateless_call(ctx, &mut waiting, &request, &context)?;
        // A retry that answers a confirmation goes on in the task the confirmation was asked
        // in, which went on past its request as its call waited.
        let task = match &asked {
            Some(asked) => Stateless {
                start: asked.start.clone(),
                life: Life::Continued,
            },
            None => task,
        };
        let answer = asked.and_then(|asked| Some((asked.ticket, confirmation_answer(&request)?)));
        let answered = match self.hear(&ctx, words).await {
            Ok(()) => {
                self.call_stateless(&ctx, &task.start, &mut waiting, call, answer, &context)
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
            // No handle of the task was given nor will be: nothing can go on in it, so what
            // the stores hold for it can go.
            self.shared.registry.end_task(ctx.task_id()).await;
            return answered;
        }
        if task.life != Life::Continued {
            self.keep(&ctx, &task.start).await;
        }
        let mut response = answered?;
        let meta = match &mut response {
            CallToolResponse::Complete(result) => &mut result.meta,
            CallToolResponse::InputRequired(result) => &mut result.meta,
            CallToolResponse::Task(result) => &mut result.meta,
            _ => return Ok(response),
        };
        self.hand_back(&ctx, &waiting, &task.start, meta);
        Ok(response)
    }
}

impl Session {
    /// A call in a session: the caller confirms through an elicitation while the request
    /// waits, and a call sent again while it waits resumes it.
    async fn call_in_session(
        &self,
        ctx: &CallContext,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The request's JSON-RPC id: unique within the session, whose task is its own.
        let call = call_for(&self.waiting(), request, || match &context.id {
            NumberOrString::Number(number) => number.to_string(),
            NumberOrString::String(text) => text.to_string(),
        });
        let mut outcome = self.shared.registry.dispatch(ctx, &call).await;
        if let Outcome::Pending(ticket) = &outcome
            && ticket.caller_confirms
            && let Some(confirmed) = approval::confirm(&self.shared, ctx, ticket, context).await
        {
            outcome = confirmed;
        }
        let outcome = match outcome {
            Outcome::Pending(ticket) => match self.wait(ctx, &call, ticket, context).await? {
                Waited::Task(task) => return Ok(task),
                Waited::Ended(outcome) => outcome,
            },
            outcome => outcome,
        };
        remember(&mut self.waiting(), &call, &outcome);
        tool_result(&outcome).map(CallToolResponse::from)
    }

    /// The call a stateless request makes, and its task. Its id is the one the client gave in
    /// `_meta["dev.portcullis/call"]` (a retry on any instance is then the same call), that of
    /// the task's call still waiting with the same tool and arguments, or a new one. A retry
    /// that answers a confirmation names its call and task in its sealed `requestState`, which
    /// opens only for the same caller, tool and arguments.
    fn stateless_call(
        &self,
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
        let asked = self
            .shared
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

    /// A call under the stateless protocol, in the task of `ctx` started at `start`. The
    /// caller confirms in two requests: the first answers `InputRequiredResult` with a sealed
    /// `requestState`; the retry carries the `answer`, with the ticket its state named.
    async fn call_stateless(
        &self,
        ctx: &CallContext,
        start: &TaskStart,
        waiting: &mut Vec<StillWaiting>,
        call: ToolCall,
        answer: Option<(String, ElicitationAction)>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut outcome = self.shared.registry.dispatch(ctx, &call).await;
        if let Outcome::Pending(ticket) = &outcome
            && ticket.caller_confirms
        {
            let answer = answer
                .filter(|(asked, _)| *asked == ticket.id)
                .map(|(_, action)| action);
            match answer {
                Some(action) => {
                    if let Some(decided) = approval::decide(&self.shared, ctx, ticket, action).await
                    {
                        outcome = decided;
                    }
                }
                None if approval::can_confirm(context) => {
                    // Sent again without its answer (the state expired, say), the call asks
                    // again under the same ticket rather than opening another.
                    remember(waiting, &call, &outcome);
                    return self.ask_to_confirm(ctx, start, &call, ticket);
                }
                None => {}
            }
        }
        let outcome = match outcome {
            Outcome::Pending(ticket) => match self.wait(ctx, &call, ticket, context).await? {
                Waited::Task(task) => return Ok(task),
                Waited::Ended(outcome) => outcome,
            },
            outcome => outcome,
        };
        remember(waiting, &call, &outcome);
        tool_result(&outcome).map(CallToolResponse::from)
    }

    /// The `InputRequiredResult` that asks the caller to confirm `call`, waiting under
    /// `ticket`.
    fn ask_to_confirm(
        &self,
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
        let state =
            self.shared
                .seals
                .confirmation(ctx, start, call, ticket, self.shared.approval_wait);
        Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
            Some([(CONFIRMATION.to_owned(), ask)].into()),
            Some(state),
        )))
    }

    /// A call waiting for an operator: a task at once for a client that declared the tasks
    /// extension, otherwise the request held open until the call's outcome or the end of the
    /// wait.
    async fn wait(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        ticket: Box<Ticket>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Waited, ErrorData> {
        if context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks())
        {
            let in_session = !stateless(context);
            return task::open(&self.shared, ctx, in_session, call, &ticket).map(Waited::Task);
        }
        Ok(Waited::Ended(
            approval::await_decision(&self.shared, ctx, call, ticket, context).await,
        ))
    }

    /// Puts the handle of `ctx`'s task, started at `start`, in a result's `_meta`, for the
    /// client to send back.
    fn hand_back(
        &self,
        ctx: &CallContext,
        waiting: &[StillWaiting],
        start: &TaskStart,
        meta: &mut Option<MetaObject>,
    ) {
        let lifetime = self.shared.live_tasks.lifetime();
        let handle = self.shared.seals.task_handle(ctx, waiting, start, lifetime);
        meta.get_or_insert_with(MetaObject::default)
            .0
            .insert(TASK_META.to_owned(), json!(handle));
    }

    /// The session's calls still waiting.
    fn waiting(&self) -> std::sync::MutexGuard<'_, Vec<StillWaiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A stateless request's task: when and where it started, and whether it goes on after the
/// request (its handle handed back) or ends with it.
struct Stateless {
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

/// How the wait for an operator ended.
enum Waited {
    /// The client follows the call through this MCP task.
    Task(CallToolResponse),
    /// The call's outcome, or still pending when the wait ended first.
    Ended(Outcome),
}

/// Whether `request` is served under the stateless protocol (2026-07-28 and later).
fn stateless(request: &RequestContext<RoleServer>) -> bool {
    request
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The caller the HTTP layer authenticated for `request`.
fn authenticated(request: &RequestContext<RoleServer>) -> Option<CallContext> {
    request
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Authenticated>())
        .map(|authenticated| authenticated.0.clone())
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

/// A tool list as a result.
fn tool_list(tools: &Value) -> Result<ListToolsResult, ErrorData> {
    let mut result: ListToolsResult = serde_json::from_value(json!({ "tools": tools }))
        .map_err(|error| ErrorData::internal_error(format!("unrenderable tools: {error}"), None))?;
    result.result_type = Some(ResultType::COMPLETE);
    Ok(result)
}

/// The caller's answer to the confirmation, from the retry's `inputResponses`.
fn confirmation_answer(request: &CallToolRequestParams) -> Option<ElicitationAction> {
    let answer = request.input_responses.as_ref()?.get(CONFIRMATION)?;
    serde_json::from_value(answer.get("action")?.clone()).ok()
}

impl Shared {
    /// The MCP tool list `ctx` sees.
    pub(crate) fn tools_for(&self, ctx: &CallContext) -> Result<Value, ErrorData> {
        self.registry
            .export(ctx, Profile::Mcp)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }
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
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
            assert_eq!(error.data.unwrap()["code"], "call_id_invalid");
        }
    }
}
