//! The keyring the console reads: the file the workers load, read again when it changes, so
//! that a reviewer the operator confirms signs in without a restart, and one the operator
//! removes is signed out at the next request (a removed file holds nobody). A file that no
//! longer reads as a keyring leaves the last good one in place (and is logged): a half-written
//! file never signs anyone in.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::SystemTime;

use portcullis_core::Keyring;

pub(crate) struct KeyringSource {
    file: Option<PathBuf>,
    read: RwLock<(Option<SystemTime>, Arc<Keyring>)>,
}

impl KeyringSource {
    pub(crate) fn new(keyring: Keyring, file: Option<PathBuf>) -> Self {
        let modified = file.as_ref().and_then(modified);
        KeyringSource {
            file,
            read: RwLock::new((modified, Arc::new(keyring))),
        }
    }

    /// The keyring as its file holds it now.
    pub(crate) fn current(&self) -> Arc<Keyring> {
        let Some(file) = &self.file else {
            return self.held();
        };
        let modified = modified(file);
        if modified == self.read.read().unwrap_or_else(PoisonError::into_inner).0 {
            return self.held();
        }
        // A keyring file removed holds nobody: removing it revokes every reviewer.
        let read = match modified {
            Some(_) => Keyring::load(file),
            None => Ok(Keyring::new()),
        };
        match read {
            Ok(keyring) => {
                let keyring = Arc::new(keyring);
                *self.read.write().unwrap_or_else(PoisonError::into_inner) =
                    (modified, keyring.clone());
                tracing::info!(target: "portcullis_console", action = "keyring_read", file = %file.display());
                keyring
            }
            Err(error) => {
                tracing::error!(target: "portcullis_console", action = "keyring_unreadable", file = %file.display(), %error);
                self.held()
            }
        }
    }

    fn held(&self) -> Arc<Keyring> {
        self.read
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .clone()
    }
}

fn modified(file: &PathBuf) -> Option<SystemTime> {
    std::fs::metadata(file)
        .and_then(|metadata| metadata.modified())
        .ok()
}
