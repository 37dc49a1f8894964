//! What every request goes through: the security headers on every response, the same-origin
//! check of every request that changes something, the session cookie and the CSRF token, and
//! refusals as data (`{"code", "message", "path"}`, the code snake_case and stable).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::connect_info::Connected;
use axum::extract::{Request, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, COOKIE, ORIGIN, REFERRER_POLICY, SET_COOKIE,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use portcullis_core::{Rejection, Reviewer};
use serde_json::json;
use tokio::net::TcpListener;

use crate::sessions::Session;
use crate::state::Console;
use crate::tls::TlsListener;

/// Scripts, styles and requests from the console itself only, no inline script or style, no
/// frame around it, no form posted elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                   base-uri 'none'";

/// The header a page's script sends the session's CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";

/// A refusal: its HTTP status, a stable code, a sentence, and where in the arguments.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) code: String,
    pub(crate) message: String,
    pub(crate) path: Option<String>,
}

impl Refusal {
    pub(crate) fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Refusal {
            status,
            code: code.to_owned(),
            message: message.into(),
            path: None,
        }
    }
}

/// A refusal of the gates or of a store, as the gates wrote it.
impl From<Rejection> for Refusal {
    fn from(rejection: Rejection) -> Self {
        Refusal {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: rejection.code().to_string(),
            message: rejection.message().to_owned(),
            path: rejection.path().map(str::to_owned),
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = json!({"code": self.code, "message": self.message, "path": self.path});
        (self.status, Json(body)).into_response()
    }
}

/// The security headers on every response, and the same-origin check of every request that is
/// not a read.
pub(crate) async fn guard(
    State(console): State<Arc<Console>>,
    request: Request,
    next: Next,
) -> Response {
    let changes = !matches!(*request.method(), Method::GET | Method::HEAD);
    let mut response = match same_origin(&console, request.headers()) {
        Err(refusal) if changes => {
            tracing::warn!(
                target: "portcullis_console",
                action = "refused",
                code = %refusal.code,
                path = %request.uri().path(),
                "a request from another origin was refused"
            );
            refusal.into_response()
        }
        _ => next.run(request).await,
    };
    let headers = response.headers_mut();
    for (name, value) in [
        (CONTENT_SECURITY_POLICY, CSP),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (X_FRAME_OPTIONS, "DENY"),
        (REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers
        .entry(CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    response
}

/// The request comes from the console's own pages: its `Origin` is the console's, and the
/// browser does not say it was sent from another site.
fn same_origin(console: &Console, headers: &HeaderMap) -> Result<(), Refusal> {
    let refused = || {
        Refusal::new(
            StatusCode::FORBIDDEN,
            "cross_origin_request",
            "the request did not come from the console's own pages",
        )
    };
    let origin = headers.get(ORIGIN).and_then(|value| value.to_str().ok());
    if origin != Some(console.origin.as_str()) {
        return Err(refused());
    }
    match headers.get("sec-fetch-site").map(HeaderValue::as_bytes) {
        None | Some(b"same-origin") => Ok(()),
        Some(_) => Err(refused()),
    }
}

/// The session cookie's name: under TLS, a `__Host-` cookie (Secure, this host, path `/`).
pub(crate) fn cookie_name(console: &Console) -> &'static str {
    if console.secure {
        "__Host-portcullis_session"
    } else {
        "portcullis_session"
    }
}

/// The `Set-Cookie` header of a new session.
pub(crate) fn session_cookie(console: &Console, value: &str) -> (axum::http::HeaderName, String) {
    let secure = if console.secure { "; Secure" } else { "" };
    (
        SET_COOKIE,
        format!(
            "{}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=28800{secure}",
            cookie_name(console)
        ),
    )
}

/// The `Set-Cookie` header that ends the session in the browser.
pub(crate) fn cleared_cookie(console: &Console) -> (axum::http::HeaderName, String) {
    let secure = if console.secure { "; Secure" } else { "" };
    (
        SET_COOKIE,
        format!(
            "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}",
            cookie_name(console)
        ),
    )
}

/// A signed-in reviewer, as the keyring holds them now.
pub(crate) struct SignedIn {
    pub(crate) cookie: String,
    pub(crate) session: Session,
    pub(crate) reviewer: Reviewer,
}

/// The reviewer the request's session cookie signs in, if the keyring still holds them.
pub(crate) fn signed_in(console: &Console, headers: &HeaderMap) -> Option<SignedIn> {
    let name = cookie_name(console);
    let cookie = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name).then(|| value.to_owned())
        })?;
    let session = console.sessions.session(&cookie, now_ms())?;
    let reviewer = console
        .keyring
        .current()
        .reviewers()
        .into_iter()
        .find(|reviewer| reviewer.id() == session.reviewer)?
        .clone();
    Some(SignedIn {
        cookie,
        session,
        reviewer,
    })
}

/// The signed-in reviewer of a request that changes something, which must carry the session's
/// CSRF token.
pub(crate) fn signed_in_with_token(
    console: &Console,
    headers: &HeaderMap,
) -> Result<SignedIn, Refusal> {
    let signed_in = signed_in(console, headers).ok_or_else(|| {
        Refusal::new(
            StatusCode::UNAUTHORIZED,
            "not_signed_in",
            "sign in with your passkey first",
        )
    })?;
    let token = headers
        .get(CSRF_HEADER)
        .map(HeaderValue::as_bytes)
        .unwrap_or_default();
    if !same_bytes(token, signed_in.session.csrf.as_bytes()) {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "csrf_token_invalid",
            "the request does not carry this session's token: reload the page",
        ));
    }
    Ok(signed_in)
}

/// Compares two secrets in time that does not depend on where they differ.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// The address a request came from, as the console's handlers read it
/// ([`ConnectInfo`](axum::extract::ConnectInfo)); a test that calls the router without a
/// socket gives one with [`MockConnectInfo`](axum::extract::connect_info::MockConnectInfo).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub SocketAddr);

impl Connected<IncomingStream<'_, TcpListener>> for ClientAddress {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        ClientAddress(*stream.remote_addr())
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for ClientAddress {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        ClientAddress(*stream.remote_addr())
    }
}
