//! Durable stores for portcullis: the state the gates keep, in a database that outlives the
//! process and is shared by several workers: pending approvals, claims of calls, budgets, open
//! transactions, the audit log, each task's sources for the provenance gate (the user's
//! messages and the tools' outputs, numbered in the order they entered the task), and agent
//! runs ([`RunStore`](portcullis_agent::RunStore)), so that a run paused for a human resumes
//! after a restart, on any worker, once.
//!
//! [`SqliteStore`] is the embedded default: a file path is the whole configuration. It opens
//! the database in WAL mode with full `fsync`, runs its embedded migrations, and refuses a
//! database whose schema is newer than it knows. Every decision that must happen once (a
//! ticket taken, a call claimed) is one SQLite transaction, so several processes on one machine
//! may share the file.
//!
//! No caller exhausts what others share: the provenance and budget stores hold at most
//! [`Shares`] tasks, and a share of them for each caller (an actor in its tenant; a
//! hundredth by default, so that at least 100 callers use a store at once). A caller at its
//! share is refused a new task (`sources_share_full`, `budget_share_full`) while its tasks go
//! on and other callers are served. Tasks end on their own
//! ([`TaskLifetime`](portcullis_core::TaskLifetime), [`Store::with_lifetime`]), without ever
//! allowing what they refused: a tainted task stays tainted, a spent budget is refused `task_expired`, while the
//! store remembers them. `portcullis usage` shows what each caller holds; `portcullis prune`
//! ([`Store::prune`]) ends what the lifetimes allow and deletes what the [`Retention`] allows
//! (never the audit log).
//!
//! ```
//! use portcullis_core::{DecisionKey, Keyring, Registry, Reviewer};
//! use portcullis_stores::SqliteStore;
//!
//! // Only decisions signed by a reviewer's key count: whoever can write the file cannot
//! // approve. In production the keyring is a file of public keys (`Keyring::load`).
//! let rita = DecisionKey::generate();
//! let keyring = Keyring::new().reviewer(Reviewer::new("rita").with_roles(["finance"]), rita.public_key());
//!
//! // The service's data directory; here one that is removed when the example ends.
//! let dir = tempfile::tempdir().unwrap();
//! let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
//! let registry = Registry::builder()
//!     .approval_store(store.clone())
//!     .keyring(keyring)
//!     .repeat_store(store)
//!     .build()
//!     .unwrap();
//! # drop(registry);
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod claims;
mod error;
mod group_commit;
mod invites;
mod postgres;
mod refusals;
mod runs;
mod seal;
mod sources;
mod sqlite;
mod store;
mod tasks;
mod values;

pub use error::OpenError;
pub use invites::{Enrolled, Enrolment, Invite, fingerprint};
pub use postgres::{
    DEFAULT_CONNECTIONS, DEFAULT_SCHEMA, PostgresStore, PostgresTls, postgres_client,
};
pub use runs::RunSummary;
pub use seal::{SealError, SealKeys};
pub use sqlite::SqliteStore;
pub use store::{Location, Store};
pub use tasks::{CallerUsage, Pruned, Retention, Shares};
