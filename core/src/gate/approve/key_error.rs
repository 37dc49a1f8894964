//! Why a reviewer's key or a keyring could not be read.

use std::fmt;

/// Why a key or a keyring could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The file could not be read.
    Unreadable(String),
    /// The text is not a key or a keyring.
    Invalid(String),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Unreadable(reason) => write!(f, "could not be read: {reason}"),
            KeyError::Invalid(reason) => write!(f, "not a portcullis key: {reason}"),
        }
    }
}

impl std::error::Error for KeyError {}
