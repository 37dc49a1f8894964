//! Refusals: which gate refused a call, with which stable code, and what the model can do about it.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod code;
mod gate;

pub use code::RejectionCode;
pub use gate::Gate;

/// The most violations one model message lists; the rest are counted. The model needs a few to
/// fix its call, and a reply must not grow with whatever the model sent.
const MODEL_MESSAGE_VIOLATIONS: usize = 20;

/// `text`, cut to `max_chars` characters with an ellipsis if it is longer: what the model sent
/// is echoed back, and it may be a megabyte long.
pub(crate) fn shorten(text: &str, max_chars: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        None => text.into(),
        Some((cut, _)) => format!("{}…", &text[..cut]).into(),
    }
}

/// [`shorten`] of a text the caller owns: kept as it is when it is short enough.
pub(crate) fn shortened(text: String, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text,
        Some(_) => shorten(&text, max_chars).into_owned(),
    }
}

/// One violated constraint found by the validate gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    /// JSON pointer to the offending value, using the names the model sees (`/items/0/qty`).
    pub path: String,
    /// The rule: `range`, `length`, `pattern`, `email`, `url`, `contains`, or the code of a
    /// custom validator.
    pub rule: String,
    /// A sentence for the model, e.g. "must be at least 3 characters".
    pub message: String,
    /// The bounds of the rule (`min`, `max`, `exclusive_min`, ...), without the offending value.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub params: Map<String, Value>,
}

/// Why a call was refused: the gate, a stable code, a JSON-pointer path to the offending
/// argument, a sentence, a hint, and whether retrying can help.
///
/// [`Rejection::to_model_message`] renders it as the compact JSON text that goes back to the
/// model so that it can correct its call. It serializes whole (its code, message, path, hint,
/// retryable flag, reason and violations), for a store that keeps a call's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rejection {
    // Boxed: a refusal is rare and the happy path should not carry its size around.
    inner: Box<Details>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Details {
    code: RejectionCode,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
    retryable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    violations: Vec<Violation>,
}

impl Rejection {
    /// A refusal with `code` and a sentence saying what is wrong.
    pub fn new(code: RejectionCode, message: impl Into<String>) -> Self {
        Rejection {
            inner: Box::new(Details {
                code,
                message: message.into(),
                path: None,
                hint: None,
                retryable: code.retryable_by_default(),
                reason: None,
                violations: Vec::new(),
            }),
        }
    }

