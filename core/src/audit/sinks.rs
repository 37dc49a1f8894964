//! The sinks portcullis ships: memory (tests, small tools), a JSON Lines file, and `tracing`.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::{AuditRecord, AuditSink};

/// Keeps records in memory; clones share them.
#[derive(Debug, Clone, Default)]
pub struct MemoryAuditSink {
    records: Arc<Mutex<Vec<AuditRecord>>>,
}

impl MemoryAuditSink {
    /// Every record written so far, in order.
    pub fn records(&self) -> Vec<AuditRecord> {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl AuditSink for MemoryAuditSink {
    fn write(&self, record: &AuditRecord) -> io::Result<()> {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(record.clone());
        Ok(())
    }
}

/// Appends one JSON object per line to a file, flushed after every record and, if asked,
/// synced to the disk (`fsync`) too.
#[derive(Debug)]
pub struct JsonLinesAuditSink {
    path: PathBuf,
    file: Mutex<File>,
    sync: bool,
}

impl JsonLinesAuditSink {
    /// Opens `path` for appending, creating it if needed. With `sync`, every record is on the
    /// disk before the call's outcome is returned, at the price of a disk write per call.
    pub fn open(path: impl AsRef<Path>, sync: bool) -> io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(JsonLinesAuditSink {
            path,
            file: Mutex::new(file),
            sync,
        })
    }

    /// Reads back every record of the file, for [`verify`](super::verify).
    pub fn read(&self) -> io::Result<Vec<AuditRecord>> {
        read_json_lines(&self.path)
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

impl AuditSink for JsonLinesAuditSink {
    fn write(&self, record: &AuditRecord) -> io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        // One write of the whole line, so that a reader never sees half a record.
        file.write_all(&line)?;
        file.flush()?;
        if self.sync {
            file.sync_data()?;
        }
        Ok(())
    }
}

/// Emits each record as a `tracing` event at INFO level, target `portcullis::audit`, with the
/// record as JSON in the `record` field.
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingAuditSink;

impl AuditSink for TracingAuditSink {
    fn write(&self, record: &AuditRecord) -> io::Result<()> {
        let json = serde_json::to_string(record).map_err(io::Error::other)?;
        tracing::info!(
            target: "portcullis::audit",
            sequence = record.sequence,
            tool = %record.tool,
            decision = %record.decision,
            code = record.code.as_deref().unwrap_or(""),
            record = %json,
            "tool call decided"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{AuditLog, Decided, verify};
    use crate::{CallContext, Outcome, ToolCall};
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn json_lines_round_trip_and_verify() {
        let dir = std::env::temp_dir().join(format!("portcullis-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.jsonl");
        let _ = std::fs::remove_file(&path);
        let sink = JsonLinesAuditSink::open(&path, true).unwrap();
        let log = AuditLog::new(sink);
        let ctx = CallContext::new("alice");
        for index in 0..3 {
            let call = ToolCall::new(format!("c{index}"), "list", "{}");
            log.append(Decided {
                ctx: &ctx,
                call: &call,
                contract: None,
                outcome: &Outcome::Completed(json!(index)),
                duration: Duration::ZERO,
                resolution: None,
                original_arguments: None,
                facts: None,
            });
        }
        let records = read_json_lines(&path).unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(verify(&records), Ok(()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
