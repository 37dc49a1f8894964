//! The budget gate: the task, the actor and the tool are within their limits. The counting is
//! the [`BudgetStore`]'s; this gate builds the charge and reports how calls ended.

use serde_json::Value;

use crate::{Arguments, BudgetLimits, BudgetStore, CallContext, Charge, Outcome, Rejection};
use crate::{RejectionCode, ToolContract};

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

    /// Reserves one call, or refuses it without counting anything.
    pub(crate) async fn reserve(
        &self,
        ctx: &CallContext,
        contract: &ToolContract,
        arguments: &Arguments,
    ) -> Result<(), Rejection> {
        let canonical = self
            .limits
            .stalled_loop_after
            .map(|_| canonical_arguments(arguments));
        let charge = Charge {
            task: ctx.task_id(),
            actor: ctx.actor(),
            tool: contract.name(),
            cost: contract.cost(),
            tool_max_calls_per_task: contract.max_calls_per_task(),
            canonical_arguments: canonical.as_deref(),
        };
        self.store.reserve(charge, &self.limits).await
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

/// The arguments as compact JSON with every object's keys sorted, so that the same call
/// written with its keys in another order is the same call.
fn canonical_arguments(arguments: &Arguments) -> String {
    fn sorted(value: Value) -> Value {
        match value {
            Value::Object(entries) => {
                let mut entries: Vec<(String, Value)> = entries.into_iter().collect();
                entries.sort_by(|(a, _), (b, _)| a.cmp(b));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(key, value)| (key, sorted(value)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
            other => other,
        }
    }
    let value = match arguments {
        // Text that passed the decode gate is valid JSON.
        Arguments::Text(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        Arguments::Json(value) => value.clone(),
    };
    sorted(value).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_make_another_call() {
        let a = canonical_arguments(&Arguments::Text(r#"{"b":1,"a":{"d":2,"c":3}}"#.into()));
        let b = canonical_arguments(&Arguments::Json(json!({"a": {"c": 3, "d": 2}, "b": 1})));
        assert_eq!(a, b);
        assert_eq!(a, r#"{"a":{"c":3,"d":2},"b":1}"#);
    }
}
