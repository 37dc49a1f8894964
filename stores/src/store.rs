//! One store chosen by where it lives: a SQLite file or a PostgreSQL URL, for applications
//! and tools (the `portcullis` command line) that take the location from their configuration.

use std::io;

use portcullis_agent::{RunStore, RunStoreError, StoredRun};
use portcullis_core::audit::{
    AuditKey, AuditRecord, AuditSink, Checkpoint, Unchained, Verifier, VerifyError,
};
use portcullis_core::{
    Abandoned, ApprovalStore, BoxFuture, BudgetLimits, BudgetStore, BudgetUsage, CallContext,
    CallKey, Charge, Claim, ClaimState, Lease, OpenClaim, Outcome, PendingCall, PendingLimits,
    ProvenanceStore, Recorded, RefusalLimit, Rejection, RepeatStore, SignedDecision, SourceRecord,
    StoredStep, Ticket, TransactionStore,
};
use portcullis_core::{PasskeyCredential, Reviewer, TaskLifetime};

use crate::tasks::{CallerUsage, Pruned, Retention, Shares};

use crate::invites::{Enrolled, Invite};

use crate::error::OpenError;

use crate::postgres::{PostgresStore, PostgresTls};

use crate::runs::RunSummary;

use crate::seal::SealKeys;

use crate::sqlite::SqliteStore;

/// Runs `$call` on whichever store `$store` is.
macro_rules! on_store {
    ($self:expr, $store:ident => $call:expr) => {
        match $self {
            Store::Sqlite($store) => $call,
            Store::Postgres($store) => $call,
        }
    };
}

/// A store at a location given as text: `postgres://…` or `postgresql://…` for PostgreSQL,
/// a path (or `sqlite://path`) for SQLite. It is every store the gates use, and an agent's
/// [`RunStore`], as the store it opened.
#[derive(Clone)]
#[non_exhaustive]
pub enum Store {
    /// A SQLite file.
    Sqlite(SqliteStore),
    /// A PostgreSQL database.
    Postgres(PostgresStore),
}

