//! The sinks portcullis ships: memory (tests, small tools), a JSON Lines file, and `tracing`.

use std::fs::{File, OpenOptions};
use std::future::ready;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::round_writer::RoundWriter;
use super::{AuditKey, AuditRecord, AuditSink, Checkpoint, Unchained, Verifier, VerifyError};
use crate::future::BoxFuture;

/// Keeps records in memory; clones share them, and one chain. It holds at most `capacity`
/// records (100,000 by default) and never forgets one: once full, appends fail, so that a call
/// that must be recorded before it runs does not run (`audit_unavailable`), and the failure of
/// the other records is reported through `tracing`. For tests and short-lived tools; a server
/// audits into a file or a database.
#[derive(Debug, Clone)]
pub struct MemoryAuditSink {
    records: Arc<Mutex<Vec<AuditRecord>>>,
    capacity: usize,
}

impl Default for MemoryAuditSink {
    fn default() -> Self {
        MemoryAuditSink::with_capacity(100_000)
    }
}

impl MemoryAuditSink {
    /// A sink that holds at most `capacity` records.
    pub fn with_capacity(capacity: usize) -> Self {
        MemoryAuditSink {
            records: Arc::default(),
            capacity,
        }
    }

    /// Every record written so far, in order.
    pub fn records(&self) -> Vec<AuditRecord> {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl AuditSink for MemoryAuditSink {
    fn append(&self, entry: Unchained) -> BoxFuture<'_, io::Result<()>> {
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        if records.len() >= self.capacity {
            return Box::pin(ready(Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!(
                    "the memory audit sink holds {} records, as many as it may",
                    records.len()
                ),
            ))));
        }
        let head = records
            .last()
            .map_or_else(Checkpoint::genesis, Checkpoint::after);
        records.push(entry.chain_after(&head));
        Box::pin(ready(Ok(())))
    }
}

/// Appends one JSON object per line to a file, written unbuffered and, if asked, synced to the
/// disk (`fsync`) too.
///
/// The chain continues across restarts and writers: the sink reads the file's last record
/// when it opens, and appends under an exclusive file lock, reading the last record again
/// whenever another writer (another sink on the same file, in this process or another)
/// appended since. A file that ends in half a record, or that became shorter than the sink
/// left it, is refused rather than forked.
///
/// With `sync`, a thread of the sink's own writes the records: those appended while it writes
/// and syncs one round go together in the next, in one write and one `fsync` (group commit),
/// and each append's future completes once its own record is on the disk. No executor thread
/// waits for the disk. Without `sync`, each append writes its record on the calling thread.
#[derive(Debug)]
pub struct JsonLinesAuditSink {
    path: PathBuf,
    writing: Writing,
}

#[derive(Debug)]
enum Writing {
    /// Each append writes its record.
    Immediate(Mutex<Writer>),
    /// A thread writes and syncs the records in rounds.
    Synced(RoundWriter),
}

/// The file, and the head of the chain it holds.
#[derive(Debug)]
struct Writer {
    file: File,
    head: Checkpoint,
    /// The file's length after this sink's last write or read of the head.
    length: u64,
}

impl JsonLinesAuditSink {
    /// Opens `path` for appending, creating it if needed, and continues the chain of the
    /// records it holds. With `sync`, every record is on the disk before the call's outcome
    /// (or, for a call audited first, the call itself) goes on.
    pub fn open(path: impl AsRef<Path>, sync: bool) -> io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)?;
        let mut writer = Writer {
            file,
            head: Checkpoint::genesis(),
            length: 0,
        };
        writer.file.lock_shared()?;
        let read = writer.catch_up();
        writer.file.unlock()?;
        read?;
        let writing = match sync {
            true => Writing::Synced(synced_rounds(writer)?),
            false => Writing::Immediate(Mutex::new(writer)),
        };
        Ok(JsonLinesAuditSink { path, writing })
    }

    /// Reads back every record of the file, for [`verify`](super::verify).
    pub fn read(&self) -> io::Result<Vec<AuditRecord>> {
        read_json_lines(&self.path)
    }
}

