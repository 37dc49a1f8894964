//! The compensation road: a completed step of an abandoned transaction undone, its
//! compensation run with the canonical arguments the tool received and the output it returned.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use serde_json::Value;

use crate::audit::{Decided, Facts};
use crate::call::ToolCall;
use crate::context::CallContext;
use crate::future::BoxFuture;
use crate::future::Contained;
use crate::gate::bound::rebind;
use crate::outcome::Outcome;
use crate::registry::Registered;
use crate::registry::Registry;
use crate::rejection::{Rejection, RejectionCode};
use crate::rollback::CompensationResult;
use crate::tool::ToolError;

impl Registry {
    /// Runs the compensation of a completed call, contained and audited.
    pub(crate) async fn compensate(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        canonical: &Value,
        output: Value,
    ) -> CompensationResult {
        let started = Instant::now();
        let Some(Registered { tool, check }) = self
            .registered(&call.name)
            .filter(|registered| registered.tool.contract().has_rollback())
        else {
            return CompensationResult::NothingToUndo;
        };
        let failed = |error| -> BoxFuture<'_, _> { Box::pin(std::future::ready(Err(error))) };
        // The tool's own code reads the output back: a panic there fails this compensation,
        // not the transaction that asked for it.
        let prepared = catch_unwind(AssertUnwindSafe(|| {
            match rebind(&**tool, check, canonical) {
                Ok(bound) => bound.compensate(ctx, output),
                Err(rejection) => Some(failed(ToolError::new(
                    "compensation_arguments_unreadable",
                    rejection.message().to_owned(),
                ))),
            }
        }));
        let compensation = prepared.unwrap_or_else(|_| Some(failed(compensation_panicked())));
        let Some(compensation) = compensation else {
            return CompensationResult::NothingToUndo;
        };
        let facts = Facts::default();
        let _ = facts.canonical.set(canonical.clone());
        let settings = self.settings();
        // A compensation changes state too: under the same write-ahead rule as the call.
        if let Some(log) = settings.audit.as_ref() {
            let contract = tool.contract();
            if contract.audit_required()
                && let Err(error) = log
                    .about_to_run(ctx, call, contract, &facts, Some("compensation"))
                    .await
            {
                tracing::error!(tool = contract.name(), %error, "a compensation could not be recorded before it ran, so it did not run");
                return CompensationResult::Failed(ToolError::new(
                    "audit_unavailable",
                    "the compensation could not be recorded before it ran, so it did not run",
                ));
            }
        }
        let result = match (Contained {
            future: compensation,
        })
        .await
        {
            Ok(Ok(())) => CompensationResult::Compensated,
            Ok(Err(error)) => CompensationResult::Failed(error),
            Err(()) => CompensationResult::Failed(compensation_panicked()),
        };
        let outcome = match &result {
            CompensationResult::Failed(error) => Outcome::Rejected(
                Rejection::new(RejectionCode::ToolFailed, error.message())
                    .with_reason(error.code()),
            ),
            _ => Outcome::Completed(Value::Null),
        };
        settings
            .record(Decided {
                ctx,
                call,
                contract: Some(tool.contract()),
                outcome: &outcome,
                duration: started.elapsed(),
                resolution: Some("compensation".to_owned()),
                original_arguments: None,
                facts: Some(&facts),
            })
            .await;
        result
    }
}

/// The failure of a compensation that panicked.
fn compensation_panicked() -> ToolError {
    ToolError::new(
        "compensation_panicked",
        "the compensation failed unexpectedly",
    )
}
