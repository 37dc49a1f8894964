//! The decode gate: the model's raw arguments into the tool's typed arguments, strictly.
//!
//! Refuses text over the size limit (`arguments_too_large`) before reading it; then, whichever
//! the reading meets first, text that is not JSON (`malformed_json`), a key named twice in one
//! object (`duplicate_key`) and nesting over the depth limit (`arguments_too_deep`); then
//! anything but an object at the top (`not_an_object`); and last whatever the typed arguments
//! cannot hold: `unknown_argument`, `missing_argument`, `invalid_type`, `invalid_value`.

mod canonical;
mod deserializer;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub(crate) use canonical::{Canonical, WriteCanonical, canonical_of, fingerprint, identity_of};

use crate::call::Arguments;
use crate::contract::ToolContract;
use crate::pointer::{Segment, pointer};
use crate::rejection::shorten;
use crate::rejection::{Rejection, RejectionCode, Violation};
use crate::schema::check::{Finding, SchemaCheck};
use crate::suggest;

use crate::json::strict::{self, Node, StrictJsonError};
use deserializer::{DecodeError, NodeDeserializer, Problem};

/// Limits on the raw arguments of one call, applied before anything else is parsed.
///
/// ```
/// use portcullis_core::DecodeLimits;
///
/// let limits = DecodeLimits::default();
/// assert_eq!(limits.max_bytes, 1024 * 1024);
/// assert_eq!(limits.max_depth, 32);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// The largest argument text accepted, in bytes (a JSON value is measured as compact JSON).
    pub max_bytes: usize,
    /// The deepest nesting of arrays and objects accepted; the top-level object is depth 1.
    /// At most [`DecodeLimits::MAX_DEPTH`].
    pub max_depth: usize,
    /// Whether a `null` member of an object counts as left out, so that an optional argument
    /// takes its default. On in registries that serve a profile which shows optional
    /// arguments as required and nullable (OpenAI's strict mode); such profiles take no maps,
    /// so every object in the arguments is a struct's.
    pub null_means_absent: bool,
}

impl DecodeLimits {
    /// The deepest limit that can be configured, safely within the JSON parser's own
    /// recursion limit.
    pub const MAX_DEPTH: usize = 100;
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_bytes: 1024 * 1024,
            max_depth: 32,
            null_means_absent: false,
        }
    }
}

/// The typed arguments of a call, decoded once.
pub(crate) struct Decoded<'c, A> {
    pub(crate) args: A,
    /// The constraints of the schema the arguments, as sent, break: the validate gate's.
    pub(crate) violations: Vec<Violation>,
    /// The dynamic arguments of the contract the model left out, or sent as a `null` read as
    /// absent: what they hold is the tool's default, not the model's choice.
    pub(crate) left_out: Vec<&'c str>,
}

/// Decodes parsed arguments into the typed arguments a caller keeps, told which paths hold
/// sensitive values.
pub(crate) type TypedDecoder<'t, A> =
    dyn FnMut(Node<'_>, &dyn Fn(&[Segment]) -> bool) -> Result<A, Rejection> + 't;

/// The decode gate: `arguments` into the typed arguments of a tool with `contract`, refusing
/// with the gate's codes. A refusal about a `#[sensitive]` argument does not repeat its value.
///
/// The arguments as sent are held to `check`, the compiled schema, before they are consumed:
/// what breaks the schema's shape where the typed decoding did not see it is refused here too,
/// with the same codes; what breaks its constraints goes on to the validate gate.
///
/// `typed` decodes the parsed arguments ([`typed_node`]) into what the caller keeps of them:
/// through it, the gate is compiled once for every tool that keeps them alike.
pub(crate) fn decode<'c, A>(
    contract: &'c ToolContract,
    check: &SchemaCheck,
    arguments: &Arguments,
    limits: &DecodeLimits,
    typed: &mut TypedDecoder<'_, A>,
) -> Result<Decoded<'c, A>, Rejection> {
    let node = read(arguments, limits)?;
    let left_out = left_out(&node, contract);
    let findings = check.check(&node);
    let args = typed(node, &|path| contract.is_sensitive(path))?;
    Ok(Decoded {
        args,
        violations: violations(findings)?,
        left_out,
    })
}