impl Writer {
    /// Reads the head again if the file changed since this sink last saw it.
    fn catch_up(&mut self) -> io::Result<()> {
        let length = self.file.metadata()?.len();
        if length == self.length {
            return Ok(());
        }
        let invalid = |message: &str| Err(io::Error::new(io::ErrorKind::InvalidData, message));
        if length < self.length {
            return invalid(
                "the audit file is shorter than this sink left it: it was cut or replaced",
            );
        }
        let mut last = [0u8];
        self.file.seek(SeekFrom::Start(length - 1))?;
        self.file.read_exact(&mut last)?;
        if last != *b"\n" {
            return invalid("the audit file ends in half a record");
        }
        self.head = match last_line(&mut self.file, length)? {
            Some(line) => {
                let record: AuditRecord = serde_json::from_slice(&line).map_err(|error| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("the audit file's last record cannot be read ({error}): it may end in half a record"),
                    )
                })?;
                Checkpoint::after(&record)
            }
            None => Checkpoint::genesis(),
        };
        self.length = length;
        Ok(())
    }
}

/// The last line of the first `length` bytes of `file`, without its newline; `None` for a
/// file of blank lines only.
fn last_line(file: &mut File, length: u64) -> io::Result<Option<Vec<u8>>> {
    const CHUNK: u64 = 64 * 1024;
    let mut tail: Vec<u8> = Vec::new();
    let mut start = length;
    loop {
        let trimmed = tail.iter().rposition(|byte| !byte.is_ascii_whitespace());
        if let Some(end) = trimmed
            && let Some(newline) = tail[..end].iter().rposition(|&byte| byte == b'\n')
        {
            return Ok(Some(tail[newline + 1..=end].to_vec()));
        }
        if start == 0 {
            return Ok(trimmed.map(|end| tail[..=end].to_vec()));
        }
        let from = start.saturating_sub(CHUNK);
        let mut chunk = vec![0; (start - from) as usize];
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&tail);
        tail = chunk;
        start = from;
    }
}

/// Reads the records of a JSON Lines audit file.
pub fn read_json_lines(path: &Path) -> io::Result<Vec<AuditRecord>> {
    BufReader::new(File::open(path)?)
        .lines()
        .filter(|line| !line.as_ref().is_ok_and(|line| line.trim().is_empty()))
        .map(|line| serde_json::from_str(&line?).map_err(io::Error::other))
        .collect()
}

/// Checks the chain of the JSON Lines audit log `reader` reads (an open file, in a
/// `BufReader`), a page of lines at a time ([`Verifier::push_texts`], whose links are checked
/// on every core): only one page is held at once, so a log of any length verifies in constant
/// memory. With `checkpoint`, as [`verify_to`](super::verify_to); without, as
/// [`verify`](super::verify).
pub fn verify_json_lines(
    reader: impl BufRead,
    key: Option<&AuditKey>,
    checkpoint: Option<&Checkpoint>,
) -> Result<Checkpoint, VerifyError> {
    /// Lines held at once: about a megabyte of records.
    const PAGE: usize = 1_000;
    let mut verifier = Verifier::new(key).to(checkpoint);
    let mut page = Vec::with_capacity(PAGE);
    for line in reader.lines() {
        let line = line?;
        if !line.trim().is_empty() {
            page.push(line);
        }
        if page.len() == PAGE {
            verifier.push_texts(&trimmed(&page))?;
            page.clear();
        }
    }
    verifier.push_texts(&trimmed(&page))?;
    Ok(verifier.finish()?)
}

fn trimmed(lines: &[String]) -> Vec<&str> {
    lines.iter().map(|line| line.trim()).collect()
}

impl AuditSink for JsonLinesAuditSink {
    fn append(&self, entry: Unchained) -> BoxFuture<'_, io::Result<()>> {
        match &self.writing {
            Writing::Immediate(writer) => Box::pin(ready(
                writer
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .append_all(vec![entry]),
            )),
            Writing::Synced(rounds) => Box::pin(rounds.append(entry)),
        }
    }
}

/// The rounds of a sink with `sync`: each written, then synced. Once an `fsync` failed, the
/// kernel may have dropped written pages and report it only once, so no later record can be
/// known to be on the disk: every later round is refused.
fn synced_rounds(mut writer: Writer) -> io::Result<RoundWriter> {
    let mut broken = false;
    RoundWriter::start("portcullis-audit-json-lines", move |entries| {
        if broken {
            return Err(io::Error::other(
                "an earlier fsync of the audit file failed: reopen the log once the disk is sound",
            ));
        }
        writer.append_all(entries)?;
        writer.file.sync_data().inspect_err(|error| {
            tracing::error!(%error, "the audit file could not be synced to the disk");
            broken = true;
        })
    })
}

