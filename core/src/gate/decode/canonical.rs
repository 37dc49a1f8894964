//! The canonical arguments: what the tool receives, written as JSON by the arguments' own
//! `Serialize` (defaults filled in, numbers in the form the type holds, renames applied).
//!
//! Every gate after decode judges the canonical arguments, never the model's text: `1.0` is the
//! integer 1 to the tool, so it is the integer 1 to every policy.

use std::sync::OnceLock;

use serde::Serialize;
use serde_json::Value;

use crate::digest::sha256_hex;
use crate::rejection::{Rejection, RejectionCode};
use crate::schema::check::SchemaCheck;

/// Writes the canonical arguments of a call's typed arguments.
pub(crate) trait WriteCanonical: Sync {
    /// The canonical arguments, as a `Value`.
    fn value(&self) -> Result<Value, Rejection>;
    /// Their canonical text, written into `out` with no `Value` built; `false` where it cannot
    /// be written so (see [`write_canonical_of`](crate::json::write_canonical_of)).
    fn text(&self, out: &mut String) -> bool;
}

/// The canonical arguments of one call, written from its typed arguments the first time a gate
/// reads them (a call no gate reads them for does not pay for them), and kept for the audit.
pub(crate) struct Canonical<'a> {
    write: &'a dyn WriteCanonical,
    kept: &'a OnceLock<Value>,
}

impl<'a> Canonical<'a> {
    /// The canonical arguments of `write`'s typed arguments, kept in `kept`.
    pub(crate) fn new(write: &'a dyn WriteCanonical, kept: &'a OnceLock<Value>) -> Self {
        Canonical { write, kept }
    }

    /// The call's fingerprint ([`fingerprint`]), written straight from the typed arguments
    /// when no gate has read them as a `Value` and the schema holds no set, whose elements
    /// are put in order through the `Value`.
    pub(crate) fn fingerprint(&self, check: &SchemaCheck) -> Result<String, Rejection> {
        if self.kept.get().is_none()
            && let Some(text) = streamed_identity(check, self.write)
        {
            return Ok(sha256_hex(text.as_bytes()));
        }
        Ok(fingerprint(check, self.get()?))
    }

    /// The canonical arguments.
    pub(crate) fn get(&self) -> Result<&'a Value, Rejection> {
        if let Some(value) = self.kept.get() {
            return Ok(value);
        }
        let value = self.write.value()?;
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

/// What tells a call apart from others with its id (a retry under one id that sends other
/// arguments is another call): the SHA-256, in hex, of the identity text of its canonical
/// arguments ([`SchemaCheck::identity_text`]).
pub(crate) fn fingerprint(check: &SchemaCheck, canonical: &Value) -> String {
    sha256_hex(check.identity_text(canonical).as_bytes())
}

/// The identity text ([`SchemaCheck::identity_text`]) of typed arguments: written straight
/// from them where it can be, else through their `Value`.
pub(crate) fn identity_of(
    check: &SchemaCheck,
    write: &dyn WriteCanonical,
) -> Result<String, Rejection> {
    match streamed_identity(check, write) {
        Some(text) => Ok(text),
        None => Ok(check.identity_text(&write.value()?)),
    }
}

/// The identity text written straight from the typed arguments, where their schema holds no
/// set (whose elements are put in order through the `Value`) and the writer can write them.
fn streamed_identity(check: &SchemaCheck, write: &dyn WriteCanonical) -> Option<String> {
    if check.has_sets() {
        return None;
    }
    let mut text = String::with_capacity(256);
    write.text(&mut text).then_some(text)
}
