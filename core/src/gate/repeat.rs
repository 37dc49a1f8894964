//! The repeat gate: one run per call. A model repeats calls (a retry after a timeout, a
//! duplicated tool call in one response, a JSON-RPC id reused by a client), and a tool that is
//! not idempotent must not run twice for one of them.
//!
//! The gate runs after authorize, so a repeat is judged as the caller it comes from: a call is
//! known by its tenant, actor, task, tool and call id ([`CallKey`]), and another caller reusing
//! the id makes a call of its own. The [`RepeatStore`] claims a call atomically before anything
//! runs: of concurrent duplicates one runs, and the others are refused with `call_in_progress`
//! until it is decided; afterwards a repeat gets the first outcome back. A call waiting for
//! approval is claimed too, so resending it returns the same ticket. The same id with other
//! arguments is refused with `call_id_reused`.

use std::collections::{HashMap, VecDeque};
use std::future::ready;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::{Arc, MutexGuard};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::context::CallContext;
use crate::encoding::{hash_bytes, hex};
use crate::future::BoxFuture;
use crate::locked_parts::LockedParts;
use crate::outcome::{Outcome, Ticket};
use crate::rejection::{Rejection, RejectionCode};
use crate::share::{Shares, caller_key};
use crate::time::now_ms;

/// Which call a claim is for: who made it, in which task, of which tool, under which id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallKey {
    /// The caller's tenant.
    pub tenant: Option<String>,
    /// Who called.
    pub actor: String,
    /// The task the call belongs to.
    pub task: String,
    /// The tool.
    pub tool: String,
    /// The provider's call id.
    pub call_id: String,
}

impl CallKey {
    pub(crate) fn new(ctx: &CallContext, tool: &str, call_id: &str) -> Self {
        CallKey {
            tenant: ctx.tenant().map(str::to_owned),
            actor: ctx.actor().to_owned(),
            task: ctx.task_id().to_owned(),
            tool: tool.to_owned(),
            call_id: call_id.to_owned(),
        }
    }

    /// A short name of the call for an operator (`portcullis claims list` shows it,
    /// `portcullis claims settle` takes it): 16 hex digits of the SHA-256 of the key's fields,
    /// each preceded by its length. The same in every store and on every worker.
    pub fn claim_id(&self) -> String {
        let mut digest = Sha256::new();
        let mut field = |text: Option<&str>| match text {
            Some(text) => {
                digest.update((text.len() as u64).to_le_bytes());
                digest.update(text.as_bytes());
            }
            None => digest.update(u64::MAX.to_le_bytes()),
        };
        field(self.tenant.as_deref());
        for text in [&self.actor, &self.task, &self.tool, &self.call_id] {
            field(Some(text));
        }
        hex(&digest.finalize()[..8])
    }
}

/// A claim whose call is not settled, as a durable store lists it for an operator.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenClaim {
    /// The call.
    pub key: CallKey,
    /// [`ClaimState::Running`], or [`ClaimState::Pending`] with the ticket it waits under.
    pub state: ClaimState,
    /// When it was claimed, in milliseconds since the Unix epoch.
    pub claimed_ms: u64,
}

impl OpenClaim {
    /// Whether a repeat of the call is refused with `outcome_unknown`: it is running and was
    /// claimed before `lease_start_ms`, so its worker stopped in the middle.
    pub fn is_abandoned(&self, lease_start_ms: u64) -> bool {
        matches!(self.state, ClaimState::Running) && self.claimed_ms < lease_start_ms
    }
}

/// The refusal of a settlement that names no claim.
pub fn claim_not_found() -> Rejection {
    Rejection::new(
        RejectionCode::ClaimNotFound,
        "no claim of a call has this id, or its call was released without running",
    )
    .with_hint("list the open claims with `portcullis claims list`")
}