impl Writer {
    /// Chains `entries`, in order, after the file's last record, and writes them in one write
    /// under the file's exclusive lock, so that no other writer interleaves and no reader sees
    /// half a record. Nothing is chained on from a failed write.
    fn append_all(&mut self, entries: Vec<Unchained>) -> io::Result<()> {
        self.file.lock()?;
        let appended = self.append_locked(entries);
        self.file.unlock()?;
        appended
    }

    fn append_locked(&mut self, entries: Vec<Unchained>) -> io::Result<()> {
        self.catch_up()?;
        let mut head = self.head.clone();
        let mut lines = Vec::new();
        for entry in entries {
            let record = entry.chain_after(&head);
            serde_json::to_writer(&mut lines, &record).map_err(io::Error::other)?;
            lines.push(b'\n');
            head = Checkpoint::after(&record);
        }
        self.file.write_all(&lines)?;
        self.length += lines.len() as u64;
        self.head = head;
        Ok(())
    }
}

/// Emits each record as a `tracing` event at INFO level, target `portcullis::audit`, with the
/// record as JSON in the `record` field. The chain lives in this process: start it with
/// [`TracingAuditSink::after`] from the checkpoint where the last process stopped, or verify
/// each process's records on their own.
#[derive(Debug, Default)]
pub struct TracingAuditSink {
    head: Mutex<Option<Checkpoint>>,
}

impl TracingAuditSink {
    /// A sink whose first record follows `checkpoint`.
    pub fn after(checkpoint: Checkpoint) -> Self {
        TracingAuditSink {
            head: Mutex::new(Some(checkpoint)),
        }
    }
}

impl AuditSink for TracingAuditSink {
    fn append(&self, entry: Unchained) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(ready(self.emit(entry)))
    }
}

impl TracingAuditSink {
    fn emit(&self, entry: Unchained) -> io::Result<()> {
        let mut head = self.head.lock().unwrap_or_else(PoisonError::into_inner);
        let record = entry.chain_after(head.get_or_insert_with(Checkpoint::genesis));
        let json = serde_json::to_string(&record).map_err(io::Error::other)?;
        tracing::info!(
            target: "portcullis::audit",
            sequence = record.sequence,
            tool = %record.tool,
            decision = %record.decision,
            code = record.code.as_deref().unwrap_or(""),
            record = %json,
            "tool call decided"
        );
        *head = Some(Checkpoint::after(&record));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::tests::block_on;
    use crate::audit::{AuditLog, ChainBreak, Decided, Written, record_of, verify};
    use crate::{CallContext, Outcome, ToolCall};
    use serde_json::json;

    fn append_to(path: &Path, from: usize, to: usize) {
        let log = AuditLog::new(JsonLinesAuditSink::open(path, true).unwrap());
        let ctx = CallContext::new("alice");
        for index in from..to {
            let call = ToolCall::new(format!("c{index}"), "list", "{}");
            let outcome = Outcome::Completed(json!(index));
            block_on(log.append(Decided::plain(&ctx, &call, None, &outcome)));
        }
    }

    #[test]
    fn json_lines_verify_a_page_at_a_time_with_the_verdict_of_the_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        append_to(&path, 0, 2_500);
        let text = std::fs::read_to_string(&path).unwrap();
        let records = read_json_lines(&path).unwrap();
        let whole = verify(&records, None).unwrap();
        let verified = |text: &str, checkpoint: Option<&Checkpoint>| {
            verify_json_lines(text.as_bytes(), None, checkpoint)
        };
        assert_eq!(verified(&text, Some(&whole)).unwrap(), whole);
        // Blank lines and Windows line ends are no records.
        let spaced = text.replace('\n', "\r\n\n");
        assert_eq!(verified(&spaced, None).unwrap(), whole);

        // A record altered in the third page, and one dropped from the second.
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines[2_222] = lines[2_222].replace("\"actor\":\"alice\"", "\"actor\":\"mallory\"");
        let altered = verified(&lines.join("\n"), None).unwrap_err();
        assert!(
            matches!(
                altered,
                VerifyError::Broken(ChainBreak::Altered { position: 2_222 })
            ),
            "{altered}"
        );
        let mut lines: Vec<&str> = text.lines().collect();
        lines.remove(1_500);
        let dropped = verified(&lines.join("\n"), None).unwrap_err();
        assert!(
            matches!(
                dropped,
                VerifyError::Broken(ChainBreak::Broken {
                    position: 1_500,
                    ..
                })
            ),
            "{dropped}"
        );
        // Cut short of a checkpoint taken earlier.
        let cut: Vec<&str> = text.lines().take(1_000).collect();
        let cut_short = verified(&cut.join("\n"), Some(&whole)).unwrap_err();
        assert!(
            matches!(
                cut_short,
                VerifyError::Broken(ChainBreak::CutShort {
                    found_length: 1_000,
                    ..
                })
            ),
            "{cut_short}"
        );
    }

