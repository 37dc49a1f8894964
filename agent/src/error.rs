//! Why an agent could not be built, or could not do what it was asked.

use crate::store::RunStoreError;

/// Why [`Agent`](crate::Agent) could not do what it was asked. A run that stops is not an error: it comes
/// back as a [`Run`](crate::Run) with a [`StopReason`](crate::StopReason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// No run of that id is stored (`run_not_found`).
    #[error("no run `{0}` is stored")]
    NotFound(String),
    /// Another worker holds the run (`run_in_progress`).
    #[error("another worker holds run `{id}` until {until_ms} (ms since the Unix epoch)")]
    InProgress {
        /// The run.
        id: String,
        /// Until when it is held.
        until_ms: u64,
    },
    /// The run is not waiting for a decision (`run_not_paused`).
    #[error("run `{id}` is {status}, not paused")]
    NotPaused {
        /// The run.
        id: String,
        /// `finished` or `stopped`.
        status: &'static str,
    },
    /// The run waits for decisions; a message continues it only once it is resumed
    /// (`run_paused`).
    #[error("run `{0}` waits for decisions on its tickets; resume it once they are decided")]
    Paused(String),
    /// The run stopped and does not go on (`run_stopped`).
    #[error("run `{0}` stopped; start another")]
    Stopped(String),
    /// Another worker took the run over after this one's lease ran out; this one wrote nothing
    /// more (`run_taken_over`).
    #[error("another worker took run `{0}` over")]
    TakenOver(String),
    /// The user's message could not be recorded as a source of the task, so no call of the run
    /// could use it; nothing changed (`sources_unavailable`).
    #[error("the user's message could not be recorded: {0}")]
    SourcesUnavailable(String),
    /// The run store could not be read or written (`runs_unavailable`).
    #[error("the run store failed: {0}")]
    Unavailable(String),
    /// The caller holds as many runs going on as its share of the run store allows; nothing
    /// started (`run_share_full`). Finish or stop a run of its own first.
    #[error("{0}; finish or stop one of its runs first")]
    ShareFull(String),
}

impl RunError {
    /// The stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            RunError::NotFound(_) => "run_not_found",
            RunError::InProgress { .. } => "run_in_progress",
            RunError::NotPaused { .. } => "run_not_paused",
            RunError::Paused(_) => "run_paused",
            RunError::Stopped(_) => "run_stopped",
            RunError::TakenOver(_) => "run_taken_over",
            RunError::SourcesUnavailable(_) => "sources_unavailable",
            RunError::Unavailable(_) => "runs_unavailable",
            RunError::ShareFull(_) => "run_share_full",
        }
    }
}

impl From<RunStoreError> for RunError {
    fn from(error: RunStoreError) -> Self {
        match error {
            RunStoreError::ShareFull(_) => RunError::ShareFull(error.to_string()),
            RunStoreError::Failed(message) => RunError::Unavailable(message),
        }
    }
}

/// Why [`AgentBuilder::build`](crate::AgentBuilder::build) refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentBuildError {
    /// The registry does not export tools in the model's format; declare it with
    /// `RegistryBuilder::profile` (`profile_not_served`).
    #[error(
        "the registry does not serve the model's profile {0}; add `.profile({0:?})` to the registry builder"
    )]
    ProfileNotServed(portcullis_core::export::Profile),
}
