//! Hostile arguments written from a tool's input schema: one argument broken at a time, the
//! others left as a valid call has them, each with the code the gates must answer.
//!
//! The codes follow the gates' written rules (the guide's `gates` and `refusals` pages): a value
//! outside what its type can hold is `invalid_value`, a value the type holds but a declared
//! bound forbids is `constraint_violation`; the type's range comes from the schema's `format`
//! (`uint8`, `int64`, ...), since the exported `maximum` of a `u8` is 255 whether or not a
//! `#[validate(range)]` narrowed it.

use portcullis_core::{DecodeLimits, RejectionCode};
use serde_json::{Map, Value, json};

/// One hostile argument text and what it must get.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Hostile {
    /// What was broken, for a person reading the report.
    pub(crate) what: String,
    /// The arguments as the model would send them: JSON text, which alone can name a key twice.
    pub(crate) arguments: String,
    pub(crate) expected: RejectionCode,
}

/// Names a model (or an injected text) may add to claim a power it does not have.
const CLAIMS_OF_POWER: [&str; 5] = ["role", "admin", "is_admin", "tenant", "override"];

/// Every hostile argument text for a tool whose input schema is `schema`, starting from
/// `valid`, a call's arguments that pass every gate.
pub(crate) fn hostile(
    schema: &Value,
    valid: &Map<String, Value>,
    limits: DecodeLimits,
) -> Vec<Hostile> {
    let mut cases = Vec::new();
    shape(schema, valid, limits, &mut cases);
    let properties = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (name, property) in &properties {
        let property = resolve(schema, property);
        let with = |value: Value| {
            let mut arguments = valid.clone();
            arguments.insert(name.clone(), value);
            Value::Object(arguments).to_string()
        };
        for (what, value, expected) in broken_values(schema, property) {
            cases.push(Hostile {
                what: format!("`{name}`: {what}"),
                arguments: with(value),
                expected,
            });
        }
        for (what, raw, expected) in raw_number_forms(property).into_iter().flatten() {
            cases.push(Hostile {
                what: format!("`{name}`: {what}"),
                arguments: with_raw(valid, name, &raw, false),
                expected,
            });
        }
        if let Some(Value::Object(inner)) = valid.get(name) {
            let arguments = Value::Object(valid.clone());
            let at = format!("/{}", escape(name));
            nested(schema, property, inner, &at, &arguments, &mut cases);
        }
    }
    cases
}

/// Cases inside an object argument (at JSON pointer `at` of `arguments`, whose valid value
/// there is `valid`): each of its fields broken as a top-level argument is, one of its
/// required fields left out, a field it does not declare; and so on into its own objects.
fn nested(
    root: &Value,
    object: &Value,
    valid: &Map<String, Value>,
    at: &str,
    arguments: &Value,
    cases: &mut Vec<Hostile>,
) {
    let Some(properties) = object["properties"].as_object() else {
        return;
    };
    let mut push = |what: String, field: &str, value: Option<Value>, expected| {
        let mut changed = valid.clone();
        match value {
            Some(value) => changed.insert(field.to_owned(), value),
            None => changed.remove(field),
        };
        let mut whole = arguments.clone();
        if let Some(slot) = whole.pointer_mut(at) {
            *slot = Value::Object(changed);
        }
        cases.push(Hostile {
            what,
            arguments: whole.to_string(),
            expected,
        });
    };
    let path = at.replace('/', ".");
    let path = path.trim_start_matches('.');
    for name in object["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        push(
            format!("`{path}.{name}` left out"),
            name,
            None,
            RejectionCode::MissingArgument,
        );
    }
    if object["additionalProperties"] == false {
        let unknown = properties
            .keys()
            .map(|name| format!("{name}_"))
            .chain(CLAIMS_OF_POWER.iter().map(|name| (*name).to_owned()))
            .filter(|name| !properties.contains_key(name));
        for name in unknown {
            push(
                format!("`{path}.{name}`, a field it does not declare"),
                &name,
                Some(json!(true)),
                RejectionCode::UnknownArgument,
            );
        }
    }
    for (name, property) in properties {
        for (what, value, expected) in broken_values(root, resolve(root, property)) {
            push(
                format!("`{path}.{name}`: {what}"),
                name,
                Some(value),
                expected,
            );
        }
    }
    for (name, property) in properties {
        if let Some(Value::Object(inner)) = valid.get(name) {
            let deeper = format!("{at}/{}", escape(name));
            nested(
                root,
                resolve(root, property),
                inner,
                &deeper,
                arguments,
                cases,
            );
        }
    }
}

