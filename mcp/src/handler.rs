//! The MCP handler, which rmcp makes once per session (2025-11-25 and earlier) and once per
//! request of the stateless protocol (2026-07-28): it knows who calls and which lifecycle a
//! request follows, and hands the request to that lifecycle, [`session`](crate::session) or
//! [`stateless`]. Every call of either goes through
//! [`Registry::dispatch`](portcullis_core::Registry::dispatch).
//!
//! Under both, a `tools/call` from a host that relays its user's messages may carry the user's
//! latest message, recorded in the call's task before the call is judged
//! ([`user_message`](crate::user_message)).

use std::sync::Arc;

use portcullis_core::CallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ExtensionCapabilities,
    GetTaskParams, GetTaskResult, Implementation, InitializeRequestParams, InitializeResult,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, TASKS_EXTENSION_ID, ToolsCapability,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::identity::Authenticated;
use crate::limits;
use crate::server::Shared;
use crate::session::Session;
use crate::{stateless, task};

/// Where a handler's caller comes from.
pub(crate) enum Origin {
    /// The configuration: one caller for the session (stdio).
    Fixed(CallContext),
    /// Each request's credentials; in a session, they must name the caller that opened it.
    Requests,
}

/// The handler of one session, or of one stateless request.
pub(crate) struct Handler {
    shared: Arc<Shared>,
    origin: Origin,
    /// The session this handler serves, where its requests follow the session lifecycle.
    session: Session,
}

impl Handler {
    pub(crate) fn new(shared: Arc<Shared>, origin: Origin) -> Self {
        let fixed = match &origin {
            Origin::Fixed(caller) => Some(caller),
            Origin::Requests => None,
        };
        let session = Session::new(shared.clone(), fixed);
        Handler {
            shared,
            origin,
            session,
        }
    }

    /// The identity of the request's caller, as configured or as its credentials name it.
    fn identity(&self, request: &RequestContext<RoleServer>) -> Result<CallContext, ErrorData> {
        match &self.origin {
            Origin::Fixed(caller) => Some(caller.clone()),
            Origin::Requests => authenticated(request),
        }
        .ok_or_else(|| ErrorData::invalid_request("the request is not authenticated", None))
    }

    /// The context of a request that names no task of its own (`initialize`, `tasks/get`,
    /// `tasks/cancel`): in a session, the session's; under the stateless protocol, the
    /// caller's identity, as an MCP task id names its call's task whatever handle the request
    /// carries.
    fn context(&self, request: &RequestContext<RoleServer>) -> Result<CallContext, ErrorData> {
        let identity = self.identity(request)?;
        if stateless_protocol(request) {
            return Ok(identity);
        }
        self.session.context(&identity)
    }
}

impl ServerHandler for Handler {
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
            self.session.hold(place);
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
        let in_session = !stateless_protocol(&context);
        task::get(&self.shared, &ctx, in_session, &request.task_id).await
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
        let identity = self.identity(&context)?;
        if stateless_protocol(&context) {
            return stateless::list_tools(&self.shared, &identity, &context).await;
        }
        self.session.list_tools(&identity, &context)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let identity = self.identity(&context)?;
        if stateless_protocol(&context) {
            return stateless::call_tool(&self.shared, &identity, &request, &context).await;
        }
        self.session.call_tool(&identity, &request, &context).await
    }
}

/// Whether `request` is served under the stateless protocol (2026-07-28 and later).
fn stateless_protocol(request: &RequestContext<RoleServer>) -> bool {
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