/// Whether an operator may settle a claim held in `state` since `claimed_ms` (`None`: no
/// claim): only one whose outcome is unknown, claimed before `lease_start_ms` and never
/// reported, may be. The rule every store applies, under the lock that makes the settlement
/// one decision.
pub fn may_settle(held: Option<(&ClaimState, u64)>, lease_start_ms: u64) -> Result<(), Rejection> {
    match held {
        None => Err(claim_not_found()),
        Some((ClaimState::Settled(_), _)) => Err(Rejection::new(
            RejectionCode::ClaimSettled,
            "the claim is settled already: repeats of the call get the outcome it holds",
        )
        .with_hint("read who settled it in the audit log")),
        Some((ClaimState::Pending(ticket), _)) => Err(Rejection::new(
            RejectionCode::ClaimNotAbandoned,
            format!(
                "the call waits for a reviewer's decision under ticket {}; its outcome is not \
                 unknown",
                ticket.id
            ),
        )
        .with_hint("decide the ticket with `portcullis approvals`")),
        Some((ClaimState::Running, claimed_ms)) if claimed_ms >= lease_start_ms => {
            Err(Rejection::new(
                RejectionCode::ClaimNotAbandoned,
                "the call was claimed less than its lease ago: its worker may still report how \
                 it ended",
            )
            .with_hint(
                "wait until the claim's lease has run out, then settle it if it is still open",
            ))
        }
        Some((ClaimState::Running, _)) => Ok(()),
    }
}

/// Where a claimed call stands; it serializes for a durable store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimState {
    /// It passed the repeat gate and has not been decided yet.
    Running,
    /// It waits for a human under this ticket.
    Pending(Box<Ticket>),
    /// It was decided: the tool ran (or a reviewer or the clock refused it) with this outcome.
    Settled(Outcome),
}

/// What claiming a call found.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// The call is new and now claimed: it is the caller's to run.
    New,
    /// The same call was claimed before; where it stands.
    Existing(ClaimState),
    /// The call id was claimed for other arguments.
    OtherArguments,
    /// The same call was claimed to run before the lease's start and never reported how it
    /// ended: its worker stopped in the middle. It may have run.
    Abandoned,
    /// The store could not be reached: the call is refused, since it cannot be known not to
    /// have run.
    Unavailable,
    /// A bounded store holds as many open claims as it may: the call is new, but is not
    /// claimed, and is refused (`claim_store_full`).
    Full,
    /// The caller (its actor in its tenant) holds as many open claims as its share of a
    /// bounded store allows: the call is new, but is not claimed, and is refused
    /// (`claim_share_full`).
    ShareFull,
}

/// Keeps the claims of calls. Implementations must claim atomically: of two concurrent claims
/// of one key, exactly one gets [`Claim::New`].
pub trait RepeatStore: Send + Sync + 'static {
    /// Claims `key` for a call whose canonical arguments have `fingerprint`, or reports the
    /// claim already held: [`Claim::Abandoned`] for one still running that was claimed before
    /// `lease_start_ms` (milliseconds since the Unix epoch).
    fn claim<'a>(
        &'a self,
        key: &'a CallKey,
        fingerprint: &'a str,
        lease_start_ms: u64,
    ) -> BoxFuture<'a, Claim>;
    /// Records where a claimed call now stands. A settled claim stays settled: its outcome is
    /// final, whatever update comes after.
    fn update<'a>(&'a self, key: &'a CallKey, state: ClaimState) -> BoxFuture<'a, ()>;
    /// Drops the claim of a call that did not run and will not (a later gate refused it): the
    /// id may serve again. A settled claim is kept.
    fn release<'a>(&'a self, key: &'a CallKey) -> BoxFuture<'a, ()>;
}

