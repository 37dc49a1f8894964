//! The audit log in PostgreSQL: each record is chained after the log's last in the
//! transaction that stores it, under the log's advisory lock, so records appended by workers
//! on several machines form one chain, and a record is committed before `append` returns (the
//! write-ahead rule holds).

use std::io;

use portcullis_core::BoxFuture;
use portcullis_core::audit::{AuditRecord, AuditSink, Checkpoint, Unchained};

use super::{AUDIT_LOCK, Failure, PostgresStore, lock, to_text};
use crate::values::{as_sql, from_sql};

impl PostgresStore {
    async fn append_entry(&self, entry: Unchained<'_>) -> Result<(), Failure> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        lock(&transaction, &[AUDIT_LOCK]).await?;
        let last = transaction
            .query_opt(
                "SELECT sequence, hash FROM audit_records ORDER BY sequence DESC LIMIT 1",
                &[],
            )
            .await?;
        let head = match last {
            Some(row) => Checkpoint {
                length: from_sql(row.try_get(0)?) + 1,
                head: row.try_get(1)?,
            },
            None => Checkpoint::genesis(),
        };
        let record = entry.chain_after(&head);
        transaction
            .execute(
                "INSERT INTO audit_records (sequence, hash, record) VALUES ($1, $2, $3)",
                &[&as_sql(record.sequence), &record.hash, &to_text(&record)?],
            )
            .await?;
        transaction.commit().await?;
        Ok(())
    }

    /// The audit log's records from `from` (a sequence number) on, at most `limit` of them, in
    /// order; from 0 with no limit, the whole log, for
    /// [`verify`](portcullis_core::audit::verify).
    pub async fn audit_records(
        &self,
        from: u64,
        limit: Option<u64>,
    ) -> io::Result<Vec<AuditRecord>> {
        let read = async {
            let rows = self
                .client()
                .await?
                .query(
                    "SELECT record FROM audit_records WHERE sequence >= $1
                     ORDER BY sequence LIMIT $2",
                    &[&as_sql(from), &limit.map(as_sql)],
                )
                .await?;
            rows.iter()
                .map(|row| Ok(serde_json::from_str(row.try_get(0)?)?))
                .collect::<Result<Vec<AuditRecord>, Failure>>()
        };
        read.await.map_err(io::Error::other)
    }
}

impl AuditSink for PostgresStore {
    fn append<'a>(&'a self, entry: Unchained<'a>) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move { self.append_entry(entry).await.map_err(io::Error::other) })
    }
}
