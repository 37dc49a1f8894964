//! Where the budget gate's counts are kept: the [`BudgetStore`] a registry asks to reserve each
//! call, check every limit and record the call in one atomic step, so that concurrent calls can
//! never overspend and a refused call records nothing; after the tool ran, the store is told
//! whether it failed, for the circuit breaker.

use std::future::ready;

use super::limits::{BudgetLimits, RefusalLimit};
use crate::context::CallContext;
use crate::future::BoxFuture;
use crate::policy::BudgetUsage;
use crate::rejection::{Rejection, RejectionCode};

/// One call the budget gate asks a store to reserve.
#[derive(Debug, Clone, Copy)]
pub struct Charge<'a> {
    /// The task the call belongs to.
    pub task: &'a str,
    /// Who calls.
    pub actor: &'a str,
    /// The caller's tenant, if any: with the actor, the caller whose share of a bounded store
    /// holds the task.
    pub tenant: Option<&'a str>,
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

    /// Counts one refusal of a call of the task of `ctx`, and returns how many it collected
    /// within `limit`'s window. A store keeps at most `limit.refusals` of a task's latest
    /// refusals, and none older than the window: only those can stop the task. A bounded store
    /// holds a task's refusals in the share of its caller ([`CallContext::actor`] in
    /// [`CallContext::tenant`]).
    fn count_refusal<'a>(
        &'a self,
        ctx: &'a CallContext,
        limit: &'a RefusalLimit,
    ) -> BoxFuture<'a, u64>;

    /// Forgets what was counted for `task`, which ended and whose id is never used again
    /// ([`Registry::end_task`](crate::Registry::end_task)). The default keeps it: a durable
    /// store is bounded by its disk, and keeping a budget never allows more.
    fn forget_task<'a>(&'a self, task: &'a str) -> BoxFuture<'a, ()> {
        let _ = task;
        Box::pin(ready(()))
    }

    /// How many refusals the task of `ctx` collected within `limit`'s window; a refusal when
    /// the store cannot tell (`budget_unavailable`; from a bounded store that does not hold the
    /// task and has no room for it, `budget_store_full`, or `budget_share_full` when its
    /// caller's share is full), and the task's call is then refused.
    fn refusals<'a>(
        &'a self,
        ctx: &'a CallContext,
        limit: &'a RefusalLimit,
    ) -> BoxFuture<'a, Result<u64, Rejection>>;

    /// What `task` spent so far: its reserved calls and their cost, for the policies that
    /// read it ([`Policy::reads_budget`](crate::Policy::reads_budget)). A store that cannot
    /// tell refuses (`budget_unavailable`), and the call is refused: the default, for a store
    /// written before policies read budgets.
    fn task_usage<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<BudgetUsage, Rejection>> {
        let _ = task;
        Box::pin(ready(Err(Rejection::new(
            RejectionCode::BudgetUnavailable,
            "the budget store cannot tell what the task spent, so no policy can judge it",
        ))))
    }
}
