//! Hostile arguments written from a tool's input schema: one argument broken at a time, the
//! others left as a valid call has them, each with the code the gates must answer.
//!
//! The codes follow the gates' written rules (the guide's `gates` and `refusals` pages): a value
//! outside what its type can hold is `invalid_value`, a value the type holds but a declared
//! bound forbids is `constraint_violation`; the type's range comes from the schema's `format`
//! (`uint8`, `int64`, ...), since the exported `maximum` of a `u8` is 255 whether or not a
//! `#[validate(range)]` narrowed it.

use std::collections::BTreeSet;

use portcullis_core::{DecodeLimits, RejectionCode};
use serde_json::{Map, Value, json};

use crate::schema::resolve;
use crate::valid::valid_value;

/// One hostile argument text and what it must get.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Hostile {
    /// What was broken, for a person reading the report.
    pub(crate) what: String,
    /// The arguments as the model would send them: JSON text, which alone can name a key twice.
    pub(crate) arguments: String,
    pub(crate) expected: RejectionCode,
}

/// Names a model (or an injected text) may add to claim a power it does not have, or to
/// talk its way past a check.
pub(crate) const CLAIMS_OF_POWER: [&str; 20] = [
    "role",
    "roles",
    "admin",
    "is_admin",
    "tenant",
    "tenant_id",
    "environment",
    "actor",
    "user",
    "reviewer",
    "override",
    "sudo",
    "bypass",
    "force",
    "approved",
    "approval",
    "confirm",
    "dry_run",
    "skip_checks",
    "__proto__",
];

/// Every hostile argument text for a tool whose input schema is `schema`, starting from
/// `valid`, a call's arguments that pass every gate.
pub(crate) fn hostile(
    schema: &Value,
    valid: &Map<String, Value>,
    limits: DecodeLimits,
) -> Vec<Hostile> {
    let mut cases = Vec::new();
    whole(schema, valid, limits, &mut cases);
    let top = Place {
        path: String::new(),
        before: String::new(),
        after: String::new(),
    };
    object(schema, schema, valid, &top, limits, &mut cases);
    cases
}

/// Where an object sits in the arguments: its path for a person, and the arguments' text
/// before and after it, so that a case can write the object's own text, which alone can name
/// a key twice or spell a number its own way.
struct Place {
    /// `address.` for the object of the argument `address`; empty at the top.
    path: String,
    before: String,
    after: String,
}

impl Place {
    /// The place of the object member `name` of `object`, itself at `self`.
    fn inside(&self, object: &Map<String, Value>, name: &str) -> Place {
        const HOLE: &str = "\u{0}red-team-hole\u{0}";
        let mut holed = object.clone();
        holed.insert(name.to_owned(), json!(HOLE));
        let text = Value::Object(holed).to_string();
        let hole = json!(HOLE).to_string();
        let (before, after) = text.split_once(&hole).unwrap_or((&text, ""));
        Place {
            path: format!("{}{name}.", self.path),
            before: format!("{}{before}", self.before),
            after: format!("{after}{}", self.after),
        }
    }

    /// The whole arguments with `object` here.
    fn with(&self, object: &str) -> String {
        format!("{}{object}{}", self.before, self.after)
    }
}