/// A [`RepeatStore`] in memory, for one process. It keeps the outcomes of at least the latest
/// `capacity` decided calls, older outcomes forgotten oldest first, and up to 10,000 open
/// claims (calls running or waiting for approval; [`with_open_claims`](Self::with_open_claims)),
/// none forgotten while open within its lease.
///
/// What is forgotten, and when: a decided call's outcome, after `capacity` later calls were
/// decided (a repeat of its id then runs as a new call: keep `capacity` above the calls a
/// client may repeat, or use a durable store); a call still running past its lease, when room
/// is needed (its dispatch was dropped, or its tool hangs): it is decided then as
/// `outcome_unknown`, and forgotten as any outcome. A new call finding its part of the store
/// holding its share of open claims, all within their lease, is refused with
/// `claim_store_full`: nothing open is forgotten to make room for it. Each caller (its actor
/// in its tenant) holds at most a share of the open claims, a hundredth of them by default
/// ([`open_claims_per_caller`](Self::open_claims_per_caller)): one more call of a caller
/// holding its share is refused with `claim_share_full`, and other callers are not affected.
///
/// A store of [`InMemoryRepeatStore::SPLIT_FROM`] calls or more is split into
/// [`InMemoryRepeatStore::PARTS`] parts, each with a lock of its own, so that threads claiming
/// different calls do not wait on each other. A call's part is chosen by a hash keyed at
/// random when the store is made, so no caller can steer calls into one part. Each part keeps
/// twice its share of `capacity` outcomes and of the open claims (so the store holds up to
/// twice as many of each), and the chance of a call's outcome being forgotten before `capacity` later calls were decided is
/// below 10⁻¹⁰ (a Chernoff bound; smaller the larger the store).
#[derive(Clone)]
pub struct InMemoryRepeatStore {
    parts: Arc<LockedParts<Claims>>,
    capacity_per_part: usize,
    open_per_part: usize,
    /// How many open claims each caller holds, and may hold: locked after a claim's part.
    callers: Arc<LockedParts<Shares>>,
    open_per_caller: usize,
    /// Random bytes of this store's own, hashed before every key: see [`KeyDigest`].
    salt: [u8; 16],
}

/// The claims, by the digest of their key, the digests of the settled calls, oldest first,
/// and how many claims are open (not settled).
#[derive(Default)]
struct Claims {
    calls: HashMap<KeyDigest, Held, BuildHasherDefault<FirstBytes>>,
    settled: VecDeque<KeyDigest>,
    open: usize,
}

impl Claims {
    /// Whether one more open claim fits within `open`, once the claims still running
    /// that were claimed before `lease_start_ms` are decided as `outcome_unknown` (what a
    /// repeat of them is told already).
    fn room(
        &mut self,
        open: usize,
        capacity: usize,
        lease_start_ms: u64,
        callers: &LockedParts<Shares>,
    ) -> bool {
        if self.open < open {
            return true;
        }
        for (digest, held) in &mut self.calls {
            if matches!(held.state, ClaimState::Running) && held.claimed_ms < lease_start_ms {
                held.state = ClaimState::Settled(Outcome::Rejected(outcome_unknown()));
                self.settled.push_back(*digest);
                self.open -= 1;
                give_back(callers, held.caller.take());
            }
        }
        self.forget_beyond(capacity);
        self.open < open
    }

    /// Forgets the oldest outcomes beyond `capacity`.
    fn forget_beyond(&mut self, capacity: usize) {
        while self.settled.len() > capacity {
            let Some(oldest) = self.settled.pop_front() else {
                break;
            };
            self.calls.remove(&oldest);
        }
    }
}

/// A claim: the call's fingerprint, where it stands, when it was claimed, and, while it is
/// open, the caller whose share holds it.
struct Held {
    fingerprint: HeldFingerprint,
    state: ClaimState,
    claimed_ms: u64,
    caller: Option<String>,
}

/// A fingerprint as a claim keeps it: the 32 bytes that a SHA-256 in hex (what the gates
/// write) stands for, with no text allocated; any other text by its SHA-256, marked so that it
/// never equals the hex of that SHA-256.
#[derive(PartialEq, Eq)]
struct HeldFingerprint {
    hashed_text: bool,
    bytes: [u8; 32],
}

impl HeldFingerprint {
    fn of(fingerprint: &str) -> Self {
        match hash_bytes(fingerprint) {
            Some(bytes) => HeldFingerprint {
                hashed_text: false,
                bytes,
            },
            None => HeldFingerprint {
                hashed_text: true,
                bytes: Sha256::digest(fingerprint).into(),
            },
        }
    }
}

/// The SHA-256 of the store's salt and a [`CallKey`], its fields each preceded by its length:
/// what the in-memory store keys its claims by, so that claiming a call copies none of the
/// key's strings and hashes 32 bytes instead of five strings. The salt keeps the digests out of
/// a caller's reach, so that no caller can choose call ids whose digests crowd one bucket.
#[derive(Clone, Copy, PartialEq, Eq)]
struct KeyDigest([u8; 32]);

