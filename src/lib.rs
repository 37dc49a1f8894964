//! portcullis puts hard, code-level gates between an LLM agent and the tools it calls.
//!
//! One attribute on a plain Rust function is the tool's whole contract. From it, [`tool`]
//! generates the JSON Schema the model is shown and the validation the call must pass; a
//! [`Registry`] forces every model-produced call through the gates (resolve, decode, validate,
//! execute) and answers with an [`Outcome`]: completed, or refused with a stable
//! [`RejectionCode`] and a message the model can act on.
//!
//! ```
//! use portcullis::prelude::*;
//! use serde_json::json;
//!
//! /// Refund part of a payment.
//! #[tool(risk = "high", role = "billing_admin", irreversible = "refunds settle at once")]
//! fn refund(
//!     ctx: &CallContext,
//!     /// The payment to refund.
//!     payment_id: String,
//!     /// Amount in cents.
//!     #[validate(range(min = 1, max = 50_000))]
//!     amount_cents: u32,
//! ) -> Result<String, ToolError> {
//!     Ok(format!("{} refunded {amount_cents} cents of {payment_id}", ctx.actor()))
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let registry = Registry::builder().tool(Refund).build().unwrap();
//! let ctx = CallContext::new("alice").with_roles(["billing_admin"]);
//!
//! let good = ToolCall::new("call_1", "refund", r#"{"payment_id": "pay_7", "amount_cents": 500}"#);
//! let outcome = registry.dispatch(&ctx, &good).await;
//! assert_eq!(outcome.output(), Some(&json!("alice refunded 500 cents of pay_7")));
//!
//! // The same key twice: which amount did the model mean? Neither runs.
//! let smuggled = ToolCall::new("call_2", "refund", r#"{"payment_id": "pay_7", "amount_cents": 1, "amount_cents": 5000000}"#);
//! let outcome = registry.dispatch(&ctx, &smuggled).await;
//! assert_eq!(outcome.code(), Some(RejectionCode::DuplicateKey));
//!
//! let too_much = ToolCall::new("call_3", "refund", json!({"payment_id": "pay_7", "amount_cents": 90_000}));
//! let outcome = registry.dispatch(&ctx, &too_much).await;
//! let rejection = outcome.rejection().unwrap();
//! assert_eq!(rejection.code(), RejectionCode::ConstraintViolation);
//! assert_eq!(rejection.path(), Some("/amount_cents"));
//! # });
//! ```
//!
//! The [guide] has a page for each task: the [gates](guide::gates) a call passes, the
//! [`#[tool]` attribute](guide::attribute), [approvals](guide::approvals), running in
//! [production](guide::production), and the table of [refusal codes](guide::refusals).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use portcullis_core::*;
pub use portcullis_macros::{Sensitive, Sourced, tool};

/// The agent loop around the gates (the `portcullis-agent` crate): see the guide's
/// [agent](crate::guide::agent) page.
pub use portcullis_agent as agent;

/// The red-team kit (the `portcullis-testing` crate): hostile calls written from each tool's
/// contract, each with the refusal it must get; see the guide's [testing](crate::guide::testing)
/// page.
pub use portcullis_testing as testing;

/// Cedar policies over the tools' contracts (the `portcullis-cedar` crate, with the feature
/// `cedar`): see the guide's [cedar](crate::guide::cedar) page.
#[cfg(feature = "cedar")]
pub use portcullis_cedar as cedar;

pub mod guide;

/// The README's first example, compiled and run with the tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The items a tool author needs: `use portcullis::prelude::*;`.
pub mod prelude {
    pub use portcullis_core::{
        CallContext, Outcome, Registry, Rejection, RejectionCode, Risk, Tool, ToolCall,
        ToolContract, ToolError,
    };
    pub use portcullis_macros::{Sensitive, Sourced, tool};
}
