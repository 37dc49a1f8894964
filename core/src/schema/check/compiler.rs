//! A schema compiled into the check's arena: every keyword known or refused, `$ref`s resolved,
//! unions that the check cannot enforce refused, patterns read as ECMA-262 reads them.

use std::collections::HashMap;

use regex::Regex;
use serde_json::{Map, Number, Value};

use super::compiled::{Allowed, Compiled, Format, Id, JsonType};
use super::findings::escape;
use crate::schema::format_range;

/// Keywords that describe and constrain nothing.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "example",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentEncoding",
    "contentMediaType",
];

pub(super) struct Compiler<'s> {
    pub(super) root: &'s Value,
    pub(super) nodes: Vec<Compiled>,
    /// Subschemas already compiled, by JSON pointer: a `$ref` to one of them, or back to one
    /// being compiled (a recursive type), is that index.
    pub(super) by_location: HashMap<String, Id>,
}

impl<'s> Compiler<'s> {
    /// Refuses a union whose alternatives a value can fit alike when an earlier one carries
    /// constraints of its own. serde's untagged enum takes the first alternative that decodes,
    /// while `anyOf` holds if any alternative does: `Percent(u8 up to 100) | Cents(u32)` would
    /// let 250 pass as `Cents` and reach the tool as `Percent(250)`.
    pub(super) fn check_unions(&self) -> Result<(), String> {
        let location_of = |wanted: Id| {
            self.by_location
                .iter()
                .find(|(_, id)| **id == wanted)
                .map_or_else(|| "/".to_owned(), |(location, _)| location.clone())
        };
        for (id, node) in self.nodes.iter().enumerate() {
            for (index, &earlier) in node.any_of.iter().enumerate() {
                let overlapping = node.any_of[index + 1..]
                    .iter()
                    .any(|&later| self.types(earlier, 0) & self.types(later, 0) != 0);
                if overlapping && self.constrained(earlier, &mut Vec::new()) {
                    return Err(format!(
                        "the union at `{}` has alternatives a value can fit alike, and an earlier one has constraints the later ones do not enforce: serde would take the earlier one without them; tag the enum, or make its alternatives take different JSON types",
                        location_of(id)
                    ));
                }
            }
        }
        Ok(())
    }

    /// The JSON types a subschema accepts, as a mask (an integer is a number too). A chain of
    /// references or unions deeper than any type has is taken to accept everything.
    pub(super) fn types(&self, id: Id, depth: usize) -> u8 {
        let node = &self.nodes[id];
        if depth > 64 {
            return u8::MAX;
        }
        if let Some(reference) = node.reference {
            return self.types(reference, depth + 1);
        }
        if node.types.is_empty() {
            return node
                .any_of
                .iter()
                .chain(&node.one_of)
                .map(|&branch| self.types(branch, depth + 1))
                .reduce(|a, b| a | b)
                .unwrap_or(u8::MAX);
        }
        node.types
            .iter()
            .map(|kind| match kind {
                JsonType::Integer | JsonType::Number => 0b0000_1100,
                other => 1 << (*other as u8),
            })
            .fold(0, |mask, bit| mask | bit)
    }

    /// Whether a subschema, or one within it, constrains a value beyond what its Rust type's
    /// `Deserialize` refuses: a bound tighter than the type's range, a length, a pattern, a
    /// format, unique items, a `not`.
    fn constrained(&self, id: Id, seen: &mut Vec<Id>) -> bool {
        if seen.contains(&id) {
            return false;
        }
        seen.push(id);
        let node = &self.nodes[id];
        let beyond_type = |bound: &Option<Number>, edge: Option<&Value>| {
            bound
                .as_ref()
                .is_some_and(|bound| edge.and_then(Value::as_number) != Some(bound))
        };
        let range = node.type_range.as_ref();
        let own = beyond_type(&node.minimum, range.map(|(min, _)| min))
            || beyond_type(&node.maximum, range.map(|(_, max)| max))
            || node.exclusive_minimum.is_some()
            || node.exclusive_maximum.is_some()
            || node.multiple_of.is_some()
            || node.min_length.is_some()
            || node.max_length.is_some()
            || node.pattern.is_some()
            || node.format.is_some()
            || node.min_items.is_some()
            || node.max_items.is_some()
            || node.unique_items
            || node.min_properties.is_some()
            || node.max_properties.is_some()
            || node.not.is_some();
        own || node
            .properties
            .iter()
            .map(|(_, id)| *id)
            .chain(node.items)
            .chain(node.prefix_items.iter().copied())
            .chain(node.additional)
            .chain(node.reference)
            .chain(node.all_of.iter().copied())
            .chain(node.any_of.iter().copied())
            .chain(node.one_of.iter().copied())
            .collect::<Vec<Id>>()
            .into_iter()
            .any(|child| self.constrained(child, seen))
    }

