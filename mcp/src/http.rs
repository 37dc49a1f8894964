//! Streamable HTTP: every request authenticated before the MCP layer sees it.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use crate::identity::Authenticator;
use crate::server::{McpServer, ServeError};
use crate::session::{Authenticated, Origin, Session};
use crate::{challenge, limits, message};

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
            move || Ok(Session::new(shared.clone(), Origin::Requests, None)),
            Arc::new(sessions),
            config,
        );
        let authenticator: Arc<dyn Authenticator> = Arc::new(authenticator);
        let metadata = authenticator
            .protected_resource()
            .map(|resource| resource.routes());
        let router = Router::new()
            .route_service("/mcp", service)
            .layer(middleware::from_fn(terminated))
            .layer(middleware::from_fn(move |request: Request, next: Next| {
                limits::admit(limits.clone(), request, next)
            }))
            .layer(middleware::from_fn(move |request: Request, next: Next| {
                let authenticator = authenticator.clone();
                async move { authenticate(authenticator.as_ref(), request, next).await }
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

/// Lets a request through with its caller in its extensions, or refuses it.
async fn authenticate(authenticator: &dyn Authenticator, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let caller = match authenticator.authenticate(&parts).await {
        Ok(caller) => caller,
        Err(refusal) => return challenge::refused(&refusal, authenticator.protected_resource()),
    };
    parts.extensions.insert(Authenticated(caller));
    if parts.method != Method::POST {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let Ok(bytes) = axum::body::to_bytes(body, MAX_REQUEST_BYTES).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request is larger than 4 MiB",
        )
            .into_response();
    };
    if let Err(error) = message::check(&bytes) {
        return bad_request(error);
    }
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    // rmcp reads the message once, after the caps, and answers what it cannot read as a client
    // message with a bare 415; reading it a second time for every message cost a tenth of the
    // server's time under load, so only a refused one is read again, to say why.
    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE
        && let Err(error) = message::client_message(&bytes)
    {
        return bad_request(error);
    }
    response
}

/// `400 Bad Request` carrying the JSON-RPC error response `error`.
fn bad_request(error: serde_json::Value) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        error.to_string(),
    )
        .into_response()
}

/// Answers a session's termination (`DELETE`) with `204 No Content`, as clients expect, where
/// rmcp answers `202 Accepted`.
async fn terminated(request: Request, next: Next) -> Response {
    let deleting = request.method() == Method::DELETE;
    let mut response = next.run(request).await;
    if deleting && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

/// The largest request body read, as rmcp's own default.
pub(crate) const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;
