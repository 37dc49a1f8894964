//! Values as the databases keep them: counts and times as signed 64-bit integers, times in
//! milliseconds since the Unix epoch, records as JSON text, sealed where they may hold
//! secrets (see [`Sealing`]).

use portcullis_core::{
    Abandoned, CallContext, ClaimState, PendingCall, RefusalLimit, Rejection, RejectionCode,
    SignedDecision, StoredStep, Ticket,
};

use crate::seal::Sealing;

/// A database or reading failure.
pub(crate) type Failure = Box<dyn std::error::Error + Send + Sync>;

/// An abandoned transaction read back from its stored context and its steps (each its
/// place, its payload and whether it was compensated), in order.
pub(crate) fn read_abandoned(
    sealing: &Sealing,
    id: &str,
    ctx: &str,
    steps: &[(i64, String, bool)],
) -> Result<Abandoned, Failure> {
    let steps = steps
        .iter()
        .map(|(index, payload, compensated)| {
            let payload = sealing.read(&step_place(id, *index), payload)?;
            let mut step: StoredStep = serde_json::from_str(&payload)?;
            step.compensated = *compensated;
            Ok(step)
        })
        .collect::<Result<_, Failure>>()?;
    Ok(Abandoned {
        id: id.to_owned(),
        ctx: serde_json::from_str(&sealing.read(&place("transactions.ctx", id), ctx)?)?,
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

/// Where a value is stored, as sealing binds it: a sealed value opens only there.
pub(crate) fn place(column: &str, row: &str) -> String {
    format!("{column}:{row}")
}

/// A pending call as a database keeps it: the call (sealed with keys), its decision (sealed
/// too: an edit holds arguments), and its ticket in clear, redacted, for the reviewers' queue.
pub(crate) struct StoredCall {
    pub(crate) call: String,
    pub(crate) decision: Option<String>,
    pub(crate) ticket: String,
}

impl StoredCall {
    pub(crate) fn of(sealing: &Sealing, pending: &PendingCall) -> Result<Self, serde_json::Error> {
        let id = &pending.ticket.id;
        Ok(StoredCall {
            call: sealing.write(
                &place("pending_calls.call", id),
                serde_json::to_string(pending)?,
            ),
            decision: pending
                .decision
                .as_ref()
                .map(|decision| stored_decision(sealing, id, decision))
                .transpose()?,
            ticket: serde_json::to_string(&pending.ticket)?,
        })
    }
}

/// A decision on ticket `id` as a database keeps it.
pub(crate) fn stored_decision(
    sealing: &Sealing,
    id: &str,
    decision: &SignedDecision,
) -> Result<String, serde_json::Error> {
    Ok(sealing.write(
        &place("pending_calls.decision", id),
        serde_json::to_string(decision)?,
    ))
}

/// The pending call of ticket `id` read back from its stored call and decision.
pub(crate) fn read_call(
    sealing: &Sealing,
    id: &str,
    call: &str,
    decision: Option<&str>,
) -> Result<PendingCall, Failure> {
    let mut pending: PendingCall =
        serde_json::from_str(&sealing.read(&place("pending_calls.call", id), call)?)?;
    pending.decision = decision
        .map(|decision| {
            let decision = sealing.read(&place("pending_calls.decision", id), decision)?;
            Ok::<_, Failure>(serde_json::from_str(&decision)?)
        })
        .transpose()?;
    Ok(pending)
}

/// The ticket of a pending call: from its own column, or, for a call stored before it had
/// one, from the call.
pub(crate) fn read_ticket(
    sealing: &Sealing,
    id: &str,
    call: &str,
    ticket: Option<&str>,
) -> Result<Ticket, Failure> {
    match ticket {
        Some(ticket) => Ok(serde_json::from_str(ticket)?),
        None => Ok(read_call(sealing, id, call, None)?.ticket),
    }
}

/// A claim's state as a database keeps it (sealed with keys: an outcome holds a tool's
/// output), for the claim `key` (the stored call key).
pub(crate) fn stored_state(
    sealing: &Sealing,
    key: &str,
    state: &ClaimState,
) -> Result<String, serde_json::Error> {
    Ok(sealing.write(&place("claims.state", key), serde_json::to_string(state)?))
}

/// A claim's state read back.
pub(crate) fn read_state(sealing: &Sealing, key: &str, state: &str) -> Result<ClaimState, Failure> {
    Ok(serde_json::from_str(
        &sealing.read(&place("claims.state", key), state)?,
    )?)
}

/// A transaction's context as a database keeps it (sealed with keys: it holds the user's
/// request).
pub(crate) fn stored_context(
    sealing: &Sealing,
    id: &str,
    ctx: &CallContext,
) -> Result<String, serde_json::Error> {
    Ok(sealing.write(&place("transactions.ctx", id), serde_json::to_string(ctx)?))
}

/// A transaction's step as a database keeps it (sealed with keys: it holds the call's
/// canonical arguments and output), bound to the transaction and its place in it, so that a
/// step copied to another place does not open.
pub(crate) fn stored_step(
    sealing: &Sealing,
    id: &str,
    index: i64,
    step: &StoredStep,
) -> Result<String, serde_json::Error> {
    Ok(sealing.write(&step_place(id, index), serde_json::to_string(step)?))
}

fn step_place(id: &str, index: i64) -> String {
    place("transaction_steps.payload", &format!("{id}:{index}"))
}

/// The time at and before which a refusal is outside `limit`'s window at `now`.
pub(crate) fn window_start(now: i64, limit: &RefusalLimit) -> i64 {
    now.saturating_sub(as_sql(limit.per_ms()))
}

/// The refusal of a call whose task's spending could not be read for the policies.
pub(crate) fn usage_unknown() -> Rejection {
    Rejection::new(
        RejectionCode::BudgetUnavailable,
        "what the task spent could not be read, so no policy could judge the call",
    )
    .with_hint("try again later")
}

/// The refusal of a call whose task's refusals could not be read.
pub(crate) fn refusals_unknown() -> Rejection {
    Rejection::new(
        RejectionCode::BudgetUnavailable,
        "the task's refusals could not be counted, so the call did not run",
    )
    .with_hint("try again later")
}