/// `name` as one reference token of a JSON pointer.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Cases of the arguments as a whole: not an object, not JSON, a required argument missing,
/// an argument the tool does not declare, a key named twice, too deep, too large.
fn shape(
    schema: &Value,
    valid: &Map<String, Value>,
    limits: DecodeLimits,
    cases: &mut Vec<Hostile>,
) {
    let mut push = |what: String, arguments: String, expected| {
        cases.push(Hostile {
            what,
            arguments,
            expected,
        })
    };
    for (what, text) in [
        ("an array", "[]"),
        ("a string", "\"delete everything\""),
        ("null", "null"),
        ("a number", "1"),
    ] {
        push(
            format!("the arguments are {what}"),
            text.to_owned(),
            RejectionCode::NotAnObject,
        );
    }
    let valid_text = Value::Object(valid.clone()).to_string();
    for (what, text) in [
        ("cut short", valid_text[..valid_text.len() - 1].to_owned()),
        ("followed by a second object", format!("{valid_text}{{}}")),
        (
            "with a trailing comma",
            format!("{},}}", &valid_text[..valid_text.len() - 1]),
        ),
        ("with single quotes", valid_text.replace('"', "'")),
    ] {
        push(
            format!("the arguments {what}"),
            text,
            RejectionCode::MalformedJson,
        );
    }
    let required = schema["required"].as_array().cloned().unwrap_or_default();
    for name in required.iter().filter_map(Value::as_str) {
        let mut arguments = valid.clone();
        arguments.remove(name);
        push(
            format!("`{name}` left out"),
            Value::Object(arguments).to_string(),
            RejectionCode::MissingArgument,
        );
    }
    let declared = schema["properties"].as_object();
    let is_declared = |name: &str| declared.is_some_and(|properties| properties.contains_key(name));
    let look_alikes = declared
        .into_iter()
        .flat_map(|properties| properties.keys())
        .flat_map(|name| {
            [
                format!("{name}_"),
                name.to_uppercase(),
                format!("{name}\u{200b}"),
            ]
        });
    let claims = CLAIMS_OF_POWER.iter().map(|name| (*name).to_owned());
    for name in claims.chain(look_alikes).filter(|name| !is_declared(name)) {
        let mut arguments = valid.clone();
        arguments.insert(name.clone(), json!(true));
        push(
            format!("an undeclared argument `{}`", name.escape_debug()),
            Value::Object(arguments).to_string(),
            RejectionCode::UnknownArgument,
        );
    }
    for (name, value) in valid {
        push(
            format!("`{name}` named twice, with two values"),
            with_raw(valid, name, &other_value(value).to_string(), true),
            RejectionCode::DuplicateKey,
        );
    }
    let depth = limits.max_depth + 1;
    if let Some(name) = valid.keys().next() {
        push(
            format!("`{name}` nested {depth} deep"),
            with_raw(
                valid,
                name,
                &format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
                false,
            ),
            RejectionCode::ArgumentsTooDeep,
        );
    }
    let mut large = valid.clone();
    large.insert("padding".to_owned(), json!("x".repeat(limits.max_bytes)));
    push(
        format!("more than {} bytes", limits.max_bytes),
        Value::Object(large).to_string(),
        RejectionCode::ArgumentsTooLarge,
    );
}

/// `valid` with `name` set to `raw`, JSON text written as it is (a number's spelling, a nesting
/// no `Value` is built for), or named a second time if `valid` has it already.
fn with_raw(valid: &Map<String, Value>, name: &str, raw: &str, again: bool) -> String {
    let mut arguments = valid.clone();
    if !again {
        arguments.remove(name);
    }
    let text = Value::Object(arguments).to_string();
    let open = &text[..text.len() - 1];
    let comma = if open.len() > 1 { "," } else { "" };
    format!("{open}{comma}{}:{raw}}}", Value::from(name))
}

