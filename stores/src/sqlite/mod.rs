//! The SQLite store: one file, opened in WAL mode, its schema migrated when opened.

mod approvals;
mod audit;
mod budget;
mod invites;
mod provenance;
mod repeats;
mod runs;
mod tasks;
mod transactions;
mod upkeep;

use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use portcullis_core::audit::RoundWriter;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::error::OpenError;
use crate::seal::{SealKeys, Sealing};
use crate::tasks::{Bounds, Retention, Shares};
pub(crate) use crate::values::{as_sql, from_sql, now_ms};

/// The schema, one migration per version, applied in order when a store opens. Never edit a
/// migration that shipped: add the next one.
const MIGRATIONS: &[&str] = &[
    // 1: pending approvals and claims of calls.
    "CREATE TABLE pending_calls (
        ticket_id TEXT PRIMARY KEY,
        task TEXT NOT NULL,
        actor TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL,
        call TEXT NOT NULL
    );
    CREATE INDEX pending_calls_by_task ON pending_calls (task, expires_ms);
    CREATE INDEX pending_calls_by_actor ON pending_calls (actor, expires_ms);
    CREATE INDEX pending_calls_by_expiry ON pending_calls (expires_ms);
    CREATE TABLE claims (
        call_key TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        state TEXT NOT NULL,
        settled INTEGER NOT NULL
    );",
    // 2: the audit log, one chain whoever appends.
    "CREATE TABLE audit_records (
        sequence INTEGER PRIMARY KEY,
        hash TEXT NOT NULL,
        record TEXT NOT NULL
    );",
    // 3: budgets: tasks, their calls per tool, the actors' recent calls, the tools' circuits.
    "CREATE TABLE budget_tasks (
        task TEXT PRIMARY KEY,
        calls INTEGER NOT NULL DEFAULT 0,
        cost INTEGER NOT NULL DEFAULT 0,
        last_tool TEXT,
        last_arguments TEXT,
        last_times INTEGER NOT NULL DEFAULT 0,
        refusals INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE budget_tool_calls (
        task TEXT NOT NULL,
        tool TEXT NOT NULL,
        calls INTEGER NOT NULL,
        PRIMARY KEY (task, tool)
    );
    CREATE TABLE budget_actor_calls (actor TEXT NOT NULL, at_ms INTEGER NOT NULL);
    CREATE INDEX budget_actor_calls_by_actor ON budget_actor_calls (actor, at_ms);
    CREATE TABLE budget_circuits (
        tool TEXT PRIMARY KEY,
        failures_in_a_row INTEGER NOT NULL,
        open_until_ms INTEGER
    );",
    // 4: open transactions and their completed steps.
    "CREATE TABLE transactions (
        id TEXT PRIMARY KEY,
        ctx TEXT NOT NULL,
        lease_until_ms INTEGER NOT NULL
    );
    CREATE INDEX transactions_by_lease ON transactions (lease_until_ms);
    CREATE TABLE transaction_steps (
        id TEXT NOT NULL,
        step INTEGER NOT NULL,
        payload TEXT NOT NULL,
        compensated INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (id, step)
    );",
    // 5: a pending call's decision, recorded before a worker runs it.
    "ALTER TABLE pending_calls ADD COLUMN decision TEXT;",
    // 6: when a call was claimed, for its lease; claims from before count as long abandoned.
    "ALTER TABLE claims ADD COLUMN claimed_ms INTEGER NOT NULL DEFAULT 0;",
    // 7: refusals as times, for a refusal limit over a window. The counts of before, which
    // held for a task's whole life, become as many refusals made now (at most 10,000 a task):
    // a task stopped before the upgrade stays stopped for a window after it.
    "CREATE TABLE budget_refusals (task TEXT NOT NULL, at_ms INTEGER NOT NULL);
    CREATE INDEX budget_refusals_by_task ON budget_refusals (task, at_ms);
    WITH RECURSIVE earlier (task, left_to_add) AS (
        SELECT task, min(refusals, 10000) FROM budget_tasks WHERE refusals > 0
        UNION ALL
        SELECT task, left_to_add - 1 FROM earlier WHERE left_to_add > 1
    )
    INSERT INTO budget_refusals (task, at_ms)
    SELECT task, CAST(strftime('%s', 'now') AS INTEGER) * 1000 FROM earlier;
    UPDATE budget_tasks SET refusals = 0 WHERE refusals <> 0;",
    // 8: a pending call's ticket in clear, redacted, for the queue: the call may be sealed;
    // the lease of the worker about to run a decided call.
    "ALTER TABLE pending_calls ADD COLUMN ticket TEXT;
    ALTER TABLE pending_calls ADD COLUMN lease_id TEXT;
    ALTER TABLE pending_calls ADD COLUMN leased_until_ms INTEGER NOT NULL DEFAULT 0;",
    // 9: the tasks' sources, for the provenance gate: each task's last number and the bytes
    // of text it keeps, and each source, its text sealed with keys.
    "CREATE TABLE provenance_tasks (
        task TEXT NOT NULL,
        tenant TEXT NOT NULL,
        number INTEGER NOT NULL,
        text_bytes INTEGER NOT NULL,
        PRIMARY KEY (task, tenant)
    );
    CREATE TABLE provenance_sources (
        task TEXT NOT NULL,
        tenant TEXT NOT NULL,
        number INTEGER NOT NULL,
        origin TEXT NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY (task, tenant, number)
    );",
    // 10: agent runs: the state sealed with keys, what an operator lists them by in clear.
    "CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        held_until_ms INTEGER NOT NULL,
        status TEXT NOT NULL,
        stop_code TEXT,
        actor TEXT NOT NULL,
        tenant TEXT,
        task_id TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL,
        tickets TEXT NOT NULL,
        steps INTEGER NOT NULL,
        usage TEXT NOT NULL,
        state TEXT NOT NULL
    );
    CREATE INDEX runs_by_update ON runs (updated_ms);",
    // 11: invitations to review: a token's SHA-256, the reviewer invited, the passkey enrolled.
    "CREATE TABLE reviewer_invites (
        token_hash TEXT PRIMARY KEY,
        reviewer TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL,
        credential TEXT,
        enrolled_ms INTEGER
    );",
    // 12: callers' shares of the provenance and budget stores, and tasks that end on their
    // own. A task's row keeps its caller's actor (and, for a budget, its tenant), when it
    // began, was last used and ended, and (provenance) the number its kept sources begin at:
    // the tables are rebuilt with their columns of before (whatever else a database holds).
    // The tasks of before belong to a caller of their tenant with no actor, began and were
    // used at the upgrade, and count in the shares. `task_callers` counts each caller's live
    // tasks and ended tasks' records; `task_totals` the store's; `provenance_marks` the
    // number every task deleted stayed below.
    "CREATE TABLE provenance_tasks_12 (
        task TEXT NOT NULL,
        tenant TEXT NOT NULL,
        number INTEGER NOT NULL,
        text_bytes INTEGER NOT NULL,
        actor TEXT NOT NULL DEFAULT '',
        first_number INTEGER NOT NULL DEFAULT 1,
        started_ms INTEGER NOT NULL DEFAULT 0,
        used_ms INTEGER NOT NULL DEFAULT 0,
        ended_ms INTEGER,
        PRIMARY KEY (task, tenant)
    );
    INSERT INTO provenance_tasks_12 (task, tenant, number, text_bytes, started_ms, used_ms)
    SELECT task, tenant, number, text_bytes, CAST(strftime('%s', 'now') AS INTEGER) * 1000,
        CAST(strftime('%s', 'now') AS INTEGER) * 1000
    FROM provenance_tasks;
    DROP TABLE provenance_tasks;
    ALTER TABLE provenance_tasks_12 RENAME TO provenance_tasks;
    CREATE INDEX provenance_tasks_by_caller ON provenance_tasks (tenant, actor);
    CREATE INDEX provenance_tasks_by_end ON provenance_tasks (ended_ms);
    CREATE TABLE budget_tasks_12 (
        task TEXT PRIMARY KEY,
        calls INTEGER NOT NULL DEFAULT 0,
        cost INTEGER NOT NULL DEFAULT 0,
        last_tool TEXT,
        last_arguments TEXT,
        last_times INTEGER NOT NULL DEFAULT 0,
        refusals INTEGER NOT NULL DEFAULT 0,
        actor TEXT NOT NULL DEFAULT '',
        tenant TEXT NOT NULL DEFAULT '',
        started_ms INTEGER NOT NULL DEFAULT 0,
        used_ms INTEGER NOT NULL DEFAULT 0,
        ended_ms INTEGER
    );
    INSERT INTO budget_tasks_12 (task, calls, cost, last_tool, last_arguments, last_times,
        refusals, started_ms, used_ms)
    SELECT task, calls, cost, last_tool, last_arguments, last_times, refusals,
        CAST(strftime('%s', 'now') AS INTEGER) * 1000,
        CAST(strftime('%s', 'now') AS INTEGER) * 1000
    FROM budget_tasks;
    DROP TABLE budget_tasks;
    ALTER TABLE budget_tasks_12 RENAME TO budget_tasks;
    CREATE INDEX budget_tasks_by_caller ON budget_tasks (tenant, actor);
    CREATE INDEX budget_tasks_by_end ON budget_tasks (ended_ms);
    CREATE INDEX IF NOT EXISTS budget_actor_calls_by_time ON budget_actor_calls (at_ms);
    CREATE INDEX IF NOT EXISTS budget_refusals_by_time ON budget_refusals (at_ms);
    CREATE INDEX IF NOT EXISTS claims_by_time ON claims (settled, claimed_ms);
    DROP TABLE IF EXISTS task_callers;
    DROP TABLE IF EXISTS task_totals;
    DROP TABLE IF EXISTS provenance_marks;
    CREATE TABLE task_callers (
        store TEXT NOT NULL,
        tenant TEXT NOT NULL,
        actor TEXT NOT NULL,
        live INTEGER NOT NULL,
        ended INTEGER NOT NULL,
        PRIMARY KEY (store, tenant, actor)
    );
    INSERT INTO task_callers (store, tenant, actor, live, ended)
    SELECT 'provenance', tenant, actor, sum(ended_ms IS NULL), sum(ended_ms IS NOT NULL)
    FROM provenance_tasks GROUP BY tenant, actor;
    INSERT INTO task_callers (store, tenant, actor, live, ended)
    SELECT 'budget', tenant, actor, sum(ended_ms IS NULL), sum(ended_ms IS NOT NULL)
    FROM budget_tasks GROUP BY tenant, actor;
    CREATE TABLE task_totals (
        store TEXT NOT NULL,
        part INTEGER NOT NULL,
        live INTEGER NOT NULL,
        ended INTEGER NOT NULL,
        PRIMARY KEY (store, part)
    );
    INSERT INTO task_totals (store, part, live, ended)
    VALUES ('provenance', 0,
            (SELECT count(*) FROM provenance_tasks WHERE ended_ms IS NULL),
            (SELECT count(*) FROM provenance_tasks WHERE ended_ms IS NOT NULL)),
        ('budget', 0,
            (SELECT count(*) FROM budget_tasks WHERE ended_ms IS NULL),
            (SELECT count(*) FROM budget_tasks WHERE ended_ms IS NOT NULL));
    CREATE TABLE provenance_marks (part INTEGER PRIMARY KEY, number INTEGER NOT NULL);
    INSERT INTO provenance_marks (part, number) VALUES (0, 0);",
    // 13: a pending call's tenant, so that the calls waiting of one caller are counted per
    // actor in its tenant (the same actor in another tenant is another caller). Calls of before
    // count as of no tenant.
    "ALTER TABLE pending_calls ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    CREATE INDEX pending_calls_by_caller ON pending_calls (actor, tenant, expires_ms);",
    // 14: whose claims and refusals these are, so that a caller's open claims, and the tasks
    // holding its refusals, are counted in its share; until when a caller holds all the tasks
    // holding refusals it may (`refusal_shares`). Open claims of before take their caller from
    // their key; refusals of before count as of no caller.
    "ALTER TABLE claims ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    ALTER TABLE claims ADD COLUMN actor TEXT NOT NULL DEFAULT '';
    UPDATE claims SET tenant = coalesce(json_extract(call_key, '$.tenant'), ''),
        actor = coalesce(json_extract(call_key, '$.actor'), '')
    WHERE settled = 0;
    CREATE INDEX claims_by_caller ON claims (tenant, actor, settled, claimed_ms);
    ALTER TABLE budget_refusals ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    ALTER TABLE budget_refusals ADD COLUMN actor TEXT NOT NULL DEFAULT '';
    CREATE INDEX budget_refusals_by_caller ON budget_refusals (tenant, actor, at_ms);
    CREATE TABLE refusal_shares (
        tenant TEXT NOT NULL,
        actor TEXT NOT NULL,
        full_until_ms INTEGER NOT NULL,
        PRIMARY KEY (tenant, actor)
    );
    CREATE INDEX runs_by_caller ON runs (actor, tenant, status);",
];

