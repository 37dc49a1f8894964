//! What the console keeps between requests, in memory and bounded: signed-in sessions (each
//! with its CSRF token and the decision its reviewer is about to sign), the ceremonies under
//! way (a sign-in's challenge, an enrolment's registration state), and the sign-in attempts
//! counted for the rate limit. A restart signs everyone out and ends the ceremonies under way;
//! nothing here approves anything. Each map holds at most 10,000 entries.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use portcullis_core::ApprovalDecision;
use portcullis_core::encoding::{hex, random_id};
use sha2::{Digest, Sha256};
use webauthn_rs::prelude::PasskeyRegistration;

/// How long a session lasts without a request, and at most.
const IDLE_MS: u64 = 30 * 60 * 1_000;
const LIFETIME_MS: u64 = 8 * 60 * 60 * 1_000;
/// How long a ceremony's challenge may be answered.
const CEREMONY_MS: u64 = 2 * 60 * 1_000;
/// The most sessions, and ceremonies, kept at once: past them, a new one is refused
/// (`console_busy`) until some expire.
const CAPACITY: usize = 10_000;
/// Sign-in attempts: per address, per minute; failures per reviewer, per quarter of an hour.
const STARTS_PER_ADDRESS: u32 = 20;
pub(crate) const FAILURES_PER_REVIEWER: u32 = 5;
const ADDRESS_WINDOW_MS: u64 = 60 * 1_000;
const REVIEWER_WINDOW_MS: u64 = 15 * 60 * 1_000;

/// A signed-in reviewer.
#[derive(Clone)]
pub(crate) struct Session {
    pub(crate) reviewer: String,
    pub(crate) csrf: String,
    started_ms: u64,
    seen_ms: u64,
    /// The decision the reviewer asked to sign, waiting for the passkey's assertion.
    pub(crate) signing: Option<Signing>,
}

/// A decision waiting for its assertion: which ticket, what, when, over which challenge.
#[derive(Clone)]
pub(crate) struct Signing {
    pub(crate) ticket: String,
    pub(crate) decision: ApprovalDecision,
    pub(crate) signed_ms: u64,
}

/// A sign-in waiting for its assertion.
pub(crate) struct SignIn {
    pub(crate) reviewer: String,
    pub(crate) challenge: [u8; 32],
    expires_ms: u64,
}

/// An enrolment waiting for the new passkey.
pub(crate) struct Enrolling {
    pub(crate) token: String,
    pub(crate) registration: PasskeyRegistration,
    expires_ms: u64,
}

/// A fixed window of counted attempts.
struct Window {
    started_ms: u64,
    count: u32,
}

/// Why a session or ceremony could not be kept.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Busy;

#[derive(Default)]
pub(crate) struct Sessions {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    /// By the SHA-256 of the session's cookie: the cookie itself is not kept.
    sessions: HashMap<String, Session>,
    sign_ins: HashMap<String, SignIn>,
    enrolments: HashMap<String, Enrolling>,
    attempts: HashMap<String, Window>,
}

