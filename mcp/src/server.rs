//! The server: a registry, how long a call may wait for a human while its request is open, and
//! the sessions to tell when their tool list changes.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use portcullis_core::export::Profile;
use portcullis_core::{CallContext, DecisionKey, Registry};
use rmcp::model::RequestStateCodec;
use rmcp::service::Peer;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use crate::limits::{Caps, Limits};
use crate::live_tasks::LiveTasks;
use crate::sealed::Seals;

/// A [`Registry`] served over MCP, over stdio ([`serve_stdio`](Self::serve_stdio)) or
/// streamable HTTP ([`serve_http`](Self::serve_http)). Cheap to clone: clones share the
/// registry and the sessions.
///
/// ```no_run
/// use portcullis_core::export::Profile;
/// use portcullis_core::{CallContext, DecisionKey, Registry};
/// use portcullis_mcp::McpServer;
///
/// # async fn run() -> Result<(), portcullis_mcp::ServeError> {
/// let registry = Registry::builder().profile(Profile::Mcp).build().unwrap();
/// let server = McpServer::builder(registry).build()?;
/// server.serve_stdio(CallContext::new("ops-bot").with_roles(["support"])).await
/// # }
/// ```
#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
}

/// What every session of a server shares.
pub(crate) struct Shared {
    pub(crate) registry: Arc<Registry>,
    pub(crate) name: String,
    /// How long a request stays open while its call waits for a human.
    pub(crate) approval_wait: Duration,
    /// How often a waiting request, and the server's worker, look at the approval store.
    pub(crate) poll_interval: Duration,
    pub(crate) allowed_hosts: Vec<String>,
    pub(crate) allowed_origins: Vec<String>,
    /// How long an HTTP session may go without a request before rmcp ends it.
    pub(crate) session_idle_timeout: Duration,
    /// Signs a caller's confirmation of its own call.
    pub(crate) confirmation_key: Option<DecisionKey>,
    /// Seals what clients carry for the server: task handles, confirmations, MCP task ids.
    pub(crate) seals: Seals,
    /// How long a client may keep a tool list, under the stateless protocol.
    tools_ttl: Duration,
    /// The caps on sessions and requests over HTTP, and what callers hold under them.
    pub(crate) limits: Arc<Limits>,
    /// The continuable tasks of the stateless protocol this instance started.
    pub(crate) live_tasks: LiveTasks,
    listeners: Mutex<Vec<Listener>>,
}

/// A session that listed its tools: told when what it sees changes.
pub(crate) struct Listener {
    peer: Peer<RoleServer>,
    ctx: CallContext,
    listed: Value,
}

impl Listener {
    pub(crate) fn new(peer: Peer<RoleServer>, ctx: CallContext, listed: Value) -> Self {
        Listener { peer, ctx, listed }
    }
}

impl Shared {
    /// The MCP tool list `ctx` sees.
    pub(crate) fn tools_for(&self, ctx: &CallContext) -> Result<Value, ErrorData> {
        self.registry
            .export(ctx, Profile::Mcp)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    /// The `ttlMs` of a tool list.
    pub(crate) fn tools_ttl_ms(&self) -> u64 {
        u64::try_from(self.tools_ttl.as_millis()).unwrap_or(u64::MAX)
    }

    /// Remembers the tool list a session was just given.
    pub(crate) fn listen(&self, listener: Listener) {
        let mut listeners = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        listeners.retain(|known| {
            !known.peer.is_transport_closed() && known.ctx.task_id() != listener.ctx.task_id()
        });
        listeners.push(listener);
    }

    /// Forgets the tool list of the session of task `task_id`, which closed.
    pub(crate) fn unlisten(&self, task_id: &str) {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|known| known.ctx.task_id() != task_id);
    }
}