    pub(super) fn compile(&mut self, schema: &'s Value, location: String) -> Result<Id, String> {
        if let Some(&id) = self.by_location.get(&location) {
            return Ok(id);
        }
        let id = self.nodes.len();
        self.nodes.push(Compiled::default());
        self.by_location.insert(location.clone(), id);
        let compiled = match schema {
            Value::Bool(true) => Compiled::default(),
            Value::Bool(false) => Compiled {
                nothing: true,
                ..Compiled::default()
            },
            Value::Object(keywords) => self.keywords(keywords, &location)?,
            other => return Err(format!("`{other}` at `{location}` is not a schema")),
        };
        self.nodes[id] = compiled;
        Ok(id)
    }

    pub(super) fn keywords(
        &mut self,
        keywords: &'s Map<String, Value>,
        location: &str,
    ) -> Result<Compiled, String> {
        let mut node = Compiled::default();
        let at = |keyword: &str| format!("{location}/{keyword}");
        for (keyword, value) in keywords {
            let unexpected = || format!("`{keyword}` at `{location}` has an unexpected value");
            match keyword.as_str() {
                annotation if ANNOTATIONS.contains(&annotation) || annotation.starts_with("x-") => {
                }
                "type" => {
                    let names: Vec<&Value> = match value {
                        Value::Array(names) => names.iter().collect(),
                        single => vec![single],
                    };
                    for name in names {
                        let kind = name
                            .as_str()
                            .and_then(JsonType::parse)
                            .ok_or_else(unexpected)?;
                        node.types.push(kind);
                    }
                }
                "enum" => {
                    let values = value.as_array().ok_or_else(unexpected)?;
                    node.allowed = Some(Allowed::new(values));
                }
                "const" => node.allowed = Some(Allowed::new(std::slice::from_ref(value))),
                "minimum" => node.minimum = Some(number(value).ok_or_else(unexpected)?),
                "maximum" => node.maximum = Some(number(value).ok_or_else(unexpected)?),
                "exclusiveMinimum" => {
                    node.exclusive_minimum = Some(number(value).ok_or_else(unexpected)?)
                }
                "exclusiveMaximum" => {
                    node.exclusive_maximum = Some(number(value).ok_or_else(unexpected)?)
                }
                "multipleOf" => node.multiple_of = Some(number(value).ok_or_else(unexpected)?),
                "minLength" => node.min_length = Some(value.as_u64().ok_or_else(unexpected)?),
                "maxLength" => node.max_length = Some(value.as_u64().ok_or_else(unexpected)?),
                "minItems" => node.min_items = Some(value.as_u64().ok_or_else(unexpected)?),
                "maxItems" => node.max_items = Some(value.as_u64().ok_or_else(unexpected)?),
                "minProperties" => {
                    node.min_properties = Some(value.as_u64().ok_or_else(unexpected)?)
                }
                "maxProperties" => {
                    node.max_properties = Some(value.as_u64().ok_or_else(unexpected)?)
                }
                "uniqueItems" => node.unique_items = value.as_bool().ok_or_else(unexpected)?,
                "pattern" => {
                    let pattern = value.as_str().ok_or_else(unexpected)?;
                    node.pattern = Some((regex(pattern, location)?, pattern.to_owned()));
                }
                "format" => {
                    let format = value.as_str().ok_or_else(unexpected)?;
                    node.type_range = format_range(format);
                    node.format = match format {
                        "email" => Some(Format::Email),
                        "uri" | "url" => Some(Format::Uri),
                        _ => None,
                    }
                }
                "required" => {
                    let names = value.as_array().ok_or_else(unexpected)?;
                    for name in names {
                        node.required
                            .push(name.as_str().ok_or_else(unexpected)?.to_owned());
                    }
                }
                "properties" => {
                    let properties = value.as_object().ok_or_else(unexpected)?;
                    for (name, schema) in properties {
                        let id =
                            self.compile(schema, format!("{}/{}", at(keyword), escape(name)))?;
                        node.properties.push((name.clone(), id));
                    }
                    node.properties.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
                }
                "patternProperties" => {
                    let properties = value.as_object().ok_or_else(unexpected)?;
                    for (pattern, schema) in properties {
                        let id =
                            self.compile(schema, format!("{}/{}", at(keyword), escape(pattern)))?;
                        node.pattern_properties
                            .push((regex(pattern, location)?, id));
                    }
                }
                "additionalProperties" => node.additional = Some(self.compile(value, at(keyword))?),
                "propertyNames" => node.property_names = Some(self.compile(value, at(keyword))?),
                "items" => node.items = Some(self.compile(value, at(keyword))?),
                "prefixItems" => node.prefix_items = self.list(value, &at(keyword))?,
                "allOf" => node.all_of = self.list(value, &at(keyword))?,
                "anyOf" => node.any_of = self.list(value, &at(keyword))?,
                "oneOf" => node.one_of = self.list(value, &at(keyword))?,
                "not" => node.not = Some(self.compile(value, at(keyword))?),
                "$ref" => {
                    let reference = value.as_str().ok_or_else(unexpected)?;
                    let target = reference
                        .strip_prefix('#')
                        .and_then(|pointer| self.root.pointer(pointer))
                        .ok_or_else(|| format!("the reference `{reference}` at `{location}` names no schema of this document"))?;
                    let target_location = reference.trim_start_matches('#').to_owned();
                    node.reference = Some(self.compile(target, target_location)?);
                }
                _ => {
                    return Err(format!(
                        "the schema uses `{keyword}` at `{}`, which the gates cannot enforce",
                        if location.is_empty() { "/" } else { location }
                    ));
                }
            }
        }
        if !node.properties.is_empty() && node.additional.is_none() {
            // serde ignores a member its type does not name, or reads it under an alias the
            // schema does not show: what the schema says of the named members would not hold
            // for it, and the model would believe it had said something.
            return Err(format!(
                "the object at `{}` accepts members it does not name: add `#[serde(deny_unknown_fields)]` to its type",
                if location.is_empty() { "/" } else { location }
            ));
        }
        Ok(node)
    }

