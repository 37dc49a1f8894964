//! The budget store in memory: bounded, split into parts that lock on their own, with a share
//! of its tasks for each caller.

use std::collections::{HashMap, VecDeque};
use std::future::ready;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::judge::{
    Usage, budget_share_full, budget_store_full, judge_charge, store_full, task_expired,
};
use super::limits::{BudgetLimits, RefusalLimit};
use super::store::{BudgetStore, Charge};
use crate::context::CallContext;
use crate::future::BoxFuture;
use crate::lifetime::{Ended, TaskLifetime};
use crate::locked_parts::LockedParts;
use crate::policy::BudgetUsage;
use crate::rejection::{Rejection, RejectionCode};
use crate::share::{Shares, caller_key, with_caller_key};

/// How much an [`InMemoryBudgetStore`] holds at once: its memory's bound.
///
/// A task is held while it counts anything a limit reads: its calls and cost once a per-task
/// limit counted them (until [`InMemoryBudgetStore::forget_task`]), its refusals while they are
/// within the refusal limit's window. An actor is held while its calls are within the rate
/// limit's window. What a store no longer holds can refuse nothing, so forgetting it allows
/// nothing that holding it would have refused. A task or an actor the store does not hold,
/// when it holds as many as its capacity allows, is refused (`budget_store_full`): a new task's
/// calls, and any call of a task whose refusals could not be counted.
///
/// Each caller (its actor in its tenant) has a share of the tasks: a task whose calls a
/// per-task limit counted is held in the share of the caller whose call counted first, until
/// [`Registry::end_task`](crate::Registry::end_task) forgets it and gives its place back. A
/// caller whose share is full is refused a new task (`budget_share_full`), while the calls of
/// the tasks it holds go on, and other callers are not affected: no caller fills the store for
/// the others. The store's own bound stays, the last resort. Nothing is evicted for a share
/// either: a forgotten budget would start afresh, and give a task the calls it spent back.
///
/// The entries are kept in 16 parts with a share of the capacity each (rounded up), so a new
/// task can be refused a little before the store holds `tasks` of them, never after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetCapacity {
    /// Tasks held at once.
    pub tasks: usize,
    /// Actors with calls in their rate window at once.
    pub actors: usize,
    /// Tasks whose calls were counted held at once for one caller (its actor in its tenant);
    /// `None`: a hundredth of `tasks` (at least one), so that at least 100 callers use the
    /// store at once. See [`tasks_per_caller`](Self::tasks_per_caller).
    pub tasks_per_caller: Option<usize>,
}

impl BudgetCapacity {
    /// The tasks one caller's share holds: `tasks_per_caller`, or a hundredth of `tasks`; at
    /// least one.
    pub fn tasks_per_caller(&self) -> usize {
        self.tasks_per_caller.unwrap_or(self.tasks / 100).max(1)
    }
}

impl Default for BudgetCapacity {
    /// 100,000 tasks (1,000 for each caller) and 100,000 actors: with a rate limit of 60
    /// calls, about 60 MiB at most for the actors' windows, and a few hundred bytes per task
    /// plus its last call's arguments for the stalled-loop breaker.
    fn default() -> Self {
        BudgetCapacity {
            tasks: 100_000,
            actors: 100_000,
            tasks_per_caller: None,
        }
    }
}

/// A [`BudgetStore`] in memory, for one process, bounded by its [`BudgetCapacity`], with a
/// share of its tasks for each caller (`budget_share_full` for a caller over it).
///
/// Tools' circuits, callers' rate windows and tasks' usage are kept in 16 parts each, every
/// part with a lock of its own, so that calls of different tools, callers and tasks do not wait
/// on each other: no lock is global. A call reads its tool's circuit, then takes its caller's
/// part and its task's, in that order, and checks and counts against both as one step. A
/// tool's circuit is kept for every tool that failed: the registry's tools bound them.
#[derive(Clone)]
pub struct InMemoryBudgetStore {
    state: Arc<State>,
    clock: Arc<dyn Fn() -> Instant + Send + Sync>,
}

/// The parts a call locks, in the order it locks them: its tool's circuit (and lets it go
/// again), its caller's rate window, its task's usage.
struct State {
    circuits: LockedParts<HashMap<String, Circuit>>,
    actors: LockedParts<Held<ActorWindow>>,
    tasks: LockedParts<Held<TaskUsage>>,
    /// How many counted tasks each caller's share holds (a caller with none is not kept):
    /// locked after its task's part.
    callers: LockedParts<Shares>,
    /// Actors and tasks each part may hold.
    actors_per_part: usize,
    tasks_per_part: usize,
    /// Counted tasks one caller may hold.
    tasks_per_caller: usize,
    capacity: BudgetCapacity,
    lifetime: TaskLifetime,
    /// The counted tasks the store ended on its own, refused `task_expired` while
    /// remembered: locked after a task's part.
    ended: Mutex<Ended<()>>,
}