/// The settings of an [`McpServer`], from [`McpServer::builder`]: each has a default, and
/// [`build`](Self::build) refuses a registry not built for the MCP profile.
pub struct McpServerBuilder {
    registry: Arc<Registry>,
    name: String,
    approval_wait: Duration,
    poll_interval: Duration,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    session_idle_timeout: Duration,
    confirmation_key: Option<DecisionKey>,
    state_codec: Option<RequestStateCodec>,
    tools_ttl: Duration,
    caps: Caps,
    task_lifetime: Duration,
    continuable_tasks_per_caller: usize,
}

impl McpServerBuilder {
    /// The server's name in `initialize` (default `portcullis`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How long a `tools/call` request stays open while its call waits for a human (default
    /// 2 minutes). After it, the result says the call awaits approval, with its ticket, and a
    /// later call of the same tool with the same arguments in the session resumes it.
    pub fn approval_wait(mut self, wait: Duration) -> Self {
        self.approval_wait = wait;
        self
    }

    /// How often a waiting request, and the worker that runs decisions nobody waits for,
    /// look at the approval store (default 1 second; anything under 10 milliseconds is taken
    /// as 10, so that waiting requests cannot keep the store busy).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// The `Host` values HTTP requests may carry (default: `localhost`, `127.0.0.1`, `::1`),
    /// against DNS rebinding. A server behind a public name lists that name.
    pub fn allowed_hosts<I, S>(mut self, hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allowed_hosts = hosts.into_iter().map(Into::into).collect();
        self
    }

    /// The `Origin` values HTTP requests may carry (default: `http://localhost:*`,
    /// `http://127.0.0.1:*`, `http://[::1]:*`), against DNS rebinding and pages of other sites:
    /// a request with another `Origin` is refused with `403 Forbidden`, and a request without
    /// one (a client that is not a browser) passes. An entry is `scheme://host:port`, with `*`
    /// for any port; `null` admits the browser's `Origin: null`. An empty list refuses every
    /// request that carries an `Origin`.
    pub fn allowed_origins<I, S>(mut self, origins: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allowed_origins = origins.into_iter().map(Into::into).collect();
        self
    }

    /// How many sessions one caller may hold open over HTTP (default 128); the next
    /// `initialize` is refused with `429` and the JSON-RPC error `-32010`, `data.code`
    /// `too_many_sessions`. A session counts until it is closed (`DELETE`) or has gone
    /// without a request for [`session_idle_timeout`](Self::session_idle_timeout). Callers
    /// are told apart by actor, tenant, roles and environment, as sessions tell them apart.
    pub fn max_sessions_per_caller(mut self, sessions: usize) -> Self {
        self.caps.sessions_per_caller = sessions;
        self
    }

    /// How long an HTTP session may go without a request before the server ends it and gives
    /// its place under the caps back (default 5 minutes, rmcp's). A call waiting for a human
    /// sends nothing while it waits: keep this longer than
    /// [`approval_wait`](Self::approval_wait).
    pub fn session_idle_timeout(mut self, timeout: Duration) -> Self {
        self.session_idle_timeout = timeout;
        self
    }

    /// How many sessions the server holds open over HTTP, all callers together (default
    /// 4096); the next `initialize` is refused as for
    /// [`max_sessions_per_caller`](Self::max_sessions_per_caller), with `Retry-After: 30`.
    pub fn max_sessions(mut self, sessions: usize) -> Self {
        self.caps.sessions = sessions;
        self
    }

    /// How many requests one caller may have in flight over HTTP at once, in all its sessions
    /// (default 32); the next is refused with `429` and the JSON-RPC error `-32010`,
    /// `data.code` `too_many_requests`. A request counts until its answer has been sent (a call
    /// waiting for a human counts while it waits); notifications and the client's answers
    /// to the server's requests are not counted.
    pub fn max_requests_per_caller(mut self, requests: usize) -> Self {
        self.caps.requests_per_caller = requests;
        self
    }

