//! Budgets and loop breakers: how much one task may do, how fast one actor may call, and when a
//! failing tool is left alone for a while.
//!
//! The budget gate runs after authorize and before execute. It asks a [`BudgetStore`] to
//! reserve the call: the store checks every limit and records the call in one atomic step, so
//! that concurrent calls can never overspend, and a refused call records nothing. After the
//! tool ran, the store is told whether it failed, for the circuit breaker.

use std::collections::{HashMap, VecDeque};
use std::future::ready;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::gate::parts::LockedParts;
use crate::tool::BoxFuture;
use crate::{Rejection, RejectionCode};

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

/// One call the budget gate asks a store to reserve.
#[derive(Debug, Clone, Copy)]
pub struct Charge<'a> {
    /// The task the call belongs to.
    pub task: &'a str,
    /// Who calls.
    pub actor: &'a str,
    /// The tool.
    pub tool: &'a str,
    /// The tool's cost.
    pub cost: u64,
    /// The tool's own limit of calls per task, if its contract has one.
    pub tool_max_calls_per_task: Option<u64>,
    /// The call's arguments in canonical form (keys sorted, compact, the elements of sets in
    /// one order), when the stalled-loop breaker is on: two charges of one call carry the same
    /// text.
    pub canonical_arguments: Option<&'a str>,
}

/// Keeps what the budget gate counts. Implementations must check and record a reservation
/// atomically: two concurrent calls must never both take the last unit of a budget.
pub trait BudgetStore: Send + Sync + 'static {
    /// Checks `charge` against `limits` and, if every limit holds, records it. A refusal
    /// records nothing.
    fn reserve<'a>(
        &'a self,
        charge: Charge<'a>,
        limits: &'a BudgetLimits,
    ) -> BoxFuture<'a, Result<(), Rejection>>;

    /// Records how a reserved call of `tool` ended, for the circuit breaker.
    fn settle<'a>(
        &'a self,
        tool: &'a str,
        failed: bool,
        limits: &'a BudgetLimits,
    ) -> BoxFuture<'a, ()>;

    /// Gives back what `charge` reserved (its call and its cost), for a call that will not
    /// run: a reviewer rejected it, its ticket expired, or it could not be audited first. The
    /// rate limit's window keeps it: a rate counts attempts.
    fn release<'a>(&'a self, charge: Charge<'a>) -> BoxFuture<'a, ()>;

    /// Counts one refusal of a call of `task`, and returns how many it has collected.
    fn count_refusal<'a>(&'a self, task: &'a str) -> BoxFuture<'a, u64>;

    /// How many refusals `task` has collected; `None` when the store cannot tell, and the
    /// task's calls are then refused (`budget_unavailable`).
    fn refusals<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Option<u64>>;
}

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

/// A [`BudgetStore`] in memory, for one process. Tasks are counted until
/// [`InMemoryBudgetStore::forget_task`] is called for them.
///
/// Tools' circuits, callers' rate windows and tasks' usage are kept in 16 parts each, every
/// part with a lock of its own, so that calls of different tools, callers and tasks do not wait
/// on each other: no lock is global. A call reads its tool's circuit, then takes its caller's
/// part and its task's, in that order, and checks and counts against both as one step.
#[derive(Clone)]
pub struct InMemoryBudgetStore {
    state: Arc<State>,
    clock: Arc<dyn Fn() -> Instant + Send + Sync>,
}

/// The parts a call locks, in the order it locks them: its tool's circuit (and lets it go
/// again), its caller's rate window, its task's usage.
struct State {
    circuits: LockedParts<HashMap<String, Circuit>>,
    actors: LockedParts<HashMap<String, VecDeque<Instant>>>,
    tasks: LockedParts<HashMap<String, TaskUsage>>,
}

/// The parts of each map.
const PARTS: usize = 16;

#[derive(Default)]
struct TaskUsage {
    calls: u64,
    cost: u64,
    per_tool: HashMap<String, u64>,
    /// The last call's tool and canonical arguments, and how many times in a row it was made.
    last: Option<(String, String, u32)>,
    refusals: u64,
}

#[derive(Default)]
struct Circuit {
    failures_in_a_row: u32,
    open_until: Option<Instant>,
}

impl Default for InMemoryBudgetStore {
    fn default() -> Self {
        InMemoryBudgetStore::with_clock(Instant::now)
    }
}