/// Where a store lives, read from its location's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location<'a> {
    /// A SQLite file at this path.
    Sqlite(&'a str),
    /// A PostgreSQL database at this URL.
    Postgres(&'a str),
}

impl<'a> Location<'a> {
    /// Reads `location`: `postgres://…` or `postgresql://…`, or a SQLite path, bare or as
    /// `sqlite://path`.
    ///
    /// ```
    /// use portcullis_stores::Location;
    ///
    /// assert_eq!(Location::of("sqlite://state.db"), Location::Sqlite("state.db"));
    /// assert!(matches!(Location::of("postgres://db/app"), Location::Postgres(_)));
    /// ```
    pub fn of(location: &'a str) -> Self {
        if location.starts_with("postgres://") || location.starts_with("postgresql://") {
            return Location::Postgres(location);
        }
        Location::Sqlite(location.strip_prefix("sqlite://").unwrap_or(location))
    }
}

impl Store {
    /// Opens the store at `location`, bringing its schema up to date. A PostgreSQL URL's
    /// connections use TLS as its `sslmode` and `sslrootcert` say ([`PostgresTls`]).
    pub async fn open(location: &str) -> Result<Self, OpenError> {
        Self::open_with_tls(location, &PostgresTls::default()).await
    }

    /// Opens the store at `location` as [`open`](Self::open) does; a PostgreSQL store trusts
    /// the servers whose certificates `tls` verifies.
    pub async fn open_with_tls(location: &str, tls: &PostgresTls) -> Result<Self, OpenError> {
        Ok(match Location::of(location) {
            Location::Postgres(url) => {
                Store::Postgres(PostgresStore::connect_with_tls(url, tls).await?)
            }
            Location::Sqlite(path) => Store::Sqlite(SqliteStore::open(path)?),
        })
    }

    /// Opens the store at `location` without creating or migrating anything: it must hold a
    /// store at this build's schema ([`OpenError::NotMigrated`] otherwise), and a SQLite file
    /// must exist. For tools beside the application, such as the `portcullis` command line.
    pub async fn open_existing(location: &str) -> Result<Self, OpenError> {
        Self::open_existing_with_tls(location, &PostgresTls::default()).await
    }

    /// Opens the store at `location` as [`open_existing`](Self::open_existing) does; a
    /// PostgreSQL store trusts the servers whose certificates `tls` verifies.
    pub async fn open_existing_with_tls(
        location: &str,
        tls: &PostgresTls,
    ) -> Result<Self, OpenError> {
        Ok(match Location::of(location) {
            Location::Postgres(url) => {
                Store::Postgres(PostgresStore::connect_existing_with_tls(url, tls).await?)
            }
            Location::Sqlite(path) => Store::Sqlite(SqliteStore::open_existing(path)?),
        })
    }

    /// The store, sealing what it keeps that may hold secrets with `keys` (see
    /// [`SqliteStore::sealed_with`]).
    pub fn sealed_with(self, keys: SealKeys) -> Self {
        match self {
            Store::Sqlite(store) => Store::Sqlite(store.sealed_with(keys)),
            Store::Postgres(store) => Store::Postgres(store.sealed_with(keys)),
        }
    }

    /// The store, holding at most `shares` tasks in its provenance and budget stores, in all
    /// and for each caller, and each caller's share of open claims and runs going on (see
    /// [`SqliteStore::with_shares`]). Give every worker the same.
    pub fn with_shares(self, shares: Shares) -> Self {
        match self {
            Store::Sqlite(store) => Store::Sqlite(store.with_shares(shares)),
            Store::Postgres(store) => Store::Postgres(store.with_shares(shares)),
        }
    }

    /// The store, ending its provenance and budget tasks on their own after `lifetime` (see
    /// [`SqliteStore::with_lifetime`]). Give every worker the same.
    pub fn with_lifetime(self, lifetime: TaskLifetime) -> Self {
        match self {
            Store::Sqlite(store) => Store::Sqlite(store.with_lifetime(lifetime)),
            Store::Postgres(store) => Store::Postgres(store.with_lifetime(lifetime)),
        }
    }

    /// The store, keeping what is not a task for `retention`, for [`prune`](Self::prune).
    pub fn with_retention(self, retention: Retention) -> Self {
        match self {
            Store::Sqlite(store) => Store::Sqlite(store.with_retention(retention)),
            Store::Postgres(store) => Store::Postgres(store.with_retention(retention)),
        }
    }

    /// What each caller (tenant, actor) holds in the store, by tenant and actor: its live and
    /// ended tasks, its sources' text, its open claims, runs and pending calls.
    pub async fn usage(&self) -> io::Result<Vec<CallerUsage>> {
        match self {
            Store::Sqlite(store) => store.usage(),
            Store::Postgres(store) => store.usage().await,
        }
    }

    /// Ends the provenance and budget tasks past their lifetime, forgets the records of ended
    /// tasks past their time, and deletes the runs, settled claims, expired pending calls and
    /// window rows past their retention (never the audit log), in one transaction; with
    /// `dry_run`, changes nothing and tells what it would have done. A sealed store's tasks
    /// are ended only with its seal keys ([`sealed_with`](Self::sealed_with)): a task whose
    /// sources do not read is left as it is.
    pub async fn prune(&self, dry_run: bool) -> io::Result<Pruned> {
        match self {
            Store::Sqlite(store) => store.prune(dry_run),
            Store::Postgres(store) => store.prune(dry_run).await,
        }
    }

    /// The claims whose calls are not settled (running, or waiting for a decision), oldest
    /// first.
    pub async fn open_claims(&self) -> Result<Vec<OpenClaim>, Rejection> {
        match self {
            Store::Sqlite(store) => store.open_claims(),
            Store::Postgres(store) => store.open_claims().await,
        }
    }

    /// The call whose claim has the id `id` ([`CallKey::claim_id`]), open or settled.
    pub async fn find_claim(&self, id: &str) -> Result<Option<CallKey>, Rejection> {
        match self {
            Store::Sqlite(store) => store.find_claim(id),
            Store::Postgres(store) => store.find_claim(id).await,
        }
    }

    /// Settles the claim of `key` with `outcome`, for an operator who found out how its call
    /// ended: only a claim whose outcome is unknown (running, claimed before
    /// `lease_start_ms`; see [`may_settle`](portcullis_core::may_settle)), once.
    pub async fn settle_abandoned(
        &self,
        key: &CallKey,
        outcome: &Outcome,
        lease_start_ms: u64,
    ) -> Result<(), Rejection> {
        match self {
            Store::Sqlite(store) => store.settle_abandoned(key, outcome, lease_start_ms),
            Store::Postgres(store) => store.settle_abandoned(key, outcome, lease_start_ms).await,
        }
    }

    /// Invites `reviewer` until `expires_ms` (milliseconds since the Unix epoch): returns the
    /// one-time token, which the store keeps as its SHA-256 only, and the invitation.
    pub async fn invite_reviewer(
        &self,
        reviewer: &Reviewer,
        now_ms: u64,
        expires_ms: u64,
    ) -> io::Result<(String, Invite)> {
        match self {
            Store::Sqlite(store) => store.invite_reviewer(reviewer, now_ms, expires_ms),
            Store::Postgres(store) => store.invite_reviewer(reviewer, now_ms, expires_ms).await,
        }
    }

    /// The invitation of `token`, if there is one.
    pub async fn invite(&self, token: &str) -> io::Result<Option<Invite>> {
        match self {
            Store::Sqlite(store) => store.invite(token),
            Store::Postgres(store) => store.invite(token).await,
        }
    }

    /// Enrols `credential` with the invitation of `token`: once, before it expires. The
    /// enrolment grants nothing until the operator confirms it into the keyring.
    pub async fn enrol(
        &self,
        token: &str,
        credential: &PasskeyCredential,
        now_ms: u64,
    ) -> io::Result<Enrolled> {
        match self {
            Store::Sqlite(store) => store.enrol(token, credential, now_ms),
            Store::Postgres(store) => store.enrol(token, credential, now_ms).await,
        }
    }

    /// Every invitation, newest first.
    pub async fn invites(&self) -> io::Result<Vec<Invite>> {
        match self {
            Store::Sqlite(store) => store.invites(),
            Store::Postgres(store) => store.invites().await,
        }
    }

    /// Removes the invitation `id` ([`Invite::id`]); `false` if there is none.
    pub async fn remove_invite(&self, id: &str) -> io::Result<bool> {
        match self {
            Store::Sqlite(store) => store.remove_invite(id),
            Store::Postgres(store) => store.remove_invite(id).await,
        }
    }

    /// Every agent run's summary, most recently changed first, read from what the store keeps
    /// in clear: for an operator's list, with or without the seal keys.
    pub async fn run_summaries(&self) -> Result<Vec<RunSummary>, RunStoreError> {
        match self {
            Store::Sqlite(store) => store.run_summaries(),
            Store::Postgres(store) => store.run_summaries().await,
        }
    }

    /// The audit log's records from sequence `from` on, at most `limit` of them, in order.
    pub async fn audit_records(
        &self,
        from: u64,
        limit: Option<u64>,
    ) -> io::Result<Vec<AuditRecord>> {
        match self {
            Store::Sqlite(store) => store.audit_records(from, limit),
            Store::Postgres(store) => store.audit_records(from, limit).await,
        }
    }

    /// Checks the audit log's chain from its first record, as
    /// [`verify`](portcullis_core::audit::verify) (with `checkpoint`, as
    /// [`verify_to`](portcullis_core::audit::verify_to)), reading it a page of
    /// [`Store::VERIFY_PAGE`] records at a time: a log of any length verifies in the memory of
    /// one page.
    pub async fn verify_audit(
        &self,
        key: Option<&AuditKey>,
        checkpoint: Option<&Checkpoint>,
    ) -> Result<Checkpoint, VerifyError> {
        let mut verifier = Verifier::new(key).to(checkpoint);
        loop {
            // Each page starts after the last record checked: every record the verifier took
            // has the sequence number it expected, so the page read by sequence is the next.
            let from = verifier.reached().length;
            let page = match self {
                Store::Sqlite(store) => store.audit_texts(from, Some(Self::VERIFY_PAGE))?,
                Store::Postgres(store) => store.audit_texts(from, Some(Self::VERIFY_PAGE)).await?,
            };
            verifier.push_texts(&page)?;
            if (page.len() as u64) < Self::VERIFY_PAGE {
                return Ok(verifier.finish()?);
            }
        }
    }

    /// The records [`Store::verify_audit`] reads at once.
    // Pages of 10,000 verified a million records no faster, within the noise (346,000/s
    // against 323,000/s), and a record may carry 64 KiB of arguments and its snapshots: a
    // page of 1,000 keeps what a verify holds small whatever the records.
    pub const VERIFY_PAGE: u64 = 1000;
}

impl ApprovalStore for Store {
    fn insert(
        &self,
        pending: PendingCall,
        limits: PendingLimits,
    ) -> BoxFuture<'_, Result<(), Rejection>> {
        on_store!(self, store => ApprovalStore::insert(store, pending, limits))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<PendingCall>, Rejection>> {
        on_store!(self, store => ApprovalStore::get(store, id))
    }

    fn decide<'a>(
        &'a self,
        id: &'a str,
        decision: &'a SignedDecision,
        now_ms: u64,
    ) -> BoxFuture<'a, Recorded> {
        on_store!(self, store => store.decide(id, decision, now_ms))
    }

    fn lease<'a>(
        &'a self,
        id: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Option<PendingCall>, Rejection>> {
        on_store!(self, store => store.lease(id, lease))
    }

    fn remove<'a>(
        &'a self,
        id: &'a str,
        lease_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, Rejection>> {
        on_store!(self, store => store.remove(id, lease_id))
    }

    fn give_back<'a>(
        &'a self,
        id: &'a str,
        lease_id: &'a str,
        pending: &'a PendingCall,
    ) -> BoxFuture<'a, Result<(), Rejection>> {
        on_store!(self, store => store.give_back(id, lease_id, pending))
    }

    fn take_expired(&self, now_ms: u64) -> BoxFuture<'_, Vec<PendingCall>> {
        on_store!(self, store => store.take_expired(now_ms))
    }

    fn pending(&self) -> BoxFuture<'_, Result<Vec<Ticket>, Rejection>> {
        on_store!(self, store => store.pending())
    }

    fn decided(&self) -> BoxFuture<'_, Result<Vec<String>, Rejection>> {
        on_store!(self, store => store.decided())
    }
}

