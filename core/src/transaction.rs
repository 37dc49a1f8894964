//! Task-level transactions: calls dispatched as steps, compensated in reverse order when the
//! task is abandoned.
//!
//! A step that completes is kept with its arguments and output. When a step's tool fails (the
//! execute gate's refusals: its effect may be half applied), when the transaction is aborted,
//! or when it is dropped without [`Transaction::commit`], the compensations
//! (`#[tool(rollback = ...)]`) of the completed steps run, last first, each audited; a failing
//! compensation is reported and the others still run. A refusal by an earlier gate changed
//! nothing, so the agent may correct its call and go on. A tool not declared `idempotent` never
//! runs twice for one call id: repeating the id returns the first outcome.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use serde_json::Value;

use crate::{CallContext, Gate, Outcome, Registry, ToolCall, ToolError};

/// A sequence of calls that stands or falls together.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use portcullis_core::{CallContext, Registry};
///
/// let registry = Registry::builder().build().unwrap();
/// let transaction = registry.transaction(&CallContext::new("alice"));
/// // `transaction.dispatch(&call).await` for each step, then `commit()`, or:
/// let report = transaction.abort().await;
/// assert!(report.is_empty());
/// # });
/// ```
pub struct Transaction {
    registry: Registry,
    ctx: CallContext,
    steps: Vec<Step>,
    report: Vec<Compensation>,
    finished: bool,
}

/// A completed step: the call, its canonical arguments (what the tool received) and its
/// outcome.
struct Step {
    call: ToolCall,
    canonical: Value,
    outcome: Outcome,
}

/// What happened to one completed step when the transaction was rolled back.
#[derive(Debug, Clone, PartialEq)]
pub struct Compensation {
    /// The tool of the step.
    pub tool: String,
    /// The step's call id.
    pub call_id: String,
    /// What the compensation did.
    pub result: CompensationResult,
}

/// How a step's compensation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum CompensationResult {
    /// The compensation ran and succeeded.
    Compensated,
    /// The tool declares no rollback (it is read-only, or its effect is irreversible).
    NothingToUndo,
    /// The compensation failed (or panicked); the step's effect remains.
    Failed(ToolError),
}

impl Registry {
    /// Starts a transaction for the task of `ctx`.
    pub fn transaction(&self, ctx: &CallContext) -> Transaction {
        Transaction {
            registry: self.clone(),
            ctx: ctx.clone(),
            steps: Vec::new(),
            report: Vec::new(),
            finished: false,
        }
    }
}

impl Transaction {
    /// Dispatches `call` as the next step.
    ///
    /// If a tool that is not idempotent already completed under the same call id in this
    /// transaction, the first outcome is returned and nothing runs again. If the tool fails,
    /// the transaction rolls back at once ([`Transaction::rollback_report`] tells how) and
    /// ends. A step that waits for approval is returned as it is and is not part of the
    /// transaction.
    pub async fn dispatch(&mut self, call: &ToolCall) -> Outcome {
        if self.finished {
            return Outcome::Rejected(
                crate::Rejection::new(
                    crate::RejectionCode::ToolFailed,
                    "this transaction has ended: start another for more steps",
                )
                .with_reason("transaction_ended")
                .with_retryable(false),
            );
        }
        // The registry remembers repeats too, but it may be told to remember nothing, and a
        // repeat must never become a second step to compensate.
        let repeated = self.steps.iter().find(|step| {
            step.call.id == call.id
                && step.call.name == call.name
                && self
                    .registry
                    .contract(&call.name)
                    .is_some_and(|contract| !contract.idempotent())
        });
        if let Some(step) = repeated {
            return step.outcome.clone();
        }
        let kept = self.registry.dispatch_keeping(&self.ctx, call, true).await;
        let outcome = kept.outcome;
        match (&outcome, kept.canonical) {
            // A repeat of a call another transaction of the task ran is not this one's to undo.
            _ if kept.repeated => {}
            (Outcome::Completed(_), Some(canonical)) => self.steps.push(Step {
                call: call.clone(),
                canonical,
                outcome: outcome.clone(),
            }),
            (Outcome::Rejected(rejection), _) if rejection.gate() == Gate::Execute => {
                self.report = self.roll_back().await;
                self.finished = true;
            }
            _ => {}
        }
        outcome
    }

    /// What the rollback after a failed step did, last step first; empty if none ran.
    pub fn rollback_report(&self) -> &[Compensation] {
        &self.report
    }

    /// Ends the transaction and keeps every step's effect.
    pub fn commit(mut self) {
        self.finished = true;
    }

    /// Ends the transaction and compensates every completed step, last first.
    pub async fn abort(mut self) -> Vec<Compensation> {
        self.finished = true;
        self.roll_back().await
    }

    async fn roll_back(&mut self) -> Vec<Compensation> {
        let mut report = Vec::with_capacity(self.steps.len());
        while let Some(step) = self.steps.pop() {
            let output = step.outcome.output().cloned().unwrap_or_default();
            let result = self
                .registry
                .compensate(&self.ctx, &step.call, &step.canonical, output)
                .await;
            report.push(Compensation {
                tool: step.call.name,
                call_id: step.call.id,
                result,
            });
        }
        report
    }
}

impl Drop for Transaction {
    /// Compensates the completed steps of a transaction dropped without `commit` or `abort`.
    /// No async runtime can be assumed here, so the compensations run to the end on a thread of
    /// their own, with a minimal executor; a compensation that needs a particular runtime
    /// should be run with [`Transaction::abort`] instead.
    fn drop(&mut self) {
        if self.finished || self.steps.is_empty() {
            return;
        }
        let mut abandoned = Transaction {
            registry: self.registry.clone(),
            ctx: self.ctx.clone(),
            steps: std::mem::take(&mut self.steps),
            report: Vec::new(),
            finished: true,
        };
        let runner = thread::Builder::new()
            .name("portcullis-rollback".to_owned())
            .spawn(move || {
                block_on(abandoned.roll_back());
            });
        if let Err(error) = runner {
            tracing::error!(%error, "the compensations of an abandoned transaction could not start");
        }
    }
}

/// Runs `future` to completion on this thread, parking it while the future waits.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        match future.as_mut().poll(&mut context) {
            Poll::Ready(output) => return output,
            Poll::Pending => thread::park(),
        }
    }
}
