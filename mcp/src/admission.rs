//! The one middleware every HTTP request to the MCP endpoint passes before rmcp reads it:
//! who the caller is, the body read once within its limit, the message checked, a session
//! used only by the caller that opened it, and the caps on what a caller holds open.
//!
//! One pass over each request, in this order: authentication (`401`/`403` with a
//! `WWW-Authenticate` challenge); for a `POST`, the body (`413` past 4 MiB) and the message's
//! shape (`400` with the JSON-RPC error); a session of another caller (`403`,
//! `session_of_another_caller`), whatever the method; then the caps (`429`): a new session
//! takes a place, each request one while its response is sent. A `DELETE` that ends a session
//! gives its place back at once and is answered `204`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use rmcp::model::ErrorCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::challenge;
use crate::identity::{Authenticated, Authenticator, Caller};
use crate::limits::{
    Caps, Limits, NewSession, OpenSession, Refusal, RequestSlot, SESSION_OF_ANOTHER_CALLER,
    SESSION_OF_ANOTHER_CALLER_MESSAGE,
};
use crate::message;

/// The largest request body read, as rmcp's own default.
const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// The JSON-RPC error code of a refusal by a cap, in the range the specification leaves to
/// servers.
const LIMIT_ERROR: i64 = -32010;

/// Seconds a client is asked to wait when the server holds as many sessions as it serves.
const RETRY_AFTER_SECONDS: &str = "30";

/// The header that names a session.
const SESSION_ID: &str = "mcp-session-id";

/// What a server's requests are admitted by: its authenticator and its caps.
#[derive(Clone)]
pub(crate) struct Admission {
    pub(crate) authenticator: Arc<dyn Authenticator>,
    pub(crate) limits: Arc<Limits>,
}

impl Admission {
    /// Lets `request` through to `next` with its caller in its extensions, or refuses it.
    pub(crate) async fn admit(self, request: Request, next: Next) -> Response {
        let (mut parts, body) = request.into_parts();
        let context = match self.authenticator.authenticate(&parts).await {
            Ok(context) => context,
            Err(refusal) => {
                return challenge::refused(&refusal, self.authenticator.protected_resource());
            }
        };
        let caller = Caller::of(&context);
        parts.extensions.insert(Authenticated(context));
        let session = session_id(&parts.headers);
        let another = |session: &Option<String>| {
            (session.as_deref()).is_some_and(|id| self.limits.owned_by_another(id, &caller))
        };
        if parts.method != Method::POST {
            if another(&session) {
                return not_the_owner();
            }
            let request = Request::from_parts(parts, body);
            return self.without_body(request, session, next).await;
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
        if another(&session) {
            return not_the_owner();
        }
        let mut request = Request::from_parts(parts, Body::from(bytes.clone()));
        let Ok(Head {
            id: Some(id),
            method: Some(method),
        }) = serde_json::from_slice::<Head>(&bytes)
        else {
            // Notifications and the client's answers end no sooner for being refused, and a
            // caller's confirmation must reach the call that waits for it.
            return answered(next.run(request).await, &bytes);
        };
        let new_session = if method == "initialize" && session.is_none() {
            match self.limits.open_session(&caller) {
                Ok(slot) => {
                    let open = Arc::new(OpenSession::new(slot));
                    request.extensions_mut().insert(NewSession(open.clone()));
                    Some(open)
                }
                Err(refusal) => return refused(self.limits.caps(), refusal, id),
            }
        } else {
            None
        };
        let slot = match self.limits.start_request(&caller) {
            Ok(slot) => slot,
            Err(refusal) => return refused(self.limits.caps(), refusal, id),
        };
        let response = answered(next.run(request).await, &bytes);
        if let Some(open) = new_session
            && let Some(id) = response.headers().get(SESSION_ID)
            && let Ok(id) = id.to_str()
        {
            self.limits.opened(id, &caller, &open);
        }
        response.map(|body| {
            Body::new(Holding {
                body,
                slot: Some(slot),
            })
        })
    }

    /// A request that carries no message (`GET`, `DELETE`): a `DELETE` that ends `session`
    /// gives its place back at once, and is answered `204 No Content`, as clients expect, where
    /// rmcp answers `202 Accepted`.
    async fn without_body(self, request: Request, session: Option<String>, next: Next) -> Response {
        let deleting = request.method() == Method::DELETE;
        let mut response = next.run(request).await;
        if deleting && response.status().is_success() {
            if let Some(id) = session {
                self.limits.closed(&id);
            }
            if response.status() == StatusCode::ACCEPTED {
                *response.status_mut() = StatusCode::NO_CONTENT;
            }
        }
        response
    }
}

/// rmcp's `response` to the message `bytes`. rmcp reads a message once, after the caps, and
/// answers what it cannot read as a client message with a bare `415`; reading it a second time
/// for every message cost a tenth of the server's time under load, so only a refused one is
/// read again, to say why.
fn answered(response: Response, bytes: &[u8]) -> Response {
    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE
        && let Err(error) = message::client_message(bytes)
    {
        return bad_request(error);
    }
    response
}

/// `400 Bad Request` carrying the JSON-RPC error response `error`.
fn bad_request(error: Value) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        error.to_string(),
    )
        .into_response()
}

/// What the caps need of a JSON-RPC message.
#[derive(Deserialize)]
struct Head {
    id: Option<Value>,
    method: Option<String>,
}

fn session_id(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get(SESSION_ID)
        .and_then(|id| id.to_str().ok())
        .map(str::to_owned)
}

/// The `429` of a refusal, with the JSON-RPC error of request `id`.
fn refused(caps: &Caps, refusal: Refusal, id: Value) -> Response {
    let (code, scope, limit, message) = match refusal {
        Refusal::CallerSessions => (
            "too_many_sessions",
            "caller",
            caps.sessions_per_caller,
            "this caller holds as many open sessions as a caller may: close one (DELETE) \
             before opening another",
        ),
        Refusal::ServerSessions => (
            "too_many_sessions",
            "server",
            caps.sessions,
            "the server holds as many open sessions as it serves: retry later",
        ),
        Refusal::CallerRequests => (
            "too_many_requests",
            "caller",
            caps.requests_per_caller,
            "this caller has as many requests in flight as a caller may: wait for an answer \
             before sending another",
        ),
    };
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": LIMIT_ERROR, "message": message,
        "data": {"code": code, "scope": scope, "limit": limit}}});
    let mut response = (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response();
    if refusal == Refusal::ServerSessions {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from_static(RETRY_AFTER_SECONDS),
        );
    }
    response
}

/// The `403` of a request on a session another caller opened, with a JSON-RPC error (of no
/// id: the request's body is not read, as the refusal does not depend on it).
fn not_the_owner() -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {
        "code": ErrorCode::INVALID_REQUEST.0,
        "message": SESSION_OF_ANOTHER_CALLER_MESSAGE,
        "data": {"code": SESSION_OF_ANOTHER_CALLER}}});
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A response body that holds its request's place until it has been sent.
struct Holding {
    body: Body,
    slot: Option<RequestSlot>,
}

impl HttpBody for Holding {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.slot = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