impl RepeatStore for Store {
    fn claim<'a>(
        &'a self,
        key: &'a CallKey,
        fingerprint: &'a str,
        lease_start_ms: u64,
    ) -> BoxFuture<'a, Claim> {
        on_store!(self, store => store.claim(key, fingerprint, lease_start_ms))
    }

    fn update<'a>(&'a self, key: &'a CallKey, state: ClaimState) -> BoxFuture<'a, ()> {
        on_store!(self, store => store.update(key, state))
    }

    fn release<'a>(&'a self, key: &'a CallKey) -> BoxFuture<'a, ()> {
        on_store!(self, store => RepeatStore::release(store, key))
    }
}

impl BudgetStore for Store {
    fn reserve<'a>(
        &'a self,
        charge: Charge<'a>,
        limits: &'a BudgetLimits,
    ) -> BoxFuture<'a, Result<(), Rejection>> {
        on_store!(self, store => store.reserve(charge, limits))
    }

    fn settle<'a>(
        &'a self,
        tool: &'a str,
        failed: bool,
        limits: &'a BudgetLimits,
    ) -> BoxFuture<'a, ()> {
        on_store!(self, store => store.settle(tool, failed, limits))
    }

    fn release<'a>(&'a self, charge: Charge<'a>) -> BoxFuture<'a, ()> {
        on_store!(self, store => BudgetStore::release(store, charge))
    }

    fn count_refusal<'a>(
        &'a self,
        ctx: &'a CallContext,
        limit: &'a RefusalLimit,
    ) -> BoxFuture<'a, u64> {
        on_store!(self, store => store.count_refusal(ctx, limit))
    }

    fn refusals<'a>(
        &'a self,
        ctx: &'a CallContext,
        limit: &'a RefusalLimit,
    ) -> BoxFuture<'a, Result<u64, Rejection>> {
        on_store!(self, store => store.refusals(ctx, limit))
    }

    fn task_usage<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<BudgetUsage, Rejection>> {
        on_store!(self, store => store.task_usage(task))
    }

    fn forget_task<'a>(&'a self, task: &'a str) -> BoxFuture<'a, ()> {
        on_store!(self, store => BudgetStore::forget_task(store, task))
    }
}

