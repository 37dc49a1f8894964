//! The budget's rules, the same for every store: a charge judged against what the store read
//! of its task's, its actor's and its tool's usage, and the refusals every store gives.

use super::limits::BudgetLimits;
use super::store::Charge;
use crate::rejection::{Rejection, RejectionCode};

/// What a store read of the usage a charge is judged against, in the same atomic step that
/// will record the charge.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage<'a> {
    /// The tool's circuit is open now.
    pub circuit_open: bool,
    /// The actor's calls within the rate limit's window (when one is set).
    pub calls_in_window: u64,
    /// The task's calls so far.
    pub task_calls: u64,
    /// The task's cost so far.
    pub task_cost: u64,
    /// The task's calls of this tool so far.
    pub tool_calls: u64,
    /// The task's last call: its tool, its canonical arguments, and how many times in a row it
    /// was made.
    pub last: Option<(&'a str, &'a str, u32)>,
}

/// What a store records of an admitted charge, beyond one more call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    /// The task's cost with this call.
    pub task_cost: u64,
    /// How many times in a row the task made this call, with this one.
    pub times_in_a_row: u32,
}

/// The budget's rules, for every store: admits `charge` against `limits` given `usage`, or
/// refuses it. A store reads the usage and records an admitted charge in one atomic step.
pub fn judge_charge(
    charge: &Charge<'_>,
    limits: &BudgetLimits,
    usage: &Usage<'_>,
) -> Result<Admitted, Rejection> {
    if usage.circuit_open {
        return Err(Rejection::new(
            RejectionCode::CircuitOpen,
            format!(
                "`{}` failed too often and is paused for a while",
                charge.tool
            ),
        )
        .with_hint("try again later, or do without this tool"));
    }
    if let Some(rate) = limits.rate_limit
        && usage.calls_in_window >= u64::from(rate.calls)
    {
        return Err(Rejection::new(
            RejectionCode::RateLimited,
            format!(
                "at most {} calls every {} ms",
                rate.calls,
                rate.per.as_millis()
            ),
        )
        .with_hint("wait before calling again"));
    }
    if limits
        .max_calls_per_task
        .is_some_and(|max| usage.task_calls >= max)
    {
        return Err(calls_exceeded(
            "this task has made all the calls it may make",
        ));
    }
    if charge
        .tool_max_calls_per_task
        .is_some_and(|max| usage.tool_calls >= max)
    {
        return Err(calls_exceeded(&format!(
            "this task has made all the calls of `{}` it may make",
            charge.tool
        )));
    }
    let task_cost = usage.task_cost.saturating_add(charge.cost);
    if let Some(max) = limits.max_cost_per_task
        && task_cost > max
    {
        return Err(Rejection::new(
            RejectionCode::BudgetCostExceeded,
            format!("this call would spend {task_cost} of the task's budget of {max}"),
        )
        .with_retryable(false));
    }
    let times_in_a_row = match (usage.last, charge.canonical_arguments) {
        (Some((tool, arguments, times)), Some(canonical))
            if tool == charge.tool && arguments == canonical =>
        {
            times + 1
        }
        _ => 1,
    };
    if limits
        .stalled_loop_after
        .is_some_and(|after| times_in_a_row >= after)
    {
        return Err(Rejection::new(
            RejectionCode::StalledLoop,
            format!(
                "`{}` was called {} times in a row with the same arguments",
                charge.tool,
                times_in_a_row - 1
            ),
        )
        .with_hint("the same call gives the same result: change the arguments or stop")
        .with_retryable(false));
    }
    Ok(Admitted {
        task_cost,
        times_in_a_row,
    })
}

fn calls_exceeded(message: &str) -> Rejection {
    Rejection::new(RejectionCode::BudgetCallsExceeded, message).with_retryable(false)
}

/// The refusal of a call of a task a bounded store has no room for. Every bounded store
/// refuses with it.
pub fn budget_store_full() -> Rejection {
    store_full("tasks")
}

pub(crate) fn store_full(what: &str) -> Rejection {
    Rejection::new(
        RejectionCode::BudgetStoreFull,
        format!(
            "the budget holds as many {what} as it may at once, so this call could not be counted and did not run"
        ),
    )
    .with_hint("try again later")
}

/// The refusal of a call of a task a bounded store ended on its own after a per-task limit
/// counted its calls: a budget begun afresh would allow what the old one refused. Every store
/// refuses with it.
pub fn task_expired() -> Rejection {
    Rejection::new(
        RejectionCode::TaskExpired,
        "this task was ended after it stayed idle too long, or lived as long as a task may, so its calls no longer run",
    )
    .with_hint("tell the user that the task has ended; a new task must be started")
}

/// The refusal of a call that would start a new task of a caller whose share of `tasks`
/// counted tasks is full. Every bounded store refuses with it.
pub fn budget_share_full(tasks: usize) -> Rejection {
    Rejection::new(
        RejectionCode::BudgetShareFull,
        format!(
            "this caller has {tasks} tasks counted in the budget, its whole share, so a call in a new task of it could not be counted and did not run"
        ),
    )
    .with_hint("go on in a task you started already, or end one of yours before starting another")
}