    pub(super) fn list(&mut self, value: &'s Value, location: &str) -> Result<Vec<Id>, String> {
        let schemas = value
            .as_array()
            .ok_or_else(|| format!("`{location}` is not a list of schemas"))?;
        schemas
            .iter()
            .enumerate()
            .map(|(index, schema)| self.compile(schema, format!("{location}/{index}")))
            .collect()
    }
}

pub(super) fn number(value: &Value) -> Option<Number> {
    value.as_number().cloned()
}

/// A schema's pattern, compiled to match as ECMA-262 (which JSON Schema names) matches it:
/// `\d`, `\w` and `\b` are ASCII there and Unicode in Rust, where `^\d+$` would take Arabic
/// digits ("١٢٣") and `\w` Cyrillic look-alikes.
pub(super) fn regex(pattern: &str, location: &str) -> Result<Regex, String> {
    Regex::new(&ecma_classes(pattern))
        .map_err(|error| format!("the pattern at `{location}` does not compile: {error}"))
}

/// Whether `pattern` uses a class that ECMA-262 and Rust read differently.
pub(super) fn has_unicode_classes(pattern: &str) -> bool {
    ecma_classes(pattern) != pattern
}

/// `pattern` with `\d`, `\D`, `\w`, `\W`, `\b` and `\B` made ASCII, inside and outside
/// bracket classes.
pub(super) fn ecma_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push(c);
                    break;
                };
                let replacement = match (next, in_class) {
                    ('d', false) => "[0-9]",
                    ('D', false) => "[^0-9]",
                    ('w', false) => "[0-9A-Za-z_]",
                    ('W', false) => "[^0-9A-Za-z_]",
                    ('b', false) => "(?-u:\\b)",
                    ('B', false) => "(?-u:\\B)",
                    ('d', true) => "0-9",
                    ('D', true) => "[:^digit:]",
                    ('w', true) => "0-9A-Za-z_",
                    ('W', true) => "[:^word:]",
                    // In a class, ECMA-262's `\b` is a backspace.
                    ('b', true) => "\\x08",
                    _ => {
                        out.push(c);
                        out.push(next);
                        continue;
                    }
                };
                out.push_str(replacement);
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
                // A `]` right after `[` or `[^` is a literal.
                let mut lookahead = chars.clone();
                match lookahead.next() {
                    Some('^') => {
                        out.push('^');
                        chars.next();
                        if lookahead.next() == Some(']') {
                            out.push(']');
                            chars.next();
                        }
                    }
                    Some(']') => {
                        out.push(']');
                        chars.next();
                    }
                    _ => {}
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}
