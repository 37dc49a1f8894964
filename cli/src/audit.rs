//! `portcullis audit`: read the audit log the application's registries append to the store,
//! and check that its chain is whole.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::Subcommand;
use portcullis_core::audit::{AuditKey, Checkpoint, VerifyError};
use portcullis_stores::Store;

use crate::error::CliError;
use crate::store;
use crate::table::terminal_safe;
use crate::table::{self, shorten};

/// Records read from the store at once by `export`, so that a long log is not held whole.
const EXPORT_PAGE: u64 = 1000;

/// The audit log's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The last records, as a table.
    Tail {
        /// How many records.
        #[arg(short = 'n', long = "lines", default_value_t = 20)]
        count: u64,
    },
    /// Every record as JSON Lines, one record a line, for another system to keep or query.
    Export {
        /// JSON Lines (the only format, and the default).
        #[arg(long)]
        json: bool,
        /// Start at this sequence number instead of the first record.
        #[arg(long, value_name = "SEQ", default_value_t = 0)]
        from: u64,
    },
    /// Check the chain: every record matches its own link under the key and follows the one
    /// before it. Prints the checkpoint reached (length and head); keep it somewhere the log's
    /// writers cannot reach, and pass it back with --checkpoint to find a cut tail or a
    /// rewritten log.
    Verify {
        /// The file holding the audit key the application passes to `AuditKey::new`, its
        /// exact bytes (no newline is stripped). Without one, the chain is checked as plain
        /// SHA-256, as an application without `audit_key` writes it.
        #[arg(long, env = "PORTCULLIS_AUDIT_KEY_FILE", value_name = "PATH")]
        key_file: Option<PathBuf>,
        /// A checkpoint kept from an earlier verify, `LENGTH:HEAD`: the log must still hold
        /// those records, unchanged.
        #[arg(long, value_name = "LENGTH:HEAD", value_parser = parse_checkpoint)]
        checkpoint: Option<Checkpoint>,
    },
}

/// Runs one audit command against the store `target` names, opened once the command's own
/// files are read.
pub async fn run(
    command: Command,
    target: &store::StoreArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        Command::Tail { count } => tail(&store::open(target).await?, count, out).await,
        // JSON Lines is the only export format: the flag is accepted, not needed.
        Command::Export { json: _, from } => export(&store::open(target).await?, from, out).await,
        Command::Verify {
            key_file,
            checkpoint,
        } => {
            let key = key_file.as_deref().map(read_key).transpose()?;
            let store = store::open(target).await?;
            check(&store, key.as_ref(), checkpoint.as_ref(), out).await
        }
    }
}

async fn tail(store: &Store, count: u64, out: &mut dyn Write) -> Result<(), CliError> {
    let end = log_end(store).await?;
    if end == 0 {
        writeln!(out, "the audit log is empty")?;
        return Ok(());
    }
    let start = end.saturating_sub(count);
    let records = store::audit_records(store, start, Some(count)).await?;
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|record| {
            vec![
                record.sequence.to_string(),
                table::utc(record.time_ms),
                shorten(&record.tool, 40),
                shorten(&record.actor, 30),
                record.decision.clone(),
                record.code.clone().unwrap_or_else(|| "-".to_owned()),
                record
                    .resolution
                    .as_deref()
                    .map_or_else(|| "-".to_owned(), |resolution| shorten(resolution, 40)),
            ]
        })
        .collect();
    let headers = [
        "SEQ",
        "TIME (UTC)",
        "TOOL",
        "ACTOR",
        "DECISION",
        "CODE",
        "RESOLUTION",
    ];
    write!(out, "{}", table::render(&headers, &rows))?;
    Ok(())
}