impl State {
    fn new(capacity: BudgetCapacity, lifetime: TaskLifetime) -> Self {
        State {
            capacity,
            lifetime,
            ended: Mutex::new(Ended::new(capacity.tasks.saturating_mul(10))),
            circuits: LockedParts::new(PARTS),
            actors: LockedParts::new(PARTS),
            tasks: LockedParts::new(PARTS),
            callers: LockedParts::new(PARTS),
            actors_per_part: capacity.actors.div_ceil(PARTS),
            tasks_per_part: capacity.tasks.div_ceil(PARTS),
            tasks_per_caller: capacity.tasks_per_caller(),
        }
    }
}

/// The parts of each map.
const PARTS: usize = 16;

/// An entry that may be forgotten once it can refuse nothing.
trait Forgettable {
    /// From when on it can refuse nothing; `None`: it may refuse something for ever.
    fn forgettable_from(&self) -> Option<Instant>;
}

/// One part of the actors or the tasks: its entries, and the earliest time one of them may be
/// forgotten, so that a full part is swept only when the sweep can free something.
struct Held<V> {
    entries: HashMap<String, V>,
    next_sweep: Option<Instant>,
}

impl State {
    /// Ends the tasks of `part` whose time is up at `now`: a task that held only refusals is
    /// forgotten; a task whose calls a per-task limit counted is remembered as ended (its
    /// calls are refused `task_expired`), and gives its place back to its caller's share. One
    /// whose caller holds all the ended tasks it may stays, and is tried again later.
    fn end_tasks(&self, part: &mut Held<TaskUsage>, now: Instant) {
        for (task, usage) in part.sweep(now) {
            let Some(caller) = usage.caller.as_deref() else {
                continue;
            };
            if !usage.counted {
                // Its refusals left the window: it can refuse nothing.
                self.callers.lock(caller).give_back(caller);
                continue;
            }
            let mut ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
            let key = ended.key("", &task);
            let forgotten = now.checked_add(self.lifetime.remembered).unwrap_or(now);
            if ended.remember(key, caller, forgotten, (), now) {
                drop(ended);
                self.callers.lock(caller).give_back(caller);
            } else {
                drop(ended);
                let retry = now.checked_add(self.lifetime.idle);
                let mut usage = usage;
                usage.forgettable_from = retry;
                part.entries.insert(task, usage);
                part.forgettable(retry);
            }
        }
    }

    /// Ends the tasks of every part whose time is up at `now`.
    fn end_every_task(&self, now: Instant) {
        self.tasks.each_mut(|part| self.end_tasks(part, now));
    }

    /// Whether the store ended `task` and still remembers it.
    fn ended(&self, task: &str, now: Instant) -> bool {
        let mut ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        let key = ended.key("", task);
        ended.get(&key, now).is_some()
    }
}

impl<V> Default for Held<V> {
    fn default() -> Self {
        Held {
            entries: HashMap::new(),
            next_sweep: None,
        }
    }
}

impl<V: Forgettable> Held<V> {
    /// Whether one more entry fits within `capacity`, once the entries that can refuse
    /// nothing at `now` are forgotten.
    fn room(&mut self, now: Instant, capacity: usize) -> bool {
        if self.entries.len() < capacity {
            return true;
        }
        self.sweep(now);
        self.entries.len() < capacity
    }

    /// Takes out the entries whose time is up at `now`, if any may be, and returns them.
    fn sweep(&mut self, now: Instant) -> Vec<(String, V)> {
        let mut out = Vec::new();
        if self.next_sweep.is_none_or(|at| at > now) {
            return out;
        }
        let keys: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.forgettable_from().is_some_and(|at| at <= now))
            .map(|(key, _)| key.clone())
            .collect();
        for key in keys {
            if let Some(entry) = self.entries.remove(&key) {
                out.push((key, entry));
            }
        }
        self.next_sweep = self
            .entries
            .values()
            .filter_map(Forgettable::forgettable_from)
            .min();
        out
    }

    /// The entry of `key`, made on its first use if there is room (only then is the key
    /// copied, so that counting under a known key allocates nothing); `None` when full. A new
    /// entry holds nothing yet, and may be forgotten at once.
    fn entry(
        &mut self,
        key: &str,
        now: Instant,
        capacity: usize,
        make: impl FnOnce() -> V,
    ) -> Option<&mut V> {
        if !self.entries.contains_key(key) {
            if !self.room(now, capacity) {
                return None;
            }
            self.entries.insert(key.to_owned(), make());
            self.forgettable(Some(now));
        }
        self.entries.get_mut(key)
    }

    /// Notes that an entry may be forgotten from `from` on.
    fn forgettable(&mut self, from: Option<Instant>) {
        if let Some(from) = from {
            self.next_sweep = Some(self.next_sweep.map_or(from, |next| next.min(from)));
        }
    }
}

