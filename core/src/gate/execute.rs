//! The execute gate: runs the tool's body, enforces its timeout, turns its output into JSON, and
//! contains every panic of the code a call runs.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_timer::Delay;
use serde::Serialize;

use crate::context::CallContext;
use crate::contract::ToolContract;
use crate::future::{BoxFuture, Contained};
use crate::outcome::Outcome;
use crate::rejection::{Rejection, RejectionCode};
use crate::tool::Invocation;
use crate::tool::{Tool, ToolError};

/// A tool run that either finished while it was started (a sync tool, or a refusal) or is
/// still running (an async tool).
pub(crate) enum Execution<'a> {
    Finished(Outcome),
    Running(BoxFuture<'a, Outcome>),
}

/// Runs `tool` on arguments that passed every gate before this one.
pub(crate) fn execute<'a, T: Tool>(
    tool: &'a T,
    ctx: &'a CallContext,
    args: T::Args,
) -> Execution<'a> {
    match tool.call(ctx, args) {
        Invocation::Ready(result) => Execution::Finished(completed(result)),
        Invocation::Pending(running) => Execution::Running(within_timeout(
            Box::pin(Completing { running }),
            tool.contract(),
        )),
    }
}

/// An async tool's run, its result turned into the call's outcome when it ends. A future by
/// hand rather than an `async` block: it is compiled once per tool, and this is less code.
struct Completing<'a, O> {
    running: BoxFuture<'a, Result<O, ToolError>>,
}

impl<O: Serialize> Future for Completing<'_, O> {
    type Output = Outcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        self.running.as_mut().poll(cx).map(completed)
    }
}

/// An async tool's run, refused with `tool_timeout` once it outlasts the contract's timeout.
fn within_timeout<'a>(
    running: BoxFuture<'a, Outcome>,
    contract: &ToolContract,
) -> BoxFuture<'a, Outcome> {
    let (timeout, idempotent) = (contract.timeout(), contract.idempotent());
    Box::pin(async move {
        match with_deadline(running, timeout).await {
            Finish::Done(outcome) => outcome,
            Finish::TimedOut(limit) => Outcome::Rejected(
                Rejection::new(
                    RejectionCode::ToolTimeout,
                    format!("the tool did not finish within {} ms", limit.as_millis()),
                )
                .with_hint("the call may still have taken effect; check before repeating it")
                // Repeating a call whose effect is unknown is safe only if it is idempotent.
                .with_retryable(idempotent),
            ),
        }
    })
}

/// Runs `start` (a call's decode, validate and execute, where the tool author's code runs: the
/// tool, custom deserializers and validators, `#[one_of]` functions, the output's serialization)
/// and the future it may leave running, turning any panic into a `tool_panicked` refusal.
pub(crate) fn contained<'a>(start: impl FnOnce() -> Execution<'a>) -> Execution<'a> {
    match catch_unwind(AssertUnwindSafe(start)) {
        Ok(Execution::Finished(outcome)) => Execution::Finished(outcome),
        Ok(Execution::Running(future)) => Execution::Running(Box::pin(async move {
            (Contained { future }).await.unwrap_or_else(|()| panicked())
        })),
        Err(_) => Execution::Finished(panicked()),
    }
}

fn completed<O: Serialize>(result: Result<O, ToolError>) -> Outcome {
    match result {
        Ok(output) => match serde_json::to_value(&output) {
            Ok(value) => Outcome::Completed(value),
            Err(error) => Outcome::Rejected(
                Rejection::new(
                    RejectionCode::ToolFailed,
                    format!("the tool's output could not be serialized: {error}"),
                )
                .with_reason("output_not_serializable")
                .with_retryable(false),
            ),
        },
        Err(error) => Outcome::Rejected(
            Rejection::new(RejectionCode::ToolFailed, error.message())
                .with_reason(error.code())
                .with_retryable(error.is_retryable()),
        ),
    }
}

/// The refusal for a panic. The panic's own message stays out of it: it may hold anything (a
/// connection string in an `unwrap` on an error); the process's panic hook has already reported
/// it to the operator.
pub(crate) fn panicked() -> Outcome {
    Outcome::Rejected(Rejection::new(
        RejectionCode::ToolPanicked,
        "the tool failed unexpectedly; the failure was reported to its operator",
    ))
}

/// The refusal of a call that passed every gate of a registry that runs dry.
pub(crate) fn dry_run(contract: &ToolContract) -> Rejection {
    Rejection::new(
        RejectionCode::DryRun,
        format!(
            "the call passed every gate, and `{}` was not run: the registry runs dry",
            contract.name()
        ),
    )
}

enum Finish<T> {
    Done(T),
    TimedOut(Duration),
}

/// Races `future` against an optional timer, on whatever executor polls it: the timer runs on
/// its own thread, so no particular async runtime is needed.
fn with_deadline<T>(future: BoxFuture<'_, T>, limit: Option<Duration>) -> Deadline<'_, T> {
    Deadline {
        future,
        timer: limit.map(|limit| (Delay::new(limit), limit)),
    }
}

struct Deadline<'a, T> {
    future: BoxFuture<'a, T>,
    timer: Option<(Delay, Duration)>,
}

impl<T> Future for Deadline<'_, T> {
    type Output = Finish<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Poll::Ready(done) = this.future.as_mut().poll(cx) {
            return Poll::Ready(Finish::Done(done));
        }
        if let Some((timer, limit)) = &mut this.timer
            && Pin::new(timer).poll(cx).is_ready()
        {
            return Poll::Ready(Finish::TimedOut(*limit));
        }
        Poll::Pending
    }
}