impl KeyDigest {
    fn of(salt: &[u8; 16], key: &CallKey) -> Self {
        let mut digest = Sha256::new();
        digest.update(salt);
        // No tenant is set apart from every tenant, whose length is below `u64::MAX`.
        let mut field = |text: Option<&str>| match text {
            Some(text) => {
                digest.update((text.len() as u64).to_le_bytes());
                digest.update(text.as_bytes());
            }
            None => digest.update(u64::MAX.to_le_bytes()),
        };
        field(key.tenant.as_deref());
        for text in [&key.actor, &key.task, &key.tool, &key.call_id] {
            field(Some(text));
        }
        KeyDigest(digest.finalize().into())
    }
}

impl Hash for KeyDigest {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut first = [0; 8];
        first.copy_from_slice(&self.0[..8]);
        state.write_u64(u64::from_le_bytes(first));
    }
}

/// A hasher for [`KeyDigest`]s, which are uniform already, and which a caller cannot predict:
/// their first eight bytes are the hash.
#[derive(Default)]
struct FirstBytes(u64);

impl Hasher for FirstBytes {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

impl InMemoryRepeatStore {
    /// The smallest capacity at which the store is split into parts.
    pub const SPLIT_FROM: usize = 1024;
    /// The number of parts of a split store.
    pub const PARTS: usize = 16;

    /// Open claims a store holds at once unless told otherwise.
    pub const OPEN_CLAIMS: usize = 10_000;

    /// A store that keeps the outcomes of at least the latest `capacity` decided calls, and
    /// up to [`OPEN_CLAIMS`](Self::OPEN_CLAIMS) open claims.
    pub fn with_capacity(capacity: usize) -> Self {
        let parts = if capacity < Self::SPLIT_FROM {
            1
        } else {
            Self::PARTS
        };
        let mut salt = [0u8; 16];
        getrandom::fill(&mut salt).expect("the operating system's random source is available");
        InMemoryRepeatStore {
            parts: Arc::new(LockedParts::new(parts)),
            capacity_per_part: share(capacity, parts),
            open_per_part: share(Self::OPEN_CLAIMS, parts),
            callers: Arc::new(LockedParts::new(Self::PARTS)),
            open_per_caller: Self::OPEN_CLAIMS / 100,
            salt,
        }
    }

    /// This store, holding up to `open` open claims (calls running or waiting for approval)
    /// instead: call it as the store is made. Keep it above the calls that may run or wait at
    /// once; one more is refused with `claim_store_full`.
    pub fn with_open_claims(mut self, open: usize) -> Self {
        self.open_per_part = share(open, self.parts.count());
        self.open_per_caller = (open / 100).max(1);
        self
    }

    /// This store, holding up to `open` open claims (at least one) for each caller: its actor
    /// in its tenant. Call it as the store is made, after
    /// [`with_open_claims`](Self::with_open_claims), which sets it to a hundredth of the store's.
    pub fn open_claims_per_caller(mut self, open: usize) -> Self {
        self.open_per_caller = open.max(1);
        self
    }

    /// How many claims the store holds now, open and settled: what its capacity bounds.
    #[doc(hidden)]
    pub fn held(&self) -> (usize, usize) {
        let (mut open, mut settled) = (0, 0);
        self.parts.each(|part| {
            open += part.open;
            settled += part.settled.len();
        });
        (open, settled)
    }

