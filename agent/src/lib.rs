//! The agent loop around portcullis's gates: a run that corrects itself, stops in time, and
//! waits for a human across restarts.
//!
//! [`Agent::run`] takes the user's message to the model, dispatches every call the model makes
//! through the [`Registry`](portcullis_core::Registry)'s gates (the calls of one turn at once),
//! and sends each outcome back in the model's format, until the model answers. A refusal the
//! model can act on goes back to it, so it corrects itself; a call that waits for a human
//! pauses the run, which [`Agent::resume`] continues once the ticket is decided, on any worker
//! and exactly once, since the run lives in a [`RunStore`]. A run stops, with a typed
//! [`StopReason`], at its turn, token or cost limit, when the model repeats a refused call, or
//! on a refusal it cannot act on.
//!
//! Every step is a `tracing` event (with the OpenTelemetry GenAI attribute names) and a record
//! in the registry's audit log, and the user's messages and the tools' outputs are recorded as
//! the task's sources for the provenance gate: a user of the loop declares nothing but the
//! tools.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod agent;
mod builder;
mod error;
mod model;
#[cfg(feature = "rig")]
mod rig;
mod run;
mod scripted;
mod store;

pub use agent::Agent;
pub use builder::AgentBuilder;
pub use error::{AgentBuildError, RunError};
pub use model::{Message, Model, ModelError, ModelRequest, ModelTurn, ToolResult, Usage};
#[cfg(feature = "rig")]
pub use rig::{Prices, RigModel};
/// The rig this crate's adapter is built on, for its providers' clients at the same version.
#[cfg(feature = "rig")]
pub use rig_core;
pub use run::{Run, RunOutcome, RunState, RunStatus, Step, StepEvent, StopReason, TurnCall};
pub use scripted::ScriptedModel;
pub use store::{InMemoryRunStore, RunStore, RunStoreError, StoredRun};
