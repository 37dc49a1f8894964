//! A session of the 2025-11-25 lifecycle (and earlier), which rmcp serves with one handler per
//! session: its owner, the caller whose request opened it (over HTTP; over stdio, the
//! configured caller), a task id made for the session, the session's calls still waiting for
//! approval, and its place under the server's caps. A caller confirms a call through an
//! elicitation while its request waits.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use portcullis_core::{CallContext, Outcome};
use rmcp::model::{CallToolRequestParams, CallToolResponse, ListToolsResult, NumberOrString};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::json;

use crate::approval;
use crate::identity::Caller;
use crate::limits::{self, OpenSession};
use crate::reply::{tool_list, tool_result};
use crate::sealed::StillWaiting;
use crate::server::{Listener, Shared};
use crate::user_message::{self, USER_MESSAGE_META};
use crate::waiting::{Waited, call_for, remember, wait};

/// The state of one session.
pub(crate) struct Session {
    shared: Arc<Shared>,
    /// The owner's identity as authenticated, and its context with the session's task id.
    caller: OnceLock<(CallContext, CallContext)>,
    /// The session's calls still waiting for approval when their request answered: a later
    /// call of the same tool with the same arguments resumes one instead of asking again.
    waiting: Mutex<Vec<StillWaiting>>,
    /// The session's place under the server's caps (over HTTP), given back when it drops.
    place: OnceLock<Arc<OpenSession>>,
}

impl Session {
    /// A session of `shared`'s server, owned by `fixed` where the configuration names its
    /// caller, otherwise by the caller of its first request.
    pub(crate) fn new(shared: Arc<Shared>, fixed: Option<&CallContext>) -> Self {
        let caller = OnceLock::new();
        if let Some(identity) = fixed {
            let session = identity.clone().with_fresh_task_id();
            let _ = caller.set((identity.clone(), session));
        }
        Session {
            shared,
            caller,
            waiting: Mutex::new(Vec::new()),
            place: OnceLock::new(),
        }
    }

    /// Holds `place` under the server's caps until the session ends.
    pub(crate) fn hold(&self, place: Arc<OpenSession>) {
        let _ = self.place.set(place);
    }

    /// The context of the session's task, for a request of `identity`'s caller. The first
    /// request names the session's owner: a request with another caller's credentials is
    /// refused, as a session id alone does not make a caller.
    pub(crate) fn context(&self, identity: &CallContext) -> Result<CallContext, ErrorData> {
        let (owner, session) = self.caller.get_or_init(|| {
            let session = identity.clone().with_fresh_task_id();
            (identity.clone(), session)
        });
        if Caller::of(owner) != Caller::of(identity) {
            // Over HTTP the request is refused before it gets here (`admission`).
            return Err(ErrorData::invalid_request(
                limits::SESSION_OF_ANOTHER_CALLER_MESSAGE,
                Some(json!({"code": limits::SESSION_OF_ANOTHER_CALLER})),
            ));
        }
        Ok(session.clone())
    }

    /// The tools the session's owner sees; the session is told when they change.
    pub(crate) fn list_tools(
        &self,
        identity: &CallContext,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let ctx = self.context(identity)?;
        let tools = self.shared.tools_for(&ctx)?;
        let result = tool_list(&tools)?;
        self.shared
            .listen(Listener::new(context.peer.clone(), ctx, tools));
        Ok(result)
    }

    /// A call in the session: the caller confirms through an elicitation while the request
    /// waits, and a call sent again while it waits resumes it.
    pub(crate) async fn call_tool(
        &self,
        identity: &CallContext,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let ctx = self.context(identity)?;
        let words = user_message::relayed(context.meta.0.get(USER_MESSAGE_META), identity)?;
        if let Err(refused) = user_message::record(&self.shared, &ctx, words).await {
            return tool_result(&refused).map(CallToolResponse::from);
        }
        // The request's JSON-RPC id: unique within the session, whose task is its own.
        let call = call_for(&self.waiting(), request, || match &context.id {
            NumberOrString::Number(number) => number.to_string(),
            NumberOrString::String(text) => text.to_string(),
        });
        let mut outcome = self.shared.registry.dispatch(&ctx, &call).await;
        if let Outcome::Pending(ticket) = &outcome
            && ticket.caller_confirms
            && let Some(confirmed) = approval::confirm(&self.shared, &ctx, ticket, context).await
        {
            outcome = confirmed;
        }
        let outcome = match wait(&self.shared, &ctx, true, &call, outcome, context).await? {
            Waited::Task(task) => return Ok(task),
            Waited::Ended(outcome) => outcome,
        };
        remember(&mut self.waiting(), &call, &outcome);
        tool_result(&outcome).map(CallToolResponse::from)
    }

    /// The session's calls still waiting.
    fn waiting(&self) -> MutexGuard<'_, Vec<StillWaiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
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