impl TransactionStore for Store {
    fn record_step<'a>(
        &'a self,
        id: &'a str,
        ctx: &'a CallContext,
        step: &'a StoredStep,
        lease_until_ms: u64,
    ) -> BoxFuture<'a, io::Result<()>> {
        on_store!(self, store => store.record_step(id, ctx, step, lease_until_ms))
    }

    fn mark_compensated<'a>(&'a self, id: &'a str, index: usize) -> BoxFuture<'a, ()> {
        on_store!(self, store => store.mark_compensated(id, index))
    }

    fn finish<'a>(&'a self, id: &'a str) -> BoxFuture<'a, ()> {
        on_store!(self, store => store.finish(id))
    }

    fn take_abandoned(&self, now_ms: u64, lease_until_ms: u64) -> BoxFuture<'_, Vec<Abandoned>> {
        on_store!(self, store => store.take_abandoned(now_ms, lease_until_ms))
    }
}

impl AuditSink for Store {
    fn append(&self, entry: Unchained) -> BoxFuture<'_, io::Result<()>> {
        on_store!(self, store => store.append(entry))
    }
}

impl ProvenanceStore for Store {
    fn record<'a>(
        &'a self,
        ctx: &'a CallContext,
        source: &'a SourceRecord,
    ) -> BoxFuture<'a, Result<u64, Rejection>> {
        on_store!(self, store => store.record(ctx, source))
    }

    fn admit<'a>(&'a self, ctx: &'a CallContext) -> BoxFuture<'a, Result<(), Rejection>> {
        on_store!(self, store => store.admit(ctx))
    }

    fn since<'a>(
        &'a self,
        ctx: &'a CallContext,
        after: u64,
    ) -> BoxFuture<'a, Result<Vec<(u64, SourceRecord)>, Rejection>> {
        on_store!(self, store => store.since(ctx, after))
    }

    fn forget_task<'a>(&'a self, task: &'a str) -> BoxFuture<'a, ()> {
        on_store!(self, store => ProvenanceStore::forget_task(store, task))
    }
}

impl RunStore for Store {
    fn insert(&self, run: StoredRun) -> BoxFuture<'_, Result<(), RunStoreError>> {
        on_store!(self, store => RunStore::insert(store, run))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<StoredRun>, RunStoreError>> {
        on_store!(self, store => RunStore::get(store, id))
    }

    fn replace(&self, run: StoredRun, read: u64) -> BoxFuture<'_, Result<bool, RunStoreError>> {
        on_store!(self, store => store.replace(run, read))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredRun>, RunStoreError>> {
        on_store!(self, store => store.list())
    }
}
