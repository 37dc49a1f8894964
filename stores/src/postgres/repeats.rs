//! Claims of calls in PostgreSQL: of two workers claiming one call, one gets it.

use portcullis_core::{BoxFuture, CallKey, Claim, ClaimState, RepeatStore, existing_claim};

use super::{PostgresStore, failed, to_text};
use crate::values::{Failure, from_sql, now_ms, read_state, stored_state};

impl PostgresStore {
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