fn digest(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Signs `reviewer` in: the session's cookie value and CSRF token.
    pub(crate) fn open(&self, reviewer: &str, now_ms: u64) -> Result<(String, String), Busy> {
        let mut kept = self.lock();
        kept.sessions.retain(|_, session| session.live(now_ms));
        if kept.sessions.len() >= CAPACITY {
            return Err(Busy);
        }
        let cookie = random_id("session");
        let csrf = random_id("csrf");
        kept.sessions.insert(
            digest(&cookie),
            Session {
                reviewer: reviewer.to_owned(),
                csrf: csrf.clone(),
                started_ms: now_ms,
                seen_ms: now_ms,
                signing: None,
            },
        );
        Ok((cookie, csrf))
    }

    /// The live session of `cookie`, its idle time restarted.
    pub(crate) fn session(&self, cookie: &str, now_ms: u64) -> Option<Session> {
        let mut kept = self.lock();
        let key = digest(cookie);
        let session = kept.sessions.get_mut(&key)?;
        if !session.live(now_ms) {
            kept.sessions.remove(&key);
            return None;
        }
        session.seen_ms = now_ms;
        Some(session.clone())
    }

    pub(crate) fn close(&self, cookie: &str) {
        self.lock().sessions.remove(&digest(cookie));
    }

    /// Keeps `signing` as the decision the session's reviewer is about to sign.
    pub(crate) fn start_signing(&self, cookie: &str, signing: Signing) {
        if let Some(session) = self.lock().sessions.get_mut(&digest(cookie)) {
            session.signing = Some(signing);
        }
    }

    /// Takes the decision the session's reviewer was about to sign on `ticket`: an assertion
    /// answers one challenge once.
    pub(crate) fn take_signing(&self, cookie: &str, ticket: &str) -> Option<Signing> {
        let mut kept = self.lock();
        let session = kept.sessions.get_mut(&digest(cookie))?;
        match &session.signing {
            Some(signing) if signing.ticket == ticket => session.signing.take(),
            _ => None,
        }
    }

    /// A new sign-in ceremony for `reviewer`: its id and challenge.
    pub(crate) fn start_sign_in(
        &self,
        reviewer: &str,
        now_ms: u64,
    ) -> Result<(String, [u8; 32]), Busy> {
        let mut kept = self.lock();
        kept.sign_ins
            .retain(|_, sign_in| sign_in.expires_ms > now_ms);
        if kept.sign_ins.len() >= CAPACITY {
            return Err(Busy);
        }
        let id = random_id("signin");
        let mut challenge = [0u8; 32];
        getrandom::fill(&mut challenge).expect("the operating system's random source is available");
        kept.sign_ins.insert(
            id.clone(),
            SignIn {
                reviewer: reviewer.to_owned(),
                challenge,
                expires_ms: now_ms + CEREMONY_MS,
            },
        );
        Ok((id, challenge))
    }

    /// Takes the sign-in ceremony `id`, if it has not expired: a challenge is answered once.
    pub(crate) fn take_sign_in(&self, id: &str, now_ms: u64) -> Option<SignIn> {
        self.lock()
            .sign_ins
            .remove(id)
            .filter(|sign_in| sign_in.expires_ms > now_ms)
    }

    /// A new enrolment ceremony: its id.
    pub(crate) fn start_enrolment(
        &self,
        token: &str,
        registration: PasskeyRegistration,
        now_ms: u64,
    ) -> Result<String, Busy> {
        let mut kept = self.lock();
        kept.enrolments
            .retain(|_, enrolling| enrolling.expires_ms > now_ms);
        if kept.enrolments.len() >= CAPACITY {
            return Err(Busy);
        }
        let id = random_id("enrolment");
        kept.enrolments.insert(
            id.clone(),
            Enrolling {
                token: token.to_owned(),
                registration,
                expires_ms: now_ms + CEREMONY_MS,
            },
        );
        Ok(id)
    }

    pub(crate) fn take_enrolment(&self, id: &str, now_ms: u64) -> Option<Enrolling> {
        self.lock()
            .enrolments
            .remove(id)
            .filter(|enrolling| enrolling.expires_ms > now_ms)
    }

    /// Counts an attempt under `key` (an address's sign-in, a reviewer's failure) and says
    /// whether it is within `limit` for its window.
    pub(crate) fn attempt(&self, key: &str, limit: u32, now_ms: u64) -> bool {
        let window_ms = window_of(key);
        let mut kept = self.lock();
        if kept.attempts.len() >= CAPACITY && !kept.attempts.contains_key(key) {
            kept.attempts
                .retain(|key, window| now_ms < window.started_ms + window_of(key));
            // Still full: a flood of names or addresses; refuse rather than grow.
            if kept.attempts.len() >= CAPACITY {
                return false;
            }
        }
        let window = kept.attempts.entry(key.to_owned()).or_insert(Window {
            started_ms: now_ms,
            count: 0,
        });
        if now_ms >= window.started_ms + window_ms {
            *window = Window {
                started_ms: now_ms,
                count: 0,
            };
        }
        window.count = window.count.saturating_add(1);
        window.count <= limit
    }

    /// Counts a ceremony (a sign-in, an enrolment) started from `address` and says whether it
    /// is within the address's limit.
    pub(crate) fn start_from(&self, address: std::net::IpAddr, now_ms: u64) -> bool {
        self.attempt(&format!("address:{address}"), STARTS_PER_ADDRESS, now_ms)
    }

    /// How many attempts `key` has made in its current window.
    pub(crate) fn attempts(&self, key: &str) -> u32 {
        self.lock()
            .attempts
            .get(key)
            .map_or(0, |window| window.count)
    }
}

