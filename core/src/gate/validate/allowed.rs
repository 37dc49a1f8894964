//! The values of `#[one_of]` arguments, checked against what their function allows for the
//! call's context now.
//!
//! The canonical arguments are compared, not the text the model sent, so `1.0` for an integer
//! is `1`; values compare as JSON Schema's `enum` compares them. The allowed values are hashed
//! once per call by their canonical text, so each value sent costs one lookup: a list of 60,000
//! elements against 1,000 allowed values is 60,000 lookups, not 60 million comparisons.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::Value;

use crate::context::CallContext;
use crate::contract::ToolContract;
use crate::contract::{AllowedValues, ValuesApply};
use crate::json::canonical_text;
use crate::pointer::{Segment, pointer};
use crate::rejection::shorten;
use crate::rejection::{Rejection, RejectionCode};

/// How many allowed values a refusal lists: enough to choose from, bounded in size.
const LISTED_VALUES: usize = 20;

/// Refuses a call whose dynamic argument holds a value its contract's function does not allow
/// for `ctx`. The arguments the model `left_out` are not checked: they hold the default the
/// tool's author chose, which need not be one the model may choose.
pub(crate) fn check_allowed_values(
    contract: &ToolContract,
    ctx: &CallContext,
    left_out: &[&str],
    canonical: &Value,
) -> Result<(), Rejection> {
    for allowed in contract.allowed_values(ctx) {
        if left_out.contains(&allowed.argument) {
            continue;
        }
        let path = [Segment::Key(allowed.argument.to_owned())];
        let sensitive = contract.is_sensitive(&path);
        let refuse =
            |value: &Value, path: &[Segment]| Err(not_allowed(value, &allowed, path, sensitive));
        let Some(value) = canonical.get(allowed.argument) else {
            // The arguments' `Serialize` does not write it: fail closed, not unchecked.
            return Err(Rejection::new(
                RejectionCode::InvalidValue,
                format!(
                    "`{}` cannot be compared with its allowed values",
                    allowed.argument
                ),
            )
            .with_path(pointer(&path))
            .with_retryable(false));
        };
        let permitted: HashSet<String> = allowed.values.iter().map(canonical_text).collect();
        match (allowed.applies, value) {
            (ValuesApply::EachElement { nullable: true }, Value::Null) => {}
            (ValuesApply::EachElement { .. }, Value::Array(elements)) => {
                for (index, element) in elements.iter().enumerate() {
                    if !permitted.contains(&canonical_text(element)) {
                        let at = [path[0].clone(), Segment::Index(index)];
                        return refuse(element, &at);
                    }
                }
            }
            _ if permitted.contains(&canonical_text(value)) => {}
            _ => return refuse(value, &path),
        }
    }
    Ok(())
}

/// A value as a refusal shows it: a string as its text, anything else as JSON, cut short.
fn shown(value: &Value) -> String {
    let text = match value {
        Value::String(text) => Cow::Borrowed(text.as_str()),
        other => Cow::Owned(other.to_string()),
    };
    shorten(&text, 64).into_owned()
}

fn not_allowed(
    value: &Value,
    allowed: &AllowedValues<'_>,
    path: &[Segment],
    sensitive: bool,
) -> Rejection {
    let message = if sensitive {
        "the value is not one of the allowed values".to_owned()
    } else {
        format!("`{}` is not one of the allowed values", shown(value))
    };
    let rejection = Rejection::new(RejectionCode::InvalidValue, message).with_path(pointer(path));
    let listed: Vec<&Value> = allowed
        .values
        .iter()
        .filter(|value| !value.is_null())
        .collect();
    if listed.is_empty() {
        // Nothing is allowed for this caller now: no other value would do either.
        return rejection
            .with_hint(format!(
                "`{}` has no allowed value for this caller now",
                allowed.argument
            ))
            .with_retryable(false);
    }
    let mut hint: Vec<String> = listed
        .iter()
        .take(LISTED_VALUES)
        .map(|value| format!("`{}`", shown(value)))
        .collect();
    if listed.len() > LISTED_VALUES {
        hint.push(format!("and {} more", listed.len() - LISTED_VALUES));
    }
    rejection.with_hint(format!("the allowed values are {}", hint.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn thirty_codes(_: &CallContext) -> Vec<Value> {
        (1..=30).map(|n| Value::from(format!("c-{n}"))).collect()
    }

    fn pick(sensitive: bool) -> ToolContract {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "code": {"type": "string"},
                "sizes": {"type": "array", "items": {"type": "number"}},
            },
        });
        let builder = ToolContract::builder("pick", "Picks a code.", schema)
            .one_of("code", thirty_codes)
            .one_of("sizes", |_| vec![json!(1), json!(2.5)]);
        if sensitive {
            builder.sensitive(["code"]).build()
        } else {
            builder.build()
        }
    }

    #[test]
    fn a_refusal_lists_a_bounded_number_of_allowed_values() {
        let contract = pick(false);
        let ctx = CallContext::new("alice");
        let rejection =
            check_allowed_values(&contract, &ctx, &[], &json!({"code": "c-99", "sizes": []}))
                .unwrap_err();
        assert_eq!(rejection.path(), Some("/code"));
        assert_eq!(
            rejection.message(),
            "`c-99` is not one of the allowed values"
        );
        let hint = rejection.hint().unwrap_or_default();
        assert!(
            hint.starts_with("the allowed values are `c-1`, `c-2`"),
            "{hint}"
        );
        assert!(hint.ends_with("`c-20`, and 10 more"), "{hint}");
        assert!(
            check_allowed_values(&contract, &ctx, &[], &json!({"code": "c-30", "sizes": []}))
                .is_ok()
        );
    }

    #[test]
    fn values_compare_as_json_schema_compares_them() {
        let contract = pick(false);
        let ctx = CallContext::new("alice");
        let arguments = json!({"code": "c-1", "sizes": [1.0, 2.5, 1]});
        assert!(check_allowed_values(&contract, &ctx, &[], &arguments).is_ok());
        let arguments = json!({"code": "c-1", "sizes": [1, "1"]});
        let rejection = check_allowed_values(&contract, &ctx, &[], &arguments).unwrap_err();
        assert_eq!(rejection.path(), Some("/sizes/1"));
    }

    #[test]
    fn a_sensitive_value_is_not_repeated() {
        let contract = pick(true);
        let ctx = CallContext::new("alice");
        let rejection = check_allowed_values(
            &contract,
            &ctx,
            &[],
            &json!({"code": "secret-99", "sizes": []}),
        )
        .unwrap_err();
        assert_eq!(
            rejection.message(),
            "the value is not one of the allowed values"
        );
        assert!(!rejection.to_model_message().contains("secret-99"));
    }
}
