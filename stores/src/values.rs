//! Values as the databases keep them: counts and times as signed 64-bit integers, times in
//! milliseconds since the Unix epoch, records as JSON text.

use portcullis_core::{Abandoned, RefusalLimit, Rejection, RejectionCode, StoredStep};

/// An abandoned transaction read back from its stored context and its steps (each a payload
/// and whether it was compensated), in order.
pub(crate) fn read_abandoned(
    id: &str,
    ctx: &str,
    steps: &[(String, bool)],
) -> Result<Abandoned, serde_json::Error> {
    let steps = steps
        .iter()
        .map(|(payload, compensated)| {
            let mut step: StoredStep = serde_json::from_str(payload)?;
            step.compensated = *compensated;
            Ok(step)
        })
        .collect::<Result<_, serde_json::Error>>()?;
    Ok(Abandoned {
        id: id.to_owned(),
        ctx: serde_json::from_str(ctx)?,
        steps,
    })
}

/// Milliseconds since the Unix epoch: the clock every worker sharing a database reads.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

/// A count or a time as a database keeps it.
pub(crate) fn as_sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A count as a database kept it.
pub(crate) fn from_sql(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// The time at and before which a refusal is outside `limit`'s window at `now`.
pub(crate) fn window_start(now: i64, limit: &RefusalLimit) -> i64 {
    now.saturating_sub(as_sql(limit.per_ms()))
}

/// The refusal of a call whose task's refusals could not be read.
pub(crate) fn refusals_unknown() -> Rejection {
    Rejection::new(
        RejectionCode::BudgetUnavailable,
        "the task's refusals could not be counted, so the call did not run",
    )
    .with_hint("try again later")
}
