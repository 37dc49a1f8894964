//! Group commit on a thread of its own, for sinks whose storage blocks: the thread takes the
//! entries appended since its last round and stores them in one step (one write and one
//! `fsync`, one database transaction), then completes each append's future. No executor thread
//! waits for the disk, and a round costs one commit however many calls it carries.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;

use super::Unchained;

/// Stores an audit log's entries in rounds, on a thread of its own.
///
/// `store` gets each round's entries in the order they were appended; it must chain them after
/// the log's head, in that order, and store them as one step, as [`AuditSink::append`]
/// describes. An append's future completes once the round holding its entry was stored, with
/// that round's error if it was not, so that a call audited first still runs only once its own
/// record is stored. The entries appended while a round is stored make the next round.
///
/// ```
/// use portcullis_core::audit::{AuditSink, Checkpoint, RoundWriter, Unchained};
/// use portcullis_core::BoxFuture;
/// use std::sync::{Arc, Mutex};
///
/// /// A sink whose storage blocks (here a vector behind a lock, in place of a database).
/// struct Stored {
///     rounds: RoundWriter,
/// }
///
/// impl AuditSink for Stored {
///     fn append(&self, entry: Unchained) -> BoxFuture<'_, std::io::Result<()>> {
///         Box::pin(self.rounds.append(entry))
///     }
/// }
///
/// let log = Arc::new(Mutex::new(Vec::new()));
/// let kept = Arc::clone(&log);
/// let rounds = RoundWriter::start("example-audit", move |entries: Vec<Unchained>| {
///     let mut log = kept.lock().unwrap();
///     for entry in entries {
///         let head = log.last().map_or_else(Checkpoint::genesis, Checkpoint::after);
///         let record = entry.chain_after(&head);
///         log.push(record);
///     }
///     Ok(())
/// })
/// .unwrap();
/// let _sink = Stored { rounds };
/// ```
///
/// [`AuditSink::append`]: super::AuditSink::append
pub struct RoundWriter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the thread: an entry was queued, or the writer closes.
    work: Condvar,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<(Unchained, Arc<Slot>)>,
    closing: bool,
}

/// Where the thread leaves one append's result, and the waker of the task that waits for it.
#[derive(Default)]
struct Slot(Mutex<SlotState>);

#[derive(Default)]
struct SlotState {
    result: Option<io::Result<()>>,
    waker: Option<Waker>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Slot {
    fn fill(&self, result: io::Result<()>) {
        let mut state = lock(&self.0);
        state.result = Some(result);
        if let Some(waker) = state.waker.take() {
            waker.wake();
        }
    }
}

impl fmt::Debug for RoundWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RoundWriter").finish_non_exhaustive()
    }
}

impl RoundWriter {
    /// Starts the thread, named `name`, that stores each round with `store`.
    pub fn start<S>(name: &str, mut store: S) -> io::Result<Self>
    where
        S: FnMut(Vec<Unchained>) -> io::Result<()> + Send + 'static,
    {
        let shared = Arc::new(Shared::default());
        let thread = std::thread::Builder::new().name(name.to_owned()).spawn({
            let shared = Arc::clone(&shared);
            move || store_until_closed(&mut store, &shared)
        })?;
        Ok(RoundWriter {
            shared,
            thread: Some(thread),
        })
    }

    /// Queues `entry` for the next round; completes once that round is stored, or with the
    /// error that kept it from being stored.
    pub fn append(
        &self,
        entry: Unchained,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let slot = Arc::new(Slot::default());
        lock(&self.shared.queue)
            .waiting
            .push((entry, Arc::clone(&slot)));
        self.shared.work.notify_one();
        Stored { slot }
    }
}

impl Drop for RoundWriter {
    /// Stores what was queued, then stops the thread.
    fn drop(&mut self) {
        lock(&self.shared.queue).closing = true;
        self.shared.work.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread's rounds, until the writer closes with nothing queued.
fn store_until_closed<S>(store: &mut S, shared: &Shared)
where
    S: FnMut(Vec<Unchained>) -> io::Result<()>,
{
    loop {
        let round = {
            let mut queue = lock(&shared.queue);
            while queue.waiting.is_empty() && !queue.closing {
                queue = shared
                    .work
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if queue.waiting.is_empty() {
                return;
            }
            std::mem::take(&mut queue.waiting)
        };
        let (entries, slots): (Vec<_>, Vec<_>) = round.into_iter().unzip();
        // A store that panics stores nothing; its round is refused, and the thread goes on.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store(entries)))
            .unwrap_or_else(|_| Err(io::Error::other("storing the audit records panicked")));
        for slot in &slots {
            slot.fill(match &result {
                Ok(()) => Ok(()),
                Err(error) => Err(io::Error::new(error.kind(), error.to_string())),
            });
        }
    }
}

/// An append's wait for the round that stores it.
struct Stored {
    slot: Arc<Slot>,
}

impl Future for Stored {
    type Output = io::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut state = lock(&self.slot.0);
        match state.result.take() {
            Some(result) => Poll::Ready(result),
            None => {
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::tests::block_on;
    use crate::audit::{Decided, Written, record_of};
    use crate::{CallContext, Outcome, ToolCall};

    fn entry(id: &str) -> Unchained {
        let ctx = CallContext::new("alice");
        let call = ToolCall::new(id, "list", "{}");
        let outcome = Outcome::Completed(serde_json::Value::Null);
        let record = record_of(
            &Decided::plain(&ctx, &call, None, &outcome),
            Written::Decision,
        );
        let digest = record.digest();
        Unchained {
            record,
            digest,
            key: None,
        }
    }

    /// A writer whose rounds answer as `answer` says for the round's first call id, and which
    /// keeps the call ids of the rounds it stored.
    fn scripted(
        answer: impl Fn(&str) -> io::Result<()> + Send + 'static,
    ) -> (RoundWriter, Arc<Mutex<Vec<String>>>) {
        let stored = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&stored);
        let writer = RoundWriter::start("test-audit", move |entries: Vec<Unchained>| {
            let first = entries[0].record.call_id.clone();
            answer(&first)?;
            let ids = entries.into_iter().map(|entry| entry.record.call_id);
            lock(&kept).extend(ids);
            Ok(())
        })
        .unwrap();
        (writer, stored)
    }

    #[test]
    fn a_failed_round_refuses_its_appends_with_its_error_and_the_next_round_goes_on() {
        let (writer, stored) = scripted(|id| match id {
            "refused" => Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "the disk is full",
            )),
            "panics" => panic!("a store that panics"),
            _ => Ok(()),
        });
        let error = block_on(writer.append(entry("refused"))).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::StorageFull);
        assert_eq!(error.to_string(), "the disk is full");
        let error = block_on(writer.append(entry("panics"))).unwrap_err();
        assert_eq!(error.to_string(), "storing the audit records panicked");
        block_on(writer.append(entry("stored"))).unwrap();
        assert_eq!(*lock(&stored), ["stored"]);
    }

    #[test]
    fn closing_stores_what_was_queued_first() {
        let (writer, stored) = scripted(|_| Ok(()));
        let waits: Vec<_> = (0..10)
            .map(|index| writer.append(entry(&format!("c{index}"))))
            .collect();
        drop(writer);
        let ids: Vec<String> = (0..10).map(|index| format!("c{index}")).collect();
        assert_eq!(*lock(&stored), ids, "every queued entry, in order");
        for wait in waits {
            block_on(wait).unwrap();
        }
    }
}
