//! The JSON Schema of a tool's arguments and output, made to promise exactly what the decode
//! and validate gates enforce.
//!
//! schemars describes integer types with a non-standard `format` (`uint8`, `int64`, ...) and at
//! most `minimum: 0`. The decode gate refuses any integer outside the Rust type's range, so the
//! schema states the whole range: a `u8` says `maximum: 255`. A bound declared with
//! `#[validate(range)]` that is tighter than the type's range is kept.

pub(crate) mod check;
pub(crate) mod definitions;

use std::cmp::Ordering;

use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value};

/// The schema of `T` as the model is shown it: JSON Schema 2020-12, without `$schema` and
/// without the Rust type's name as the root `title`.
pub fn schema_for<T: JsonSchema>() -> Value {
    let generator = SchemaGenerator::new(SchemaSettings::draft2020_12());
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(root) = &mut schema {
        root.remove("$schema");
        root.remove("title");
    }
    state_type_ranges(&mut schema);
    schema
}

/// Whether a schema's `type` keyword is `name` or lists it.
pub(crate) fn type_includes(type_keyword: Option<&Value>, name: &str) -> bool {
    match type_keyword {
        Some(Value::String(single)) => single == name,
        Some(Value::Array(types)) => types.iter().any(|listed| listed == name),
        _ => false,
    }
}

/// The inclusive range of an integer or float `format` written by schemars.
pub(crate) fn format_range(format: &str) -> Option<(Value, Value)> {
    Some(match format {
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "int64" | "int" => (i64::MIN.into(), i64::MAX.into()),
        "uint8" => (0.into(), u8::MAX.into()),
        "uint16" => (0.into(), u16::MAX.into()),
        "uint32" => (0.into(), u32::MAX.into()),
        "uint64" | "uint" => (0.into(), u64::MAX.into()),
        // The decode gate reads integers of at most 64 bits, whatever the Rust type holds.
        "int128" => (i64::MIN.into(), u64::MAX.into()),
        "uint128" => (0.into(), u64::MAX.into()),
        "float" => (f64::from(f32::MIN).into(), f64::from(f32::MAX).into()),
        _ => return None,
    })
}

/// Adds the type's range to every numeric subschema that carries a known `format`.
fn state_type_ranges(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            let format = object
                .get("format")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let format = format.as_deref();
            if let Some((min, max)) = format.and_then(format_range) {
                tighten(object, "minimum", min, Ordering::Greater);
                tighten(object, "maximum", max, Ordering::Less);
            }
            if format == Some("float") {
                state_f32_exclusive_bounds(object);
            }
            // Keywords that hold data rather than schemas are left as they are.
            object
                .iter_mut()
                .filter(|(keyword, _)| {
                    !matches!(
                        keyword.as_str(),
                        "default" | "const" | "enum" | "examples" | "example"
                    )
                })
                .for_each(|(_, value)| state_type_ranges(value));
        }
        Value::Array(items) => items.iter_mut().for_each(state_type_ranges),
        _ => {}
    }
}

/// An `f32` argument is checked twice: as sent, against the schema, and as the `f32` it
/// becomes, by its own `Validate`. A number just inside an exclusive bound can round onto it
/// (`99.999999` is `100.0` as an `f32`), which the second check refuses and the first cannot
/// see. So the schema also states the inclusive bound of the nearest `f32` inside: every number
/// within it rounds to an `f32` within the exclusive bound, and every number beyond it is
/// refused by both.
fn state_f32_exclusive_bounds(object: &mut Map<String, Value>) {
    let nearest_inside = |bound: f64, below: bool| {
        let mut candidate = bound as f32;
        while (below && f64::from(candidate) >= bound) || (!below && f64::from(candidate) <= bound)
        {
            candidate = step(candidate, below);
        }
        candidate
    };
    if let Some(bound) = object.get("exclusiveMaximum").and_then(Value::as_f64) {
        let inside = f64::from(nearest_inside(bound, true));
        tighten(object, "maximum", inside.into(), Ordering::Less);
    }
    if let Some(bound) = object.get("exclusiveMinimum").and_then(Value::as_f64) {
        let inside = f64::from(nearest_inside(bound, false));
        tighten(object, "minimum", inside.into(), Ordering::Greater);
    }
}