    /// The digest of `key` in this store, and the part that holds its claim, locked.
    fn lock(&self, key: &CallKey) -> (KeyDigest, MutexGuard<'_, Claims>) {
        let digest = KeyDigest::of(&self.salt, key);
        (digest, self.parts.lock(&digest.0))
    }
}

impl Default for InMemoryRepeatStore {
    /// Keeps the outcomes of at least the latest 10,000 decided calls.
    fn default() -> Self {
        InMemoryRepeatStore::with_capacity(10_000)
    }
}

impl RepeatStore for InMemoryRepeatStore {
    fn claim<'a>(
        &'a self,
        key: &'a CallKey,
        fingerprint: &'a str,
        lease_start_ms: u64,
    ) -> BoxFuture<'a, Claim> {
        let (digest, mut claims) = self.lock(key);
        if let Some(held) = claims.calls.get(&digest) {
            let claim = existing(
                held.fingerprint == HeldFingerprint::of(fingerprint),
                held.state.clone(),
                held.claimed_ms,
                lease_start_ms,
            );
            return Box::pin(ready(claim));
        }
        if !claims.room(
            self.open_per_part,
            self.capacity_per_part,
            lease_start_ms,
            &self.callers,
        ) {
            return Box::pin(ready(Claim::Full));
        }
        let caller = caller_key(&key.actor, key.tenant.as_deref().unwrap_or_default());
        {
            let mut callers = self.callers.lock(&caller);
            if callers.held(&caller) >= self.open_per_caller {
                return Box::pin(ready(Claim::ShareFull));
            }
            callers.take(&caller);
        }
        claims.calls.insert(
            digest,
            Held {
                fingerprint: HeldFingerprint::of(fingerprint),
                state: ClaimState::Running,
                claimed_ms: now_ms(),
                caller: Some(caller),
            },
        );
        claims.open += 1;
        Box::pin(ready(Claim::New))
    }

    fn update<'a>(&'a self, key: &'a CallKey, state: ClaimState) -> BoxFuture<'a, ()> {
        let (digest, mut claims) = self.lock(key);
        let settles = matches!(state, ClaimState::Settled(_));
        if let Some(held) = claims.calls.get_mut(&digest)
            && !matches!(held.state, ClaimState::Settled(_))
        {
            held.state = state;
            if settles {
                let caller = held.caller.take();
                claims.settled.push_back(digest);
                claims.open -= 1;
                give_back(&self.callers, caller);
            }
        }
        claims.forget_beyond(self.capacity_per_part);
        Box::pin(ready(()))
    }

    fn release<'a>(&'a self, key: &'a CallKey) -> BoxFuture<'a, ()> {
        let (digest, mut claims) = self.lock(key);
        let open = claims
            .calls
            .get(&digest)
            .is_some_and(|held| !matches!(held.state, ClaimState::Settled(_)));
        if open && let Some(held) = claims.calls.remove(&digest) {
            claims.open -= 1;
            give_back(&self.callers, held.caller);
        }
        Box::pin(ready(()))
    }
}

/// Gives a claim's place back to the share of `caller`, once the claim is no longer open.
fn give_back(callers: &LockedParts<Shares>, caller: Option<String>) {
    if let Some(caller) = caller {
        callers.lock(&caller).give_back(&caller);
    }
}

/// What one of `parts` parts keeps of `total`: all of it in one part, or twice its share, so
/// that a part fills only when the whole store nearly has.
fn share(total: usize, parts: usize) -> usize {
    if parts == 1 {
        total
    } else {
        2 * total.div_ceil(parts)
    }
}

/// The refusal of a call that an earlier attempt claimed and never reported on.
fn outcome_unknown() -> Rejection {
    Rejection::new(
        RejectionCode::OutcomeUnknown,
        "an earlier attempt of this call began and never reported how it ended: it may have \
         run, so it does not run again",
    )
    .with_hint("do not send it again; tell the user that an operator must check whether it ran")
    .with_retryable(false)
}

/// What a call with `fingerprint` finds where a claim for `held_fingerprint` stands in
/// `state` since `claimed_ms`: the rule every store applies to a claim it holds already.
pub fn existing_claim(
    held_fingerprint: &str,
    fingerprint: &str,
    state: ClaimState,
    claimed_ms: u64,
    lease_start_ms: u64,
) -> Claim {
    existing(
        held_fingerprint == fingerprint,
        state,
        claimed_ms,
        lease_start_ms,
    )
}

/// [`existing_claim`], told whether the fingerprints are the same.
fn existing(
    same_arguments: bool,
    state: ClaimState,
    claimed_ms: u64,
    lease_start_ms: u64,
) -> Claim {
    if !same_arguments {
        return Claim::OtherArguments;
    }
    match state {
        ClaimState::Running if claimed_ms < lease_start_ms => Claim::Abandoned,
        state => Claim::Existing(state),
    }
}

