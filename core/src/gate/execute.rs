//! The execute gate: runs the tool's body, contains its panics, enforces its timeout, and turns
//! its output into JSON.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_timer::Delay;
use serde::Serialize;

use crate::tool::{BoxFuture, Invocation};
use crate::{CallContext, Outcome, Rejection, RejectionCode, Tool, ToolError};

/// A tool run that either finished while it was started (a sync tool, or a panic) or is still
/// running (an async tool).
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
    let invocation = match catch_unwind(AssertUnwindSafe(|| tool.call(ctx, args))) {
        Ok(invocation) => invocation,
        Err(payload) => return Execution::Finished(panicked(payload)),
    };
    match invocation {
        Invocation::Ready(result) => Execution::Finished(completed(result)),
        Invocation::Pending(future) => {
            let timeout = tool.contract().timeout();
            Execution::Running(Box::pin(async move {
                match (Contained { future }).with_deadline(timeout).await {
                    Finish::Done(Ok(result)) => completed(result),
                    Finish::Done(Err(payload)) => panicked(payload),
                    Finish::TimedOut(limit) => Outcome::Rejected(
                        Rejection::new(
                            RejectionCode::ToolTimeout,
                            format!("the tool did not finish within {} ms", limit.as_millis()),
                        )
                        .with_hint("the call may succeed later; its effect, if any, is unknown"),
                    ),
                }
            }))
        }
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

fn panicked(payload: Box<dyn Any + Send>) -> Outcome {
    let detail = payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned());
    Outcome::Rejected(Rejection::new(
        RejectionCode::ToolPanicked,
        format!("the tool failed unexpectedly ({detail})"),
    ))
}

/// A future whose panics come back as `Err` instead of unwinding through the caller.
struct Contained<'a, T> {
    future: BoxFuture<'a, T>,
}

impl<T> Future for Contained<'_, T> {
    type Output = Result<T, Box<dyn Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let future = self.future.as_mut();
        match catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}

impl<'a, T> Contained<'a, T> {
    fn with_deadline(self, limit: Option<Duration>) -> Deadline<'a, T> {
        Deadline {
            inner: self,
            timer: limit.map(|limit| (Delay::new(limit), limit)),
        }
    }
}

enum Finish<T> {
    Done(T),
    TimedOut(Duration),
}

/// Races a future against an optional timer, on whatever executor polls it: the timer runs on
/// its own thread, so no particular async runtime is needed.
struct Deadline<'a, T> {
    inner: Contained<'a, T>,
    timer: Option<(Delay, Duration)>,
}

impl<T> Future for Deadline<'_, T> {
    type Output = Finish<Result<T, Box<dyn Any + Send>>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Poll::Ready(done) = Pin::new(&mut this.inner).poll(cx) {
            return Poll::Ready(Finish::Done(done));
        }
        if let Some((timer, limit)) = &mut this.timer {
            if Pin::new(timer).poll(cx).is_ready() {
                return Poll::Ready(Finish::TimedOut(*limit));
            }
        }
        Poll::Pending
    }
}
