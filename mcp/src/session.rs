//! One MCP session: its caller, its task, its tool list and its calls, every one of them
//! through [`Registry::dispatch`](portcullis_core::Registry::dispatch).

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use portcullis_core::export::Profile;
use portcullis_core::wire::{self, mcp};
use portcullis_core::{Arguments, CallContext, Outcome, ToolCall};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ErrorCode,
    ExtensionCapabilities, GetTaskParams, GetTaskResult, Implementation, InitializeRequestParams,
    InitializeResult, JsonObject, ListToolsResult, NumberOrString, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, TASKS_EXTENSION_ID, ToolsCapability,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::approval::{self, WAITING_MESSAGE};
use crate::identity::same_caller;
use crate::limits::{self, OpenSession};
use crate::server::{Listener, Shared};
use crate::task::Tasks;

/// The caller of an HTTP request, as the server's [`Authenticator`](crate::Authenticator)
/// found it; the HTTP layer puts it in the request's extensions.
#[derive(Clone)]
pub(crate) struct Authenticated(pub(crate) CallContext);

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
const WAITING_CALLS: usize = 100;

/// The state of one session; rmcp makes one per MCP session.
pub(crate) struct Session {
    shared: Arc<Shared>,
    origin: Origin,
    /// The caller's identity as authenticated, and its context with the session's task id.
    caller: OnceLock<(CallContext, CallContext)>,
    /// The calls still waiting for approval when their request answered: a later call of the
    /// same tool with the same arguments, in this session, resumes one instead of asking again.
    /// At most [`WAITING_CALLS`], the oldest forgotten first.
    waiting: Mutex<Vec<ToolCall>>,
    tasks: Tasks,
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
            tasks: Tasks::default(),
            place: OnceLock::new(),
        }
    }

    /// The context of the request's caller, with the session's task id. Over HTTP the first
    /// request names the session's caller, and a request with another caller's credentials
    /// is refused: a session id alone does not make a caller.
    fn context(&self, request: &RequestContext<RoleServer>) -> Result<CallContext, ErrorData> {
        if let Origin::Requests = self.origin {
            let identity = request
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Authenticated>())
                .map(|authenticated| authenticated.0.clone())
                .ok_or_else(|| {
                    ErrorData::invalid_request("the request is not authenticated", None)
                })?;
            let (owner, _) = self.caller.get_or_init(|| {
                let session = identity.clone().with_fresh_task_id();
                (identity.clone(), session)
            });
            if !same_caller(owner, &identity) {
                return Err(ErrorData::invalid_request(
                    "this session belongs to another caller: open a session of your own",
                    None,
                ));
            }
        }
        self.caller
            .get()
            .map(|(_, session)| session.clone())
            .ok_or_else(|| ErrorData::internal_error("the session has no caller", None))
    }

    /// The call to dispatch for this request: a new one, whose id is the request's JSON-RPC id
    /// (unique within the session's task), or, for the same tool and arguments as a call still
    /// waiting for approval, that call again.
    fn call_for(&self, request: &CallToolRequestParams, id: &NumberOrString) -> ToolCall {
        let arguments =
            Arguments::Json(Value::Object(request.arguments.clone().unwrap_or_default()));
        let waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(earlier) = waiting
            .iter()
            .find(|earlier| earlier.name == request.name && earlier.arguments == arguments)
        {
            return earlier.clone();
        }
        let id = match id {
            NumberOrString::Number(number) => number.to_string(),
            NumberOrString::String(text) => text.to_string(),
        };
        ToolCall::new(id, request.name.to_string(), arguments)
    }

    /// Remembers a call still waiting when its request answers, and forgets one that ended;
    /// a retryable refusal (a store out of reach) ends nothing.
    fn remember(&self, call: &ToolCall, outcome: &Outcome) {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let known = waiting.iter().position(|earlier| earlier.id == call.id);
        match (outcome, known) {
            (Outcome::Pending(_), None) => {
                if waiting.len() >= WAITING_CALLS {
                    waiting.remove(0);
                }
                waiting.push(call.clone());
            }
            (Outcome::Pending(_), Some(_)) => {}
            (Outcome::Rejected(refusal), _) if refusal.retryable() => {}
            (_, Some(index)) => {
                waiting.swap_remove(index);
            }
            (_, None) => {}
        }
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
    serde_json::from_value(value)
        .map_err(|error| ErrorData::internal_error(format!("unrenderable result: {error}"), None))
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
        // Sessions carry the caller and the task; the stateless 2026-07-28 lifecycle has none.
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
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
        self.context(&context)?;
        self.tasks
            .get(&self.shared, &request.task_id, |outcome| {
                let result = tool_result(outcome)?;
                serde_json::to_value(result)
                    .map_err(|error| ErrorData::internal_error(error.to_string(), None))
            })
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
        let ctx = self.context(&context)?;
        let tools = self.shared.tools_for(&ctx)?;
        self.shared
            .listen(Listener::new(context.peer.clone(), ctx, tools.clone()));
        serde_json::from_value(json!({"tools": tools})).map_err(|error| {
            ErrorData::internal_error(format!("unrenderable tools: {error}"), None)
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let ctx = self.context(&context)?;
        let call = self.call_for(&request, &context.id);
        let registry = &self.shared.registry;
        let mut outcome = registry.dispatch(&ctx, &call).await;
        if let Outcome::Pending(ticket) = &outcome
            && ticket.caller_confirms
            && let Some(confirmed) = approval::confirm(&self.shared, &ctx, ticket, &context).await
        {
            outcome = confirmed;
        }
        if let Outcome::Pending(ticket) = outcome {
            if context
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.supports_tasks())
            {
                return self.tasks.open(&self.shared, &ctx, &call, &ticket);
            }
            outcome = approval::await_decision(&self.shared, &ctx, &call, ticket, &context).await;
        }
        self.remember(&call, &outcome);
        tool_result(&outcome).map(CallToolResponse::from)
    }
}

impl Shared {
    /// The MCP tool list `ctx` sees.
    pub(crate) fn tools_for(&self, ctx: &CallContext) -> Result<Value, ErrorData> {
        self.registry
            .export(ctx, Profile::Mcp)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }
}
