//! The audit log in PostgreSQL: each record is chained after the log's last in the
//! transaction that stores it, under the log's advisory lock, so records appended by workers
//! on several machines form one chain, and a record is committed before `append` returns (the
//! write-ahead rule holds). The records of concurrent calls share a transaction
//! ([`GroupCommit`](crate::group_commit::GroupCommit)).

use std::io;

use portcullis_core::BoxFuture;
use portcullis_core::audit::{AuditRecord, AuditSink, Checkpoint, Unchained};
use tokio_postgres::IsolationLevel;
use tokio_postgres::types::ToSql;

use super::{AUDIT_LOCK, Failure, PostgresStore, to_text};
use crate::values::{as_sql, from_sql};

impl PostgresStore {
    /// Chains `entries` after the log's last record and stores them, in one transaction.
    ///
    /// Four round trips: the transaction's start; the log's lock and its head, sent together
    /// (run in order: under read committed the head is read after the lock is held, whatever
    /// the server's default level); the insert of the whole batch; the commit. The statements
    /// are prepared once per connection.
    async fn append_entries(&self, entries: Vec<Unchained>) -> Result<(), Failure> {
        let mut client = self.client().await?;
        let transaction = client
            .build_transaction()
            .isolation_level(IsolationLevel::ReadCommitted)
            .start()
            .await?;
        let (lock, head_query, insert) = tokio::try_join!(
            transaction.prepare_cached(Self::TAKE_LOCK),
            transaction.prepare_cached(
                "SELECT sequence, hash FROM audit_records ORDER BY sequence DESC LIMIT 1"
            ),
            // One statement for the whole batch: one round trip, however many records.
            transaction.prepare_cached(
                "INSERT INTO audit_records (sequence, hash, record)
                 SELECT * FROM unnest($1::BIGINT[], $2::TEXT[], $3::TEXT[])"
            ),
        )?;
        let lock_key = self.lock_key(AUDIT_LOCK);
        let lock_parameters: [&(dyn ToSql + Sync); 1] = [&lock_key];
        let (_, last) = tokio::try_join!(
            transaction.execute(&lock, &lock_parameters),
            transaction.query_opt(&head_query, &[]),
        )?;
        let mut head = match last {
            Some(row) => Checkpoint {
                length: from_sql(row.try_get(0)?) + 1,
                head: row.try_get(1)?,
            },
            None => Checkpoint::genesis(),
        };
        let (mut sequences, mut hashes, mut texts) = (Vec::new(), Vec::new(), Vec::new());
        for entry in entries {
            let record = entry.chain_after(&head);
            head = Checkpoint::after(&record);
            sequences.push(as_sql(record.sequence));
            texts.push(to_text(&record)?);
            hashes.push(record.hash);
        }
        transaction
            .execute(&insert, &[&sequences, &hashes, &texts])
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
        self.audit_texts(from, limit)
            .await?
            .iter()
            .map(|text| serde_json::from_str(text).map_err(io::Error::other))
            .collect()
    }

    /// The same records, as the JSON text they are stored as. The sequence is the table's
    /// key: a page from `from` starts with a seek on it, however long the log.
    pub(crate) async fn audit_texts(
        &self,
        from: u64,
        limit: Option<u64>,
    ) -> io::Result<Vec<String>> {
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
                .map(|row| Ok(row.try_get::<_, String>(0)?))
                .collect::<Result<Vec<String>, Failure>>()
        };
        read.await.map_err(io::Error::other)
    }
}

impl AuditSink for PostgresStore {
    fn append(&self, entry: Unchained) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(self.audit.append(entry, async |entries| {
            self.append_entries(entries).await.map_err(io::Error::other)
        }))
    }
}