/// Another value of the same JSON type as `value`, so that a key named twice disagrees with
/// itself.
fn other_value(value: &Value) -> Value {
    match value {
        Value::Number(number) if number.as_u64() == Some(1) => json!(2),
        Value::Number(_) => json!(1),
        Value::String(text) => json!(format!("{text}x")),
        Value::Bool(flag) => json!(!flag),
        Value::Null => json!(0),
        Value::Array(_) => json!([]),
        Value::Object(_) => json!({}),
    }
}

/// `property` itself, or the definition its `$ref` names.
pub(crate) fn resolve<'a>(schema: &'a Value, property: &'a Value) -> &'a Value {
    property["$ref"]
        .as_str()
        .and_then(|reference| reference.strip_prefix("#/$defs/"))
        .and_then(|name| schema["$defs"].get(name))
        .unwrap_or(property)
}

/// The JSON types `property` accepts; empty when it does not say (a union, a `$ref` left).
fn types(property: &Value) -> Vec<&str> {
    match &property["type"] {
        Value::String(kind) => vec![kind.as_str()],
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// The range of the Rust integer type a schema's `format` names.
fn type_range(format: &str) -> Option<(i128, i128)> {
    let bits = |text: &str| match text {
        "8" => Some(8),
        "16" => Some(16),
        "32" => Some(32),
        "64" | "" => Some(64),
        _ => None,
    };
    if let Some(rest) = format.strip_prefix("uint") {
        let bits = bits(rest)?;
        return Some((0, (1i128 << bits) - 1));
    }
    let bits = bits(format.strip_prefix("int")?)?;
    Some((-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1))
}

/// The values of `property` that must be refused, each with what it breaks and its code.
fn broken_values(root: &Value, property: &Value) -> Vec<(String, Value, RejectionCode)> {
    let mut broken = Vec::new();
    let kinds = types(property);
    let enumerated = property["enum"].as_array();
    let wrong: [(&str, Value, &[&str]); 7] = [
        ("null", Value::Null, &["null"]),
        ("a boolean", json!(true), &["boolean"]),
        ("a string", json!("1"), &["string"]),
        ("a fraction", json!(1.5), &["number"]),
        ("a whole number", json!(7), &["integer", "number"]),
        ("an array", json!([]), &["array"]),
        ("an object", json!({}), &["object"]),
    ];
    // A union without a `type` (an enum with data) says too little to predict the code.
    if !kinds.is_empty() {
        for (what, value, accepted_as) in wrong {
            if !accepted_as.iter().any(|kind| kinds.contains(kind)) {
                broken.push((what.to_owned(), value, RejectionCode::InvalidType));
            }
        }
    }
    if kinds.contains(&"integer") {
        let range = property["format"].as_str().and_then(type_range);
        let minimum = property["minimum"].as_i64().map(i128::from);
        let maximum = property["maximum"]
            .as_u64()
            .map(i128::from)
            .or(property["maximum"].as_i64().map(i128::from));
        if let Some((low, high)) = range {
            for (what, value) in [("one above", high + 1), ("one below", low - 1)] {
                broken.push((
                    format!("{what} what its type holds ({value})"),
                    number(value),
                    RejectionCode::InvalidValue,
                ));
            }
            if let Some(maximum) = maximum.filter(|maximum| *maximum < high) {
                broken.push((
                    format!("one above its maximum ({})", maximum + 1),
                    number(maximum + 1),
                    RejectionCode::ConstraintViolation,
                ));
            }
            if let Some(minimum) = minimum.filter(|minimum| *minimum > low) {
                broken.push((
                    format!("one below its minimum ({})", minimum - 1),
                    number(minimum - 1),
                    RejectionCode::ConstraintViolation,
                ));
            }
        }
    }
    if kinds.contains(&"string") && enumerated.is_none() {
        if let Some(maximum) = property["maxLength"].as_u64() {
            let long = "a".repeat(usize::try_from(maximum).unwrap_or(usize::MAX) + 1);
            broken.push((
                format!("one character longer than {maximum}"),
                json!(long),
                RejectionCode::ConstraintViolation,
            ));
        }
        if let Some(minimum) = property["minLength"]
            .as_u64()
            .filter(|minimum| *minimum > 0)
        {
            let short = "a".repeat(usize::try_from(minimum - 1).unwrap_or(0));
            broken.push((
                format!("one character shorter than {minimum}"),
                json!(short),
                RejectionCode::ConstraintViolation,
            ));
        }
    }
    if kinds.contains(&"array") {
        let items = resolve(root, &property["items"]);
        let item = crate::valid::valid_value(root, items);
        if let (Some(maximum), Some(item)) = (property["maxItems"].as_u64(), &item) {
            let count = usize::try_from(maximum).unwrap_or(usize::MAX - 1) + 1;
            broken.push((
                format!("{count} elements, one more than it takes"),
                Value::Array(vec![item.clone(); count]),
                RejectionCode::ConstraintViolation,
            ));
        }
        if let (true, Some(item)) = (property["uniqueItems"] == true, &item) {
            broken.push((
                "an element twice in a set".to_owned(),
                json!([item, item]),
                RejectionCode::InvalidValue,
            ));
        }
        for (what, value, expected) in broken_values(root, items) {
            broken.push((
                format!("an element that is {what}"),
                json!([value]),
                expected,
            ));
        }
    }
    if let Some(allowed) = enumerated {
        let strings: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
        for (what, value) in spellings_beside(&strings) {
            broken.push((
                format!("{what}, outside its values"),
                json!(value),
                RejectionCode::InvalidValue,
            ));
        }
    }
    broken
}

/// Spellings of `allowed`'s first value that are none of `allowed`: another case, a space
/// around it, an invisible or a right-to-left character in it, a Cyrillic look-alike letter,
/// full-width letters, a NUL; and a value made up.
fn spellings_beside(allowed: &[&str]) -> Vec<(&'static str, String)> {
    let Some(first) = allowed.first() else {
        return Vec::new();
    };
    let look_alike: String = first
        .chars()
        .map(|c| match c {
            'a' => 'а',
            'e' => 'е',
            'o' => 'о',
            'c' => 'с',
            'p' => 'р',
            'E' => 'Е',
            'O' => 'О',
            'A' => 'А',
            other => other,
        })
        .collect();
    let full_width: String = first
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() {
                char::from_u32(u32::from(c) - 0x21 + 0xFF01).unwrap_or(c)
            } else {
                c
            }
        })
        .collect();
    let spellings = [
        ("another case", swap_case(first)),
        ("a trailing space", format!("{first} ")),
        ("a zero-width space", format!("{first}\u{200b}")),
        ("a right-to-left mark", format!("\u{200f}{first}")),
        ("a Cyrillic look-alike", look_alike),
        ("full-width letters", full_width),
        ("a NUL", format!("{first}\u{0}")),
        ("a made-up value", "anything_else".to_owned()),
    ];
    spellings
        .into_iter()
        .filter(|(_, spelling)| !allowed.contains(&spelling.as_str()))
        .collect()
}