/// An actor's calls within the rate limit's window, oldest first.
struct ActorWindow {
    calls: VecDeque<Instant>,
    /// When its latest call leaves the window (`None` for one that never does), or, for an
    /// actor without calls, when it was made.
    leaves: Option<Instant>,
}

impl ActorWindow {
    fn new(now: Instant) -> Self {
        ActorWindow {
            calls: VecDeque::new(),
            leaves: Some(now),
        }
    }
}

impl Forgettable for ActorWindow {
    fn forgettable_from(&self) -> Option<Instant> {
        self.leaves
    }
}

struct TaskUsage {
    calls: u64,
    cost: u64,
    per_tool: HashMap<String, u64>,
    /// The last call's tool and canonical arguments, and how many times in a row it was made.
    last: Option<(String, String, u32)>,
    /// Whether a per-task limit counted its calls: then they are kept until the task ends,
    /// since its budget holds for its whole life, and the store remembers it ended.
    counted: bool,
    /// When it was made.
    started: Instant,
    /// The key of the caller whose share holds it, once counted or holding refusals.
    caller: Option<String>,
    /// Its latest refusals within the refusal limit's window, oldest first.
    refusals: VecDeque<Instant>,
    /// When it can refuse nothing any more, or ends: when it was made, for a task that holds
    /// nothing yet; when its latest refusal leaves the window; once it counted calls, when its
    /// [`TaskLifetime`] is over unless used again; `None` when its refusals count for the
    /// task's whole life.
    forgettable_from: Option<Instant>,
}

impl TaskUsage {
    fn new(now: Instant) -> Self {
        TaskUsage {
            calls: 0,
            cost: 0,
            per_tool: HashMap::new(),
            last: None,
            counted: false,
            started: now,
            caller: None,
            refusals: VecDeque::new(),
            forgettable_from: Some(now),
        }
    }
}

impl Forgettable for TaskUsage {
    fn forgettable_from(&self) -> Option<Instant> {
        self.forgettable_from
    }
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

/// Whether a per-task limit reads the task's calls for `charge`.
fn counts_task(charge: &Charge<'_>, limits: &BudgetLimits) -> bool {
    limits.max_calls_per_task.is_some()
        || limits.max_cost_per_task.is_some()
        || limits.stalled_loop_after.is_some()
        || charge.tool_max_calls_per_task.is_some()
}

/// Drops the times older than `per` from the front of `times`.
fn slide(times: &mut VecDeque<Instant>, now: Instant, per: Duration) {
    while times
        .front()
        .is_some_and(|at| now.saturating_duration_since(*at) >= per)
    {
        times.pop_front();
    }
}

impl InMemoryBudgetStore {
    /// A store that reads the time from `clock` (tests use a clock they move by hand), with
    /// the default [`BudgetCapacity`].
    pub fn with_clock(clock: impl Fn() -> Instant + Send + Sync + 'static) -> Self {
        InMemoryBudgetStore {
            state: Arc::new(State::new(
                BudgetCapacity::default(),
                TaskLifetime::default(),
            )),
            clock: Arc::new(clock),
        }
    }

    /// This store, emptied and bounded by `capacity`: call it as the store is made.
    pub fn with_capacity(self, capacity: BudgetCapacity) -> Self {
        InMemoryBudgetStore {
            state: Arc::new(State::new(capacity, self.state.lifetime)),
            clock: self.clock,
        }
    }

    /// This store, emptied, ending tasks on its own after `lifetime`: call it as the store is
    /// made.
    pub fn with_lifetime(self, lifetime: TaskLifetime) -> Self {
        InMemoryBudgetStore {
            state: Arc::new(State::new(self.state.capacity, lifetime)),
            clock: self.clock,
        }
    }

    /// Drops what was counted for `task`, once it has ended (what
    /// [`Registry::end_task`](crate::Registry::end_task) does). Its budget starts afresh should
    /// its id come again: forget only a task whose id is never used again (a session's task,
    /// once the session closed).
    pub fn forget_task(&self, task: &str) {
        let mut tasks = self.state.tasks.lock(task);
        let caller = tasks.entries.remove(task).and_then(|usage| usage.caller);
        {
            let mut ended = self
                .state
                .ended
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let key = ended.key("", task);
            ended.forget(&key);
        }
        if let Some(caller) = caller {
            self.state.callers.lock(&caller).give_back(&caller);
        }
    }

    /// How many tasks the share of `actor` in `tenant` holds now.
    #[cfg(test)]
    fn held_by(&self, actor: &str, tenant: Option<&str>) -> usize {
        let caller = caller_key(actor, tenant.unwrap_or_default());
        self.state.callers.lock(&caller).held(&caller)
    }

