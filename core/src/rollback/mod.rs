//! What a rollback keeps and reports: each completed step of a transaction, kept where a worker
//! that crashed cannot lose it ([`store`]), and what its compensation did.

pub(crate) mod store;

use crate::tool::ToolError;

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
