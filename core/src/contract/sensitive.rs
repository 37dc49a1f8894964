//! Sensitive arguments: where they are in the arguments, and their redaction.
//!
//! A contract names each sensitive value by a JSON pointer into the arguments (RFC 6901), where
//! the segment `*` stands for every element of an array or every value of a map:
//! `/admin_note`, `/card/number`, `/cards/*/number`.

use std::borrow::Cow;

use serde_json::Value;

use super::tool_contract::ToolContract;
use crate::call::Arguments;
use crate::digest::sha256_hex;
use crate::json::longer_than;
use crate::pointer::Segment;

/// What replaces a `#[sensitive]` value in a record, a ticket and `Debug`.
pub const REDACTED: &str = "[redacted]";

/// The segment of a sensitive pointer that stands for every element or map value.
const ANY: &str = "*";

impl ToolContract {
    /// Whether the value at `path` is, lies within, or holds a sensitive value: a refusal
    /// about it must not repeat what it found (a refusal about a whole that holds a secret may
    /// have found the secret itself, as in an untagged enum's buffered content).
    pub(crate) fn is_sensitive(&self, path: &[Segment]) -> bool {
        self.sensitive.iter().any(|pointer| {
            segments(pointer).zip(path).all(|(wanted, at)| match at {
                _ if wanted == ANY => true,
                Segment::Key(key) => wanted == **key,
                Segment::Index(index) => wanted == index.to_string(),
            })
        })
    }

    /// Replaces every sensitive value in `arguments` with [`REDACTED`].
    pub(crate) fn redact(&self, arguments: &mut Value) {
        for pointer in &self.sensitive {
            let segments: Vec<Cow<'_, str>> = segments(pointer).collect();
            redact_at(arguments, &segments);
        }
    }
}

/// A sensitive argument named as the model sees it, or a pointer already.
pub(crate) fn pointer_of(name: String) -> String {
    if name.starts_with('/') {
        name
    } else {
        format!("/{}", name.replace('~', "~0").replace('/', "~1"))
    }
}

/// The unescaped segments of a pointer; only a segment with an escape is copied.
fn segments(pointer: &str) -> impl Iterator<Item = Cow<'_, str>> + '_ {
    pointer.split('/').skip(1).map(|segment| {
        if segment.contains('~') {
            Cow::Owned(segment.replace("~1", "/").replace("~0", "~"))
        } else {
            Cow::Borrowed(segment)
        }
    })
}

fn redact_at(value: &mut Value, segments: &[Cow<'_, str>]) {
    let Some((first, rest)) = segments.split_first() else {
        *value = Value::String(REDACTED.to_owned());
        return;
    };
    match value {
        Value::Object(members) if first == ANY => {
            members
                .values_mut()
                .for_each(|member| redact_at(member, rest));
        }
        Value::Object(members) => {
            if let Some(member) = members.get_mut(first.as_ref()) {
                redact_at(member, rest);
            }
        }
        Value::Array(items) if first == ANY => {
            items.iter_mut().for_each(|item| redact_at(item, rest));
        }
        Value::Array(items) => {
            if let Some(item) = first.parse::<usize>().ok().and_then(|at| items.get_mut(at)) {
                redact_at(item, rest);
            }
        }
        _ => {}
    }
}

/// Arguments longer than this, as JSON text, are recorded by size only.
const RECORDED_ARGUMENTS_LIMIT: usize = 64 * 1024;

/// Arguments as sent, as recorded: JSON with the contract's sensitive values redacted, or, for
/// text that is not JSON (which may hold a secret the redaction cannot find) and arguments too
/// long to keep, their size and SHA-256.
pub(crate) fn recorded_arguments(arguments: &Arguments, contract: Option<&ToolContract>) -> Value {
    let parsed = match arguments {
        Arguments::Text(text) if text.len() <= RECORDED_ARGUMENTS_LIMIT => {
            match serde_json::from_str::<Value>(text) {
                Ok(value) => Ok(value),
                Err(_) => Err(text.as_bytes().to_vec()),
            }
        }
        Arguments::Text(text) => Err(text.as_bytes().to_vec()),
        Arguments::Json(value) => Ok(value.clone()),
    };
    match parsed {
        Ok(value) => recorded_canonical(&value, contract),
        Err(bytes) => unrecorded(&bytes),
    }
}

/// Arguments already parsed, as recorded: redacted, or by size and SHA-256 when too long.
pub(crate) fn recorded_canonical(arguments: &Value, contract: Option<&ToolContract>) -> Value {
    if longer_than(arguments, RECORDED_ARGUMENTS_LIMIT) {
        return unrecorded(arguments.to_string().as_bytes());
    }
    let mut value = arguments.clone();
    if let Some(contract) = contract {
        contract.redact(&mut value);
    }
    value
}

fn unrecorded(bytes: &[u8]) -> Value {
    serde_json::json!({"unrecorded": {"bytes": bytes.len(), "sha256": sha256_hex(bytes)}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn contract(sensitive: &[&str]) -> ToolContract {
        ToolContract::builder(
            "t",
            "A tool.",
            json!({"type": "object", "additionalProperties": false}),
        )
        .sensitive(sensitive.iter().copied())
        .build()
    }

    #[test]
    fn pointers_reach_into_lists_and_maps() {
        let contract = contract(&["password", "/cards/*/number", "/vault/*"]);
        let mut arguments = json!({
            "user": "a",
            "password": "hunter2",
            "cards": [{"number": "4111", "label": "work"}, {"label": "none"}],
            "vault": {"a": 1, "b": {"c": 2}},
        });
        contract.redact(&mut arguments);
        assert_eq!(
            arguments,
            json!({
                "user": "a",
                "password": REDACTED,
                "cards": [{"number": REDACTED, "label": "work"}, {"label": "none"}],
                "vault": {"a": REDACTED, "b": REDACTED},
            })
        );
        let key = |key: &str| Segment::Key(key.into());
        assert!(contract.is_sensitive(&[key("password")]));
        assert!(contract.is_sensitive(&[key("cards"), Segment::Index(3), key("number")]));
        assert!(contract.is_sensitive(&[key("vault"), key("x"), key("y")]));
        assert!(!contract.is_sensitive(&[key("cards"), Segment::Index(0), key("label")]));
        assert!(!contract.is_sensitive(&[key("user")]));
        assert!(
            contract.is_sensitive(&[key("cards")]),
            "the list holds secrets"
        );
        assert!(contract.is_sensitive(&[]), "the arguments hold secrets");
    }
}