fn swap_case(text: &str) -> String {
    let upper = text.to_uppercase();
    if upper == text {
        text.to_lowercase()
    } else {
        upper
    }
}

/// `value` as a JSON number.
fn number(value: i128) -> Value {
    serde_json::from_str(&value.to_string()).expect("an integer is JSON")
}

/// Spellings of numbers past an integer argument's maximum that only the text can carry: an
/// integral float and an exponent (`51.0`, `5.1e1`).
fn raw_number_forms(property: &Value) -> Option<Vec<(String, String, RejectionCode)>> {
    if !types(property).contains(&"integer") {
        return None;
    }
    let (_, high) = property["format"].as_str().and_then(type_range)?;
    let maximum = property["maximum"]
        .as_u64()
        .map(i128::from)
        .filter(|maximum| *maximum < high)?;
    let above = maximum + 1;
    let digits = above.to_string();
    let exponent =
        format!("{}.{}e{}", &digits[..1], &digits[1..], digits.len() - 1).replace(".e", "e");
    Some(vec![
        (
            format!("{above}.0, an integral float past its maximum"),
            format!("{above}.0"),
            RejectionCode::ConstraintViolation,
        ),
        (
            format!("{exponent}, an exponent past its maximum"),
            exponent,
            RejectionCode::ConstraintViolation,
        ),
    ])
}