    /// Signs the callers' confirmations of their own calls (MCP elicitation, on tools whose
    /// contract lets the caller confirm) with `key`. A registry with a keyring counts them
    /// only if it holds the key's public half as a confirmation key
    /// ([`Keyring::caller_confirmations`](portcullis_core::Keyring::caller_confirmations)),
    /// which lets the key decide as the call's actor on such tickets and nothing else.
    /// Without it, confirmations are unsigned, and count only where the registry accepts
    /// unsigned decisions.
    pub fn confirmation_key(mut self, key: DecisionKey) -> Self {
        self.confirmation_key = Some(key);
        self
    }

    /// Seals what the server gives clients to send back (default: a key of this process
    /// alone): under the stateless protocol (2026-07-28), the handle of the caller's task
    /// (`_meta["dev.portcullis/task"]`) and the `requestState` of a confirmation; under both
    /// protocols, the id of an MCP task waiting for an operator. Each is bound to its caller,
    /// expires, and cannot be forged without the key. Instances that serve one client behind a
    /// load balancer, or a server that should honour them after a restart, share the keys;
    /// a keyring ([`RequestStateCodec::new_with_keyring`]) rotates them.
    ///
    /// ```
    /// use portcullis_mcp::RequestStateCodec;
    ///
    /// let codec = RequestStateCodec::new_with_keyring(
    ///     "2026-11",
    ///     [("2026-11", [7u8; 32]), ("2026-10", [8u8; 32])],
    /// )
    /// .unwrap();
    /// # let _ = codec;
    /// ```
    pub fn state_codec(mut self, codec: RequestStateCodec) -> Self {
        self.state_codec = Some(codec);
        self
    }

    /// How long a client of the stateless protocol may keep a tool list before it asks again
    /// (`ttlMs`, default 0: every time). The list is each caller's own (`cacheScope:
    /// private`); a dynamic value (`#[one_of]`) that changes within the time is still checked
    /// by the gates, only the model's hint is stale.
    pub fn tools_ttl(mut self, ttl: Duration) -> Self {
        self.tools_ttl = ttl;
        self
    }

    /// How long a continuable task of the stateless protocol (2026-07-28) lives from its start,
    /// however often it is used (default 24 hours): a request with its handle after that is
    /// refused (`-32602`, `data.code` `task_expired`) and what the stores hold for it is
    /// forgotten. A task is continuable when a request without a handle asks for one
    /// (`_meta["dev.portcullis/continuable"]: true`) or when its call still waits for a human;
    /// any other request without a handle is a task that ends with the request.
    pub fn continuable_task_lifetime(mut self, lifetime: Duration) -> Self {
        self.task_lifetime = lifetime;
        self
    }

    /// How many continuable tasks of the stateless protocol one caller (actor and tenant) holds
    /// at once on this instance (default 64; at least 1): starting one more ends the caller's
    /// oldest, whose handle is then refused (`-32602`, `data.code` `task_ended`). The default
    /// lets 100 callers each hold 64 tasks and have 32 requests in flight (each a task) within
    /// the 10,000 tasks the default in-memory provenance store holds.
    pub fn max_continuable_tasks_per_caller(mut self, tasks: usize) -> Self {
        self.continuable_tasks_per_caller = tasks;
        self
    }

    /// The server; [`ServeError::NoMcpProfile`] unless the registry was built for the MCP
    /// profile ([`RegistryBuilder::profile`](portcullis_core::RegistryBuilder::profile)), which
    /// checks at build time that every tool fits MCP.
    pub fn build(self) -> Result<McpServer, ServeError> {
        if !self.registry.serves(Profile::Mcp) {
            return Err(ServeError::NoMcpProfile);
        }
        Ok(McpServer {
            shared: Arc::new(Shared {
                registry: self.registry,
                name: self.name,
                approval_wait: self.approval_wait,
                poll_interval: self.poll_interval,
                allowed_hosts: self.allowed_hosts,
                allowed_origins: self.allowed_origins,
                session_idle_timeout: self.session_idle_timeout,
                confirmation_key: self.confirmation_key,
                seals: self
                    .state_codec
                    .map_or_else(Seals::of_this_process, Seals::new),
                tools_ttl: self.tools_ttl,
                limits: Arc::new(Limits::new(self.caps)),
                live_tasks: LiveTasks::new(self.task_lifetime, self.continuable_tasks_per_caller),
                listeners: Mutex::new(Vec::new()),
            }),
        })
    }
}

