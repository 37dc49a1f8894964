//! Caps on what callers hold open over HTTP: sessions per caller and in all, and requests in
//! flight per caller, so that one caller's flood leaves the others served.
//!
//! A session's place is taken when its `initialize` request arrives and handed to the session
//! ([`claim`]); it is given back when the session ends, by `DELETE` or by rmcp's idle timeout
//! (the session is dropped then), and at once when a `DELETE` closes it. A request's place is
//! held until its response has been sent.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use rmcp::RoleServer;
use rmcp::model::ErrorCode;
use rmcp::service::RequestContext;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::identity::Caller;
use crate::session::Authenticated;

/// The JSON-RPC error code of a refusal by a cap, in the range the specification leaves to
/// servers.
const LIMIT_ERROR: i64 = -32010;

/// Seconds a client is asked to wait when the server holds as many sessions as it serves.
const RETRY_AFTER_SECONDS: &str = "30";

/// The code of a refusal of a request on a session another caller opened.
pub(crate) const SESSION_OF_ANOTHER_CALLER: &str = "session_of_another_caller";

/// What that refusal says.
pub(crate) const SESSION_OF_ANOTHER_CALLER_MESSAGE: &str =
    "this session belongs to another caller: open a session of your own";

/// The header that names a session.
const SESSION_ID: &str = "mcp-session-id";

/// The caps, as the builder set them.
#[derive(Clone, Copy)]
pub(crate) struct Caps {
    pub(crate) sessions_per_caller: usize,
    pub(crate) sessions: usize,
    pub(crate) requests_per_caller: usize,
}

/// The caps of a server, and what its callers hold under them.
pub(crate) struct Limits {
    caps: Caps,
    held: Mutex<Held>,
    /// The open sessions by id, with the caller that opened each: to refuse every request on
    /// a session from another caller, and to give a session's place back when a `DELETE`
    /// closes it rather than when rmcp gets round to dropping it. Entries of sessions that
    /// ended otherwise are pruned as sessions open.
    by_id: Mutex<HashMap<String, Opened>>,
}

/// A session as it opened: its owner, and its place while it lasts.
struct Opened {
    owner: Caller,
    place: Weak<OpenSession>,
}

#[derive(Default)]
struct Held {
    sessions: usize,
    callers: HashMap<Caller, PerCaller>,
}

#[derive(Default)]
struct PerCaller {
    sessions: usize,
    requests: usize,
}

/// Why a place was refused.
#[derive(Debug, PartialEq)]
enum Refusal {
    /// The caller holds as many sessions as a caller may.
    CallerSessions,
    /// The server holds as many sessions as it serves.
    ServerSessions,
    /// The caller has as many requests in flight as a caller may.
    CallerRequests,
}

/// A session's place under the caps, given back when dropped.
pub(crate) struct SessionSlot {
    limits: Arc<Limits>,
    caller: Caller,
}

/// A request's place under the cap, given back when dropped.
struct RequestSlot {
    limits: Arc<Limits>,
    caller: Caller,
}

/// The place of a session being opened: the session keeps it ([`claim`]) until it ends; a
/// `DELETE` of the session empties it at once.
pub(crate) struct OpenSession(Mutex<Option<SessionSlot>>);

/// The place of the session an `initialize` request opens, in the request's extensions.
#[derive(Clone)]
struct NewSession(Arc<OpenSession>);

