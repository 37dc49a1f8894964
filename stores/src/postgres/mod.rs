//! The PostgreSQL store: a pool of connections to one database, for workers on several
//! machines. Its tables live in a schema of their own (`portcullis` unless told otherwise),
//! migrated when a store connects.

mod approvals;
mod audit;
mod budget;
mod invites;
mod prepared;
mod provenance;
mod repeats;
mod runs;
mod tasks;
mod tls;
mod transactions;

use std::fmt;
use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod};
use tokio_postgres::GenericClient;

use prepared::Prepared;

pub use tls::{PostgresTls, postgres_client};

use crate::error::OpenError;
use crate::group_commit::GroupCommit;
use crate::seal::{SealKeys, Sealing};
use crate::tasks::{Bounds, Retention, Shares};
use crate::values::Failure;

/// The schema, one migration per version, applied in order when a store connects. Never edit
/// a migration that shipped: add the next one.
const MIGRATIONS: &[&str] = &[
    // 1: pending approvals, claims, the audit log, budgets, open transactions.
    "CREATE TABLE pending_calls (
        ticket_id TEXT PRIMARY KEY,
        task TEXT NOT NULL,
        actor TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        expires_ms BIGINT NOT NULL,
        call TEXT NOT NULL,
        decision TEXT
    );
    CREATE INDEX pending_calls_by_task ON pending_calls (task, expires_ms);
    CREATE INDEX pending_calls_by_actor ON pending_calls (actor, expires_ms);
    CREATE INDEX pending_calls_by_expiry ON pending_calls (expires_ms);
    CREATE TABLE claims (
        call_key TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        state TEXT NOT NULL,
        settled BOOLEAN NOT NULL
    );
    CREATE TABLE audit_records (
        sequence BIGINT PRIMARY KEY,
        hash TEXT NOT NULL,
        record TEXT NOT NULL
    );
    CREATE TABLE budget_tasks (
        task TEXT PRIMARY KEY,
        calls BIGINT NOT NULL DEFAULT 0,
        cost BIGINT NOT NULL DEFAULT 0,
        last_tool TEXT,
        last_arguments TEXT,
        last_times BIGINT NOT NULL DEFAULT 0,
        refusals BIGINT NOT NULL DEFAULT 0
    );
    CREATE TABLE budget_tool_calls (
        task TEXT NOT NULL,
        tool TEXT NOT NULL,
        calls BIGINT NOT NULL,
        PRIMARY KEY (task, tool)
    );
    CREATE TABLE budget_actor_calls (actor TEXT NOT NULL, at_ms BIGINT NOT NULL);
    CREATE INDEX budget_actor_calls_by_actor ON budget_actor_calls (actor, at_ms);
    CREATE TABLE budget_circuits (
        tool TEXT PRIMARY KEY,
        failures_in_a_row BIGINT NOT NULL,
        open_until_ms BIGINT
    );
    CREATE TABLE transactions (
        id TEXT PRIMARY KEY,
        ctx TEXT NOT NULL,
        lease_until_ms BIGINT NOT NULL
    );
    CREATE INDEX transactions_by_lease ON transactions (lease_until_ms);
    CREATE TABLE transaction_steps (
        id TEXT NOT NULL,
        step BIGINT NOT NULL,
        payload TEXT NOT NULL,
        compensated BOOLEAN NOT NULL DEFAULT FALSE,
        PRIMARY KEY (id, step)
    );",
    // 2: when a call was claimed, for its lease; claims from before count as long abandoned.
    "ALTER TABLE claims ADD COLUMN claimed_ms BIGINT NOT NULL DEFAULT 0;",
    // 3: refusals as times, for a refusal limit over a window. The counts of before, which
    // held for a task's whole life, become as many refusals made now (at most 10,000 a task):
    // a task stopped before the upgrade stays stopped for a window after it.
    "CREATE TABLE budget_refusals (task TEXT NOT NULL, at_ms BIGINT NOT NULL);
    CREATE INDEX budget_refusals_by_task ON budget_refusals (task, at_ms);
    INSERT INTO budget_refusals (task, at_ms)
    SELECT task, (extract(epoch FROM now()) * 1000)::BIGINT
    FROM budget_tasks, generate_series(1, least(refusals, 10000))
    WHERE refusals > 0;
    UPDATE budget_tasks SET refusals = 0 WHERE refusals <> 0;",
    // 4: a pending call's ticket in clear, redacted, for the queue: the call may be sealed;
    // the lease of the worker about to run a decided call.
    "ALTER TABLE pending_calls ADD COLUMN ticket TEXT;
    ALTER TABLE pending_calls ADD COLUMN lease_id TEXT;
    ALTER TABLE pending_calls ADD COLUMN leased_until_ms BIGINT NOT NULL DEFAULT 0;",
    // 5: the tasks' sources, for the provenance gate: each task's last number and the bytes
    // of text it keeps (its row is the lock a writer takes the next number under), and each
    // source, its text sealed with keys.
    "CREATE TABLE provenance_tasks (
        task TEXT NOT NULL,
        tenant TEXT NOT NULL,
        number BIGINT NOT NULL,
        text_bytes BIGINT NOT NULL,
        PRIMARY KEY (task, tenant)
    );
    CREATE TABLE provenance_sources (
        task TEXT NOT NULL,
        tenant TEXT NOT NULL,
        number BIGINT NOT NULL,
        origin TEXT NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY (task, tenant, number)
    );",
    // 6: agent runs: the state sealed with keys, what an operator lists them by in clear.
    "CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        version BIGINT NOT NULL,
        held_until_ms BIGINT NOT NULL,
        status TEXT NOT NULL,
        stop_code TEXT,
        actor TEXT NOT NULL,
        tenant TEXT,
        task_id TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        updated_ms BIGINT NOT NULL,
        tickets TEXT NOT NULL,
        steps BIGINT NOT NULL,
        usage TEXT NOT NULL,
        state TEXT NOT NULL
    );
    CREATE INDEX runs_by_update ON runs (updated_ms);",
    // 7: invitations to review: a token's SHA-256, the reviewer invited, the passkey enrolled.
    "CREATE TABLE reviewer_invites (
        token_hash TEXT PRIMARY KEY,
        reviewer TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        expires_ms BIGINT NOT NULL,
        credential TEXT,
        enrolled_ms BIGINT
    );",
    // 8: callers' shares of the provenance and budget stores, and tasks that end on their
    // own. A task's row keeps its caller's actor (and, for a budget, its tenant), when it
    // began, was last used and ended, and (provenance) the number its kept sources begin at.
    // The tasks of before belong to a caller of their tenant with no actor, began and were
    // used at the upgrade, and count in the shares (what a database holds of these already is
    // kept, or counted again). `task_callers` counts each caller's live tasks and ended
    // tasks' records; `task_totals` the store's, in 16 parts by task id;
    // `provenance_marks` the number every task deleted stayed below, in the same parts.
    "ALTER TABLE provenance_tasks ADD COLUMN IF NOT EXISTS actor TEXT NOT NULL DEFAULT '',
        ADD COLUMN IF NOT EXISTS first_number BIGINT NOT NULL DEFAULT 1,
        ADD COLUMN IF NOT EXISTS started_ms BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS used_ms BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS ended_ms BIGINT;
    UPDATE provenance_tasks SET started_ms = (extract(epoch FROM now()) * 1000)::BIGINT,
        used_ms = (extract(epoch FROM now()) * 1000)::BIGINT
    WHERE started_ms = 0;
    CREATE INDEX IF NOT EXISTS provenance_tasks_by_caller ON provenance_tasks (tenant, actor);
    CREATE INDEX IF NOT EXISTS provenance_tasks_by_end ON provenance_tasks (ended_ms);
    ALTER TABLE budget_tasks ADD COLUMN IF NOT EXISTS actor TEXT NOT NULL DEFAULT '',
        ADD COLUMN IF NOT EXISTS tenant TEXT NOT NULL DEFAULT '',
        ADD COLUMN IF NOT EXISTS started_ms BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS used_ms BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS ended_ms BIGINT;
    UPDATE budget_tasks SET started_ms = (extract(epoch FROM now()) * 1000)::BIGINT,
        used_ms = (extract(epoch FROM now()) * 1000)::BIGINT
    WHERE started_ms = 0;
    CREATE INDEX IF NOT EXISTS budget_tasks_by_caller ON budget_tasks (tenant, actor);
    CREATE INDEX IF NOT EXISTS budget_tasks_by_end ON budget_tasks (ended_ms);
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
        live BIGINT NOT NULL,
        ended BIGINT NOT NULL,
        PRIMARY KEY (store, tenant, actor)
    );
    INSERT INTO task_callers (store, tenant, actor, live, ended)
    SELECT 'provenance', tenant, actor, count(*) FILTER (WHERE ended_ms IS NULL),
        count(*) FILTER (WHERE ended_ms IS NOT NULL)
    FROM provenance_tasks GROUP BY tenant, actor;
    INSERT INTO task_callers (store, tenant, actor, live, ended)
    SELECT 'budget', tenant, actor, count(*) FILTER (WHERE ended_ms IS NULL),
        count(*) FILTER (WHERE ended_ms IS NOT NULL)
    FROM budget_tasks GROUP BY tenant, actor;
    CREATE TABLE task_totals (
        store TEXT NOT NULL,
        part INTEGER NOT NULL,
        live BIGINT NOT NULL,
        ended BIGINT NOT NULL,
        PRIMARY KEY (store, part)
    );
    INSERT INTO task_totals (store, part, live, ended)
    SELECT store, part, 0, 0
    FROM (VALUES ('provenance'), ('budget')) AS stores (store), generate_series(0, 15) AS part;
    UPDATE task_totals SET live = held.live, ended = held.ended
    FROM (SELECT (hashtextextended(task, 0) & 15)::INTEGER AS part,
              count(*) FILTER (WHERE ended_ms IS NULL) AS live,
              count(*) FILTER (WHERE ended_ms IS NOT NULL) AS ended
          FROM provenance_tasks GROUP BY 1) AS held
    WHERE task_totals.store = 'provenance' AND task_totals.part = held.part;
    UPDATE task_totals SET live = held.live, ended = held.ended
    FROM (SELECT (hashtextextended(task, 0) & 15)::INTEGER AS part,
              count(*) FILTER (WHERE ended_ms IS NULL) AS live,
              count(*) FILTER (WHERE ended_ms IS NOT NULL) AS ended
          FROM budget_tasks GROUP BY 1) AS held
    WHERE task_totals.store = 'budget' AND task_totals.part = held.part;
    CREATE TABLE provenance_marks (part INTEGER PRIMARY KEY, number BIGINT NOT NULL);
    INSERT INTO provenance_marks (part, number) SELECT part, 0 FROM generate_series(0, 15) AS part;",
    // 9: a pending call's tenant, so that the calls waiting of one caller are counted per
    // actor in its tenant (the same actor in another tenant is another caller). Calls of before
    // count as of no tenant.
    "ALTER TABLE pending_calls ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    CREATE INDEX pending_calls_by_caller ON pending_calls (actor, tenant, expires_ms);",
    // 10: whose claims and refusals these are, so that a caller's open claims, and the tasks
    // holding its refusals, are counted in its share; until when a caller holds all the tasks
    // holding refusals it may (`refusal_shares`). Open claims of before take their caller from
    // their key; refusals of before count as of no caller.
    "ALTER TABLE claims ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    ALTER TABLE claims ADD COLUMN actor TEXT NOT NULL DEFAULT '';
    UPDATE claims SET tenant = coalesce(call_key::jsonb ->> 'tenant', ''),
        actor = coalesce(call_key::jsonb ->> 'actor', '')
    WHERE NOT settled;
    CREATE INDEX claims_by_caller ON claims (tenant, actor, settled, claimed_ms);
    ALTER TABLE budget_refusals ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    ALTER TABLE budget_refusals ADD COLUMN actor TEXT NOT NULL DEFAULT '';
    CREATE INDEX budget_refusals_by_caller ON budget_refusals (tenant, actor, at_ms);
    CREATE TABLE refusal_shares (
        tenant TEXT NOT NULL,
        actor TEXT NOT NULL,
        full_until_ms BIGINT NOT NULL,
        PRIMARY KEY (tenant, actor)
    );
    CREATE INDEX runs_by_caller ON runs (actor, tenant, status);",
];

