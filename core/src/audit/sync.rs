//! Group commit for the JSON Lines sink: a thread of the sink's own takes the records appended
//! since its last round, chains and writes them in one write under the file's lock, runs one
//! `fsync` for all of them, and only then completes each append's future. No executor thread
//! waits for the disk, and a round costs one lock, one write and one `fsync` however many
//! calls it carries.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;

use super::Unchained;
use super::sinks::Writer;

/// The thread that writes and syncs a file's records, and the queue it takes them from.
pub(super) struct Batcher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the thread: a record was queued, or the sink closes.
    work: Condvar,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<(Unchained, Arc<Slot>)>,
    /// An `fsync` failed: the kernel may have dropped written pages and report it only once,
    /// so no record written since the last good `fsync` can be known to be on the disk.
    broken: bool,
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

fn broken() -> io::Error {
    io::Error::other(
        "an earlier fsync of the audit file failed: reopen the log once the disk is sound",
    )
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

impl fmt::Debug for Batcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batcher").finish_non_exhaustive()
    }
}

impl Batcher {
    /// Starts the thread that writes into `writer`'s file and syncs it.
    pub(super) fn start(writer: Writer) -> io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let thread = std::thread::Builder::new()
            .name("portcullis-audit-writer".to_owned())
            .spawn({
                let shared = Arc::clone(&shared);
                move || write_until_closed(writer, &shared)
            })?;
        Ok(Batcher {
            shared,
            thread: Some(thread),
        })
    }

    /// Queues `entry` for the next round; the future completes once it is on the disk, or
    /// with the error that kept it off.
    pub(super) fn append(&self, entry: Unchained) -> Stored {
        let slot = Arc::new(Slot::default());
        let mut queue = lock(&self.shared.queue);
        if queue.broken {
            slot.fill(Err(broken()));
        } else {
            queue.waiting.push((entry, Arc::clone(&slot)));
            self.shared.work.notify_one();
        }
        Stored { slot }
    }
}

impl Drop for Batcher {
    /// Writes and syncs what was queued, then stops the thread.
    fn drop(&mut self) {
        lock(&self.shared.queue).closing = true;
        self.shared.work.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread's rounds, until the sink closes with nothing queued.
fn write_until_closed(mut writer: Writer, shared: &Shared) {
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
        let written = writer.append_all(entries);
        let result = written.and_then(|()| {
            writer.sync().inspect_err(|error| {
                tracing::error!(%error, "the audit file could not be synced to the disk");
                lock(&shared.queue).broken = true;
            })
        });
        for slot in &slots {
            slot.fill(match &result {
                Ok(()) => Ok(()),
                Err(error) => Err(io::Error::new(error.kind(), error.to_string())),
            });
        }
    }
}

/// An append's wait for the round that stores it.
pub(super) struct Stored {
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