/// The constraint violations among `findings`, or the refusal of the first that is about the
/// arguments' shape.
pub(crate) fn violations(findings: Vec<Finding>) -> Result<Vec<Violation>, Rejection> {
    let mut violations = Vec::new();
    for finding in findings {
        match finding {
            Finding::Constraint(violation) => violations.push(violation),
            Finding::Shape {
                code,
                path,
                message,
            } => return Err(Rejection::new(code, message).with_path(path)),
        }
    }
    Ok(violations)
}

/// Decodes canonical arguments (which passed the gate once) into the typed arguments again.
pub(crate) fn typed<A: DeserializeOwned>(canonical: &Value) -> Result<A, Rejection> {
    typed_node(Node::borrowed(canonical), &|_| true)
}

/// The dynamic arguments the model left out, where the arguments hold no member the schema
/// does not show: otherwise the arguments' `Deserialize` reads keys of its own (a serde
/// `alias`, say, in a hand-written tool), and a value sent under such a key would pass for a
/// default.
fn left_out<'c>(node: &Node<'_>, contract: &'c ToolContract) -> Vec<&'c str> {
    if contract.dynamic_arguments().next().is_none() {
        return Vec::new();
    }
    let properties = contract
        .input_schema()
        .get("properties")
        .and_then(Value::as_object);
    match (node, properties) {
        (Node::Object(members), Some(properties))
            if members
                .iter()
                .all(|(member, _)| properties.contains_key(member.as_ref())) =>
        {
            contract
                .dynamic_arguments()
                .filter(|name| !members.iter().any(|(member, _)| member == name))
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The arguments as a tree, within the limits, with `null` members dropped where they mean
/// "absent".
fn read<'a>(arguments: &'a Arguments, limits: &DecodeLimits) -> Result<Node<'a>, Rejection> {
    let mut node = match arguments {
        Arguments::Text(text) => parse_text(text, limits)?,
        Arguments::Json(value) => {
            check_value(value, limits)?;
            Node::borrowed(value)
        }
    };
    if limits.null_means_absent {
        node.drop_null_members();
    }
    Ok(node)
}

/// Parsed arguments into the typed arguments `T`; a refusal about a value at a path
/// `sensitive` holds for does not repeat it.
pub(crate) fn typed_node<T: DeserializeOwned>(
    node: Node<'_>,
    sensitive: &dyn Fn(&[Segment]) -> bool,
) -> Result<T, Rejection> {
    if !matches!(node, Node::Object(_)) {
        return Err(not_an_object(&node));
    }
    T::deserialize(NodeDeserializer::new(node)).map_err(|error| refusal(error, sensitive))
}

fn not_an_object(node: &Node<'_>) -> Rejection {
    Rejection::new(
        RejectionCode::NotAnObject,
        format!(
            "the arguments must be a JSON object, not {}",
            json_kind(node)
        ),
    )
    .with_hint("send the arguments as an object of named values, e.g. {\"name\": value}")
}

fn too_large(limits: &DecodeLimits) -> Rejection {
    Rejection::new(
        RejectionCode::ArgumentsTooLarge,
        format!(
            "the arguments exceed the limit of {} bytes",
            limits.max_bytes
        ),
    )
    .with_hint("send fewer or shorter values")
}

fn too_deep(path: &[Segment], max_depth: usize) -> Rejection {
    Rejection::new(
        RejectionCode::ArgumentsTooDeep,
        format!("the arguments nest deeper than {max_depth} levels"),
    )
    .with_path(pointer(path))
}

/// Applies the size, syntax, duplicate-key and depth checks to argument text.
fn parse_text<'a>(text: &'a str, limits: &DecodeLimits) -> Result<Node<'a>, Rejection> {
    if text.len() > limits.max_bytes {
        return Err(too_large(limits));
    }
    let max_depth = limits.max_depth;
    strict::parse(text, max_depth).map_err(|error| match error {
        StrictJsonError::Malformed(detail) => Rejection::new(
            RejectionCode::MalformedJson,
            format!("the arguments are not valid JSON: {detail}"),
        )
        .with_hint("send one JSON object"),
        StrictJsonError::DuplicateKey { key, path } => Rejection::new(
            RejectionCode::DuplicateKey,
            format!("the key `{key}` appears more than once in the same object"),
        )
        .with_path(pointer(&path))
        .with_hint("send each key once, with the one value you mean"),
        StrictJsonError::TooDeep { path } => too_deep(&path, max_depth),
    })
}