    /// How many tasks and actors the store holds now: the entries its capacity bounds.
    #[doc(hidden)]
    pub fn held(&self) -> (usize, usize) {
        let (mut tasks, mut actors) = (0, 0);
        self.state.tasks.each(|part| tasks += part.entries.len());
        self.state.actors.each(|part| actors += part.entries.len());
        (tasks, actors)
    }

    /// Checks and records `charge`; a caller whose share is full first has its tasks whose
    /// time is up ended, in every part, and is then judged again.
    fn check_and_record(&self, charge: Charge<'_>, limits: &BudgetLimits) -> Result<(), Rejection> {
        let now = (self.clock)();
        match self.record_at(charge, limits, now) {
            Err(refused) if refused.code() == RejectionCode::BudgetShareFull => {
                self.state.end_every_task(now);
                self.record_at(charge, limits, now)
            }
            judged => judged,
        }
    }

    fn record_at(
        &self,
        charge: Charge<'_>,
        limits: &BudgetLimits,
        now: Instant,
    ) -> Result<(), Rejection> {
        let state = &*self.state;
        // Read, and let go: a circuit that opens right after counts from the next call.
        let circuit_open = state
            .circuits
            .lock(charge.tool)
            .get(charge.tool)
            .is_some_and(|circuit| circuit.open_until.is_some_and(|until| now < until));
        let mut actors = state.actors.lock(charge.actor);
        let mut window = match limits.rate_limit {
            Some(rate) => {
                let window = actors
                    .entry(charge.actor, now, state.actors_per_part, || {
                        ActorWindow::new(now)
                    })
                    .ok_or_else(|| store_full("callers"))?;
                slide(&mut window.calls, now, rate.per);
                Some(window)
            }
            None => None,
        };
        let counts = counts_task(&charge, limits);
        let mut tasks = state.tasks.lock(charge.task);
        state.end_tasks(&mut tasks, now);
        // A task the store counts for the first time takes a place in its caller's share: its
        // part stays locked until the call is counted, so that two new tasks of one caller
        // cannot both take its last place.
        let mut share = None;
        let held = tasks.entries.get(charge.task);
        let (counted, placed) = (
            held.is_some_and(|task| task.counted),
            held.is_some_and(|task| task.caller.is_some()),
        );
        if counts && !counted {
            if state.ended(charge.task, now) {
                return Err(task_expired());
            }
            if !placed {
                let caller = caller_key(charge.actor, charge.tenant.unwrap_or_default());
                let callers = state.callers.lock(&caller);
                if callers.held(&caller) >= state.tasks_per_caller {
                    return Err(budget_share_full(state.tasks_per_caller));
                }
                share = Some((callers, caller));
            }
        }
        let task = if counts {
            Some(
                tasks
                    .entry(charge.task, now, state.tasks_per_part, || {
                        TaskUsage::new(now)
                    })
                    .ok_or_else(budget_store_full)?,
            )
        } else {
            tasks.entries.get_mut(charge.task)
        };
        let usage = Usage {
            circuit_open,
            calls_in_window: window
                .as_ref()
                .map_or(0, |window| window.calls.len() as u64),
            task_calls: task.as_ref().map_or(0, |task| task.calls),
            task_cost: task.as_ref().map_or(0, |task| task.cost),
            tool_calls: task
                .as_ref()
                .and_then(|task| task.per_tool.get(charge.tool).copied())
                .unwrap_or(0),
            last: task.as_ref().and_then(|task| {
                task.last
                    .as_ref()
                    .map(|(tool, arguments, times)| (tool.as_str(), arguments.as_str(), *times))
            }),
        };
        let admitted = judge_charge(&charge, limits, &usage)?;
        let mut ends = None;
        if let Some(task) = task.filter(|_| counts) {
            if let Some((mut callers, caller)) = share {
                callers.take(&caller);
                task.caller = Some(caller);
            }
            task.counted = true;
            task.forgettable_from = state.lifetime.ends(task.started, now);
            ends = task.forgettable_from;
            task.calls += 1;
            task.cost = admitted.task_cost;
            if !task.per_tool.contains_key(charge.tool) {
                task.per_tool.insert(charge.tool.to_owned(), 0);
            }
            if let Some(calls) = task.per_tool.get_mut(charge.tool) {
                *calls += 1;
            }
            task.last = charge.canonical_arguments.map(|canonical| {
                (
                    charge.tool.to_owned(),
                    canonical.to_owned(),
                    admitted.times_in_a_row,
                )
            });
        }
        tasks.forgettable(ends);
        if let (Some(window), Some(rate)) = (window.as_mut(), limits.rate_limit) {
            window.calls.push_back(now);
            window.leaves = now.checked_add(rate.per);
            let leaves = window.leaves;
            actors.forgettable(leaves);
        }
        Ok(())
    }

