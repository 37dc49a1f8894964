//! Claims of calls in SQLite: of two processes claiming one call, one gets it; a caller holds
//! at most its share of the open claims ([`Shares::open_claims_per_caller`](crate::Shares)).

use std::future::ready;

use portcullis_core::{
    BoxFuture, CallKey, Claim, ClaimState, OpenClaim, Outcome, Rejection, RepeatStore,
    existing_claim, may_settle,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{SqliteStore, as_sql, failed, from_sql, now_ms};
use crate::claims::{settled_once, unavailable};
use crate::seal::Sealing;
use crate::tasks::Bounds;
use crate::values::{Failure, read_state, stored_state};

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
    bounds: &Bounds,
    call: &CallKey,
    fingerprint: &str,
    lease_start_ms: u64,
) -> Result<Claim, rusqlite::Error> {
    let key = stored_key(call)?;
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
            let tenant = call.tenant.as_deref().unwrap_or_default();
            // Claims running past their lease do not count: their calls are not going on.
            let open: i64 = transaction.query_row(
                "SELECT count(*) FROM claims
                 WHERE tenant = ?1 AND actor = ?2 AND settled = 0 AND claimed_ms >= ?3",
                params![tenant, call.actor, as_sql(lease_start_ms)],
                |row| row.get(0),
            )?;
            if open >= bounds.open_claims_per_caller() {
                return Ok(Claim::ShareFull);
            }
            transaction.execute(
                "INSERT INTO claims (call_key, fingerprint, state, settled, claimed_ms, tenant,
                     actor)
                 VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6)",
                params![
                    key,
                    sealing.comparable(fingerprint, None),
                    stored_state(sealing, &key, &ClaimState::Running).map_err(to_sql_error)?,
                    now_ms(),
                    tenant,
                    call.actor,
                ],
            )?;
            Claim::New
        }
    };
    transaction.commit()?;
    Ok(claim)
}

fn open_claims(connection: &Connection, sealing: &Sealing) -> Result<Vec<OpenClaim>, Failure> {
    let mut statement = connection.prepare(
        "SELECT call_key, state, claimed_ms FROM claims WHERE settled = 0 ORDER BY claimed_ms",
    )?;
    let rows = statement.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, i64>(2)?,
        ))
    })?;
    let mut claims = Vec::new();
    for row in rows {
        let (key, state, claimed_ms) = row?;
        claims.push(OpenClaim {
            state: read_state(sealing, &key, &state)?,
            key: serde_json::from_str(&key)?,
            claimed_ms: from_sql(claimed_ms),
        });
    }
    Ok(claims)
}

/// The key of the claim whose [`CallKey::claim_id`] is `id`: open claims first, then the
/// settled ones, read one row at a time.
fn find_claim(connection: &Connection, id: &str) -> Result<Option<CallKey>, Failure> {
    let mut statement = connection.prepare("SELECT call_key FROM claims ORDER BY settled")?;
    let mut rows = statement.query([])?;
    while let Some(row) = rows.next()? {
        let key: CallKey = serde_json::from_str(&row.get::<_, String>(0)?)?;
        if key.claim_id() == id {
            return Ok(Some(key));
        }
    }
    Ok(None)
}

/// Settles `key` with `outcome` if its outcome is unknown, in one `IMMEDIATE` transaction:
/// of two settlements, or a settlement and the worker's own report, one is first and the
/// other finds the claim settled.
fn settle_abandoned(
    connection: &mut Connection,
    sealing: &Sealing,
    key: &CallKey,
    outcome: &Outcome,
    lease_start_ms: u64,
) -> Result<Result<(), Rejection>, Failure> {
    let key = stored_key(key)?;
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let held: Option<(String, i64)> = transaction
        .query_row(
            "SELECT state, claimed_ms FROM claims WHERE call_key = ?1",
            [&key],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?;
    let held = match held {
        Some((state, claimed_ms)) => {
            Some((read_state(sealing, &key, &state)?, from_sql(claimed_ms)))
        }
        None => None,
    };
    if let Err(refusal) = may_settle(
        held.as_ref()
            .map(|(state, claimed_ms)| (state, *claimed_ms)),
        lease_start_ms,
    ) {
        return Ok(Err(refusal));
    }
    let settled = stored_state(sealing, &key, &ClaimState::Settled(outcome.clone()))?;
    let updated = transaction.execute(
        "UPDATE claims SET state = ?2, settled = 1
         WHERE call_key = ?1 AND settled = 0 AND claimed_ms < ?3",
        params![key, settled, as_sql(lease_start_ms)],
    )?;
    transaction.commit()?;
    Ok(settled_once(updated as u64))
}

impl SqliteStore {
    /// The claims whose calls are not settled (running, or waiting for a decision), oldest
    /// first.
    pub fn open_claims(&self) -> Result<Vec<OpenClaim>, Rejection> {
        open_claims(&self.lock(), &self.sealing)
            .map_err(|error| unavailable("read the claims", &*error))
    }

    /// The call whose claim has the id `id` ([`CallKey::claim_id`]), open or settled.
    pub fn find_claim(&self, id: &str) -> Result<Option<CallKey>, Rejection> {
        find_claim(&self.lock(), id).map_err(|error| unavailable("read the claims", &*error))
    }

    /// Settles the claim of `key` with `outcome`, for an operator who found out how its call
    /// ended: only a claim whose outcome is unknown ([`may_settle`]), once.
    pub fn settle_abandoned(
        &self,
        key: &CallKey,
        outcome: &Outcome,
        lease_start_ms: u64,
    ) -> Result<(), Rejection> {
        settle_abandoned(
            &mut self.lock(),
            &self.sealing,
            key,
            outcome,
            lease_start_ms,
        )
        .unwrap_or_else(|error| Err(unavailable("settle a claim", &*error)))
    }
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
            &self.bounds,
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