    /// Points the refusal at one argument (a JSON pointer such as `/record_id`).
    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.inner.path = Some(path.into());
        self
    }

    /// Adds a hint: the closest valid name, the allowed values, what to do instead.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.inner.hint = Some(hint.into());
        self
    }

    /// Overrides whether retrying can help.
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.inner.retryable = retryable;
        self
    }

    /// Adds a finer-grained, stable reason within the code (for `tool_failed`, the tool's own
    /// error code).
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.inner.reason = Some(reason.into());
        self
    }

    pub(crate) fn with_violations(mut self, violations: Vec<Violation>) -> Self {
        self.inner.violations = violations;
        self
    }

    /// The gate that refused.
    pub fn gate(&self) -> Gate {
        self.inner.code.gate()
    }

    /// The stable code.
    pub fn code(&self) -> RejectionCode {
        self.inner.code
    }

    /// A sentence saying what is wrong.
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// JSON pointer to the offending argument, when one argument is at fault.
    pub fn path(&self) -> Option<&str> {
        self.inner.path.as_deref()
    }

    /// What the model can do instead.
    pub fn hint(&self) -> Option<&str> {
        self.inner.hint.as_deref()
    }

    /// Whether a corrected call may succeed.
    pub fn retryable(&self) -> bool {
        self.inner.retryable
    }

    /// The finer-grained reason, where there is one (the tool's own code for `tool_failed`).
    pub fn reason(&self) -> Option<&str> {
        self.inner.reason.as_deref()
    }

    /// Every violated constraint, for `constraint_violation`; empty otherwise.
    pub fn violations(&self) -> &[Violation] {
        &self.inner.violations
    }

    /// The compact JSON text that goes back to the model.
    ///
    /// ```
    /// use portcullis_core::{Rejection, RejectionCode};
    ///
    /// let rejection = Rejection::new(RejectionCode::UnknownArgument, "unknown argument `recordid`")
    ///     .with_path("/recordid")
    ///     .with_hint("did you mean `record_id`?");
    /// assert_eq!(
    ///     rejection.to_model_message(),
    ///     r#"{"error":"unknown_argument","gate":"decode","message":"unknown argument `recordid`","path":"/recordid","hint":"did you mean `record_id`?","retryable":true}"#
    /// );
    /// ```
    pub fn to_model_message(&self) -> String {
        #[derive(Serialize)]
        struct ModelMessage<'a> {
            error: RejectionCode,
            gate: Gate,
            message: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            path: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            hint: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            reason: Option<&'a str>,
            retryable: bool,
            #[serde(skip_serializing_if = "<[Violation]>::is_empty")]
            violations: &'a [Violation],
            #[serde(skip_serializing_if = "is_zero")]
            violations_omitted: usize,
        }
        fn is_zero(count: &usize) -> bool {
            *count == 0
        }
        let shown = self.inner.violations.len().min(MODEL_MESSAGE_VIOLATIONS);
        let path = self.inner.path.as_deref().map(|path| shorten(path, 200));
        let hint = self.inner.hint.as_deref().map(|hint| shorten(hint, 500));
        let message = ModelMessage {
            error: self.inner.code,
            gate: self.gate(),
            message: &shorten(&self.inner.message, 500),
            path: path.as_deref(),
            hint: hint.as_deref(),
            reason: self.inner.reason.as_deref(),
            retryable: self.inner.retryable,
            violations: &self.inner.violations[..shown],
            violations_omitted: self.inner.violations.len() - shown,
        };
        serde_json::to_string(&message)
            .expect("a message of strings, booleans and JSON values always serializes")
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} gate): {}",
            self.inner.code,
            self.gate(),
            self.inner.message
        )?;
        if let Some(path) = &self.inner.path {
            write!(f, " at {path}")?;
        }
        if let Some(hint) = &self.inner.hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Rejection {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_belong_to_their_gates() {
        assert_eq!(RejectionCode::UnknownTool.gate(), Gate::Resolve);
        assert_eq!(RejectionCode::DuplicateKey.gate(), Gate::Decode);
        assert_eq!(RejectionCode::ConstraintViolation.gate(), Gate::Validate);
        assert_eq!(RejectionCode::ToolPanicked.gate(), Gate::Execute);
    }

    #[test]
    fn serialized_code_matches_as_str() {
        for code in [
            RejectionCode::ArgumentsTooLarge,
            RejectionCode::NotAnObject,
            RejectionCode::ToolTimeout,
            RejectionCode::ClaimNotAbandoned,
        ] {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                Value::String(code.as_str().into())
            );
        }
    }

    #[test]
    fn panics_are_not_retryable() {
        assert!(!Rejection::new(RejectionCode::ToolPanicked, "boom").retryable());
        assert!(Rejection::new(RejectionCode::InvalidType, "bad").retryable());
    }

    #[test]
    fn model_messages_stay_small() {
        let long_name = "x".repeat(100_000);
        let violation = Violation {
            path: "/a".into(),
            rule: "range".into(),
            message: "must be at least 1".into(),
            params: Map::new(),
        };
        let rejection = Rejection::new(RejectionCode::ConstraintViolation, long_name.clone())
            .with_path(format!("/{long_name}"))
            .with_violations(vec![violation; 1000]);
        let message: Value = serde_json::from_str(&rejection.to_model_message()).unwrap();
        assert_eq!(message["message"].as_str().unwrap().chars().count(), 501);
        assert_eq!(message["path"].as_str().unwrap().chars().count(), 201);
        assert_eq!(message["violations"].as_array().unwrap().len(), 20);
        assert_eq!(message["violations_omitted"], 980);
        assert_eq!(
            rejection.violations().len(),
            1000,
            "the rejection itself keeps them all"
        );
        assert_eq!(shorten("héllo", 2), "hé…");
        assert_eq!(shorten("héllo", 5), "héllo");
    }

    #[test]
    fn model_message_lists_violations() {
        let rejection = Rejection::new(RejectionCode::ConstraintViolation, "1 constraint violated")
            .with_path("/a")
            .with_violations(vec![Violation {
                path: "/a".into(),
                rule: "range".into(),
                message: "must be at least 1".into(),
                params: Map::from_iter([("min".to_string(), Value::from(1))]),
            }]);
        let parsed: Value = serde_json::from_str(&rejection.to_model_message()).unwrap();
        assert_eq!(parsed["error"], "constraint_violation");
        assert_eq!(parsed["gate"], "validate");
        assert_eq!(parsed["violations"][0]["rule"], "range");
        assert_eq!(parsed["violations"][0]["params"]["min"], 1);
    }
}
