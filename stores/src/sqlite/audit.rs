//! The audit log in SQLite: each record is chained after the log's last in the transaction
//! that stores it, so records appended by several processes form one chain, and a record is
//! on the disk before `append` returns (the write-ahead rule holds). A thread of the store's
//! own stores the records in rounds ([`RoundWriter`]): the records of concurrent calls share a
//! transaction, and no executor thread waits for its commit.

use std::future::ready;
use std::io;
use std::sync::{Arc, PoisonError};

use portcullis_core::BoxFuture;
use portcullis_core::audit::{AuditRecord, AuditSink, Checkpoint, RoundWriter, Unchained};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{SqliteStore, as_sql};

/// Chains `entries` after the log's last record and stores them, in one transaction.
fn append(connection: &mut Connection, entries: Vec<Unchained>) -> Result<(), rusqlite::Error> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let last: Option<(i64, String)> = transaction
        .query_row(
            "SELECT sequence, hash FROM audit_records ORDER BY sequence DESC LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?;
    let mut head = match last {
        Some((sequence, hash)) => Checkpoint {
            length: u64::try_from(sequence).unwrap_or(0) + 1,
            head: hash,
        },
        None => Checkpoint::genesis(),
    };
    {
        let mut insert = transaction.prepare_cached(
            "INSERT INTO audit_records (sequence, hash, record) VALUES (?1, ?2, ?3)",
        )?;
        for entry in entries {
            let record = entry.chain_after(&head);
            let text = serde_json::to_string(&record)
                .map_err(|error| rusqlite::Error::ToSqlConversionFailure(Box::new(error)))?;
            insert.execute(params![as_sql(record.sequence), record.hash, text])?;
            head = Checkpoint::after(&record);
        }
    }
    transaction.commit()
}

impl AuditSink for SqliteStore {
    fn append(&self, entry: Unchained) -> BoxFuture<'_, io::Result<()>> {
        if let Some(rounds) = self.audit.get() {
            return Box::pin(rounds.append(entry));
        }
        // A thread that could not start is not remembered: the next record tries again, so a
        // passing shortage of threads refuses the calls of its moment, not every later one.
        let connection = Arc::clone(&self.connection);
        let started = RoundWriter::start("portcullis-audit-sqlite", move |entries| {
            let mut connection = connection.lock().unwrap_or_else(PoisonError::into_inner);
            append(&mut connection, entries).map_err(io::Error::other)
        });
        match started {
            // Two first records may both start a thread: the one set first stores every record,
            // and the other, with nothing queued, stops when dropped.
            Ok(rounds) => Box::pin(self.audit.get_or_init(|| rounds).append(entry)),
            Err(error) => Box::pin(ready(Err(io::Error::other(format!(
                "the audit's writer thread could not start: {error}"
            ))))),
        }
    }
}

impl SqliteStore {
    /// The audit log's records from `from` (a sequence number) on, at most `limit` of them, in
    /// order; from 0 with no limit, the whole log, for
    /// [`verify`](portcullis_core::audit::verify).
    pub fn audit_records(&self, from: u64, limit: Option<u64>) -> io::Result<Vec<AuditRecord>> {
        self.audit_texts(from, limit)?
            .iter()
            .map(|text| serde_json::from_str(text).map_err(io::Error::other))
            .collect()
    }

    /// The same records, as the JSON text they are stored as. The sequence is the table's
    /// key: a page from `from` starts with a seek on it, however long the log.
    pub(crate) fn audit_texts(&self, from: u64, limit: Option<u64>) -> io::Result<Vec<String>> {
        let connection = self.lock();
        let read = (|| {
            let mut statement = connection.prepare_cached(
                "SELECT record FROM audit_records WHERE sequence >= ?1 ORDER BY sequence LIMIT ?2",
            )?;
            let from = i64::try_from(from).unwrap_or(i64::MAX);
            let limit = limit.map_or(-1, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
            let rows = statement.query_map(params![from, limit], |row| row.get::<_, String>(0))?;
            rows.collect::<Result<Vec<String>, _>>()
        })();
        read.map_err(io::Error::other)
    }
}