/// The answer to a call whose claim was already held, or `None` for a new call.
pub(crate) fn answer(claim: Claim) -> Option<Outcome> {
    match claim {
        Claim::New => None,
        Claim::Existing(ClaimState::Settled(outcome)) => Some(outcome),
        Claim::Existing(ClaimState::Pending(ticket)) => Some(Outcome::Pending(ticket)),
        Claim::Existing(ClaimState::Running) => Some(Outcome::Rejected(
            Rejection::new(
                RejectionCode::CallInProgress,
                "a call with this id is running now",
            )
            .with_hint("wait, then send the same call again to read its outcome"),
        )),
        Claim::Unavailable => Some(Outcome::Rejected(
            Rejection::new(
                RejectionCode::ClaimsUnavailable,
                "the call could not be claimed, so it did not run",
            )
            .with_hint("try again later"),
        )),
        Claim::Abandoned => Some(Outcome::Rejected(outcome_unknown())),
        Claim::Full => Some(Outcome::Rejected(
            Rejection::new(
                RejectionCode::ClaimStoreFull,
                "the store of claims holds as many open calls as it may, so the call was not \
                 claimed and did not run",
            )
            .with_hint("try again later"),
        )),
        Claim::ShareFull => Some(Outcome::Rejected(
            Rejection::new(
                RejectionCode::ClaimShareFull,
                "this caller has as many calls running or waiting for approval as its share of \
                 the store of claims allows, so the call was not claimed and did not run",
            )
            .with_hint("wait for a call of yours to end, then send this one again"),
        )),
        Claim::OtherArguments => Some(Outcome::Rejected(
            Rejection::new(
                RejectionCode::CallIdReused,
                "this call id was used for a call with other arguments",
            )
            .with_hint("give every new call an id of its own")
            .with_retryable(false),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(actor: &str, id: &str) -> CallKey {
        CallKey::new(&CallContext::new(actor).with_task_id("t"), "pay", id)
    }

    fn claim(store: &InMemoryRepeatStore, key: &CallKey, fingerprint: &str) -> Claim {
        futures_executor(store.claim(key, fingerprint, 0))
    }

    #[test]
    fn a_claim_running_past_its_lease_is_abandoned() {
        let store = InMemoryRepeatStore::default();
        let first = key("alice", "1");
        assert_eq!(claim(&store, &first, "a"), Claim::New);
        let later = now_ms() + 1;
        let again = futures_executor(store.claim(&first, "a", later));
        assert_eq!(again, Claim::Abandoned);
        assert_eq!(
            futures_executor(store.claim(&first, "b", later)),
            Claim::OtherArguments,
            "other arguments are told so first"
        );
        let done = ClaimState::Settled(Outcome::Completed(json!(1)));
        futures_executor(store.update(&first, done.clone()));
        let settled = futures_executor(store.claim(&first, "a", later));
        assert_eq!(
            settled,
            Claim::Existing(done),
            "an outcome is never unknown"
        );
    }

    #[test]
    fn a_claim_tells_fingerprints_apart_however_they_are_written() {
        let store = InMemoryRepeatStore::default();
        let digest = crate::digest::sha256_hex(b"{}");
        let hashed_text = hex(&Sha256::digest(b"not hex"));
        for (id, held, sent, same) in [
            ("1", digest.as_str(), digest.as_str(), true),
            ("2", digest.as_str(), &*digest.to_uppercase(), false),
            ("3", "not hex", "not hex", true),
            ("4", "not hex", "not hex ", false),
            // A text that is no SHA-256 in hex is held as its SHA-256, and still is not the
            // fingerprint that spells that SHA-256 in hex.
            ("5", "not hex", hashed_text.as_str(), false),
        ] {
            let call = key("alice", id);
            assert_eq!(claim(&store, &call, held), Claim::New);
            let expected = match same {
                true => Claim::Existing(ClaimState::Running),
                false => Claim::OtherArguments,
            };
            assert_eq!(claim(&store, &call, sent), expected, "{held} then {sent}");
        }
    }

    fn futures_executor<T>(future: BoxFuture<'_, T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn claims_once_and_keeps_the_latest_outcomes() {
        let store = InMemoryRepeatStore::with_capacity(1).with_open_claims(1);
        let first = key("alice", "1");
        assert_eq!(claim(&store, &first, "a"), Claim::New);
        assert_eq!(
            claim(&store, &first, "a"),
            Claim::Existing(ClaimState::Running)
        );
        assert_eq!(claim(&store, &first, "b"), Claim::OtherArguments);
        let done = ClaimState::Settled(Outcome::Completed(json!(1)));
        futures_executor(store.update(&first, done.clone()));
        let bob = key("bob", "1");
        assert_eq!(
            claim(&store, &bob, "a"),
            Claim::New,
            "another caller's call"
        );
        futures_executor(store.release(&bob));
        assert_eq!(claim(&store, &first, "a"), Claim::Existing(done.clone()));
        futures_executor(store.update(&first, ClaimState::Running));
        futures_executor(store.release(&first));
        assert_eq!(
            claim(&store, &first, "a"),
            Claim::Existing(done),
            "a settled claim is final"
        );

        let second = key("alice", "2");
        assert_eq!(claim(&store, &second, "a"), Claim::New);
        futures_executor(store.release(&second));
        assert_eq!(claim(&store, &second, "a"), Claim::New, "released");
        futures_executor(store.update(&second, ClaimState::Settled(Outcome::Completed(json!(2)))));
        assert_eq!(
            claim(&store, &first, "a"),
            Claim::New,
            "the oldest is forgotten"
        );
    }

    #[test]
    fn a_claim_id_is_stable_and_tells_keys_apart() {
        let call = key("alice", "1");
        let id = call.claim_id();
        assert_eq!(id.len(), 16);
        assert!(id.bytes().all(|byte| byte.is_ascii_hexdigit()));
        assert_eq!(id, key("alice", "1").claim_id(), "the same on every worker");
        assert_ne!(id, key("alice", "2").claim_id());
        // Fields are length-prefixed: moving text from one to the next changes the id.
        let moved = CallKey {
            actor: "alic".to_owned(),
            task: "et".to_owned(),
            ..call.clone()
        };
        assert_ne!(id, moved.claim_id());
        assert_ne!(
            id,
            CallKey {
                tenant: Some(String::new()),
                ..call
            }
            .claim_id()
        );
    }

    #[test]
    fn only_a_claim_whose_outcome_is_unknown_may_be_settled() {
        let code = |held: Option<(&ClaimState, u64)>| may_settle(held, 100).err().map(|r| r.code());
        assert_eq!(code(Some((&ClaimState::Running, 99))), None);
        assert_eq!(
            code(Some((&ClaimState::Running, 100))),
            Some(RejectionCode::ClaimNotAbandoned)
        );
        let settled = ClaimState::Settled(Outcome::Completed(json!(1)));
        assert_eq!(code(Some((&settled, 0))), Some(RejectionCode::ClaimSettled));
        assert_eq!(code(None), Some(RejectionCode::ClaimNotFound));
        let open = OpenClaim {
            key: key("alice", "1"),
            state: ClaimState::Running,
            claimed_ms: 99,
        };
        assert!(open.is_abandoned(100));
        assert!(!open.is_abandoned(99));
    }

    #[test]
    fn digests_of_one_key_differ_between_stores() {
        let call = key("alice", "1");
        let (one, two) = (
            InMemoryRepeatStore::default(),
            InMemoryRepeatStore::default(),
        );
        assert!(KeyDigest::of(&one.salt, &call) != KeyDigest::of(&two.salt, &call));
        assert!(KeyDigest::of(&one.salt, &call) == KeyDigest::of(&one.salt, &call));
        assert!(KeyDigest::of(&one.salt, &call) != KeyDigest::of(&one.salt, &key("alice", "2")));
    }

    #[test]
    fn a_split_store_keeps_at_least_the_latest_outcomes_and_forgets_the_old_ones() {
        let capacity = InMemoryRepeatStore::SPLIT_FROM;
        let store = InMemoryRepeatStore::with_capacity(capacity);
        assert_eq!(store.parts.count(), InMemoryRepeatStore::PARTS);
        let calls = 4 * capacity;
        for id in 0..calls {
            let call = key("alice", &id.to_string());
            assert_eq!(claim(&store, &call, "a"), Claim::New);
            let done = ClaimState::Settled(Outcome::Completed(json!(id)));
            futures_executor(store.update(&call, done));
        }
        for id in calls - capacity..calls {
            assert_eq!(
                claim(&store, &key("alice", &id.to_string()), "a"),
                Claim::Existing(ClaimState::Settled(Outcome::Completed(json!(id)))),
                "call {id} is among the latest {capacity}"
            );
        }
        let mut kept = 0;
        store.parts.each(|part| kept += part.calls.len());
        assert!(kept <= 2 * capacity, "{kept} outcomes kept");
        assert_eq!(claim(&store, &key("alice", "0"), "a"), Claim::New);
    }

    /// One caller holding its share of open claims is refused the next with its own share's
    /// code; other callers (the same actor in another tenant among them) are served; a call
    /// that ends gives its place back.
    #[test]
    fn one_caller_over_its_share_of_open_claims_is_refused_and_others_are_served() {
        let store = InMemoryRepeatStore::default();
        let calls: Vec<CallKey> = (0..101).map(|id| key("mallory", &id.to_string())).collect();
        for call in &calls[..100] {
            assert_eq!(claim(&store, call, "a"), Claim::New);
        }
        assert_eq!(claim(&store, &calls[100], "a"), Claim::ShareFull);
        let refused = answer(Claim::ShareFull).and_then(|outcome| outcome.code());
        assert_eq!(refused, Some(RejectionCode::ClaimShareFull));
        assert_eq!(claim(&store, &key("alice", "1"), "a"), Claim::New);
        let mut elsewhere = key("mallory", "1");
        elsewhere.tenant = Some("acme".into());
        assert_eq!(claim(&store, &elsewhere, "a"), Claim::New);
        let done = ClaimState::Settled(Outcome::Completed(json!(1)));
        futures_executor(store.update(&calls[0], done));
        assert_eq!(claim(&store, &calls[100], "a"), Claim::New);
        futures_executor(store.release(&calls[100]));
        assert_eq!(claim(&store, &key("mallory", "x"), "a"), Claim::New);
    }

    #[test]
    fn of_concurrent_claims_of_one_call_one_is_new() {
        let store = InMemoryRepeatStore::default().open_claims_per_caller(1000);
        for id in 0..200 {
            let call = key("alice", &id.to_string());
            let new: usize = std::thread::scope(|scope| {
                let claims: Vec<_> = (0..4)
                    .map(|_| scope.spawn(|| claim(&store, &call, "a")))
                    .collect();
                claims
                    .into_iter()
                    .map(|claim| claim.join().unwrap())
                    .filter(|claim| *claim == Claim::New)
                    .count()
            });
            assert_eq!(new, 1, "call {id}");
        }
    }

    #[test]
    fn open_claims_are_bounded_and_a_full_store_refuses_new_calls() {
        let store = InMemoryRepeatStore::with_capacity(3)
            .with_open_claims(3)
            .open_claims_per_caller(3);
        let calls: Vec<CallKey> = (0..4).map(|id| key("alice", &id.to_string())).collect();
        for call in &calls[..3] {
            assert_eq!(claim(&store, call, "a"), Claim::New);
        }
        assert_eq!(claim(&store, &calls[3], "a"), Claim::Full);
        assert_eq!(
            answer(Claim::Full).and_then(|outcome| outcome.code()),
            Some(RejectionCode::ClaimStoreFull)
        );
        // A call that ends makes room; a call waiting for approval stays open.
        futures_executor(store.release(&calls[0]));
        assert_eq!(claim(&store, &calls[3], "a"), Claim::New);
        assert_eq!(store.held(), (3, 0));
        let done = ClaimState::Settled(Outcome::Completed(json!(1)));
        futures_executor(store.update(&calls[1], done));
        assert_eq!(store.held(), (2, 1));

        // Claims running past their lease are decided as unknown when room is needed, and are
        // then told so, never run again.
        let later = now_ms() + 1;
        assert_eq!(claim(&store, &calls[0], "a"), Claim::New);
        let fresh = key("alice", "fresh");
        assert_eq!(
            futures_executor(store.claim(&fresh, "a", later)),
            Claim::New
        );
        let unknown = futures_executor(store.claim(&calls[3], "a", 0));
        let Claim::Existing(ClaimState::Settled(outcome)) = unknown else {
            panic!("{unknown:?}");
        };
        assert_eq!(outcome.code(), Some(RejectionCode::OutcomeUnknown));
        let (open, settled) = store.held();
        assert!(open <= 3 && settled <= 3, "{open} open, {settled} settled");
    }
}
