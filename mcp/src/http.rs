//! Streamable HTTP: every request authenticated before the MCP layer sees it.

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use crate::admission::Admission;
use crate::handler::{Handler, Origin};
use crate::identity::Authenticator;
use crate::server::{McpServer, ServeError};

impl McpServer {
    /// The server as an axum [`Router`] with the MCP endpoint at `/mcp`, to serve on its own
    /// ([`serve_http`](Self::serve_http)) or to nest in an application. A request whose
    /// credentials `authenticator` refuses gets `401 Unauthorized` (or `403` for too little
    /// scope) with a `WWW-Authenticate` challenge; each session answers only the caller that
    /// opened it, under a task id of its own: any request of another caller on it (`DELETE`
    /// and `GET` too) gets `403`, code `session_of_another_caller`. An authenticator for OAuth access tokens
    /// ([`OAuth`](crate::oauth::OAuth)) adds its protected resource metadata document at
    /// `/.well-known/oauth-protected-resource` (and that path followed by the resource's
    /// path), outside authentication. A request past a cap
    /// ([`McpServerBuilder::max_sessions_per_caller`](crate::McpServerBuilder::max_sessions_per_caller)
    /// and the others) gets `429`, one with an `Origin` not allowed `403`.
    pub fn router(&self, authenticator: impl Authenticator) -> Router {
        let shared = self.shared().clone();
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(shared.allowed_hosts.iter().cloned())
            .with_allowed_origins(shared.allowed_origins.iter().cloned())
            .enforce_origin_validation();
        let limits = shared.limits.clone();
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = Some(shared.session_idle_timeout);
        let service = StreamableHttpService::new(
            move || Ok(Handler::new(shared.clone(), Origin::Requests)),
            Arc::new(sessions),
            config,
        );
        let authenticator: Arc<dyn Authenticator> = Arc::new(authenticator);
        let metadata = authenticator
            .protected_resource()
            .map(|resource| resource.routes());
        let admission = Admission {
            authenticator,
            limits,
        };
        let router = Router::new()
            .route_service("/mcp", service)
            .layer(middleware::from_fn(move |request: Request, next: Next| {
                admission.clone().admit(request, next)
            }));
        // The metadata document is public: it is how a client learns where to get a token.
        match metadata {
            Some(metadata) => router.merge(metadata),
            None => router,
        }
    }

    /// Serves MCP over streamable HTTP on `listener` (the endpoint is `/mcp`) until the
    /// listener fails, with a worker that runs the decisions nobody waits for.
    pub async fn serve_http(
        &self,
        listener: TcpListener,
        authenticator: impl Authenticator,
    ) -> Result<(), ServeError> {
        let _worker = self.spawn_worker();
        // Answers are small and come in several writes (SSE events); without this, Nagle's
        // algorithm and delayed acknowledgements hold each one back for tens of milliseconds.
        let listener = listener.tap_io(|stream| {
            if let Err(error) = stream.set_nodelay(true) {
                tracing::warn!(%error, "TCP_NODELAY could not be set");
            }
        });
        axum::serve(listener, self.router(authenticator)).await?;
        Ok(())
    }
}
