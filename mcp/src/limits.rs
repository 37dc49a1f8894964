//! Caps on what callers hold open over HTTP: sessions per caller and in all, and requests in
//! flight per caller, so that one caller's flood leaves the others served.
//!
//! A session's place is taken when its `initialize` request arrives and handed to the session
//! ([`claim`]); it is given back when the session ends, by `DELETE` or by rmcp's idle timeout
//! (the session is dropped then), and at once when a `DELETE` closes it. A request's place is
//! held until its response has been sent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use crate::identity::Caller;

/// The code of a refusal of a request on a session another caller opened.
pub(crate) const SESSION_OF_ANOTHER_CALLER: &str = "session_of_another_caller";

/// What that refusal says.
pub(crate) const SESSION_OF_ANOTHER_CALLER_MESSAGE: &str =
    "this session belongs to another caller: open a session of your own";

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
pub(crate) enum Refusal {
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
pub(crate) struct RequestSlot {
    limits: Arc<Limits>,
    caller: Caller,
}

/// The place of a session being opened: the session keeps it ([`claim`]) until it ends; a
/// `DELETE` of the session empties it at once.
pub(crate) struct OpenSession(Mutex<Option<SessionSlot>>);

impl OpenSession {
    /// The place `slot` of a session being opened.
    pub(crate) fn new(slot: SessionSlot) -> Self {
        OpenSession(Mutex::new(Some(slot)))
    }
}

/// The place of the session an `initialize` request opens, in the request's extensions.
#[derive(Clone)]
pub(crate) struct NewSession(pub(crate) Arc<OpenSession>);

impl Limits {
    pub(crate) fn new(caps: Caps) -> Self {
        Limits {
            caps,
            held: Mutex::new(Held::default()),
            by_id: Mutex::new(HashMap::new()),
        }
    }

    /// The caps, as the builder set them.
    pub(crate) fn caps(&self) -> &Caps {
        &self.caps
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn open_session(self: &Arc<Self>, caller: &Caller) -> Result<SessionSlot, Refusal> {
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

    pub(crate) fn start_request(self: &Arc<Self>, caller: &Caller) -> Result<RequestSlot, Refusal> {
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
    pub(crate) fn opened(&self, id: &str, owner: &Caller, open: &Arc<OpenSession>) {
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
    pub(crate) fn owned_by_another(&self, id: &str, caller: &Caller) -> bool {
        self.by_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .is_some_and(|opened| opened.owner != *caller)
    }

    /// Gives back the place of the session `id`, which a `DELETE` closed.
    pub(crate) fn closed(&self, id: &str) {
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
