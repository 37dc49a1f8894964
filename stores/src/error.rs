//! Why a store could not be opened.

use std::error::Error;
use std::fmt;

/// Why a store could not be opened.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// The database could not be reached, opened or migrated.
    Database(Box<dyn Error + Send + Sync>),
    /// TLS refused the connection: a server certificate that does not verify against the
    /// trusted roots or does not name the host, a server without TLS where the URL requires
    /// it, or roots that could not be read.
    Tls(Box<dyn Error + Send + Sync>),
    /// The database was written by a newer portcullis: its schema is at `found`, this one knows
    /// up to `known`.
    NewerSchema {
        /// The database's schema version.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// Opened without migrating, the database is not a store at this build's schema: at
    /// `found` (0: not a portcullis store at all), where this build expects `known`.
    NotMigrated {
        /// The database's schema version.
        found: i64,
        /// The version this build expects.
        known: i64,
    },
}

impl OpenError {
    /// The database's own failure, kept as the source.
    pub(crate) fn database(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        OpenError::Database(Box::new(error))
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Database(error) => write!(f, "the store's database failed: {error}"),
            OpenError::Tls(error) => write!(
                f,
                "TLS refused the connection to the store's database: {error}{}",
                source_chain(error.as_ref())
            ),
            OpenError::NewerSchema { found, known } => write!(
                f,
                "the database's schema is at version {found}, newer than the {known} this \
                 portcullis knows: upgrade portcullis before opening it"
            ),
            OpenError::NotMigrated { found: 0, .. } => f.write_str(
                "the database holds no portcullis store: check the location, or start a worker \
                 of the application, which creates it",
            ),
            OpenError::NotMigrated { found, known } => write!(
                f,
                "the store's schema is at version {found}, older than the {known} this \
                 portcullis expects: start a worker of the new version, which migrates it"
            ),
        }
    }
}

impl Error for OpenError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            OpenError::Database(error) | OpenError::Tls(error) => Some(error.as_ref()),
            OpenError::NewerSchema { .. } | OpenError::NotMigrated { .. } => None,
        }
    }
}

/// `: cause: its cause…` for the causes under `error`, where the reason a certificate was
/// refused is (tokio-postgres says only that the handshake failed).
fn source_chain(error: &(dyn Error + 'static)) -> String {
    let mut chain = String::new();
    let mut cause = error.source();
    while let Some(error) = cause {
        chain.push_str(": ");
        chain.push_str(&error.to_string());
        cause = error.source();
    }
    chain
}
