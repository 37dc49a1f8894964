//! The limits the budget gate enforces: per task, per actor's rate, per tool's failures, and
//! the refusals a task may collect.

use std::time::Duration;

/// The limits the budget gate enforces; every one is off unless set.
///
/// ```
/// use std::time::Duration;
/// use portcullis_core::{BudgetLimits, CircuitBreaker, RateLimit};
///
/// let limits = BudgetLimits {
///     max_calls_per_task: Some(50),
///     max_cost_per_task: Some(1_000),
///     stalled_loop_after: Some(3),
///     rate_limit: Some(RateLimit { calls: 60, per: Duration::from_secs(60) }),
///     circuit_breaker: Some(CircuitBreaker { failures: 5, cool_down: Duration::from_secs(30) }),
/// };
/// # drop(limits);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BudgetLimits {
    /// The most calls one task may make, all tools together.
    pub max_calls_per_task: Option<u64>,
    /// The most cost (the sum of the contracts' `cost`) one task may spend.
    pub max_cost_per_task: Option<u64>,
    /// A call that would be the N-th call in a row of the same tool with the same arguments in
    /// one task is refused as a stalled loop.
    pub stalled_loop_after: Option<u32>,
    /// How fast one actor may call, all tasks and tools together.
    pub rate_limit: Option<RateLimit>,
    /// When a tool that keeps failing is left alone.
    pub circuit_breaker: Option<CircuitBreaker>,
}

/// At most `calls` calls in any window of `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Calls allowed in one window.
    pub calls: u32,
    /// The window.
    pub per: Duration,
}

/// After `failures` failed calls of a tool in a row, its calls are refused for `cool_down`;
/// then one call is let through, and a failure opens the circuit again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitBreaker {
    /// Failures in a row that open the circuit.
    pub failures: u32,
    /// How long the circuit stays open.
    pub cool_down: Duration,
}

/// A task is stopped (`too_many_refusals`) once `refusals` of its calls were refused within
/// any window of `per`: the refusals older than `per` no longer count, so that a long session
/// is not stopped for good by refusals of hours ago, while a model that retries refused calls
/// without end is held to `refusals` of them every `per`.
///
/// ```
/// use std::time::Duration;
/// use portcullis_core::RefusalLimit;
///
/// let per_ten_minutes = RefusalLimit { refusals: 50, per: Duration::from_secs(600) };
/// let whole_task = RefusalLimit::whole_task(50);
/// assert_eq!(whole_task.per, Duration::MAX);
/// # drop(per_ten_minutes);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusalLimit {
    /// Refusals within one window that stop the task.
    pub refusals: u64,
    /// The window; [`Duration::MAX`]: the task's whole life.
    pub per: Duration,
}

impl RefusalLimit {
    /// `refusals` over the task's whole life: a stopped task stays stopped.
    pub const fn whole_task(refusals: u64) -> Self {
        RefusalLimit {
            refusals,
            per: Duration::MAX,
        }
    }

    /// The window in milliseconds, for a store that keeps times as milliseconds (`u64::MAX`
    /// for the task's whole life).
    pub fn per_ms(&self) -> u64 {
        u64::try_from(self.per.as_millis()).unwrap_or(u64::MAX)
    }
}
