//! Group commit for the audit log: the records that concurrent calls append while a batch is
//! being stored are chained and stored together, in the next database transaction, so that
//! they share one commit (one `fsync`). Each append still returns only once its own record is
//! stored: the write-ahead rule holds record by record.

use std::future::Future;
use std::io;
use std::sync::{Mutex, PoisonError};

use portcullis_core::audit::Unchained;
use tokio::sync::oneshot;

/// The entries waiting for the next batch, and the turn of the one batch being stored.
#[derive(Default)]
pub(crate) struct GroupCommit {
    waiting: Mutex<Vec<Waiting>>,
    storing: tokio::sync::Mutex<()>,
}

struct Waiting {
    entry: Unchained,
    stored: oneshot::Sender<Result<(), String>>,
}

impl GroupCommit {
    /// Appends `entry` with the others waiting: whoever gets the turn stores every waiting
    /// entry, in order, with `store`; returns once the batch holding `entry` is stored.
    pub(crate) async fn append<S, F>(&self, entry: Unchained, store: S) -> io::Result<()>
    where
        S: FnOnce(Vec<Unchained>) -> F,
        F: Future<Output = io::Result<()>>,
    {
        let (stored, mut outcome) = oneshot::channel();
        self.lock_waiting().push(Waiting { entry, stored });
        // Waits for the turn to store, unless the batch being stored took the entry along:
        // then the turn goes to a caller whose entry still waits, so batches stay large.
        let turn = tokio::select! {
            biased;
            result = &mut outcome => return stored_or_not(result),
            turn = self.storing.lock() => turn,
        };
        let batch = std::mem::take(&mut *self.lock_waiting());
        if !batch.is_empty() {
            let (entries, waiting): (Vec<Unchained>, Vec<_>) = batch
                .into_iter()
                .map(|waiting| (waiting.entry, waiting.stored))
                .unzip();
            let result = store(entries).await.map_err(|error| error.to_string());
            for stored in waiting {
                let _ = stored.send(result.clone());
            }
        }
        drop(turn);
        stored_or_not(outcome.await)
    }

    fn lock_waiting(&self) -> std::sync::MutexGuard<'_, Vec<Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What the batch holding an entry reported.
fn stored_or_not(result: Result<Result<(), String>, oneshot::error::RecvError>) -> io::Result<()> {
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(message)) => Err(io::Error::other(message)),
        // The call storing the batch was cancelled: whether it committed is unknown, so the
        // record counts as not stored (and a call waiting for it does not run).
        Err(_) => Err(io::Error::other(
            "the batch holding the record was abandoned before it was stored",
        )),
    }
}