/// The `f32` next to `value`, below it or above it.
fn step(value: f32, below: bool) -> f32 {
    if value == 0.0 {
        let smallest = f32::from_bits(1);
        return if below { -smallest } else { smallest };
    }
    let bits = value.to_bits();
    let away_from_zero = (value > 0.0) != below;
    f32::from_bits(if away_from_zero { bits + 1 } else { bits - 1 })
}

/// Sets `key` to `bound` unless the declared value is already as tight: equal to it, or beyond
/// it on the `tighter` side.
fn tighten(object: &mut Map<String, Value>, key: &str, bound: Value, tighter: Ordering) {
    let declared_is_tight = object
        .get(key)
        .and_then(|declared| compare(declared, &bound))
        .is_some_and(|order| order == tighter || order == Ordering::Equal);
    if !declared_is_tight {
        object.insert(key.to_owned(), bound);
    }
}

/// Compares two JSON numbers, exactly where both are integers (f64 cannot tell `u64::MAX`
/// from 2^64).
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    let exact = |value: &Value| {
        value
            .as_i64()
            .map(i128::from)
            .or_else(|| value.as_u64().map(i128::from))
    };
    match (exact(a), exact(b)) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// How deep a schema is followed: deeper than any arguments decode.
pub(crate) const SCHEMA_DEPTH: usize = 64;

/// `node` with its `$ref` (into `root`) followed.
pub(crate) fn resolved<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    node.get("$ref")
        .and_then(Value::as_str)
        .and_then(|reference| reference.strip_prefix('#'))
        .and_then(|pointer| root.pointer(pointer))
        .unwrap_or(node)
}

/// The schemas a pointer's `segments` (`*` or an index: every element) reach from `node`,
/// through `$ref`s and the branches of `anyOf`, `oneOf` and `allOf`.
pub(crate) fn reached<'a>(
    root: &'a Value,
    node: &'a Value,
    mut segments: std::iter::Skip<std::str::Split<'_, char>>,
    depth: usize,
) -> Vec<&'a Value> {
    let node = resolved(root, node);
    if depth > SCHEMA_DEPTH {
        return Vec::new();
    }
    let mut found: Vec<&Value> = ["anyOf", "oneOf", "allOf"]
        .iter()
        .filter_map(|key| node.get(*key).and_then(Value::as_array))
        .flatten()
        .flat_map(|branch| reached(root, branch, segments.clone(), depth + 1))
        .collect();
    match segments.next() {
        None => found.push(node),
        Some(segment) => {
            let next = match node
                .get("properties")
                .and_then(|properties| properties.get(segment))
            {
                Some(property) => Some(property),
                None => node.get("items"),
            };
            if let Some(next) = next {
                found.extend(reached(root, next, segments, depth + 1));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Sample {
        small: u8,
        #[schemars(range(min = 1, max = 1000))]
        id: u16,
        #[schemars(range(min = -500))]
        delta: i8,
        big: u64,
        maybe: Option<u32>,
        ratio: f32,
        #[schemars(extend("exclusiveMinimum" = 0.0, "exclusiveMaximum" = 100.0))]
        share: f32,
    }

    #[test]
    fn states_the_range_of_every_integer_type() {
        let schema = schema_for::<Sample>();
        let properties = &schema["properties"];
        assert_eq!(properties["small"]["minimum"], 0);
        assert_eq!(properties["small"]["maximum"], 255);
        assert_eq!(
            properties["id"]["minimum"], 1,
            "a tighter declared bound stays"
        );
        assert_eq!(properties["id"]["maximum"], 1000);
        assert_eq!(
            properties["delta"]["minimum"], -128,
            "a looser declared bound is tightened"
        );
        assert_eq!(properties["big"]["maximum"], json!(u64::MAX));
        assert_eq!(properties["maybe"]["maximum"], json!(u32::MAX));
        assert_eq!(properties["ratio"]["maximum"], json!(f64::from(f32::MAX)));
        assert!(schema.get("$schema").is_none());
        assert_eq!(
            properties["share"]["maximum"],
            json!(f64::from(99.99999_f32))
        );
        assert_eq!(properties["share"]["exclusiveMaximum"], json!(100.0));
        assert_eq!(
            properties["share"]["minimum"],
            json!(f64::from(f32::from_bits(1)))
        );
        assert!(schema.get("title").is_none());
    }
}