    fn record_end(&self, tool: &str, failed: bool, limits: &BudgetLimits) {
        let Some(breaker) = limits.circuit_breaker else {
            return;
        };
        let now = (self.clock)();
        let mut circuits = self.state.circuits.lock(tool);
        if !circuits.contains_key(tool) {
            circuits.insert(tool.to_owned(), Circuit::default());
        }
        let Some(circuit) = circuits.get_mut(tool) else {
            return;
        };
        if failed {
            circuit.failures_in_a_row = circuit.failures_in_a_row.saturating_add(1);
            if circuit.failures_in_a_row >= breaker.failures {
                circuit.open_until = now.checked_add(breaker.cool_down);
            }
        } else {
            *circuit = Circuit::default();
        }
    }

    /// Counts a refusal of `task`, held in the share of `caller` (a [`caller_key`]).
    fn count(&self, task: &str, caller: &str, limit: &RefusalLimit) -> u64 {
        let now = (self.clock)();
        let state = &*self.state;
        let mut tasks = state.tasks.lock(task);
        state.end_tasks(&mut tasks, now);
        // A store, or a caller's share, without room counts nothing: the task's next call is
        // refused as the store or the share is full, since the store does not hold the task.
        if !tasks.entries.contains_key(task) {
            let mut callers = state.callers.lock(caller);
            if callers.held(caller) >= state.tasks_per_caller
                || !tasks.room(now, state.tasks_per_part)
            {
                return 0;
            }
            callers.take(caller);
            let usage = TaskUsage {
                caller: Some(caller.to_owned()),
                ..TaskUsage::new(now)
            };
            tasks.entries.insert(task.to_owned(), usage);
        }
        let Some(usage) = tasks.entries.get_mut(task) else {
            return 0;
        };
        slide(&mut usage.refusals, now, limit.per);
        usage.refusals.push_back(now);
        while usage.refusals.len() as u64 > limit.refusals {
            usage.refusals.pop_front();
        }
        if !usage.counted {
            usage.forgettable_from = now.checked_add(limit.per);
        }
        let (refusals, from) = (usage.refusals.len() as u64, usage.forgettable_from);
        tasks.forgettable(from);
        refusals
    }

    /// The refusals `task` collected within `limit`'s window; for a task the store does not
    /// hold, a refusal when neither the store nor the share of `caller` has room for it.
    fn count_within(
        &self,
        task: &str,
        (actor, tenant): (&str, &str),
        limit: &RefusalLimit,
    ) -> Result<u64, Rejection> {
        let now = (self.clock)();
        let state = &*self.state;
        let mut tasks = state.tasks.lock(task);
        state.end_tasks(&mut tasks, now);
        if let Some(usage) = tasks.entries.get_mut(task) {
            slide(&mut usage.refusals, now, limit.per);
            return Ok(usage.refusals.len() as u64);
        }
        let held = with_caller_key(actor, tenant, |caller| {
            state.callers.lock(caller).held(caller)
        });
        if held >= state.tasks_per_caller {
            return Err(budget_share_full(state.tasks_per_caller));
        }
        if tasks.room(now, state.tasks_per_part) {
            Ok(0)
        } else {
            Err(budget_store_full())
        }
    }
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
        if let Some(task) = self
            .state
            .tasks
            .lock(charge.task)
            .entries
            .get_mut(charge.task)
        {
            task.calls = task.calls.saturating_sub(1);
            task.cost = task.cost.saturating_sub(charge.cost);
            if let Some(calls) = task.per_tool.get_mut(charge.tool) {
                *calls = calls.saturating_sub(1);
            }
        }
        Box::pin(ready(()))
    }