    #[test]
    fn json_lines_continue_their_chain_when_opened_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        append_to(&path, 0, 3);
        append_to(&path, 3, 5);
        let records = read_json_lines(&path).unwrap();
        assert_eq!(records.len(), 5);
        assert_eq!(verify(&records, None), Ok(Checkpoint::after(&records[4])));

        // Half a record at the end: the sink refuses to fork the chain from a guess.
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"sequence\": 5, \"ti").unwrap();
        let error = JsonLinesAuditSink::open(&path, false).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);

        // Cut under an open sink: it refuses to chain on from an older head.
        std::fs::write(&path, "").unwrap();
        append_to(&path, 0, 2);
        let sink = JsonLinesAuditSink::open(&path, false).unwrap();
        let first_line = std::fs::read_to_string(&path).unwrap();
        let first_line = first_line.lines().next().unwrap();
        std::fs::write(&path, format!("{first_line}\n")).unwrap();
        let log = AuditLog::new(sink);
        let ctx = CallContext::new("alice");
        let call = ToolCall::new("c", "list", "{}");
        let outcome = Outcome::Completed(json!(0));
        let record = record_of(
            &Decided::plain(&ctx, &call, None, &outcome),
            Written::Decision,
        );
        let error = block_on(log.store(record, None)).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn appends_go_to_the_disk_in_their_order_and_each_completes_once_it_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink = JsonLinesAuditSink::open(&path, true).unwrap();
        let ctx = CallContext::new("alice");
        let mut waits: Vec<_> = (0..64)
            .map(|index| {
                let call = ToolCall::new(format!("c{index}"), "list", "{}");
                let outcome = Outcome::Completed(json!(index));
                let record = record_of(
                    &Decided::plain(&ctx, &call, None, &outcome),
                    Written::Decision,
                );
                let digest = record.digest();
                sink.append(Unchained {
                    record,
                    digest,
                    key: None,
                })
            })
            .collect();
        block_on(waits.pop().unwrap()).unwrap();
        // The round that stored the last record stored every record before it.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        for (index, mut wait) in waits.into_iter().enumerate() {
            assert!(
                matches!(wait.as_mut().poll(&mut cx), std::task::Poll::Ready(Ok(()))),
                "append {index} is not known to be on the disk"
            );
        }
        let records = read_json_lines(&path).unwrap();
        let calls: Vec<String> = records
            .iter()
            .map(|record| record.call_id.clone())
            .collect();
        let appended: Vec<String> = (0..64).map(|index| format!("c{index}")).collect();
        assert_eq!(calls, appended);
        assert_eq!(verify(&records, None), Ok(Checkpoint::after(&records[63])));
        drop(sink);
    }

    #[test]
    fn the_last_line_is_found_across_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lines");
        let long = "x".repeat(200_000);
        std::fs::write(&path, format!("first\n{long}\n\n")).unwrap();
        let mut file = File::open(&path).unwrap();
        let length = file.metadata().unwrap().len();
        assert_eq!(
            last_line(&mut file, length).unwrap(),
            Some(long.into_bytes())
        );
        std::fs::write(&path, "only").unwrap();
        let mut file = File::open(&path).unwrap();
        assert_eq!(last_line(&mut file, 4).unwrap(), Some(b"only".to_vec()));
    }
}