/// One past the highest sequence number in the log, found by reading one record at a time
/// (doubling, then halving): the store reads a range of records, not the log's length, and a
/// tail of a long log should not read it all. "A record at or after `s`" is monotone in `s`
/// even where records are missing, so the search holds on a damaged log too.
pub async fn log_end(store: &Store) -> Result<u64, CliError> {
    if !has_record_from(store, 0).await? {
        return Ok(0);
    }
    // Invariant: a record at or after `low` exists; none at or after `high`.
    let (mut low, mut high) = (0u64, 1u64);
    while has_record_from(store, high).await? {
        low = high;
        high = high.saturating_mul(2);
        // Only a forged sequence number gets here; stop rather than search forever.
        if high == u64::MAX {
            break;
        }
    }
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if has_record_from(store, middle).await? {
            low = middle;
        } else {
            high = middle;
        }
    }
    Ok(high)
}

async fn has_record_from(store: &Store, sequence: u64) -> Result<bool, CliError> {
    let records = store::audit_records(store, sequence, Some(1)).await?;
    Ok(!records.is_empty())
}

async fn export(store: &Store, from: u64, out: &mut dyn Write) -> Result<(), CliError> {
    let mut next = from;
    loop {
        let page = store::audit_records(store, next, Some(EXPORT_PAGE)).await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        // Forward by at least one, even in a damaged log whose records disagree with their
        // place: the export ends.
        next = last.sequence.saturating_add(1).max(next.saturating_add(1));
        for record in &page {
            let line = serde_json::to_string(record).map_err(io::Error::from)?;
            writeln!(out, "{}", terminal_safe(&line))?;
        }
        if (page.len() as u64) < EXPORT_PAGE {
            return Ok(());
        }
    }
}

async fn check(
    store: &Store,
    key: Option<&AuditKey>,
    checkpoint: Option<&Checkpoint>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    // The chain is checked from the first record: a verify that starts later trusts what it
    // skipped.
    let reached = store
        .verify_audit(key, checkpoint)
        .await
        .map_err(|error| match error {
            VerifyError::Unreadable(error) => CliError::StoreRead(error),
            VerifyError::Broken(chain_break) => CliError::ChainBroken {
                chain_break,
                keyed: key.is_some(),
            },
        })?;
    let chain = if key.is_some() {
        "keyed chain (HMAC-SHA-256)"
    } else {
        "unkeyed chain (SHA-256: it shows accidents, not a forger)"
    };
    writeln!(
        out,
        "the audit log verifies: {} records, {chain}",
        reached.length
    )?;
    if let Some(checkpoint) = checkpoint {
        writeln!(
            out,
            "it still holds the {} records of the checkpoint, unchanged",
            checkpoint.length
        )?;
    }
    writeln!(out, "checkpoint: {}:{}", reached.length, reached.head)?;
    Ok(())
}

pub fn read_key(path: &Path) -> Result<AuditKey, CliError> {
    let bytes = std::fs::read(path).map_err(|error| CliError::ReadFile(path.to_owned(), error))?;
    AuditKey::new(bytes).map_err(|why| CliError::BadFile(path.to_owned(), why))
}

fn parse_checkpoint(text: &str) -> Result<Checkpoint, String> {
    let (length, head) = text
        .split_once(':')
        .ok_or("expected LENGTH:HEAD, as `audit verify` prints it")?;
    let length = length
        .parse()
        .map_err(|_| format!("the length `{length}` is not a number of records"))?;
    let is_hash = head.len() == 64 && head.bytes().all(|byte| byte.is_ascii_hexdigit());
    if !is_hash {
        return Err("the head must be a SHA-256 in hex, 64 characters".to_owned());
    }
    Ok(Checkpoint {
        length,
        head: head.to_ascii_lowercase(),
    })
}

#[cfg(test)]
mod tests {
    use super::parse_checkpoint;

    #[test]
    fn a_checkpoint_reads_as_verify_prints_it() {
        let head = "ab".repeat(32);
        let checkpoint = parse_checkpoint(&format!("12:{head}")).unwrap();
        assert_eq!((checkpoint.length, checkpoint.head), (12, head));
        assert!(parse_checkpoint("12").is_err());
        assert!(parse_checkpoint("x:00").is_err());
        assert!(parse_checkpoint(&format!("1:{}", "zz".repeat(32))).is_err());
    }
}
