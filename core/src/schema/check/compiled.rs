//! A subschema as the check holds it: its keywords parsed once, the schemas it names by index.

use std::collections::HashSet;

use regex::Regex;
use serde_json::{Number, Value};

use crate::json::{JsonView, View, canonical_text, integer_value};

pub(super) type Id = usize;

/// The allowed values of an `enum` or `const`: compared one by one when they are few, by
/// their canonical text when they are many.
#[derive(Debug)]
pub(super) enum Allowed {
    Few(Vec<Value>),
    Many(HashSet<String>),
}

impl Allowed {
    const FEW: usize = 16;

    pub(super) fn new(values: &[Value]) -> Allowed {
        if values.len() <= Self::FEW {
            Allowed::Few(values.to_vec())
        } else {
            Allowed::Many(values.iter().map(canonical_text).collect())
        }
    }

    pub(super) fn holds<J: JsonView>(&self, value: &J) -> bool {
        match self {
            Allowed::Few(values) => values.iter().any(|allowed| same(value, allowed)),
            Allowed::Many(texts) => texts.contains(&canonical_text(value)),
        }
    }
}

/// JSON Schema's equality: numbers by value, object members in any order.
pub(super) fn same<J: JsonView>(value: &J, allowed: &Value) -> bool {
    match (value.view(), allowed) {
        (View::Null, Value::Null) => true,
        (View::Bool(a), Value::Bool(b)) => a == *b,
        (View::String(a), Value::String(b)) => a == b,
        (View::Number(a), Value::Number(b)) => compare(a, b).is_some_and(|order| order.is_eq()),
        (View::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b))
        }
        (View::Object(len), Value::Object(b)) => {
            let mut equal = len == b.len();
            value.for_each_member(&mut |key, member| {
                equal = equal && b.get(key).is_some_and(|allowed| same(member, allowed));
            });
            equal
        }
        _ => false,
    }
}

#[derive(Debug, Default)]
pub(super) struct Compiled {
    /// `false`: nothing is valid.
    pub(super) nothing: bool,
    pub(super) types: Vec<JsonType>,
    pub(super) allowed: Option<Allowed>,
    // numbers
    pub(super) minimum: Option<Number>,
    pub(super) maximum: Option<Number>,
    pub(super) exclusive_minimum: Option<Number>,
    pub(super) exclusive_maximum: Option<Number>,
    pub(super) multiple_of: Option<Number>,
    // strings
    pub(super) min_length: Option<u64>,
    pub(super) max_length: Option<u64>,
    pub(super) pattern: Option<(Regex, String)>,
    pub(super) format: Option<Format>,
    /// The range a numeric `format` (`uint8`, `float`, ...) states: the Rust type's own, which
    /// its `Deserialize` enforces.
    pub(super) type_range: Option<(Value, Value)>,
    // arrays
    pub(super) items: Option<Id>,
    pub(super) prefix_items: Vec<Id>,
    pub(super) min_items: Option<u64>,
    pub(super) max_items: Option<u64>,
    pub(super) unique_items: bool,
    // objects
    /// Sorted by name.
    pub(super) properties: Vec<(String, Id)>,
    pub(super) pattern_properties: Vec<(Regex, Id)>,
    pub(super) required: Vec<String>,
    pub(super) additional: Option<Id>,
    pub(super) property_names: Option<Id>,
    pub(super) min_properties: Option<u64>,
    pub(super) max_properties: Option<u64>,
    // applicators
    pub(super) reference: Option<Id>,
    pub(super) all_of: Vec<Id>,
    pub(super) any_of: Vec<Id>,
    pub(super) one_of: Vec<Id>,
    pub(super) not: Option<Id>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum JsonType {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Array,
    Object,
}

impl JsonType {
    pub(super) fn parse(name: &str) -> Option<JsonType> {
        Some(match name {
            "null" => JsonType::Null,
            "boolean" => JsonType::Boolean,
            "integer" => JsonType::Integer,
            "number" => JsonType::Number,
            "string" => JsonType::String,
            "array" => JsonType::Array,
            "object" => JsonType::Object,
            _ => return None,
        })
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            JsonType::Null => "null",
            JsonType::Boolean => "a boolean",
            JsonType::Integer => "an integer",
            JsonType::Number => "a number",
            JsonType::String => "a string",
            JsonType::Array => "an array",
            JsonType::Object => "an object",
        }
    }

    pub(super) fn holds<J: JsonView>(self, value: &J) -> bool {
        match (self, value.view()) {
            (JsonType::Null, View::Null)
            | (JsonType::Boolean, View::Bool(_))
            | (JsonType::Number, View::Number(_))
            | (JsonType::String, View::String(_))
            | (JsonType::Array, View::Array(_))
            | (JsonType::Object, View::Object(_)) => true,
            (JsonType::Integer, View::Number(number)) => {
                integer_value(number).is_some() || number.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Format {
    Email,
    Uri,
}

/// Two numbers by value: exactly where both are integers, as floats otherwise.
pub(super) fn compare(a: &Number, b: &Number) -> Option<std::cmp::Ordering> {
    match (integer_value(a), integer_value(b)) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}
