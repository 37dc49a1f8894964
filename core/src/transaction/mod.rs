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

use crate::call::ToolCall;
use crate::context::CallContext;
use crate::encoding::random_id;
use crate::outcome::Outcome;
use crate::registry::Registry;
use crate::rejection::Gate;
use crate::rollback::Compensation;
use crate::rollback::store::StoredStep;
use crate::time::now_ms;

/// A sequence of calls that stands or falls together.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use portcullis_core::{CallContext, Registry};
///
/// let registry = Registry::builder().build().unwrap();
/// let transaction = registry.transaction(&CallContext::new("alice"));
/// // `transaction.dispatch(&call).await` for each step, then `commit().await`, or:
/// let report = transaction.abort().await;
/// assert!(report.is_empty());
/// # });
/// ```
pub struct Transaction {
    registry: Registry,
    /// The transaction's id in the registry's transaction store.
    id: String,
    ctx: CallContext,
    steps: Vec<Step>,
    report: Vec<Compensation>,
    finished: bool,
}

/// A completed step: the call, its canonical arguments (what the tool received) and its
/// outcome.
struct Step {
    /// Its place among the transaction's steps, as the store knows it.
    index: usize,
    call: ToolCall,
    canonical: Value,
    outcome: Outcome,
}

impl Registry {
    /// Starts a transaction for the task of `ctx`.
    pub fn transaction(&self, ctx: &CallContext) -> Transaction {
        Transaction {
            registry: self.clone(),
            id: random_id("transaction"),
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
                crate::rejection::Rejection::new(
                    crate::rejection::RejectionCode::ToolFailed,
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
            (Outcome::Completed(output), Some(canonical)) => {
                let step = Step {
                    index: self.steps.len(),
                    call: call.clone(),
                    canonical,
                    outcome: outcome.clone(),
                };
                let kept = self.keep(&step, output.clone()).await;
                self.steps.push(step);
                if let Err(error) = kept {
                    // A step whose compensation could be lost in a crash is not kept open.
                    tracing::error!(%error, "a transaction's step could not be stored; the transaction is rolled back");
                    self.report = self.roll_back().await;
                    self.finished = true;
                }
            }
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
    pub async fn commit(mut self) {
        self.finished = true;
        if let Some(durable) = &self.registry.settings().transactions {
            durable.store.finish(&self.id).await;
        }
    }

    /// Stores a completed step, where the registry keeps transactions durably.
    async fn keep(&self, step: &Step, output: Value) -> std::io::Result<()> {
        let Some(durable) = &self.registry.settings().transactions else {
            return Ok(());
        };
        let stored = StoredStep {
            call: step.call.clone(),
            canonical: step.canonical.clone(),
            output,
            compensated: false,
        };
        let lease_until = now_ms().saturating_add(durable.lease_ms());
        durable
            .store
            .record_step(&self.id, &self.ctx, &stored, lease_until)
            .await
    }

    /// Ends the transaction and compensates every completed step, last first.
    pub async fn abort(mut self) -> Vec<Compensation> {
        self.finished = true;
        self.roll_back().await
    }

    async fn roll_back(&mut self) -> Vec<Compensation> {
        let steps = std::mem::take(&mut self.steps).into_iter().map(|step| {
            let output = step.outcome.output().cloned().unwrap_or_default();
            (step.index, step.call, step.canonical, output)
        });
        self.registry
            .compensate_steps(&self.id, &self.ctx, steps.collect())
            .await
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
            id: std::mem::take(&mut self.id),
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

impl Registry {
    /// Compensates `steps` (index, call, canonical arguments, output), last first, each
    /// audited and, where transactions are stored, marked as it is done; then ends the
    /// transaction in the store.
    async fn compensate_steps(
        &self,
        id: &str,
        ctx: &CallContext,
        steps: Vec<(usize, ToolCall, Value, Value)>,
    ) -> Vec<Compensation> {
        let durable = self.settings().transactions.as_ref();
        let mut report = Vec::with_capacity(steps.len());
        for (index, call, canonical, output) in steps.into_iter().rev() {
            let result = self.compensate(ctx, &call, &canonical, output).await;
            if let Some(durable) = durable {
                durable.store.mark_compensated(id, index).await;
            }
            report.push(Compensation {
                tool: call.name,
                call_id: call.id,
                result,
            });
        }
        if let Some(durable) = durable {
            durable.store.finish(id).await;
        }
        report
    }

    /// Compensates the transactions whose worker stopped before committing or rolling them
    /// back (it crashed, or held them past the store's lease): for each, the steps not yet
    /// compensated, last first, each audited. Each abandoned transaction goes to one
    /// recoverer; a compensation is marked done as it finishes, so a recoverer that crashes in
    /// turn leaves only the rest to the next one (the one it was running when it crashed may
    /// run again). Returns each recovered transaction's id and report; empty without a
    /// transaction store.
    pub async fn recover(&self) -> Vec<(String, Vec<Compensation>)> {
        let Some(durable) = &self.settings().transactions else {
            return Vec::new();
        };
        let now = now_ms();
        let abandoned = durable
            .store
            .take_abandoned(now, now.saturating_add(durable.lease_ms()))
            .await;
        let mut recovered = Vec::with_capacity(abandoned.len());
        for transaction in abandoned {
            let owed = transaction
                .steps
                .into_iter()
                .enumerate()
                .filter(|(_, step)| !step.compensated)
                .map(|(index, step)| (index, step.call, step.canonical, step.output))
                .collect();
            let report = self
                .compensate_steps(&transaction.id, &transaction.ctx, owed)
                .await;
            recovered.push((transaction.id, report));
        }
        recovered
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
