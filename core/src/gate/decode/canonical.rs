//! The canonical arguments: what the tool receives, written as JSON by the arguments' own
//! `Serialize` (defaults filled in, numbers in the form the type holds, renames applied).
//!
//! Every gate after decode judges the canonical arguments, never the model's text: `1.0` is the
//! integer 1 to the tool, so it is the integer 1 to every policy.

use std::sync::OnceLock;

use serde::Serialize;
use serde_json::Value;

use crate::{Rejection, RejectionCode};

/// The canonical arguments of one call, written from its typed arguments the first time a gate
/// reads them (a call no gate reads them for does not pay for them), and kept for the audit.
pub(crate) struct Canonical<'a> {
    write: &'a (dyn Fn() -> Result<Value, Rejection> + Sync),
    kept: &'a OnceLock<Value>,
}

impl<'a> Canonical<'a> {
    /// The canonical arguments of `write`'s typed arguments, kept in `kept`.
    pub(crate) fn new(
        write: &'a (dyn Fn() -> Result<Value, Rejection> + Sync),
        kept: &'a OnceLock<Value>,
    ) -> Self {
        Canonical { write, kept }
    }

    /// The canonical arguments.
    pub(crate) fn get(&self) -> Result<&'a Value, Rejection> {
        if let Some(value) = self.kept.get() {
            return Ok(value);
        }
        let value = (self.write)()?;
        Ok(self.kept.get_or_init(|| value))
    }
}

/// The canonical arguments of decoded `args`. A type whose `Serialize` fails cannot be shown to
/// the gates that read JSON, so the call is refused rather than judged on something else.
pub(crate) fn canonical_of<A: Serialize>(args: &A) -> Result<Value, Rejection> {
    serde_json::to_value(args).map_err(|error| {
        Rejection::new(
            RejectionCode::InvalidValue,
            format!("the decoded arguments cannot be written as JSON: {error}"),
        )
        .with_reason("arguments_not_serializable")
        .with_retryable(false)
    })
}