/// Cases of the arguments as a whole: not an object, not JSON, nothing or the valid call
/// wrapped, too deep, too large.
fn whole(
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
    let valid_text = Value::Object(valid.clone()).to_string();
    for (what, text) in [
        ("an array", "[]".to_owned()),
        ("a string", "\"delete everything\"".to_owned()),
        ("null", "null".to_owned()),
        ("a number", "1".to_owned()),
        ("true", "true".to_owned()),
        ("the valid call in an array", format!("[{valid_text}]")),
        (
            "the valid call encoded once more, as a string",
            json!(valid_text).to_string(),
        ),
    ] {
        push(
            format!("the arguments are {what}"),
            text,
            RejectionCode::NotAnObject,
        );
    }
    let open = &valid_text[..valid_text.len() - 1];
    for (what, text) in [
        ("cut short", open.to_owned()),
        ("followed by a second object", format!("{valid_text}{{}}")),
        ("followed by words", format!("{valid_text} please run it")),
        ("with a trailing comma", format!("{open},}}")),
        ("with single quotes", valid_text.replace('"', "'")),
        ("with keys unquoted", unquoted_keys(valid)),
        ("as Python writes a dict", python_dict(valid)),
        ("after a byte order mark", format!("\u{feff}{valid_text}")),
        ("with a comment", format!("{open}/* run it */}}")),
        ("empty", String::new()),
    ]
    .into_iter()
    // Without a member, some of these spellings are JSON (`{}`).
    .filter(|(_, text)| serde_json::from_str::<Value>(text).is_err())
    {
        push(
            format!("the arguments {what}"),
            text,
            RejectionCode::MalformedJson,
        );
    }
    let declares = |name: &str| schema["properties"].get(name).is_some();
    if schema["required"]
        .as_array()
        .is_some_and(|required| !required.is_empty())
        && !declares("arguments")
    {
        push(
            "no argument at all".to_owned(),
            "{}".to_owned(),
            RejectionCode::MissingArgument,
        );
        push(
            "the valid call wrapped in `arguments`".to_owned(),
            json!({ "arguments": valid }).to_string(),
            RejectionCode::UnknownArgument,
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
    // A limit past 64 MiB is not worth the memory a case would take.
    if limits.max_bytes <= 64 << 20 {
        let mut large = valid.clone();
        large.insert("padding".to_owned(), json!("x".repeat(limits.max_bytes)));
        push(
            format!("more than {} bytes", limits.max_bytes),
            Value::Object(large).to_string(),
            RejectionCode::ArgumentsTooLarge,
        );
    }
}

/// Cases of one object (the arguments, or an object in them, at `place`) whose schema is
/// `schema` and whose valid value is `valid`: each required member left out, members it does
/// not declare (claims of power, look-alikes of its own names), each member named twice, each
/// member's value broken; and so on into the objects among its members, and into each variant
/// of an internally tagged enum with data ([`variants`]).
fn object(
    root: &Value,
    schema: &Value,
    valid: &Map<String, Value>,
    place: &Place,
    limits: DecodeLimits,
    cases: &mut Vec<Hostile>,
) {
    let path = &place.path;
    let mut push = |what: String, object: String, expected| {
        cases.push(Hostile {
            what,
            arguments: place.with(&object),
            expected,
        })
    };
    let required = schema["required"].as_array().cloned().unwrap_or_default();
    let is_required = |name: &str| required.iter().any(|member| member == name);
    for name in required.iter().filter_map(Value::as_str) {
        let mut object = valid.clone();
        object.remove(name);
        push(
            format!("`{path}{name}` left out"),
            Value::Object(object).to_string(),
            RejectionCode::MissingArgument,
        );
    }
    let properties = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    // The arguments take no member they do not declare; an object in them, where it says so.
    if path.is_empty() || schema["additionalProperties"] == false {
        let look_alikes = properties.keys().flat_map(|name| {
            [
                format!("{name}_"),
                name.to_uppercase(),
                format!("{name}\u{200b}"),
                format!(" {name}"),
                camel_case(name),
                cyrillic_look_alike(name),
                full_width(name),
                format!("{name}\u{0}"),
            ]
        });
        let claims = CLAIMS_OF_POWER.iter().map(|name| (*name).to_owned());
        let mut seen = BTreeSet::new();
        for name in claims
            .chain(look_alikes)
            .filter(|name| !properties.contains_key(name) && seen.insert(name.clone()))
        {
            let mut object = valid.clone();
            object.insert(name.clone(), json!(true));
            push(
                format!(
                    "`{path}{}`, a member it does not declare",
                    name.escape_debug()
                ),
                Value::Object(object).to_string(),
                RejectionCode::UnknownArgument,
            );
        }
    }
    for (name, value) in valid {
        let other = other_value(value).to_string();
        let escaped: String = name
            .encode_utf16()
            .map(|unit| format!("\\u{unit:04x}"))
            .collect();
        for (how, text) in [
            ("with two values", with_raw(valid, name, &other, true)),
            (
                "with the same value",
                with_raw(valid, name, &value.to_string(), true),
            ),
            (
                "once spelt in JSON escapes",
                with_raw_key(valid, &format!("\"{escaped}\""), &other),
            ),
        ] {
            push(
                format!("`{path}{name}` named twice, {how}"),
                text,
                RejectionCode::DuplicateKey,
            );
        }
    }
    for (name, property) in &properties {
        let property = resolve(root, property);
        let breakers = valid
            .get(name)
            .map(|value| pattern_breakers(property, value));
        for (what, value, expected) in broken_values(root, property, limits)
            .into_iter()
            .chain(breakers.into_iter().flatten())
        {
            // Where `null` means absent (OpenAI's strict profiles), a null member is left out.
            let expected = match (value.is_null() && limits.null_means_absent, expected) {
                (false, expected) => expected,
                (true, _) if is_required(name) => RejectionCode::MissingArgument,
                (true, _) => continue,
            };
            let mut object = valid.clone();
            object.insert(name.clone(), value);
            push(
                format!("`{path}{name}`: {what}"),
                Value::Object(object).to_string(),
                expected,
            );
        }
        for (what, raw, expected) in raw_number_forms(property) {
            push(
                format!("`{path}{name}`: {what}"),
                with_raw(valid, name, &raw, false),
                expected,
            );
        }
    }
    for (name, property) in &properties {
        let property = resolve(root, property);
        let inner = place.inside(valid, name);
        let variants = variants(root, property);
        if variants.is_empty()
            && let Some(Value::Object(member)) = valid.get(name)
        {
            object(root, property, member, &inner, limits, cases);
        }
        for variant in variants {
            if let Some(Value::Object(member)) = valid_value(root, variant) {
                object(root, variant, &member, &inner, limits, cases);
            }
        }
    }
}

/// The variants of an internally tagged enum with data (`oneOf`, `anyOf` of objects, each
/// with a constant tag member); none for any other union, whose refusals serde words
/// otherwise (an externally tagged variant is an object of one member, an untagged enum's
/// every failure is "no variant matched").
fn variants<'a>(root: &'a Value, property: &'a Value) -> Vec<&'a Value> {
    let variants: Vec<&Value> = ["oneOf", "anyOf"]
        .iter()
        .filter_map(|union| property[*union].as_array())
        .flatten()
        .map(|variant| resolve(root, variant))
        .filter(|variant| variant["type"] != "null")
        .collect();
    let tagged = |variant: &&Value| {
        variant["type"] == "object"
            && variant["properties"].as_object().is_some_and(|members| {
                members
                    .values()
                    .any(|member| resolve(root, member).get("const").is_some())
            })
    };
    match variants.iter().all(tagged) {
        true => variants,
        false => Vec::new(),
    }
}

/// The values of a unit enum written as a `oneOf` of constants (its variants documented).
fn constants(property: &Value) -> Option<Vec<Value>> {
    let variants = property["oneOf"].as_array()?;
    variants
        .iter()
        .map(|variant| variant.get("const").cloned())
        .collect()
}

/// `valid` with `name` set to `raw`, JSON text written as it is (a number's spelling, a nesting
/// no `Value` is built for), or named a second time if `valid` has it already.
fn with_raw(valid: &Map<String, Value>, name: &str, raw: &str, again: bool) -> String {
    let mut arguments = valid.clone();
    if !again {
        arguments.remove(name);
    }
    with_raw_key(&arguments, &Value::from(name).to_string(), raw)
}

/// `arguments` with one more member, its key and value both JSON text written as they are.
fn with_raw_key(arguments: &Map<String, Value>, key: &str, raw: &str) -> String {
    let text = Value::Object(arguments.clone()).to_string();
    let open = &text[..text.len() - 1];
    let comma = if open.len() > 1 { "," } else { "" };
    format!("{open}{comma}{key}:{raw}}}")
}

/// `arguments` as JSON text whose keys are not quoted, as JavaScript and JSON5 write them.
fn unquoted_keys(arguments: &Map<String, Value>) -> String {
    let members: Vec<String> = arguments
        .iter()
        .map(|(name, value)| format!("{name}: {value}"))
        .collect();
    format!("{{{}}}", members.join(", "))
}

/// `arguments` as Python's `repr` writes a dict: single quotes, `True`, `False`, `None`.
fn python_dict(arguments: &Map<String, Value>) -> String {
    fn python(value: &Value) -> String {
        match value {
            Value::Null => "None".to_owned(),
            Value::Bool(true) => "True".to_owned(),
            Value::Bool(false) => "False".to_owned(),
            Value::String(text) => format!("'{text}'"),
            Value::Array(items) => {
                let items: Vec<String> = items.iter().map(python).collect();
                format!("[{}]", items.join(", "))
            }
            Value::Object(members) => python_dict(members),
            number => number.to_string(),
        }
    }
    let members: Vec<String> = arguments
        .iter()
        .map(|(name, value)| format!("'{name}': {}", python(value)))
        .collect();
    format!("{{{}}}", members.join(", "))
}

/// `snake_case` as `camelCase`.
pub(crate) fn camel_case(name: &str) -> String {
    let mut parts = name.split('_');
    let first = parts.next().unwrap_or_default().to_owned();
    parts.fold(first, |mut camel, part| {
        let mut chars = part.chars();
        if let Some(initial) = chars.next() {
            camel.extend(initial.to_uppercase());
            camel.push_str(chars.as_str());
        }
        camel
    })
}

/// `text` with its Latin letters that have a Cyrillic twin written as the twin.
pub(crate) fn cyrillic_look_alike(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            'a' => 'а',
            'e' => 'е',
            'o' => 'о',
            'c' => 'с',
            'p' => 'р',
            'x' => 'х',
            'y' => 'у',
            'A' => 'А',
            'E' => 'Е',
            'O' => 'О',
            'C' => 'С',
            'P' => 'Р',
            other => other,
        })
        .collect()
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

/// The JSON types `property` accepts; empty when it does not say (a union of which a variant
/// does not say, a `$ref` left).
fn types(property: &Value) -> Vec<&str> {
    match &property["type"] {
        Value::String(kind) => vec![kind.as_str()],
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => {
            let variants = ["oneOf", "anyOf"]
                .iter()
                .find_map(|union| property[*union].as_array());
            let kinds: Vec<Vec<&str>> = variants.into_iter().flatten().map(types).collect();
            if kinds.iter().any(Vec::is_empty) {
                return Vec::new();
            }
            kinds.into_iter().flatten().collect()
        }
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
fn broken_values(
    root: &Value,
    property: &Value,
    limits: DecodeLimits,
) -> Vec<(String, Value, RejectionCode)> {
    let mut broken = Vec::new();
    let kinds = types(property);
    // A constant is an enum of one value (the tag of an enum with data, say).
    let constant = property
        .get("const")
        .map(|value| vec![value.clone()])
        .or_else(|| constants(property));
    let enumerated = property["enum"].as_array().or(constant.as_ref());
    let wrong: [(&str, Value, &[&str]); 12] = [
        ("null", Value::Null, &["null"]),
        ("a boolean", json!(true), &["boolean"]),
        ("a string", json!("1"), &["string"]),
        ("an empty string", json!(""), &["string"]),
        ("the string \"NaN\"", json!("NaN"), &["string"]),
        ("a number in words", json!("seven"), &["string"]),
        ("a fraction", json!(1.5), &["number"]),
        ("a small negative fraction", json!(-0.5), &["number"]),
        ("a tiny fraction", json!(1e-7), &["number"]),
        ("a whole number", json!(7), &["integer", "number"]),
        ("an array", json!([]), &["array"]),
        ("an object", json!({}), &["object"]),
    ];
    // A union of which a variant has no `type` says too little to predict the code. An enum
    // with data is read from an array too (serde takes an internally tagged enum's tag from
    // its first element), so an array there is refused for its tag, not its type.
    let union = property.get("type").is_none();
    let predictable = !union || constant.is_some() || !variants(root, property).is_empty();
    if !kinds.is_empty() && predictable {
        for (what, value, accepted_as) in wrong {
            let accepted = accepted_as.iter().any(|kind| kinds.contains(kind));
            let tag_first = union && value.is_array();
            if !(accepted || tag_first) {
                broken.push((what.to_owned(), value, RejectionCode::InvalidType));
            }
        }
    }
    if kinds.contains(&"integer")
        && let Some((low, high)) = property["format"].as_str().and_then(type_range)
    {
        for (what, value) in [
            ("one above what its type holds", high + 1),
            ("one below what its type holds", low - 1),
            (
                "38 digits, more than any integer type holds",
                10i128.pow(38) - 1,
            ),
        ] {
            broken.push((
                format!("{what} ({value})"),
                number(value),
                RejectionCode::InvalidValue,
            ));
        }
        for Past { what, value, .. } in past_bounds(property, low, high) {
            let what = format!("{what} ({value})");
            for (how, text) in [
                ("in quotes", value.to_string()),
                ("in full-width digits", full_width(&value.to_string())),
            ] {
                broken.push((
                    format!("{what} {how}"),
                    json!(text),
                    RejectionCode::InvalidType,
                ));
            }
            broken.push((what, number(value), RejectionCode::ConstraintViolation));
        }
    }
    if kinds.contains(&"number") && !kinds.contains(&"integer") {
        for (what, value) in past_float_bounds(property) {
            broken.push((
                format!("{what} in quotes"),
                json!(value.to_string()),
                RejectionCode::InvalidType,
            ));
            broken.push((what, json!(value), RejectionCode::ConstraintViolation));
        }
    }
    // A string of exactly one character is how a `char` reads: its type refuses any other
    // length, as `invalid_value`.
    let char_like = property["minLength"] == 1 && property["maxLength"] == 1;
    if kinds.contains(&"string") && enumerated.is_none() && !char_like {
        if let Some(maximum) = property["maxLength"].as_u64() {
            let count = usize::try_from(maximum).unwrap_or(usize::MAX - LONG) + 1;
            // A case longer than half the size limit would meet that limit instead.
            let fits = |letter: &str, count: usize| {
                letter.len().saturating_mul(count) <= limits.max_bytes / 2
            };
            for (what, letter, count) in [
                ("one character longer", "a", count),
                ("one two-byte letter longer", "é", count),
                ("one emoji longer", "🙂", count),
                ("64 KiB longer", "a", count.saturating_add(LONG)),
            ]
            .into_iter()
            .filter(|(_, letter, count)| fits(letter, *count))
            {
                broken.push((
                    format!("{what} than {maximum}"),
                    json!(letter.repeat(count)),
                    RejectionCode::ConstraintViolation,
                ));
            }
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
            if minimum > 1 {
                broken.push((
                    format!("empty, where it takes at least {minimum} characters"),
                    json!(""),
                    RejectionCode::ConstraintViolation,
                ));
            }
        }
    }
    if kinds.contains(&"array") {
        let items = resolve(root, &property["items"]);
        let item = valid_value(root, items);
        let most = property["maxItems"]
            .as_u64()
            .filter(|maximum| *maximum < 1 << 16);
        if let (Some(maximum), Some(item)) = (most, &item) {
            let count = usize::try_from(maximum).unwrap_or(0) + 1;
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
        // Beside the broken element, as many good ones as the array needs at least.
        let fewest = property["minItems"].as_u64().unwrap_or(0).min(1 << 16);
        let fewest = usize::try_from(fewest).unwrap_or(0);
        let others = match &item {
            Some(item) => Some(vec![item.clone(); fewest.saturating_sub(1)]),
            None if fewest <= 1 => Some(Vec::new()),
            None => None,
        };
        if let Some(others) = others {
            for (what, value, expected) in broken_values(root, items, limits) {
                let mut elements = vec![value];
                elements.extend(others.iter().cloned());
                broken.push((
                    format!("an element that is {what}"),
                    Value::Array(elements),
                    expected,
                ));
            }
        }
    }
    if let Some(allowed) = enumerated {
        let strings: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
        for value in &strings {
            for (what, spelling) in spellings_beside(value, &strings) {
                broken.push((
                    format!("`{value}` with {what}, outside its values"),
                    json!(spelling),
                    RejectionCode::InvalidValue,
                ));
            }
        }
        if !strings.is_empty() {
            broken.push((
                "a made-up value".to_owned(),
                json!("anything_else"),
                RejectionCode::InvalidValue,
            ));
        }
    }
    broken
}

/// Spellings of `valid`, a string `property`'s `pattern` takes, that the pattern does not
/// take: the invisible, right-to-left, look-alike and full-width spellings of enum values, for
/// a value checked by a pattern. Matched with the `regex` crate, whose `\d` and `\w` take
/// more than ECMA-262's (which the gates use): what it refuses, the gates refuse too.
fn pattern_breakers(property: &Value, valid: &Value) -> Vec<(String, Value, RejectionCode)> {
    let (Some(pattern), Some(valid)) = (property["pattern"].as_str(), valid.as_str()) else {
        return Vec::new();
    };
    let Ok(pattern) = regex::Regex::new(pattern) else {
        return Vec::new();
    };
    spellings_beside(valid, &[])
        .into_iter()
        .filter(|(_, spelling)| !pattern.is_match(spelling))
        .map(|(what, spelling)| {
            (
                format!("`{valid}` with {what}, which its pattern does not take"),
                json!(spelling),
                RejectionCode::ConstraintViolation,
            )
        })
        .collect()
}

/// How much longer than its maximum the longest over-long string is: 64 KiB.
const LONG: usize = 64 * 1024;

/// Spellings of `value` that are none of `allowed`: another case, a space around it, an
/// invisible, joining or right-to-left character in it, a combining accent, Cyrillic
/// look-alike letters, full-width letters, a line break, a NUL, quotes around it.
fn spellings_beside(value: &str, allowed: &[&str]) -> Vec<(&'static str, String)> {
    let spellings = [
        ("another case", swap_case(value)),
        ("a trailing space", format!("{value} ")),
        ("a leading space", format!(" {value}")),
        ("a zero-width space", format!("{value}\u{200b}")),
        ("a word joiner", format!("\u{2060}{value}")),
        ("a soft hyphen", format!("{value}\u{ad}")),
        ("a right-to-left mark", format!("\u{200f}{value}")),
        ("a combining accent", format!("{value}\u{301}")),
        ("Cyrillic look-alike letters", cyrillic_look_alike(value)),
        ("full-width letters", full_width(value)),
        ("a line break", format!("{value}\n")),
        ("a NUL", format!("{value}\u{0}")),
        ("quotes around it", format!("\"{value}\"")),
    ];
    spellings
        .into_iter()
        .filter(|(_, spelling)| !allowed.contains(&spelling.as_str()))
        .collect()
}

/// `text` with its ASCII letters, digits and signs written full-width (`ａ`, `１`).
pub(crate) fn full_width(text: &str) -> String {
    text.chars()
        .map(|c| match c.is_ascii_graphic() {
            true => char::from_u32(u32::from(c) - 0x21 + 0xFF01).unwrap_or(c),
            false => c,
        })
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

/// An integer a declared bound forbids.
struct Past {
    /// Where it lies, for a person: "one above its maximum".
    what: &'static str,
    value: i128,
    /// Whether it is the first integer past the bound.
    next: bool,
}

/// The integers of `property`'s type (`low` to `high`) that its declared bounds forbid: one
/// past each bound, far past it, and the type's own limit.
fn past_bounds(property: &Value, low: i128, high: i128) -> Vec<Past> {
    // A bound may be written as a float (`1000.0`), as exclusive bounds are.
    let bound = |key: &str| {
        let bound = &property[key];
        let integral = bound
            .as_f64()
            .filter(|bound| bound.fract() == 0.0 && bound.abs() < 9e15);
        (bound.as_u64().map(i128::from))
            .or(bound.as_i64().map(i128::from))
            .or(integral.map(|bound| bound as i128))
    };
    // An exclusive bound is an inclusive one a step inside it; the tighter of the two holds.
    let maximum = [
        bound("maximum"),
        bound("exclusiveMaximum").map(|bound| bound - 1),
    ]
    .into_iter()
    .flatten()
    .min();
    let minimum = [
        bound("minimum"),
        bound("exclusiveMinimum").map(|bound| bound + 1),
    ]
    .into_iter()
    .flatten()
    .max();
    let mut past = Vec::new();
    let mut push = |what, value, next| past.push(Past { what, value, next });
    if let Some(maximum) = maximum.filter(|maximum| *maximum < high) {
        push("one above its maximum", maximum + 1, true);
        let far = maximum.saturating_mul(1000).max(maximum + 2);
        if far < high {
            push("far above its maximum", far, false);
        }
        if high > maximum + 1 {
            push("the largest its type holds", high, false);
        }
    }
    if let Some(minimum) = minimum.filter(|minimum| *minimum > low) {
        push("one below its minimum", minimum - 1, true);
        if low < minimum - 1 {
            push("the smallest its type holds", low, false);
        }
    }
    past
}

/// The numbers a fractional `property`'s declared bounds forbid: the next number past each
/// bound, one past it, an exclusive bound itself.
fn past_float_bounds(property: &Value) -> Vec<(String, f64)> {
    // `±f32::MAX` is an `f32`'s own range, refused as `invalid_value` past it, not a bound.
    let bound =
        |key: &str| (property[key].as_f64()).filter(|bound| bound.abs() < f64::from(f32::MAX));
    let mut past = Vec::new();
    // Past the largest float, `+ 1.0` is the same float: only a number past its bound counts.
    if let Some(maximum) = bound("maximum") {
        for (what, value) in [
            ("just above", maximum.next_up()),
            ("one above", maximum + 1.0),
        ] {
            if value.is_finite() && value > maximum {
                past.push((format!("{what} its maximum ({maximum})"), value));
            }
        }
    }
    if let Some(minimum) = bound("minimum") {
        for (what, value) in [
            ("just below", minimum.next_down()),
            ("one below", minimum - 1.0),
        ] {
            if value.is_finite() && value < minimum {
                past.push((format!("{what} its minimum ({minimum})"), value));
            }
        }
    }
    for key in ["exclusiveMaximum", "exclusiveMinimum"] {
        if let Some(bound) = bound(key) {
            past.push((format!("its {key} itself ({bound})"), bound));
        }
    }
    past.dedup_by(|a, b| a.1 == b.1);
    past
}

/// Spellings of numbers that only the text can carry: those JSON does not write (`NaN`, hex,
/// a plus sign, ...), and the integers one past an integer argument's bounds as an integral
/// float, in exponents, and for zero as its negative. Past 2^53 a float no longer holds every
/// integer, so such bounds get no float spellings.
fn raw_number_forms(property: &Value) -> Vec<(String, String, RejectionCode)> {
    let kinds = types(property);
    if !kinds.contains(&"integer") && !kinds.contains(&"number") {
        return Vec::new();
    }
    let mut forms: Vec<_> = [
        ("NaN", "not a number"),
        ("Infinity", "infinity"),
        ("0x10", "hexadecimal"),
        ("+5", "a plus sign"),
        ("05", "a leading zero"),
        ("1_000", "digits grouped"),
    ]
    .into_iter()
    .map(|(raw, what)| {
        (
            format!("{raw}, {what}, which JSON does not write"),
            raw.to_owned(),
            RejectionCode::MalformedJson,
        )
    })
    .collect();
    let Some((low, high)) = property["format"].as_str().and_then(type_range) else {
        return forms;
    };
    let exact = 1i128 << 53;
    for Past { what, value, .. } in past_bounds(property, low, high)
        .into_iter()
        .filter(|past| past.next && past.value.abs() <= exact)
    {
        let digits = value.abs().to_string();
        let sign = if value < 0 { "-" } else { "" };
        let mantissa = format!("{}.{}", &digits[..1], &digits[1..]);
        let mantissa = mantissa.trim_end_matches('.');
        let mut spellings = vec![
            format!("{value}.0"),
            format!("{sign}{mantissa}e{}", digits.len() - 1),
            format!("{value}E0"),
            format!("{value}e+0"),
        ];
        match value {
            0 => spellings.extend(["-0".to_owned(), "-0.0".to_owned()]),
            _ => spellings.push(format!("{value}0e-1")),
        }
        for spelling in spellings {
            forms.push((
                format!("{spelling}, {what}"),
                spelling,
                RejectionCode::ConstraintViolation,
            ));
        }
    }
    forms
}
