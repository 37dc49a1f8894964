//! portcullis puts hard gates between an LLM agent and the tools it calls.
//!
//! See the README for the quickstart, the attribute reference and the refusal codes.

#![forbid(unsafe_code)]

pub use portcullis_core::*;
pub use portcullis_macros::tool;

/// The items a tool author needs: `use portcullis::prelude::*;`.
pub mod prelude {
    pub use portcullis_core::{
        CallContext, Outcome, Registry, Rejection, RejectionCode, Risk, Tool, ToolCall,
        ToolContract, ToolError,
    };
    pub use portcullis_macros::tool;
}