/// The schema that holds a store's tables, and names its advisory locks, where none is given
/// ([`PostgresStore::connect`], [`Store::open`](crate::Store::open), the `portcullis` command
/// line). Workers that must share state must use the same schema.
pub const DEFAULT_SCHEMA: &str = "portcullis";

/// The most connections a store's pool holds open at once where no number is given: a call
/// that finds them all busy waits for one. Each worker process has its own pool, so the
/// server must allow this many per worker (PostgreSQL's `max_connections`, 100 by default).
pub const DEFAULT_CONNECTIONS: usize = 16;

/// Keys of the advisory locks that order what must happen one at a time across workers.
const MIGRATION_LOCK: &str = "portcullis:migrations";
const AUDIT_LOCK: &str = "portcullis:audit";

/// State kept in a PostgreSQL database: an [`ApprovalStore`](portcullis_core::ApprovalStore),
/// a [`RepeatStore`](portcullis_core::RepeatStore), a
/// [`BudgetStore`](portcullis_core::BudgetStore), a
/// [`TransactionStore`](portcullis_core::TransactionStore), an
/// [`AuditSink`](portcullis_core::audit::AuditSink), a
/// [`ProvenanceStore`](portcullis_core::ProvenanceStore) and an agent's
/// [`RunStore`](portcullis_agent::RunStore). Clones share the pool.
///
/// Every decision that must happen once is one PostgreSQL transaction: a row taken with
/// `DELETE … RETURNING`, a conditional `UPDATE`, work ordered by an advisory lock (a
/// task's budget, a task's and an actor's pending calls, the audit chain's head), or a row
/// lock (the number of a task's next source).
///
/// Connections use TLS as the URL's `sslmode` says, verifying the server's certificate and
/// host name against the roots of a [`PostgresTls`] (the URL's `sslrootcert` by default): see
/// [`PostgresTls`] for what each mode does.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    /// The schema, which names the advisory locks: stores in other schemas of the database
    /// do not wait for this one's.
    schema: Arc<str>,
    audit: Arc<GroupCommit>,
    sealing: Sealing,
    bounds: Bounds,
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`),
    /// uses the schema `portcullis`, and brings it up to date.
    pub async fn connect(url: &str) -> Result<Self, OpenError> {
        Self::connect_with(url, DEFAULT_SCHEMA, DEFAULT_CONNECTIONS).await
    }

    /// Connects as [`connect`](Self::connect) does, with the tables in `schema` (lowercase
    /// letters, digits and `_`; any other name is refused before connecting, as it goes
    /// into the connections' search path unquoted) and at most `connections` connections at
    /// once (at least one).
    pub async fn connect_with(
        url: &str,
        schema: &str,
        connections: usize,
    ) -> Result<Self, OpenError> {
        Self::connect_with_options(url, schema, connections, &PostgresTls::default()).await
    }

    /// Connects as [`connect`](Self::connect) does, trusting the servers whose certificates
    /// `tls` verifies.
    pub async fn connect_with_tls(url: &str, tls: &PostgresTls) -> Result<Self, OpenError> {
        Self::connect_with_options(url, DEFAULT_SCHEMA, DEFAULT_CONNECTIONS, tls).await
    }

    /// Connects as [`connect_with`](Self::connect_with) does, trusting the servers whose
    /// certificates `tls` verifies.
    pub async fn connect_with_options(
        url: &str,
        schema: &str,
        connections: usize,
        tls: &PostgresTls,
    ) -> Result<Self, OpenError> {
        let store = Self::pool(url, schema, connections, tls)?;
        // Nothing to write when the schema is current: a role without the right to create
        // may then connect.
        if store.schema_version().await? != MIGRATIONS.len() as i64 {
            store.migrate().await?;
        }
        Ok(store)
    }

    /// Connects without creating or migrating anything: the schema must hold a store at this
    /// build's version (`NotMigrated` otherwise). For tools beside the application, such as
    /// the `portcullis` command line, that must not create a store where a URL is mistyped.
    pub async fn connect_existing(url: &str) -> Result<Self, OpenError> {
        Self::connect_existing_with_tls(url, &PostgresTls::default()).await
    }

    /// Connects as [`connect_existing`](Self::connect_existing) does, trusting the servers
    /// whose certificates `tls` verifies.
    pub async fn connect_existing_with_tls(
        url: &str,
        tls: &PostgresTls,
    ) -> Result<Self, OpenError> {
        let store = Self::pool(url, DEFAULT_SCHEMA, 2, tls)?;
        let (found, known) = (store.schema_version().await?, MIGRATIONS.len() as i64);
        if found != known {
            return Err(OpenError::NotMigrated { found, known });
        }
        Ok(store)
    }

    /// A store on a pool of at most `connections` connections to `url`, using `schema`.
    fn pool(
        url: &str,
        schema: &str,
        connections: usize,
        tls: &PostgresTls,
    ) -> Result<Self, OpenError> {
        let plain = !schema.is_empty()
            && schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !plain {
            return Err(OpenError::Database(
                format!("the schema name `{schema}` must be lowercase letters, digits and `_`")
                    .into(),
            ));
        }
        let (mut config, connector) = tls::connection(url, tls)?;
        config.options(format!("-c search_path={schema}"));
        let manager = Manager::from_config(
            config,
            connector,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(connections.max(1))
            .build()
            .map_err(OpenError::database)?;
        Ok(PostgresStore {
            pool,
            schema: schema.into(),
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
    /// and for each caller, and each caller's share of open claims and runs going on; see
    /// [`SqliteStore::with_shares`](crate::SqliteStore::with_shares).
    /// Call it as the store connects, the same in every worker.
    pub fn with_shares(mut self, shares: Shares) -> Self {
        self.bounds.shares = shares;
        self
    }

    /// This store, ending its provenance and budget tasks on their own after `lifetime`; see
    /// [`SqliteStore::with_lifetime`](crate::SqliteStore::with_lifetime). Call it as the store
    /// connects, the same in every worker.
    pub fn with_lifetime(mut self, lifetime: portcullis_core::TaskLifetime) -> Self {
        self.bounds.lifetime = lifetime;
        self
    }

    /// This store, keeping what is not a task for `retention`, for [`prune`](Self::prune).
    pub fn with_retention(mut self, retention: Retention) -> Self {
        self.bounds.retention = retention;
        self
    }

    async fn client(&self) -> Result<Object, Failure> {
        Ok(self.pool.get().await?)
    }

    /// Takes the advisory lock named by its one parameter ([`lock_key`](Self::lock_key)) until
    /// the transaction ends.
    const TAKE_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";

    /// The name of the advisory lock `key` in this store's schema.
    fn lock_key(&self, key: &str) -> String {
        format!("{}:{key}", self.schema)
    }

    /// Takes the advisory locks of `keys` (in this store's schema) for the rest of the
    /// transaction, in one order whatever the order of `keys`, so that two transactions taking
    /// the same locks do not deadlock.
    async fn lock(
        &self,
        transaction: &deadpool_postgres::Transaction<'_>,
        keys: &[&str],
    ) -> Result<(), tokio_postgres::Error> {
        let mut keys: Vec<String> = keys.iter().map(|key| self.lock_key(key)).collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            transaction
                .execute_prepared(Self::TAKE_LOCK, &[&key])
                .await?;
        }
        Ok(())
    }

    /// The schema's version: 0 where there is no store yet; refused if newer than this build
    /// knows. The store's first connection: a server TLS refuses is [`OpenError::Tls`].
    async fn schema_version(&self) -> Result<i64, OpenError> {
        let client = self.pool.get().await.map_err(|error| match error {
            PoolError::Backend(error) => tls::connect_error(error),
            other => OpenError::database(other),
        })?;
        let exists: bool = client
            .query_one("SELECT to_regclass('portcullis_schema') IS NOT NULL", &[])
            .await
            .and_then(|row| row.try_get(0))
            .map_err(OpenError::database)?;
        if !exists {
            return Ok(0);
        }
        stored_version(&**client).await
    }

    /// Applies the migrations the schema lacks, in one transaction, one worker at a time.
    async fn migrate(&self) -> Result<(), OpenError> {
        let mut client = self.client().await.map_err(OpenError::Database)?;
        let transaction = client.transaction().await.map_err(OpenError::database)?;
        self.lock(&transaction, &[MIGRATION_LOCK])
            .await
            .map_err(OpenError::database)?;
        transaction
            .batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS {};
                 CREATE TABLE IF NOT EXISTS portcullis_schema (version BIGINT NOT NULL);",
                self.schema
            ))
            .await
            .map_err(OpenError::database)?;
        // Read again under the lock: another worker may have migrated meanwhile.
        let found = stored_version(&*transaction).await?;
        let known = MIGRATIONS.len() as i64;
        let Ok(applied) = usize::try_from(found) else {
            return Err(OpenError::NotMigrated { found, known });
        };
        for migration in &MIGRATIONS[applied..] {
            transaction
                .batch_execute(migration)
                .await
                .map_err(OpenError::database)?;
        }
        transaction
            .execute("DELETE FROM portcullis_schema", &[])
            .await
            .map_err(OpenError::database)?;
        transaction
            .execute(
                "INSERT INTO portcullis_schema (version) VALUES ($1)",
                &[&known],
            )
            .await
            .map_err(OpenError::database)?;
        transaction.commit().await.map_err(OpenError::database)
    }
}

/// The version `portcullis_schema` records, refused if newer than this build knows.
async fn stored_version(client: &impl GenericClient) -> Result<i64, OpenError> {
    let found: i64 = client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM portcullis_schema",
            &[],
        )
        .await
        .and_then(|row| row.try_get(0))
        .map_err(OpenError::database)?;
    let known = MIGRATIONS.len() as i64;
    if found > known {
        return Err(OpenError::NewerSchema { found, known });
    }
    Ok(found)
}

/// Reports a database failure the store answers by refusing.
fn failed(operation: &str, error: &dyn fmt::Display) {
    tracing::error!(%error, "the PostgreSQL store could not {operation}");
}

/// A value as JSON text, for a column.
fn to_text<T: serde::Serialize>(value: &T) -> Result<String, Failure> {
    Ok(serde_json::to_string(value)?)
}