    fn count_refusal<'a>(
        &'a self,
        ctx: &'a CallContext,
        limit: &'a RefusalLimit,
    ) -> BoxFuture<'a, u64> {
        let caller = caller_key(ctx.actor(), ctx.tenant().unwrap_or_default());
        Box::pin(ready(self.count(ctx.task_id(), &caller, limit)))
    }

    fn forget_task<'a>(&'a self, task: &'a str) -> BoxFuture<'a, ()> {
        InMemoryBudgetStore::forget_task(self, task);
        Box::pin(ready(()))
    }

    fn refusals<'a>(
        &'a self,
        ctx: &'a CallContext,
        limit: &'a RefusalLimit,
    ) -> BoxFuture<'a, Result<u64, Rejection>> {
        let caller = (ctx.actor(), ctx.tenant().unwrap_or_default());
        Box::pin(ready(self.count_within(ctx.task_id(), caller, limit)))
    }

    fn task_usage<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<BudgetUsage, Rejection>> {
        let usage = self.state.tasks.lock(task).entries.get(task).map_or_else(
            BudgetUsage::default,
            |task| BudgetUsage {
                calls: task.calls,
                cost: task.cost,
            },
        );
        Box::pin(ready(Ok(usage)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::budget::limits::{CircuitBreaker, RateLimit};
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
            tenant: None,
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
            counted += part.entries.values().map(|usage| usage.calls).sum::<u64>();
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

    /// The measured attack: one caller counts a task more than its share, as fast as it can;
    /// its last is refused with its own share's code, its tasks go on, another caller (and
    /// the same actor in another tenant) is served, and a task it ends gives its place back.
    #[test]
    fn one_caller_over_its_share_is_refused_and_others_are_served() {
        let store = InMemoryBudgetStore::default().with_capacity(BudgetCapacity {
            tasks: 1600,
            actors: 1600,
            tasks_per_caller: Some(10),
        });
        let limits = BudgetLimits {
            max_calls_per_task: Some(5),
            ..BudgetLimits::default()
        };
        let of = |task: &'static str, actor: &'static str, tenant: Option<&'static str>| Charge {
            actor,
            tenant,
            ..charge(task, "a", None)
        };
        let tasks: Vec<String> = (0..11).map(|index| format!("t{index}")).collect();
        for task in &tasks[..10] {
            assert_eq!(
                code(store.check_and_record(charge(task, "a", None), &limits)),
                None
            );
        }
        let refused = store
            .check_and_record(charge(&tasks[10], "a", None), &limits)
            .unwrap_err();
        assert_eq!(refused.code(), RejectionCode::BudgetShareFull);
        assert!(refused.retryable());
        assert!(
            refused.message().contains("10 tasks"),
            "{}",
            refused.message()
        );
        assert_eq!(store.held_by("alice", None), 10);
        // Its tasks go on; others are served.
        assert_eq!(
            code(store.check_and_record(charge("t0", "a", None), &limits)),
            None
        );
        assert_eq!(
            code(store.check_and_record(of("b0", "bob", None), &limits)),
            None
        );
        assert_eq!(
            code(store.check_and_record(of("c0", "alice", Some("acme")), &limits)),
            None,
            "the same actor in another tenant is another caller"
        );
        // Another caller's call in one of its tasks takes nothing from either share.
        assert_eq!(
            code(store.check_and_record(of("t1", "bob", None), &limits)),
            None
        );
        assert_eq!(store.held_by("bob", None), 1);
        // A first call refused by a limit takes no place.
        let dear = Charge {
            cost: 100,
            ..of("b1", "bob", None)
        };
        let capped = BudgetLimits {
            max_cost_per_task: Some(50),
            ..limits.clone()
        };
        assert_eq!(
            code(store.check_and_record(dear, &capped)),
            Some(RejectionCode::BudgetCostExceeded)
        );
        assert_eq!(store.held_by("bob", None), 1);
        // A task it ends gives its place back.
        store.forget_task("t0");
        assert_eq!(store.held_by("alice", None), 9);
        assert_eq!(
            code(store.check_and_record(charge(&tasks[10], "a", None), &limits)),
            None
        );
        assert_eq!(
            code(store.check_and_record(charge("t11", "a", None), &limits)),
            Some(RejectionCode::BudgetShareFull)
        );
        for task in &tasks {
            store.forget_task(task);
        }
        assert_eq!(store.held_by("alice", None), 0);
        let mut kept = 0;
        store.state.callers.each(|part| kept += part.callers());
        assert_eq!(
            kept, 2,
            "bob and alice of acme; alice, with none, is not kept"
        );
    }

    #[test]
    fn threads_starting_tasks_of_one_caller_take_exactly_its_share() {
        let store = InMemoryBudgetStore::default().with_capacity(BudgetCapacity {
            tasks: 16_000,
            actors: 16_000,
            tasks_per_caller: Some(50),
        });
        let limits = BudgetLimits {
            max_calls_per_task: Some(1),
            ..BudgetLimits::default()
        };
        let admitted = admitted_by_threads(&store, &limits, |thread, index| {
            (
                format!("t{thread}-{index}"),
                "alice".to_owned(),
                "a".to_owned(),
            )
        });
        assert_eq!(admitted, 50);
        assert_eq!(store.held_by("alice", None), 50);
        assert_eq!(store.held().0, 50, "a refused task is not held");
    }

    #[test]
    fn the_default_share_is_a_hundredth() {
        assert_eq!(BudgetCapacity::default().tasks_per_caller(), 1000);
        let small = BudgetCapacity {
            tasks: 50,
            ..BudgetCapacity::default()
        };
        assert_eq!(small.tasks_per_caller(), 1);
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

    /// The key of the caller `c`, whose refusals the tests count.
    fn caller_c() -> String {
        caller_key("c", "")
    }

    fn refusals_of(store: &InMemoryBudgetStore, task: &str, limit: &RefusalLimit) -> u64 {
        store.count_within(task, ("c", ""), limit).unwrap()
    }

    #[test]
    fn refusals_leave_their_window_and_only_the_latest_are_kept() {
        let (store, clock) = manual_clock();
        let limit = RefusalLimit {
            refusals: 3,
            per: Duration::from_millis(1000),
        };
        assert_eq!(store.count("t", &caller_c(), &limit), 1);
        clock.store(400, Ordering::SeqCst);
        assert_eq!(store.count("t", &caller_c(), &limit), 2);
        assert_eq!(store.count("t", &caller_c(), &limit), 3);
        assert_eq!(
            store.count("t", &caller_c(), &limit),
            3,
            "the latest 3 are kept, no more"
        );
        assert_eq!(refusals_of(&store, "other", &limit), 0);
        clock.store(999, Ordering::SeqCst);
        assert_eq!(refusals_of(&store, "t", &limit), 3);
        clock.store(1400, Ordering::SeqCst);
        assert_eq!(refusals_of(&store, "t", &limit), 0, "older than the window");

        let whole = RefusalLimit::whole_task(2);
        store.count("w", &caller_c(), &whole);
        clock.store(u64::from(u32::MAX), Ordering::SeqCst);
        assert_eq!(store.count("w", &caller_c(), &whole), 2);
        assert_eq!(
            refusals_of(&store, "w", &whole),
            2,
            "a whole life never ends"
        );
    }

    /// Of `tasks` tasks, charged once each, how many the store admits and how many it refuses
    /// with `budget_store_full`.
    fn admitted_and_full(
        store: &InMemoryBudgetStore,
        limits: &BudgetLimits,
        prefix: &str,
        tasks: usize,
    ) -> (usize, usize) {
        let (mut admitted, mut full) = (0, 0);
        for index in 0..tasks {
            let task = format!("{prefix}{index}");
            match code(store.check_and_record(charge(&task, "a", None), limits)) {
                None => admitted += 1,
                Some(RejectionCode::BudgetStoreFull) => full += 1,
                Some(other) => panic!("{other}"),
            }
        }
        (admitted, full)
    }

    #[test]
    fn a_full_store_refuses_new_tasks_and_never_forgets_a_budget_by_itself() {
        let (store, clock) = manual_clock();
        let store = store.with_capacity(BudgetCapacity {
            tasks: 32,
            actors: 1000,
            tasks_per_caller: Some(1000),
        });
        let limits = BudgetLimits {
            max_calls_per_task: Some(1),
            ..BudgetLimits::default()
        };
        let (admitted, full) = admitted_and_full(&store, &limits, "t", 200);
        assert!(
            admitted <= 32 && full >= 168,
            "{admitted} admitted, {full} refused"
        );
        assert!(store.held().0 <= 32);
        // Within its lifetime, a task that spent its budget stays spent, and holds its place.
        clock.store(59 * 60 * 1000, Ordering::SeqCst);
        assert_eq!(
            code(store.check_and_record(charge("t0", "a", None), &limits)),
            Some(RejectionCode::BudgetCallsExceeded)
        );
        let (admitted, _) = admitted_and_full(&store, &limits, "u", 200);
        assert!(admitted <= 32 - store.held().0 + 1, "nothing was forgotten");
        // Ended tasks, forgotten by the application, make room.
        for index in 0..200 {
            store.forget_task(&format!("t{index}"));
        }
        assert_eq!(store.held().0, 0);
        let (admitted, _) = admitted_and_full(&store, &limits, "v", 1);
        assert_eq!(admitted, 1);
    }

    fn block_on<T>(future: BoxFuture<'_, T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    /// One caller's refusals in task after task are held in its own share: past it, its new
    /// tasks' calls are refused with its share's code (rather than go uncounted by the refusal
    /// limit), and another caller's refusals are counted as before.
    #[test]
    fn one_callers_refusals_are_held_in_its_share() {
        let store = InMemoryBudgetStore::default().with_capacity(BudgetCapacity {
            tasks: 1000,
            actors: 1000,
            tasks_per_caller: Some(3),
        });
        let limit = RefusalLimit {
            refusals: 5,
            per: Duration::from_secs(60),
        };
        let mallory = |task: &str| CallContext::new("mallory").with_task_id(task);
        for task in ["m0", "m1", "m2", "m3"] {
            block_on(store.count_refusal(&mallory(task), &limit));
        }
        assert_eq!(block_on(store.refusals(&mallory("m2"), &limit)).unwrap(), 1);
        let refused = block_on(store.refusals(&mallory("m3"), &limit)).unwrap_err();
        assert_eq!(refused.code(), RejectionCode::BudgetShareFull);
        let alice = CallContext::new("alice").with_task_id("a0");
        assert_eq!(block_on(store.count_refusal(&alice, &limit)), 1);
        assert_eq!(block_on(store.refusals(&alice, &limit)).unwrap(), 1);
        store.forget_task("m0");
        assert_eq!(block_on(store.refusals(&mallory("m3"), &limit)).unwrap(), 0);
    }

    /// A task idle past its lifetime is ended by the store: its place goes back to its
    /// caller's share and the store, and its calls are refused `task_expired` for as long as
    /// the store remembers it, never given a fresh budget; after that its id is a new task.
    #[test]
    fn an_idle_task_ends_on_its_own_and_stays_refused_while_remembered() {
        let (store, clock) = manual_clock();
        let lifetime = TaskLifetime {
            idle: Duration::from_secs(10),
            absolute: Duration::from_secs(100),
            remembered: Duration::from_secs(1000),
        };
        let store = store
            .with_capacity(BudgetCapacity {
                tasks: 100,
                actors: 100,
                tasks_per_caller: Some(2),
            })
            .with_lifetime(lifetime);
        let limits = BudgetLimits {
            max_calls_per_task: Some(1),
            ..BudgetLimits::default()
        };
        for task in ["t0", "t1"] {
            assert_eq!(
                code(store.check_and_record(charge(task, "a", None), &limits)),
                None
            );
        }
        assert_eq!(
            code(store.check_and_record(charge("t2", "a", None), &limits)),
            Some(RejectionCode::BudgetShareFull)
        );
        clock.store(10_000, Ordering::SeqCst);
        for task in ["t2", "t3"] {
            assert_eq!(
                code(store.check_and_record(charge(task, "a", None), &limits)),
                None,
                "both idle tasks ended and gave their places back"
            );
        }
        assert_eq!(store.held_by("alice", None), 2);
        for task in ["t0", "t1"] {
            let expired = store
                .check_and_record(charge(task, "a", None), &limits)
                .unwrap_err();
            assert_eq!(expired.code(), RejectionCode::TaskExpired);
            assert!(!expired.retryable());
        }
        // A busy task ends too, once it is as old as a task may be.
        store.forget_task("t3");
        let busy = BudgetLimits {
            max_calls_per_task: Some(100),
            ..BudgetLimits::default()
        };
        for second in (10..=109).step_by(9) {
            clock.store(second * 1000, Ordering::SeqCst);
            assert_eq!(
                code(store.check_and_record(charge("t4", "a", None), &busy)),
                None,
                "{second} s"
            );
        }
        clock.store(110_000, Ordering::SeqCst);
        assert_eq!(
            code(store.check_and_record(charge("t4", "a", None), &busy)),
            Some(RejectionCode::TaskExpired)
        );
        clock.store(10_000 + 1_000_000, Ordering::SeqCst);
        assert_eq!(
            code(store.check_and_record(charge("t0", "a", None), &limits)),
            None,
            "forgotten after a while, its id is a new task"
        );
    }

    #[test]
    fn tasks_that_can_refuse_nothing_are_forgotten_when_room_is_needed() {
        let (store, clock) = manual_clock();
        let store = store.with_capacity(BudgetCapacity {
            tasks: 32,
            actors: 32,
            tasks_per_caller: Some(1000),
        });
        let limit = RefusalLimit {
            refusals: 2,
            per: Duration::from_millis(1000),
        };
        for index in 0..200 {
            store.count(&format!("t{index}"), &caller_c(), &limit);
        }
        assert!(store.held().0 <= 32);
        let unknown = (0..200)
            .filter(|index| {
                store
                    .count_within(&format!("t{index}"), ("c", ""), &limit)
                    .map_err(|refusal| refusal.code())
                    == Err(RejectionCode::BudgetStoreFull)
            })
            .count();
        assert!(
            unknown >= 168,
            "a task the full store does not hold is refused: {unknown}"
        );
        // Without a per-task limit, a call records nothing of its task, and a rate limit
        // holds only its actor's window.
        let limits = BudgetLimits {
            rate_limit: Some(RateLimit {
                calls: 5,
                per: Duration::from_millis(1000),
            }),
            ..BudgetLimits::default()
        };
        let callers = (0..200)
            .filter(|index| {
                let actor = format!("a{index}");
                let charge = Charge {
                    actor: &actor,
                    ..charge("t0", "a", None)
                };
                store.check_and_record(charge, &limits).is_ok()
            })
            .count();
        assert!(callers <= 32, "{callers}");
        assert!(store.held().1 <= 32);
        clock.store(1000, Ordering::SeqCst);
        assert_eq!(
            refusals_of(&store, "new", &limit),
            0,
            "the old refusals left their window"
        );
        for index in 200..400 {
            store.count(&format!("t{index}"), &caller_c(), &limit);
            let actor = format!("a{index}");
            let charge = Charge {
                actor: &actor,
                ..charge("t0", "a", None)
            };
            assert_eq!(
                code(store.check_and_record(charge, &limits)),
                None,
                "{index}"
            );
            clock.fetch_add(1000, Ordering::SeqCst);
        }
        let (tasks, actors) = store.held();
        assert!(
            tasks <= 32 && actors <= 32,
            "{tasks} tasks, {actors} actors"
        );
    }
}