/// The window attempts under `key` are counted in.
fn window_of(key: &str) -> u64 {
    if key.starts_with("reviewer:") {
        REVIEWER_WINDOW_MS
    } else {
        ADDRESS_WINDOW_MS
    }
}

impl Session {
    fn live(&self, now_ms: u64) -> bool {
        now_ms < self.seen_ms + IDLE_MS && now_ms < self.started_ms + LIFETIME_MS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_ends_when_idle_or_old_and_its_cookie_is_not_kept() {
        let sessions = Sessions::default();
        let (cookie, _) = sessions.open("rita", 0).unwrap();
        assert!(!sessions.lock().sessions.contains_key(&cookie));
        assert!(sessions.session(&cookie, IDLE_MS - 1).is_some());
        assert!(sessions.session(&cookie, 2 * IDLE_MS - 2).is_some());
        assert!(sessions.session(&cookie, 3 * IDLE_MS).is_none());
        let (cookie, _) = sessions.open("rita", 0).unwrap();
        let mut now = 0;
        while now + IDLE_MS / 2 < LIFETIME_MS {
            now += IDLE_MS / 2;
            assert!(sessions.session(&cookie, now).is_some());
        }
        assert!(sessions.session(&cookie, LIFETIME_MS).is_none());
    }

    #[test]
    fn a_challenge_is_answered_once_and_not_late() {
        let sessions = Sessions::default();
        let (id, _) = sessions.start_sign_in("rita", 0).unwrap();
        assert!(sessions.take_sign_in(&id, 1).is_some());
        assert!(sessions.take_sign_in(&id, 1).is_none());
        let (late, _) = sessions.start_sign_in("rita", 0).unwrap();
        assert!(sessions.take_sign_in(&late, CEREMONY_MS).is_none());
    }

    #[test]
    fn attempts_past_the_limit_are_refused_until_the_window_ends() {
        let sessions = Sessions::default();
        for _ in 0..FAILURES_PER_REVIEWER {
            assert!(sessions.attempt("reviewer:rita", FAILURES_PER_REVIEWER, 0));
        }
        assert!(!sessions.attempt("reviewer:rita", FAILURES_PER_REVIEWER, 1));
        assert!(sessions.attempt("reviewer:carl", FAILURES_PER_REVIEWER, 1));
        assert!(sessions.attempt("reviewer:rita", FAILURES_PER_REVIEWER, REVIEWER_WINDOW_MS));
    }

    #[test]
    fn a_flood_of_names_is_refused_rather_than_kept() {
        let sessions = Sessions::default();
        for at in 0..CAPACITY {
            assert!(sessions.attempt(&format!("address:{at}"), 1, 0));
        }
        assert!(!sessions.attempt("address:one-more", 1, 0));
        assert_eq!(sessions.lock().attempts.len(), CAPACITY);
        // Once their windows end, the old entries make room.
        assert!(sessions.attempt("address:one-more", 1, ADDRESS_WINDOW_MS));
        assert_eq!(sessions.lock().attempts.len(), 1);
    }
}
