//! The budget gate: the task, the actor and the tool are within their limits. The counting is
//! the [`BudgetStore`]'s; this gate builds the charge and reports how calls ended.

pub(crate) mod judge;
pub(crate) mod limits;
pub(crate) mod memory;
pub(crate) mod store;

use super::decode::Canonical;
use crate::context::CallContext;
use crate::contract::ToolContract;
use crate::gate::budget::limits::BudgetLimits;
use crate::gate::budget::store::{BudgetStore, Charge};
use crate::outcome::Outcome;
use crate::rejection::Rejection;
use crate::rejection::RejectionCode;
use crate::schema::check::SchemaCheck;

fn charge<'a>(
    ctx: &'a CallContext,
    contract: &'a ToolContract,
    canonical_arguments: Option<&'a str>,
) -> Charge<'a> {
    Charge {
        task: ctx.task_id(),
        actor: ctx.actor(),
        tenant: ctx.tenant(),
        tool: contract.name(),
        cost: contract.cost(),
        tool_max_calls_per_task: contract.max_calls_per_task(),
        canonical_arguments,
    }
}

/// The registry's limits and the store that counts against them.
pub(crate) struct Budget {
    pub(crate) limits: BudgetLimits,
    pub(crate) store: Box<dyn BudgetStore>,
}

impl Budget {
    /// Whether calls of a tool with `contract` are counted at all.
    pub(crate) fn applies_to(&self, contract: &ToolContract) -> bool {
        self.limits != BudgetLimits::default() || contract.max_calls_per_task().is_some()
    }

    /// Reserves one call, or refuses it without counting anything. The stalled-loop breaker
    /// compares canonical arguments: the same call with its keys in another order, `5.0` for
    /// `5`, or a set's elements in another order, is the same call.
    pub(crate) async fn reserve(
        &self,
        ctx: &CallContext,
        contract: &ToolContract,
        canonical: &Canonical<'_>,
        check: &SchemaCheck,
    ) -> Result<(), Rejection> {
        let canonical = match self.limits.stalled_loop_after {
            Some(_) => Some(check.identity_text(canonical.get()?)),
            None => None,
        };
        let charge = charge(ctx, contract, canonical.as_deref());
        self.store.reserve(charge, &self.limits).await
    }

    /// Gives back the reservation of a call of `tool` that will not run: one call, and `cost`.
    pub(crate) async fn release(&self, ctx: &CallContext, tool: &str, cost: u64) {
        let charge = Charge {
            task: ctx.task_id(),
            actor: ctx.actor(),
            tenant: ctx.tenant(),
            tool,
            cost,
            tool_max_calls_per_task: None,
            canonical_arguments: None,
        };
        self.store.release(charge).await;
    }

    /// Tells the store whether the tool failed, for the circuit breaker.
    pub(crate) async fn settle(&self, contract: &ToolContract, outcome: &Outcome) {
        let failed = matches!(
            outcome.code(),
            Some(
                RejectionCode::ToolFailed
                    | RejectionCode::ToolTimeout
                    | RejectionCode::ToolPanicked
            )
        );
        self.store
            .settle(contract.name(), failed, &self.limits)
            .await;
    }
}
