//! Claims of calls in SQLite: of two processes claiming one call, one gets it.

use std::future::ready;

use portcullis_core::{BoxFuture, CallKey, Claim, ClaimState, RepeatStore, existing_claim};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{SqliteStore, failed, from_sql, now_ms};
use crate::seal::Sealing;
use crate::values::{read_state, stored_state};

/// The claim's key as stored: the call key's JSON, which tells every tenant, actor, task, tool
/// and call id apart.
fn stored_key(key: &CallKey) -> Result<String, rusqlite::Error> {
    serde_json::to_string(key).map_err(to_sql_error)
}

fn to_sql_error(error: serde_json::Error) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(error))
}

fn claim(
    connection: &mut Connection,
    sealing: &Sealing,
    key: &CallKey,
    fingerprint: &str,
    lease_start_ms: u64,
) -> Result<Claim, rusqlite::Error> {
    let key = stored_key(key)?;
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let held: Option<(String, String, i64)> = transaction
        .query_row(
            "SELECT fingerprint, state, claimed_ms FROM claims WHERE call_key = ?1",
            [&key],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?;
    let claim = match held {
        Some((known, state, claimed_ms)) => match read_state(sealing, &key, &state) {
            Ok(state) => existing_claim(
                &known,
                &sealing.comparable(fingerprint, Some(&known)),
                state,
                from_sql(claimed_ms),
                lease_start_ms,
            ),
            Err(error) => {
                failed("read a claim", &error);
                Claim::Unavailable
            }
        },
        None => {
            transaction.execute(
                "INSERT INTO claims (call_key, fingerprint, state, settled, claimed_ms)
                 VALUES (?1, ?2, ?3, 0, ?4)",
                params![
                    key,
                    sealing.comparable(fingerprint, None),
                    stored_state(sealing, &key, &ClaimState::Running).map_err(to_sql_error)?,
                    now_ms()
                ],
            )?;
            Claim::New
        }
    };
    transaction.commit()?;
    Ok(claim)
}

impl RepeatStore for SqliteStore {
    fn claim<'a>(
        &'a self,
        key: &'a CallKey,
        fingerprint: &'a str,
        lease_start_ms: u64,
    ) -> BoxFuture<'a, Claim> {
        let claimed = claim(
            &mut self.lock(),
            &self.sealing,
            key,
            fingerprint,
            lease_start_ms,
        );
        let claim = claimed.unwrap_or_else(|error| {
            failed("claim a call", &error);
            Claim::Unavailable
        });
        Box::pin(ready(claim))
    }

    fn update<'a>(&'a self, key: &'a CallKey, state: ClaimState) -> BoxFuture<'a, ()> {
        let settled = matches!(state, ClaimState::Settled(_));
        let updated = (|| {
            let key = stored_key(key)?;
            let state = stored_state(&self.sealing, &key, &state).map_err(to_sql_error)?;
            self.lock().execute(
                "UPDATE claims SET state = ?2, settled = ?3 WHERE call_key = ?1 AND settled = 0",
                params![key, state, settled],
            )
        })();
        if let Err(error) = updated {
            failed("update a claim", &error);
        }
        Box::pin(ready(()))
    }

    fn release<'a>(&'a self, key: &'a CallKey) -> BoxFuture<'a, ()> {
        let released = (|| {
            self.lock().execute(
                "DELETE FROM claims WHERE call_key = ?1 AND settled = 0",
                [stored_key(key)?],
            )
        })();
        if let Err(error) = released {
            failed("release a claim", &error);
        }
        Box::pin(ready(()))
    }
}