/// How many prepared statements a connection keeps, so that the statements a call runs are
/// prepared once.
const STATEMENTS: usize = 128;

/// How long a writer waits for another process's transaction before it gives up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// State kept in one SQLite file: an [`ApprovalStore`](portcullis_core::ApprovalStore), a
/// [`RepeatStore`](portcullis_core::RepeatStore), a
/// [`BudgetStore`](portcullis_core::BudgetStore), a
/// [`TransactionStore`](portcullis_core::TransactionStore), an
/// [`AuditSink`](portcullis_core::audit::AuditSink), a
/// [`ProvenanceStore`](portcullis_core::ProvenanceStore) and an agent's
/// [`RunStore`](portcullis_agent::RunStore). Clones share the connection.
///
/// The store's methods run their (short) SQLite transactions on the calling thread; audit records
/// go to a thread of the store's own, which stores them in rounds of one transaction each.
#[derive(Clone)]
pub struct SqliteStore {
    connection: Arc<Mutex<Connection>>,
    /// The thread that stores audit records, started by the first.
    audit: Arc<OnceLock<RoundWriter>>,
    sealing: Sealing,
    bounds: Bounds,
}

impl SqliteStore {
    /// Opens (or creates) the store at `path` and brings its schema up to date. A new file is
    /// created readable and writable by its owner only (`0600`); SQLite gives its `-wal` and
    /// `-shm` files the same mode.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let path = path.as_ref();
        create_private(path)?;
        let mut connection = Connection::open(path)?;
        connection.busy_timeout(BUSY_TIMEOUT)?;
        connection.set_prepared_statement_cache_capacity(STATEMENTS);
        // Every commit is on the disk before the decision it records is acted on.
        connection.pragma_update(None, "synchronous", "FULL")?;
        // Switching to WAL, and migrating, may find another process doing the same: SQLite
        // then answers "busy" at once rather than waiting, so the opening waits and tries again.
        let started = Instant::now();
        loop {
            let prepared = connection
                .pragma_update(None, "journal_mode", "WAL")
                .map_err(OpenError::from)
                .and_then(|()| migrate(&mut connection));
            match prepared {
                Err(OpenError::Database(error))
                    if is_busy(error.as_ref()) && started.elapsed() < BUSY_TIMEOUT =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                prepared => break prepared?,
            }
        }
        Ok(SqliteStore {
            connection: Arc::new(Mutex::new(connection)),
            audit: Arc::default(),
            sealing: Sealing::default(),
            bounds: Bounds::default(),
        })
    }

    /// Opens the store at `path` without creating or migrating anything: the file must hold a
    /// store at this build's schema (`NotMigrated` otherwise). For tools beside the
    /// application, such as the `portcullis` command line, that must not create a store
    /// where a path is mistyped.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let connection = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        connection.busy_timeout(BUSY_TIMEOUT)?;
        connection.set_prepared_statement_cache_capacity(STATEMENTS);
        connection.pragma_update(None, "synchronous", "FULL")?;
        let (found, known) = (schema_version(&connection)?, MIGRATIONS.len());
        if found != known {
            return Err(OpenError::NotMigrated {
                found: found as i64,
                known: known as i64,
            });
        }
        Ok(SqliteStore {
            connection: Arc::new(Mutex::new(connection)),
            audit: Arc::default(),
            sealing: Sealing::default(),
            bounds: Bounds::default(),
        })
    }

    /// Seals what the store keeps that may hold secrets (a pending call's arguments and its
    /// decision, a claim's outcome, a transaction's context and steps, the text of a task's
    /// sources, an agent run's state) with `keys`, and opens what they sealed; see
    /// [`SealKeys`]. Without keys, those values are kept in clear, and a sealed one is refused
    /// (`seal_key_missing`; a task's sources, `sources_unavailable`; a run, `runs_unavailable`)
    /// and left as it is.
    pub fn sealed_with(mut self, keys: SealKeys) -> Self {
        self.sealing = Sealing::with(keys);
        self
    }

    /// This store, holding at most `shares` tasks in its provenance and budget stores, in all
    /// and for each caller (its actor in its tenant), and for each caller at most its share
    /// of open claims and of runs going on; [`Shares::default`] otherwise (a hundred callers
    /// at least use the store at once). A caller at its share is refused a new task
    /// (`sources_share_full`, `budget_share_full`), claim (`claim_share_full`) or run
    /// (`run_share_full`) while what it holds goes on and other callers are served; a full
    /// store refuses any new task (`output_unrecorded`, `budget_store_full`). Call it as the
    /// store is opened, the same in every worker.
    pub fn with_shares(mut self, shares: Shares) -> Self {
        self.bounds.shares = shares;
        self
    }

    /// This store, ending its provenance and budget tasks on their own after `lifetime`
    /// ([`TaskLifetime::default`](portcullis_core::TaskLifetime::default): idle an hour, or
    /// begun a day ago; remembered a week): a clean provenance task is deleted with its
    /// sources, a tainted one stays tainted while remembered, a counted budget task is refused
    /// `task_expired` while remembered. The store ends them as it meets them, when a caller's
    /// share (or the store) is full, now and then as it records, and in `portcullis prune`.
    /// Call it as the store is opened, the same in every worker.
    pub fn with_lifetime(mut self, lifetime: portcullis_core::TaskLifetime) -> Self {
        self.bounds.lifetime = lifetime;
        self
    }

    /// This store, keeping what is not a task for `retention` ([`Retention::default`]: 30 days
    /// each), for [`prune`](Self::prune).
    pub fn with_retention(mut self, retention: Retention) -> Self {
        self.bounds.retention = retention;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A transaction in progress when a thread panicked was rolled back when it dropped.
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Creates an empty file at `path` that only its owner may read or write, unless one is there:
/// SQLite would create it with the process's umask, commonly readable by every local user.
fn create_private(path: &Path) -> Result<(), OpenError> {
    if path.as_os_str() == ":memory:" {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(OpenError::Database(Box::new(error))),
    }
}

/// Whether `error` is SQLite's "the database is locked by another connection".
fn is_busy(error: &(dyn std::error::Error + 'static)) -> bool {
    matches!(
        error.downcast_ref::<rusqlite::Error>(),
        Some(rusqlite::Error::SqliteFailure(failure, _))
            if failure.code == rusqlite::ErrorCode::DatabaseBusy
    )
}

/// The database's schema version, refused if newer than this build knows.
fn schema_version(connection: &Connection) -> Result<usize, OpenError> {
    let found: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
    let known = MIGRATIONS.len() as i64;
    if found > known {
        return Err(OpenError::NewerSchema { found, known });
    }
    usize::try_from(found).map_err(|_| OpenError::NotMigrated { found, known })
}

/// Applies the migrations the database lacks, in one transaction.
fn migrate(connection: &mut Connection) -> Result<(), OpenError> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let known = MIGRATIONS.len() as i64;
    for migration in &MIGRATIONS[schema_version(&transaction)?..] {
        transaction.execute_batch(migration)?;
    }
    transaction.pragma_update(None, "user_version", known)?;
    transaction.commit()?;
    Ok(())
}

/// Reports a database failure the store answers by refusing.
fn failed(operation: &str, error: &dyn fmt::Display) {
    tracing::error!(%error, "the SQLite store could not {operation}");
}

impl From<rusqlite::Error> for OpenError {
    fn from(error: rusqlite::Error) -> Self {
        OpenError::Database(Box::new(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        drop(SqliteStore::open(&path).unwrap());
        drop(SqliteStore::open(&path).unwrap());
        let connection = Connection::open(&path).unwrap();
        connection.pragma_update(None, "user_version", 99).unwrap();
        drop(connection);
        let error = SqliteStore::open(&path).err().unwrap();
        assert!(matches!(
            error,
            OpenError::NewerSchema {
                found: 99,
                known: 14
            }
        ));
        assert!(error.to_string().contains("upgrade portcullis"), "{error}");
        // A version no portcullis wrote is refused too, without a panic.
        let connection = Connection::open(&path).unwrap();
        connection.pragma_update(None, "user_version", -1).unwrap();
        drop(connection);
        let error = SqliteStore::open(&path).err().unwrap();
        assert!(matches!(error, OpenError::NotMigrated { found: -1, .. }));
    }

    /// The database, its write-ahead log and its shared memory file are their owner's alone,
    /// whatever the process's umask.
    #[cfg(unix)]
    #[test]
    fn a_new_store_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let store = SqliteStore::open(&path).unwrap();
        for suffix in ["", "-wal", "-shm"] {
            let file = format!("{}{suffix}", path.display());
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{file}");
        }
        drop(store);
    }
}