/// Applies the depth and size checks to an already parsed value. Depth comes first: the walk
/// that measures it stops at the limit, while measuring the size recurses through the whole
/// value, which a caller may have built deeper than any stack.
fn check_value(value: &Value, limits: &DecodeLimits) -> Result<(), Rejection> {
    let max_depth = limits.max_depth;
    if let Some(path) = strict::too_deep(value, max_depth) {
        return Err(too_deep(&path, max_depth));
    }
    if strict::longer_than(value, limits.max_bytes) {
        return Err(too_large(limits));
    }
    Ok(())
}

fn json_kind(node: &Node<'_>) -> &'static str {
    match node {
        Node::Null => "null",
        Node::Bool(_) => "a boolean",
        Node::Number(_) => "a number",
        Node::String(_) => "a string",
        Node::Array(_) => "an array",
        Node::Object(_) => "an object",
    }
}

fn backticked(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
    quoted.join(", ")
}

/// Turns a typed decoding error into the refusal the model sees. About a value at a path
/// `sensitive` holds for, it says what was expected and nothing of what was found.
fn refusal(error: DecodeError, sensitive: &dyn Fn(&[Segment]) -> bool) -> Rejection {
    let sensitive = sensitive(&error.path().cloned().collect::<Vec<_>>());
    let path = pointer(error.path());
    let found = |found: &str| {
        if sensitive {
            String::new()
        } else {
            format!(", found {found}")
        }
    };
    match error.problem {
        Problem::UnknownField { field, expected } => {
            let hint = suggest::did_you_mean(&field, expected.iter().copied())
                .unwrap_or_else(|| format!("the accepted names are {}", backticked(expected)));
            Rejection::new(
                RejectionCode::UnknownArgument,
                format!("`{}` is not an accepted argument", shorten(&field, 64)),
            )
            .with_path(path)
            .with_hint(hint)
        }
        Problem::MissingField(field) => Rejection::new(
            RejectionCode::MissingArgument,
            format!("the required argument `{field}` is missing"),
        )
        .with_path(pointer(
            error
                .path()
                .chain(std::iter::once(&Segment::Key(field.to_owned()))),
        )),
        Problem::DuplicateField(field) => Rejection::new(
            RejectionCode::DuplicateKey,
            format!("the key `{field}` appears more than once in the same object"),
        )
        .with_path(path),
        Problem::InvalidType {
            found: what,
            expected,
        } => Rejection::new(
            RejectionCode::InvalidType,
            format!("expected {expected}{}", found(&what)),
        )
        .with_path(path),
        Problem::InvalidValue {
            found: what,
            expected,
        } => Rejection::new(
            RejectionCode::InvalidValue,
            format!("expected {expected}{}", found(&what)),
        )
        .with_path(path),
        Problem::UnknownVariant { variant, expected } => {
            let message = if sensitive {
                "the value is not one of the allowed values".to_owned()
            } else {
                format!(
                    "`{}` is not one of the allowed values",
                    shorten(&variant, 64)
                )
            };
            Rejection::new(RejectionCode::InvalidValue, message)
                .with_path(path)
                .with_hint(format!("the allowed values are {}", backticked(expected)))
        }
        Problem::InvalidLength { len, expected } => Rejection::new(
            RejectionCode::InvalidValue,
            format!("expected {expected}, found an array of {len} elements"),
        )
        .with_path(path),
        // A custom deserializer's message may quote the value.
        Problem::Custom(_) if sensitive => {
            Rejection::new(RejectionCode::InvalidValue, "the value is not valid").with_path(path)
        }
        Problem::Custom(message) => {
            Rejection::new(RejectionCode::InvalidValue, message).with_path(path)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Transfer {
        amount: u32,
        currency: Currency,
        memo: Option<String>,
    }

    #[derive(Debug, Deserialize)]
    enum Currency {
        #[serde(rename = "CNY")]
        Cny,
        #[serde(rename = "USD")]
        Usd,
    }

    /// Decodes as the gate does for a tool whose `memo` is sensitive.
    fn decode_as<T: DeserializeOwned>(
        arguments: &Arguments,
        limits: &DecodeLimits,
    ) -> Result<T, Rejection> {
        let contract = ToolContract::builder(
            "transfer",
            "Transfers.",
            json!({"type": "object", "additionalProperties": false}),
        )
        .sensitive(["memo"])
        .build();
        let check = SchemaCheck::compile(&json!(true), &[]).unwrap();
        decode(&contract, &check, arguments, limits, &mut typed_node::<T>)
            .map(|decoded| decoded.args)
    }

    fn refused(arguments: impl Into<Arguments>) -> Rejection {
        decode_as::<Transfer>(&arguments.into(), &DecodeLimits::default()).unwrap_err()
    }

    #[test]
    fn text_and_value_decode_alike() {
        let text = r#"{"amount": 10, "currency": "USD"}"#;
        assert!(decode_as::<Transfer>(&text.into(), &DecodeLimits::default()).is_ok());
        let value = json!({"amount": 10.0, "currency": "CNY", "memo": null});
        assert!(decode_as::<Transfer>(&value.into(), &DecodeLimits::default()).is_ok());
    }

    #[test]
    fn refusals_carry_code_and_path() {
        let cases: Vec<(Arguments, RejectionCode, Option<&str>)> = vec![
            (
                r#"{"amount":1,"amount":99999999,"currency":"USD"}"#.into(),
                RejectionCode::DuplicateKey,
                Some("/amount"),
            ),
            ("{".into(), RejectionCode::MalformedJson, None),
            ("[1]".into(), RejectionCode::NotAnObject, None),
            (
                json!({"amount": 1, "currency": "USD", "role": "admin"}).into(),
                RejectionCode::UnknownArgument,
                Some("/role"),
            ),
            (
                json!({"currency": "USD"}).into(),
                RejectionCode::MissingArgument,
                Some("/amount"),
            ),
            (
                json!({"amount": "1", "currency": "USD"}).into(),
                RejectionCode::InvalidType,
                Some("/amount"),
            ),
            (
                json!({"amount": 4294967296u64, "currency": "USD"}).into(),
                RejectionCode::InvalidValue,
                Some("/amount"),
            ),
            (
                json!({"amount": 1, "currency": "EUR"}).into(),
                RejectionCode::InvalidValue,
                Some("/currency"),
            ),
        ];
        for (arguments, code, path) in cases {
            let rejection = refused(arguments);
            assert_eq!(
                (rejection.code(), rejection.path()),
                (code, path),
                "{rejection}"
            );
        }
    }

    #[test]
    fn hints_name_the_closest_argument_and_the_allowed_values() {
        let rejection = refused(json!({"amont": 1, "currency": "USD"}));
        assert_eq!(rejection.hint(), Some("did you mean `amount`?"));
        let rejection = refused(json!({"amount": 1, "currency": "EUR"}));
        assert_eq!(
            rejection.hint(),
            Some("the allowed values are `CNY`, `USD`")
        );
    }

    #[test]
    fn refusals_about_sensitive_values_do_not_repeat_them() {
        let rejection = refused(json!({"amount": 1, "currency": "USD", "memo": 4242}));
        assert_eq!(rejection.code(), RejectionCode::InvalidType);
        assert_eq!(rejection.message(), "expected a string");
        let rejection = refused(json!({"amount": -4242, "currency": "USD"}));
        assert_eq!(
            rejection.message(),
            "expected an integer from 0 to 4294967295, found the integer -4242",
            "the values of other arguments are shown"
        );
    }

    #[test]
    fn limits_apply_to_text_and_values() {
        let limits = DecodeLimits {
            max_bytes: 40,
            max_depth: 2,
            null_means_absent: false,
        };
        let long = format!(r#"{{"memo": "{}"}}"#, "x".repeat(64));
        let too_large = decode_as::<Transfer>(&long.as_str().into(), &limits).unwrap_err();
        assert_eq!(too_large.code(), RejectionCode::ArgumentsTooLarge);
        let parsed: Value = serde_json::from_str(&long).unwrap();
        let too_large = decode_as::<Transfer>(&parsed.into(), &limits).unwrap_err();
        assert_eq!(too_large.code(), RejectionCode::ArgumentsTooLarge);
        let deep = json!({"memo": {"a": {}}});
        let too_deep = decode_as::<Transfer>(&deep.into(), &limits).unwrap_err();
        assert_eq!(too_deep.code(), RejectionCode::ArgumentsTooDeep);
        assert_eq!(too_deep.path(), Some("/memo/a"));
    }
}
