//! Claims of calls in PostgreSQL: of two workers claiming one call, one gets it; a caller holds
//! at most its share of the open claims ([`Shares::open_claims_per_caller`](crate::Shares)).

use portcullis_core::{
    BoxFuture, CallKey, Claim, ClaimState, OpenClaim, Outcome, Rejection, RepeatStore,
    existing_claim, may_settle,
};
use tokio_postgres::types::ToSql;

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

    /// Claims `call`, or reads the claim held. A new claim is taken under its caller's advisory
    /// lock, in the transaction that counts the caller's open claims: two workers never both
    /// take a caller's last place.
    async fn claim_call(
        &self,
        call: &CallKey,
        fingerprint: &str,
        lease_start_ms: u64,
    ) -> Result<Claim, Failure> {
        let mut client = self.client().await?;
        let key = to_text(call)?;
        let running = stored_state(&self.sealing, &key, &ClaimState::Running)?;
        let new_fingerprint = self.sealing.comparable(fingerprint, None);
        let tenant = call.tenant.as_deref().unwrap_or_default();
        let caller_lock = format!("claims-of:{tenant}\n{}", call.actor);
        let caller_lock = self.lock_key(&caller_lock);
        // A claim released between the insert and the read is claimed again.
        for _ in 0..3 {
            let transaction = client.transaction().await?;
            let (now, lease_start, share) = (
                now_ms(),
                as_sql(lease_start_ms),
                self.bounds.open_claims_per_caller(),
            );
            // Prepared first, so that the lock and the insert are sent together and run in
            // order: under read committed the count is read once the lock is held.
            let (lock, insert) = tokio::try_join!(
                transaction.prepare_cached(Self::TAKE_LOCK),
                // Claims running past their lease do not count: their calls are not going on.
                transaction.prepare_cached(
                    "INSERT INTO claims (call_key, fingerprint, state, settled, claimed_ms,
                         tenant, actor)
                     SELECT $1, $2, $3, FALSE, $4, $5, $6
                     WHERE (SELECT count(*) FROM claims
                            WHERE tenant = $5 AND actor = $6 AND NOT settled
                                AND claimed_ms >= $7) < $8
                     ON CONFLICT (call_key) DO NOTHING RETURNING call_key"
                ),
            )?;
            let lock_parameters: [&(dyn ToSql + Sync); 1] = [&caller_lock];
            let claim_parameters: [&(dyn ToSql + Sync); 8] = [
                &key,
                &new_fingerprint,
                &running,
                &now,
                &tenant,
                &call.actor,
                &lease_start,
                &share,
            ];
            let (_, inserted) = tokio::try_join!(
                transaction.execute(&lock, &lock_parameters),
                transaction.query_opt(&insert, &claim_parameters),
            )?;
            transaction.commit().await?;
            if inserted.is_some() {
                return Ok(Claim::New);
            }
            let held = client
                .query_opt(
                    "SELECT fingerprint, state, claimed_ms FROM claims WHERE call_key = $1",
                    &[&key],
                )
                .await?;
            let Some(row) = held else {
                // Not claimed: either its caller holds its share, or the claim was released
                // meanwhile.
                let open: i64 = client
                    .query_one(
                        "SELECT count(*) FROM claims
                         WHERE tenant = $1 AND actor = $2 AND NOT settled AND claimed_ms >= $3",
                        &[&tenant, &call.actor, &lease_start],
                    )
                    .await?
                    .try_get(0)?;
                if open >= share {
                    return Ok(Claim::ShareFull);
                }
                continue;
            };
            let known: &str = row.try_get(0)?;
            return Ok(existing_claim(
                known,
                &self.sealing.comparable(fingerprint, Some(known)),
                read_state(&self.sealing, &key, row.try_get(1)?)?,
                from_sql(row.try_get(2)?),
                lease_start_ms,
            ));
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
