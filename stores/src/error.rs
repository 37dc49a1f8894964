//! Why a store could not be opened.

use std::error::Error;
use std::fmt;

/// Why a store could not be opened.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// The database could not be reached, opened or migrated.
    Database(Box<dyn Error + Send + Sync>),
    /// The database was written by a newer portcullis: its schema is at `found`, this one knows
    /// up to `known`.
    NewerSchema {
        /// The database's schema version.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Database(error) => write!(f, "the store's database failed: {error}"),
            OpenError::NewerSchema { found, known } => write!(
                f,
                "the database's schema is at version {found}, newer than the {known} this \
                 portcullis knows: upgrade portcullis before opening it"
            ),
        }
    }
}

impl Error for OpenError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            OpenError::Database(error) => Some(error.as_ref()),
            OpenError::NewerSchema { .. } => None,
        }
    }
}