impl Limits {
    pub(crate) fn new(caps: Caps) -> Self {
        Limits {
            caps,
            held: Mutex::new(Held::default()),
            by_id: Mutex::new(HashMap::new()),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn open_session(self: &Arc<Self>, caller: &Caller) -> Result<SessionSlot, Refusal> {
        let mut held = self.held();
        let sessions = held.callers.get(caller).map_or(0, |mine| mine.sessions);
        if sessions >= self.caps.sessions_per_caller {
            return Err(Refusal::CallerSessions);
        }
        if held.sessions >= self.caps.sessions {
            return Err(Refusal::ServerSessions);
        }
        held.sessions += 1;
        held.callers.entry(caller.clone()).or_default().sessions += 1;
        Ok(SessionSlot {
            limits: self.clone(),
            caller: caller.clone(),
        })
    }

    fn start_request(self: &Arc<Self>, caller: &Caller) -> Result<RequestSlot, Refusal> {
        let mut held = self.held();
        let requests = held.callers.get(caller).map_or(0, |mine| mine.requests);
        if requests >= self.caps.requests_per_caller {
            return Err(Refusal::CallerRequests);
        }
        held.callers.entry(caller.clone()).or_default().requests += 1;
        Ok(RequestSlot {
            limits: self.clone(),
            caller: caller.clone(),
        })
    }

    /// Gives back what `caller` held: one session, or one request.
    fn release(&self, caller: &Caller, session: bool) {
        let mut held = self.held();
        if session {
            held.sessions = held.sessions.saturating_sub(1);
        }
        let Some(mine) = held.callers.get_mut(caller) else {
            return;
        };
        if session {
            mine.sessions = mine.sessions.saturating_sub(1);
        } else {
            mine.requests = mine.requests.saturating_sub(1);
        }
        if mine.sessions == 0 && mine.requests == 0 {
            held.callers.remove(caller);
        }
    }

    /// Remembers that the session `id`, opened by `owner`, holds `open`'s place.
    fn opened(&self, id: &str, owner: &Caller, open: &Arc<OpenSession>) {
        let mut by_id = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        if by_id.len() >= self.caps.sessions {
            by_id.retain(|_, opened| opened.place.strong_count() > 0);
        }
        let opened = Opened {
            owner: owner.clone(),
            place: Arc::downgrade(open),
        };
        by_id.insert(id.to_owned(), opened);
    }

    /// Whether the session `id` was opened by a caller other than `caller`. A session the
    /// server does not know is left to rmcp, which answers `404`.
    fn owned_by_another(&self, id: &str, caller: &Caller) -> bool {
        self.by_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .is_some_and(|opened| opened.owner != *caller)
    }

    /// Gives back the place of the session `id`, which a `DELETE` closed.
    fn closed(&self, id: &str) {
        let open = self
            .by_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        let slot = open
            .and_then(|opened| opened.place.upgrade())
            .and_then(|open| open.0.lock().unwrap_or_else(PoisonError::into_inner).take());
        drop(slot);
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.limits.release(&self.caller, true);
    }
}

impl Drop for RequestSlot {
    fn drop(&mut self) {
        self.limits.release(&self.caller, false);
    }
}

/// The place of the session that `initialize` request `context` opens, for the session to keep
/// until it ends.
pub(crate) fn claim(context: &RequestContext<RoleServer>) -> Option<Arc<OpenSession>> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<NewSession>())
        .map(|new| new.0.clone())
}

/// What the caps need of a JSON-RPC message.
#[derive(Deserialize)]
struct Head {
    id: Option<Value>,
    method: Option<String>,
}

