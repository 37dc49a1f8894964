//! The databases the store tests run against: a fresh SQLite file always, and a fresh
//! PostgreSQL database when `PORTCULLIS_POSTGRES_URL` names a server (`.ci/run` starts one);
//! without it the PostgreSQL tests say they skipped and pass.

use std::sync::Arc;

use portcullis_stores::{PostgresTls, Store, postgres_client};
use tempfile::TempDir;

/// Where one test keeps its state.
#[derive(Clone)]
pub struct Backend {
    /// The store's location, as [`Store::open`] reads it.
    pub location: String,
    postgres: bool,
    /// The SQLite file's directory, removed with it when the test and the tasks it spawned
    /// are done with it, passed or failed.
    _directory: Option<Arc<TempDir>>,
}

impl Backend {
    /// A fresh SQLite file for test `name`.
    pub fn sqlite(name: &str) -> Self {
        let directory = tempfile::Builder::new()
            .prefix(&format!("portcullis-{name}-"))
            .tempdir()
            .unwrap();
        Backend {
            location: directory.path().join("state.db").display().to_string(),
            postgres: false,
            _directory: Some(Arc::new(directory)),
        }
    }

    /// A fresh PostgreSQL database for test `name`, if a server is configured.
    pub async fn postgres(name: &str) -> Option<Self> {
        let Ok(url) = std::env::var("PORTCULLIS_POSTGRES_URL") else {
            eprintln!("skipped: set PORTCULLIS_POSTGRES_URL to run the PostgreSQL tests");
            return None;
        };
        let database = format!("portcullis_{name}");
        let client = postgres_client(&url, &PostgresTls::default())
            .await
            .unwrap();
        for statement in [
            format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"),
            format!("CREATE DATABASE {database}"),
        ] {
            client.batch_execute(&statement).await.unwrap();
        }
        let (base, query) = url.split_once('?').unwrap_or((&url, ""));
        let server = base.rsplit_once('/').map_or(base, |(server, _)| server);
        let query = if query.is_empty() {
            String::new()
        } else {
            format!("?{query}")
        };
        Some(Backend {
            location: format!("{server}/{database}{query}"),
            postgres: true,
            _directory: None,
        })
    }

    /// A new connection to the store, as another worker would open it.
    pub async fn open(&self) -> Store {
        Store::open(&self.location).await.unwrap()
    }

    /// A word that tells the backends apart, to keep their test data apart in shared journals.
    pub fn tag(&self) -> &'static str {
        if self.postgres { "postgres" } else { "sqlite" }
    }

    /// Runs `sql` on the store's database directly, as an attacker with access to it would.
    pub async fn tamper(&self, sql: &str) {
        if self.postgres {
            let client = postgres_client(&self.location, &PostgresTls::default())
                .await
                .unwrap();
            client
                .batch_execute(&format!("SET search_path = portcullis; {sql}"))
                .await
                .unwrap();
        } else {
            rusqlite::Connection::open(&self.location)
                .unwrap()
                .execute_batch(sql)
                .unwrap();
        }
    }
}

/// Runs the scenario `$name(backend)` as two tests, `$name::sqlite` and `$name::postgres`.
#[macro_export]
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                super::$name($crate::common::Backend::sqlite(stringify!($name))).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                if let Some(backend) =
                    $crate::common::Backend::postgres(stringify!($name)).await
                {
                    super::$name(backend).await;
                }
            }
        }
    )*};
}