impl InMemoryBudgetStore {
    /// A store that reads the time from `clock` (tests use a clock they move by hand).
    pub fn with_clock(clock: impl Fn() -> Instant + Send + Sync + 'static) -> Self {
        InMemoryBudgetStore {
            state: Arc::new(State {
                circuits: LockedParts::new(PARTS),
                actors: LockedParts::new(PARTS),
                tasks: LockedParts::new(PARTS),
            }),
            clock: Arc::new(clock),
        }
    }

    /// Drops what was counted for `task`, once it has ended.
    pub fn forget_task(&self, task: &str) {
        self.state.tasks.lock(task).remove(task);
    }

    fn check_and_record(&self, charge: Charge<'_>, limits: &BudgetLimits) -> Result<(), Rejection> {
        let now = (self.clock)();
        // Read, and let go: a circuit that opens right after counts from the next call.
        let circuit_open = self
            .state
            .circuits
            .lock(charge.tool)
            .get(charge.tool)
            .is_some_and(|circuit| circuit.open_until.is_some_and(|until| now < until));
        let mut actors = self.state.actors.lock(charge.actor);
        let window = entry_for(&mut actors, charge.actor);
        if let Some(rate) = limits.rate_limit {
            while window
                .front()
                .is_some_and(|at| now.duration_since(*at) >= rate.per)
            {
                window.pop_front();
            }
        }
        let mut tasks = self.state.tasks.lock(charge.task);
        let task = entry_for(&mut tasks, charge.task);
        let usage = Usage {
            circuit_open,
            calls_in_window: window.len() as u64,
            task_calls: task.calls,
            task_cost: task.cost,
            tool_calls: task.per_tool.get(charge.tool).copied().unwrap_or(0),
            last: task
                .last
                .as_ref()
                .map(|(tool, arguments, times)| (tool.as_str(), arguments.as_str(), *times)),
        };
        let admitted = judge_charge(&charge, limits, &usage)?;
        task.calls += 1;
        task.cost = admitted.task_cost;
        *entry_for(&mut task.per_tool, charge.tool) += 1;
        task.last = charge.canonical_arguments.map(|canonical| {
            (
                charge.tool.to_owned(),
                canonical.to_owned(),
                admitted.times_in_a_row,
            )
        });
        if limits.rate_limit.is_some() {
            window.push_back(now);
        }
        Ok(())
    }

    fn record_end(&self, tool: &str, failed: bool, limits: &BudgetLimits) {
        let Some(breaker) = limits.circuit_breaker else {
            return;
        };
        let now = (self.clock)();
        let mut circuits = self.state.circuits.lock(tool);
        let circuit = entry_for(&mut circuits, tool);
        if failed {
            circuit.failures_in_a_row = circuit.failures_in_a_row.saturating_add(1);
            if circuit.failures_in_a_row >= breaker.failures {
                circuit.open_until = now.checked_add(breaker.cool_down);
            }
        } else {
            *circuit = Circuit::default();
        }
    }
}

/// The value under `key`, created empty on its first use: only then is the key copied, so that
/// counting a call under a known task, actor or tool allocates nothing.
fn entry_for<'m, V: Default>(map: &'m mut HashMap<String, V>, key: &str) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), V::default());
    }
    map.get_mut(key).expect("the key was inserted above")
}

fn calls_exceeded(message: &str) -> Rejection {
    Rejection::new(RejectionCode::BudgetCallsExceeded, message).with_retryable(false)
}