impl McpServer {
    /// A builder for a server of `registry`.
    pub fn builder(registry: impl Into<Arc<Registry>>) -> McpServerBuilder {
        McpServerBuilder {
            registry: registry.into(),
            name: "portcullis".to_owned(),
            approval_wait: Duration::from_secs(120),
            poll_interval: Duration::from_secs(1),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: vec![
                "http://localhost:*".into(),
                "http://127.0.0.1:*".into(),
                "http://[::1]:*".into(),
            ],
            session_idle_timeout: Duration::from_secs(300),
            confirmation_key: None,
            state_codec: None,
            tools_ttl: Duration::ZERO,
            caps: Caps {
                sessions_per_caller: 128,
                sessions: 4096,
                requests_per_caller: 32,
            },
            task_lifetime: Duration::from_secs(24 * 60 * 60),
            continuable_tasks_per_caller: 64,
        }
    }

    /// The registry the server dispatches to.
    pub fn registry(&self) -> &Registry {
        &self.shared.registry
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Tells every session whose tool list changed since it last listed it, for example after
    /// a dynamic value (`#[one_of]`) changed; returns how many were told. Sessions that
    /// closed are forgotten.
    pub async fn tools_changed(&self) -> usize {
        let changed: Vec<Peer<RoleServer>> = {
            let mut listeners = self
                .shared
                .listeners
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            listeners.retain(|listener| !listener.peer.is_transport_closed());
            listeners
                .iter_mut()
                .filter_map(|listener| {
                    let now = self.shared.tools_for(&listener.ctx).ok()?;
                    (now != listener.listed).then(|| {
                        listener.listed = now;
                        listener.peer.clone()
                    })
                })
                .collect()
        };
        let mut told = 0;
        for peer in changed {
            if peer.notify_tool_list_changed().await.is_ok() {
                told += 1;
            }
        }
        told
    }

    /// Runs, every poll interval, the decisions recorded for calls whose request no longer
    /// waits, and ends expired tickets; stops when the guard drops.
    pub(crate) fn spawn_worker(&self) -> WorkerGuard {
        let shared = self.shared.clone();
        WorkerGuard(tokio::spawn(async move {
            loop {
                tokio::time::sleep(shared.poll_interval).await;
                match shared.registry.run_decided().await {
                    Ok(ran) => {
                        for (ticket, outcome) in ran {
                            tracing::info!(%ticket, code = ?outcome.code(), "ran a decided call");
                        }
                    }
                    Err(refusal) => tracing::warn!(%refusal, "decided calls could not be read"),
                }
                shared.registry.expire_tickets().await;
            }
        }))
    }
}

/// Stops the server's worker when the serving ends.
pub(crate) struct WorkerGuard(tokio::task::JoinHandle<()>);

impl Drop for WorkerGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why a server could not start or stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServeError {
    /// The registry was not built for the MCP profile.
    NoMcpProfile,
    /// The listener or the standard streams failed.
    Io(std::io::Error),
    /// The MCP session could not be opened or ended abnormally.
    Protocol(String),
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::NoMcpProfile => f.write_str(
                "the registry does not serve the MCP profile: build it with `.profile(Profile::Mcp)`",
            ),
            ServeError::Io(error) => write!(f, "the server's connection failed: {error}"),
            ServeError::Protocol(reason) => write!(f, "the MCP session failed: {reason}"),
        }
    }
}

impl std::error::Error for ServeError {}

impl From<std::io::Error> for ServeError {
    fn from(error: std::io::Error) -> Self {
        ServeError::Io(error)
    }
}