/// Lets an authenticated request through if its caller is under the caps, or refuses it with
/// `429` and a JSON-RPC error; gives a session's place back when a `DELETE` closed it. A
/// request on a session another caller opened is refused whatever it is (`403`), before rmcp
/// sees it: a session id alone does not make a caller, and a `DELETE` would end the owner's
/// session, a `GET` receive its notifications and requests, and a POSTed answer or
/// notification reach its calls.
pub(crate) async fn admit(limits: Arc<Limits>, request: Request, next: Next) -> Response {
    let Some(caller) = request
        .extensions()
        .get::<Authenticated>()
        .map(|authenticated| Caller::of(&authenticated.0))
    else {
        return next.run(request).await;
    };
    if session_id(&request).is_some_and(|id| limits.owned_by_another(&id, &caller)) {
        return not_the_owner();
    }
    match *request.method() {
        Method::POST => {}
        Method::DELETE => {
            let id = session_id(&request);
            let response = next.run(request).await;
            if let Some(id) = id
                && response.status().is_success()
            {
                limits.closed(&id);
            }
            return response;
        }
        _ => return next.run(request).await,
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, crate::http::MAX_REQUEST_BYTES).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request is larger than 4 MiB",
        )
            .into_response();
    };
    let mut request = Request::from_parts(parts, Body::from(bytes.clone()));
    let Ok(Head {
        id: Some(id),
        method: Some(method),
    }) = serde_json::from_slice::<Head>(&bytes)
    else {
        // Notifications and the client's answers end no sooner for being refused, and a
        // caller's confirmation must reach the call that waits for it.
        return next.run(request).await;
    };
    let opening = method == "initialize" && session_id(&request).is_none();
    let new_session = if opening {
        match limits.open_session(&caller) {
            Ok(slot) => {
                let open = Arc::new(OpenSession(Mutex::new(Some(slot))));
                request.extensions_mut().insert(NewSession(open.clone()));
                Some(open)
            }
            Err(refusal) => return refused(&limits.caps, refusal, id),
        }
    } else {
        None
    };
    let slot = match limits.start_request(&caller) {
        Ok(slot) => slot,
        Err(refusal) => return refused(&limits.caps, refusal, id),
    };
    let response = next.run(request).await;
    if let Some(open) = new_session
        && let Some(id) = response.headers().get(SESSION_ID)
        && let Ok(id) = id.to_str()
    {
        limits.opened(id, &caller, &open);
    }
    response.map(|body| {
        Body::new(Holding {
            body,
            slot: Some(slot),
        })
    })
}

fn session_id(request: &Request) -> Option<String> {
    request
        .headers()
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

#[cfg(test)]
mod tests {
    use portcullis_core::CallContext;

    use super::*;

    fn limits() -> Arc<Limits> {
        Arc::new(Limits::new(Caps {
            sessions_per_caller: 2,
            sessions: 3,
            requests_per_caller: 1,
        }))
    }

    #[test]
    fn each_cap_refuses_the_next_place_and_a_place_given_back_is_free_again() {
        let limits = limits();
        let ann = Caller::of(&CallContext::new("ann"));
        let bob = Caller::of(&CallContext::new("bob"));
        let ann_sessions = [
            limits.open_session(&ann).unwrap(),
            limits.open_session(&ann).unwrap(),
        ];
        assert_eq!(
            limits.open_session(&ann).err(),
            Some(Refusal::CallerSessions)
        );
        let bobs = limits.open_session(&bob).unwrap();
        assert_eq!(
            limits.open_session(&bob).err(),
            Some(Refusal::ServerSessions)
        );
        drop(ann_sessions);
        let request = limits.start_request(&bob).unwrap();
        assert_eq!(
            limits.start_request(&bob).err(),
            Some(Refusal::CallerRequests)
        );
        assert!(limits.start_request(&ann).is_ok(), "another caller's cap");
        drop((request, bobs));
        assert!(
            limits.held().callers.is_empty(),
            "nothing held is remembered"
        );
        assert_eq!(limits.held().sessions, 0);
    }

    #[test]
    fn a_session_is_its_openers_and_a_delete_gives_the_place_back_at_once() {
        let limits = limits();
        let ann = Caller::of(&CallContext::new("ann"));
        let open = Arc::new(OpenSession(Mutex::new(Some(
            limits.open_session(&ann).unwrap(),
        ))));
        limits.opened("s-1", &ann, &open);
        assert_eq!(limits.held().sessions, 1);
        let bob = Caller::of(&CallContext::new("bob"));
        assert!(limits.owned_by_another("s-1", &bob));
        assert!(!limits.owned_by_another("s-1", &ann));
        assert!(
            !limits.owned_by_another("s-2", &bob),
            "rmcp answers an unknown session"
        );
        limits.closed("s-1");
        assert_eq!(limits.held().sessions, 0, "while the session is still held");
        drop(open);
        assert_eq!(limits.held().sessions, 0, "and given back once only");
    }
}