impl BudgetStore for InMemoryBudgetStore {
    fn reserve<'a>(
        &'a self,
        charge: Charge<'a>,
        limits: &'a BudgetLimits,
    ) -> BoxFuture<'a, Result<(), Rejection>> {
        Box::pin(ready(self.check_and_record(charge, limits)))
    }

    fn settle<'a>(
        &'a self,
        tool: &'a str,
        failed: bool,
        limits: &'a BudgetLimits,
    ) -> BoxFuture<'a, ()> {
        self.record_end(tool, failed, limits);
        Box::pin(ready(()))
    }

    fn release<'a>(&'a self, charge: Charge<'a>) -> BoxFuture<'a, ()> {
        if let Some(task) = self.state.tasks.lock(charge.task).get_mut(charge.task) {
            task.calls = task.calls.saturating_sub(1);
            task.cost = task.cost.saturating_sub(charge.cost);
            if let Some(calls) = task.per_tool.get_mut(charge.tool) {
                *calls = calls.saturating_sub(1);
            }
        }
        Box::pin(ready(()))
    }

    fn count_refusal<'a>(&'a self, task: &'a str) -> BoxFuture<'a, u64> {
        let mut tasks = self.state.tasks.lock(task);
        let usage = entry_for(&mut tasks, task);
        usage.refusals = usage.refusals.saturating_add(1);
        Box::pin(ready(usage.refusals))
    }

    fn refusals<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Option<u64>> {
        let refusals = self
            .state
            .tasks
            .lock(task)
            .get(task)
            .map_or(0, |usage| usage.refusals);
        Box::pin(ready(Some(refusals)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A clock that moves only when told to.
    fn manual_clock() -> (InMemoryBudgetStore, Arc<AtomicU64>) {
        let start = Instant::now();
        let elapsed_ms = Arc::new(AtomicU64::new(0));
        let hand = Arc::clone(&elapsed_ms);
        let store = InMemoryBudgetStore::with_clock(move || {
            start + Duration::from_millis(hand.load(Ordering::SeqCst))
        });
        (store, elapsed_ms)
    }

    fn charge<'a>(task: &'a str, tool: &'a str, arguments: Option<&'a str>) -> Charge<'a> {
        Charge {
            task,
            actor: "alice",
            tool,
            cost: 10,
            tool_max_calls_per_task: None,
            canonical_arguments: arguments,
        }
    }

    fn code(result: Result<(), Rejection>) -> Option<RejectionCode> {
        result.err().map(|rejection| rejection.code())
    }

    /// How many of 8 threads' 100 charges each `store` admits; `charge_of` gives a thread's
    /// charges their task, caller and tool from the thread's number and the charge's.
    fn admitted_by_threads(
        store: &InMemoryBudgetStore,
        limits: &BudgetLimits,
        charge_of: impl Fn(usize, usize) -> (String, String, String) + Sync,
    ) -> usize {
        std::thread::scope(|scope| {
            let threads: Vec<_> = (0..8)
                .map(|thread| {
                    let charge_of = &charge_of;
                    scope.spawn(move || {
                        (0..100)
                            .filter(|&index| {
                                let (task, actor, tool) = charge_of(thread, index);
                                let charge = Charge {
                                    actor: &actor,
                                    ..charge(&task, &tool, None)
                                };
                                store.check_and_record(charge, limits).is_ok()
                            })
                            .count()
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|thread| thread.join().unwrap())
                .sum()
        })
    }

    #[test]
    fn threads_charging_one_caller_across_tasks_and_tools_keep_its_rate_limit_exactly() {
        let store = InMemoryBudgetStore::default();
        let limits = BudgetLimits {
            max_calls_per_task: Some(500),
            rate_limit: Some(RateLimit {
                calls: 300,
                per: Duration::from_secs(3600),
            }),
            ..BudgetLimits::default()
        };
        let admitted = admitted_by_threads(&store, &limits, |thread, index| {
            let task = if index % 2 == 0 { "t1" } else { "t2" };
            let tool = if thread % 2 == 0 { "a" } else { "b" };
            (task.to_owned(), "alice".to_owned(), tool.to_owned())
        });
        assert_eq!(admitted, 300, "the caller's rate limit, across both tasks");
        let mut counted = 0;
        store.state.tasks.each(|part| {
            counted += part.values().map(|usage| usage.calls).sum::<u64>();
        });
        assert_eq!(counted, 300);
    }

    #[test]
    fn threads_charging_one_task_take_exactly_its_calls() {
        let store = InMemoryBudgetStore::default();
        let limits = BudgetLimits {
            max_calls_per_task: Some(100),
            ..BudgetLimits::default()
        };
        let admitted = admitted_by_threads(&store, &limits, |thread, _| {
            ("t".to_owned(), format!("agent-{thread}"), "a".to_owned())
        });
        assert_eq!(admitted, 100);
    }

    #[test]
    fn calls_and_cost_per_task() {
        let store = InMemoryBudgetStore::default();
        let limits = BudgetLimits {
            max_calls_per_task: Some(3),
            max_cost_per_task: Some(25),
            ..BudgetLimits::default()
        };
        assert_eq!(
            code(store.check_and_record(charge("t1", "a", None), &limits)),
            None
        );
        assert_eq!(
            code(store.check_and_record(charge("t1", "a", None), &limits)),
            None
        );
        assert_eq!(
            code(store.check_and_record(charge("t1", "a", None), &limits)),
            Some(RejectionCode::BudgetCostExceeded)
        );
        // The refused call consumed nothing: a cheaper one still fits.
        let cheap = Charge {
            cost: 5,
            ..charge("t1", "a", None)
        };
        assert_eq!(code(store.check_and_record(cheap, &limits)), None);
        assert_eq!(
            code(store.check_and_record(
                Charge {
                    cost: 0,
                    ..charge("t1", "a", None)
                },
                &limits
            )),
            Some(RejectionCode::BudgetCallsExceeded)
        );
        // Another task has its own budget.
        assert_eq!(
            code(store.check_and_record(charge("t2", "a", None), &limits)),
            None
        );
        store.forget_task("t1");
        assert_eq!(
            code(store.check_and_record(charge("t1", "a", None), &limits)),
            None
        );
    }

    #[test]
    fn per_tool_limits() {
        let store = InMemoryBudgetStore::default();
        let limits = BudgetLimits::default();
        let once = Charge {
            tool_max_calls_per_task: Some(1),
            ..charge("t", "invoice", None)
        };
        assert_eq!(code(store.check_and_record(once, &limits)), None);
        assert_eq!(
            code(store.check_and_record(once, &limits)),
            Some(RejectionCode::BudgetCallsExceeded)
        );
        assert_eq!(
            code(store.check_and_record(charge("t", "other", None), &limits)),
            None
        );
    }

    #[test]
    fn the_same_call_in_a_row_is_a_stalled_loop() {
        let store = InMemoryBudgetStore::default();
        let limits = BudgetLimits {
            stalled_loop_after: Some(3),
            ..BudgetLimits::default()
        };
        let same = charge("t", "search", Some(r#"{"q":"x"}"#));
        assert_eq!(code(store.check_and_record(same, &limits)), None);
        assert_eq!(code(store.check_and_record(same, &limits)), None);
        assert_eq!(
            code(store.check_and_record(same, &limits)),
            Some(RejectionCode::StalledLoop)
        );
        // Other arguments break the run.
        assert_eq!(
            code(store.check_and_record(charge("t", "search", Some(r#"{"q":"y"}"#)), &limits)),
            None
        );
        assert_eq!(code(store.check_and_record(same, &limits)), None);
    }

    #[test]
    fn rate_limits_slide() {
        let (store, clock) = manual_clock();
        let limits = BudgetLimits {
            rate_limit: Some(RateLimit {
                calls: 2,
                per: Duration::from_millis(1000),
            }),
            ..BudgetLimits::default()
        };
        assert_eq!(
            code(store.check_and_record(charge("t", "a", None), &limits)),
            None
        );
        clock.store(500, Ordering::SeqCst);
        assert_eq!(
            code(store.check_and_record(charge("t", "a", None), &limits)),
            None
        );
        assert_eq!(
            code(store.check_and_record(charge("u", "b", None), &limits)),
            Some(RejectionCode::RateLimited)
        );
        clock.store(1000, Ordering::SeqCst);
        assert_eq!(
            code(store.check_and_record(charge("t", "a", None), &limits)),
            None
        );
    }

    #[test]
    fn failing_tools_are_paused() {
        let (store, clock) = manual_clock();
        let limits = BudgetLimits {
            circuit_breaker: Some(CircuitBreaker {
                failures: 2,
                cool_down: Duration::from_millis(100),
            }),
            ..BudgetLimits::default()
        };
        store.record_end("flaky", true, &limits);
        assert_eq!(
            code(store.check_and_record(charge("t", "flaky", None), &limits)),
            None
        );
        store.record_end("flaky", true, &limits);
        assert_eq!(
            code(store.check_and_record(charge("t", "flaky", None), &limits)),
            Some(RejectionCode::CircuitOpen)
        );
        assert_eq!(
            code(store.check_and_record(charge("t", "steady", None), &limits)),
            None
        );
        clock.store(100, Ordering::SeqCst);
        assert_eq!(
            code(store.check_and_record(charge("t", "flaky", None), &limits)),
            None,
            "half open"
        );
        store.record_end("flaky", true, &limits);
        assert_eq!(
            code(store.check_and_record(charge("t", "flaky", None), &limits)),
            Some(RejectionCode::CircuitOpen)
        );
        clock.store(200, Ordering::SeqCst);
        store.record_end("flaky", false, &limits);
        assert_eq!(
            code(store.check_and_record(charge("t", "flaky", None), &limits)),
            None
        );
    }
}
