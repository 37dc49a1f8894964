//! The audit log in SQLite: each record is chained after the log's last in the transaction
//! that stores it, so records appended by several processes form one chain, and a record is
//! on the disk before `append` returns (the write-ahead rule holds).

use std::future::ready;
use std::io;

use portcullis_core::BoxFuture;
use portcullis_core::audit::{AuditRecord, AuditSink, Checkpoint, Unchained};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::SqliteStore;

fn append(connection: &mut Connection, entry: Unchained<'_>) -> Result<(), rusqlite::Error> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let last: Option<(i64, String)> = transaction
        .query_row(
            "SELECT sequence, hash FROM audit_records ORDER BY sequence DESC LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?;
    let head = match last {
        Some((sequence, hash)) => Checkpoint {
            length: u64::try_from(sequence).unwrap_or(0) + 1,
            head: hash,
        },
        None => Checkpoint::genesis(),
    };
    let record = entry.chain_after(&head);
    let text = serde_json::to_string(&record)
        .map_err(|error| rusqlite::Error::ToSqlConversionFailure(Box::new(error)))?;
    let sequence = i64::try_from(record.sequence)
        .map_err(|error| rusqlite::Error::ToSqlConversionFailure(Box::new(error)))?;
    transaction.execute(
        "INSERT INTO audit_records (sequence, hash, record) VALUES (?1, ?2, ?3)",
        params![sequence, record.hash, text],
    )?;
    transaction.commit()
}

impl AuditSink for SqliteStore {
    fn append<'a>(&'a self, entry: Unchained<'a>) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(ready(
            append(&mut self.lock(), entry).map_err(io::Error::other),
        ))
    }
}

impl SqliteStore {
    /// The audit log's records from `from` (a sequence number) on, at most `limit` of them, in
    /// order; from 0 with no limit, the whole log, for
    /// [`verify`](portcullis_core::audit::verify).
    pub fn audit_records(&self, from: u64, limit: Option<u64>) -> io::Result<Vec<AuditRecord>> {
        let connection = self.lock();
        let read = (|| {
            let mut statement = connection.prepare(
                "SELECT record FROM audit_records WHERE sequence >= ?1 ORDER BY sequence LIMIT ?2",
            )?;
            let from = i64::try_from(from).unwrap_or(i64::MAX);
            let limit = limit.map_or(-1, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
            let rows = statement.query_map(params![from, limit], |row| row.get::<_, String>(0))?;
            rows.collect::<Result<Vec<String>, _>>()
        })();
        read.map_err(io::Error::other)?
            .iter()
            .map(|text| serde_json::from_str(text).map_err(io::Error::other))
            .collect()
    }
}
