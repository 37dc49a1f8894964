//! Claims of calls in PostgreSQL: of two workers claiming one call, one gets it.

use portcullis_core::{
    BoxFuture, CallKey, Claim, ClaimState, OpenClaim, Outcome, Rejection, RepeatStore,
    existing_claim, may_settle,
};

use super::{PostgresStore, failed, to_text};
use crate::claims::{settled_once, unavailable};
use crate::values::{Failure, as_sql, from_sql, now_ms, read_state, stored_state};

impl PostgresStore {
    /// The claims whose calls are not settled (running, or waiting for a decision), oldest
    /// first.
    pub async fn open_claims(&self) -> Result<Vec<OpenClaim>, Rejection> {
        let read = async {
            let rows = self
                .client()
                .await?
                .query(
                    "SELECT call_key, state, claimed_ms FROM claims WHERE NOT settled
                     ORDER BY claimed_ms",
                    &[],
                )
                .await?;
            rows.iter()
                .map(|row| {
                    let key: &str = row.try_get(0)?;
                    Ok(OpenClaim {
                        key: serde_json::from_str(key)?,
                        state: read_state(&self.sealing, key, row.try_get(1)?)?,
                        claimed_ms: from_sql(row.try_get(2)?),
                    })
                })
                .collect::<Result<Vec<_>, Failure>>()
        };
        read.await
            .map_err(|error| unavailable("read the claims", &*error))
    }

    /// The call whose claim has the id `id` ([`CallKey::claim_id`]), open or settled: the
    /// open claims are read first, the settled ones only if none of them has it.
    pub async fn find_claim(&self, id: &str) -> Result<Option<CallKey>, Rejection> {
        let find = async {
            let client = self.client().await?;
            for settled in [false, true] {
                let rows = client
                    .query(
                        "SELECT call_key FROM claims WHERE settled = $1",
                        &[&settled],
                    )
                    .await?;
                for row in rows {
                    let key: CallKey = serde_json::from_str(row.try_get(0)?)?;
                    if key.claim_id() == id {
                        return Ok(Some(key));
                    }
                }
            }
            Ok::<_, Failure>(None)
        };
        find.await
            .map_err(|error| unavailable("read the claims", &*error))
    }

    /// Settles the claim of `key` with `outcome`, for an operator who found out how its call
    /// ended: only a claim whose outcome is unknown ([`may_settle`]), once. The claim's row is
    /// locked while it is judged and written: of two settlements, or a settlement and the
    /// worker's own report, one is first and the other finds the claim settled.
    pub async fn settle_abandoned(
        &self,
        key: &CallKey,
        outcome: &Outcome,
        lease_start_ms: u64,
    ) -> Result<(), Rejection> {
        let settle = async {
            let mut client = self.client().await?;
            let transaction = client.transaction().await?;
            let key = to_text(key)?;
            let held = transaction
                .query_opt(
                    "SELECT state, claimed_ms FROM claims WHERE call_key = $1 FOR UPDATE",
                    &[&key],
                )
                .await?;
            let held = match held {
                Some(row) => Some((
                    read_state(&self.sealing, &key, row.try_get(0)?)?,
                    from_sql(row.try_get(1)?),
                )),
                None => None,
            };
            if let Err(refusal) = may_settle(
                held.as_ref()
                    .map(|(state, claimed_ms)| (state, *claimed_ms)),
                lease_start_ms,
            ) {
                return Ok(Err(refusal));
            }
            let updated = transaction
                .execute(
                    "UPDATE claims SET state = $2, settled = TRUE
                     WHERE call_key = $1 AND NOT settled AND claimed_ms < $3",
                    &[
                        &key,
                        &stored_state(&self.sealing, &key, &ClaimState::Settled(outcome.clone()))?,
                        &as_sql(lease_start_ms),
                    ],
                )
                .await?;
            transaction.commit().await?;
            Ok::<_, Failure>(settled_once(updated))
        };
        settle
            .await
            .unwrap_or_else(|error| Err(unavailable("settle a claim", &*error)))
    }

    async fn claim_call(
        &self,
        key: &CallKey,
        fingerprint: &str,
        lease_start_ms: u64,
    ) -> Result<Claim, Failure> {
        let client = self.client().await?;
        let key = to_text(key)?;
        let running = stored_state(&self.sealing, &key, &ClaimState::Running)?;
        let new_fingerprint = self.sealing.comparable(fingerprint, None);
        // A claim released between the insert and the read is claimed again.
        for _ in 0..3 {
            let inserted = client
                .query_opt(
                    "INSERT INTO claims (call_key, fingerprint, state, settled, claimed_ms)
                     VALUES ($1, $2, $3, FALSE, $4)
                     ON CONFLICT (call_key) DO NOTHING RETURNING call_key",
                    &[&key, &new_fingerprint, &running, &now_ms()],
                )
                .await?;
            if inserted.is_some() {
                return Ok(Claim::New);
            }
            let held = client
                .query_opt(
                    "SELECT fingerprint, state, claimed_ms FROM claims WHERE call_key = $1",
                    &[&key],
                )
                .await?;
            if let Some(row) = held {
                let known: &str = row.try_get(0)?;
                return Ok(existing_claim(
                    known,
                    &self.sealing.comparable(fingerprint, Some(known)),
                    read_state(&self.sealing, &key, row.try_get(1)?)?,
                    from_sql(row.try_get(2)?),
                    lease_start_ms,
                ));
            }
        }
        Err("the claim changed hands three times while it was read".into())
    }
}

impl RepeatStore for PostgresStore {
    fn claim<'a>(
        &'a self,
        key: &'a CallKey,
        fingerprint: &'a str,
        lease_start_ms: u64,
    ) -> BoxFuture<'a, Claim> {
        Box::pin(async move {
            self.claim_call(key, fingerprint, lease_start_ms)
                .await
                .unwrap_or_else(|error| {
                    failed("claim a call", &error);
                    Claim::Unavailable
                })
        })
    }

    fn update<'a>(&'a self, key: &'a CallKey, state: ClaimState) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let settled = matches!(state, ClaimState::Settled(_));
            let updated = async {
                self.client()
                    .await?
                    .execute(
                        "UPDATE claims SET state = $2, settled = $3
                         WHERE call_key = $1 AND NOT settled",
                        &[
                            &to_text(key)?,
                            &stored_state(&self.sealing, &to_text(key)?, &state)?,
                            &settled,
                        ],
                    )
                    .await?;
                Ok::<_, Failure>(())
            };
            if let Err(error) = updated.await {
                failed("update a claim", &error);
            }
        })
    }

    fn release<'a>(&'a self, key: &'a CallKey) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let released = async {
                self.client()
                    .await?
                    .execute(
                        "DELETE FROM claims WHERE call_key = $1 AND NOT settled",
                        &[&to_text(key)?],
                    )
                    .await?;
                Ok::<_, Failure>(())
            };
            if let Err(error) = released.await {
                failed("release a claim", &error);
            }
        })
    }
}
