//! OpenAI's function tools, for Chat Completions and Responses, and the schema its strict
//! mode takes.

use serde_json::{Map, Value, json};

use crate::contract::ToolContract;
use crate::schema::definitions::{Definitions, rebuild_with_definitions, typed_node};
use crate::schema::type_includes;

/// String formats strict mode supports; any other `format` must not be sent.
const STRICT_FORMATS: [&str; 9] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Constraint keywords strict mode supports, copied as they are.
const STRICT_CONSTRAINTS: [&str; 8] = [
    "pattern",
    "multipleOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
];

const MAX_PROPERTIES: usize = 5_000;
const MAX_NESTING: usize = 10;
const MAX_ENUM_VALUES: usize = 1_000;
const MAX_SCHEMA_CHARACTERS: usize = 120_000;

/// `{"type": "function", "function": {...}}` for Chat Completions.
pub(super) fn chat_tool(
    contract: &ToolContract,
    schema: &Value,
    strict: bool,
) -> Result<Value, String> {
    let parameters = parameters(schema, strict)?;
    Ok(json!({
        "type": "function",
        "function": {
            "name": contract.name(),
            "description": contract.description(),
            "parameters": parameters,
            "strict": strict,
        },
    }))
}

/// The flat `{"type": "function", "name", ...}` of the Responses API. `strict` is always
/// written: the Responses API turns it on when it is left out.
pub(super) fn responses_tool(
    contract: &ToolContract,
    schema: &Value,
    strict: bool,
) -> Result<Value, String> {
    let parameters = parameters(schema, strict)?;
    Ok(json!({
        "type": "function",
        "name": contract.name(),
        "description": contract.description(),
        "parameters": parameters,
        "strict": strict,
    }))
}

fn parameters(schema: &Value, strict: bool) -> Result<Value, String> {
    if !strict {
        return Ok(schema.clone());
    }
    let parameters = strict_schema(schema)?;
    check_limits(&parameters)?;
    Ok(parameters)
}

/// The schema in strict mode's form: every property required, optional ones nullable,
/// every object closed, `oneOf` as `anyOf`, and only supported keywords.
pub(super) fn strict_schema(schema: &Value) -> Result<Value, String> {
    if schema.get("anyOf").is_some() || schema.get("oneOf").is_some() {
        return Err(
            "the arguments are a union at the root; strict mode needs a plain object".into(),
        );
    }
    if schema.get("type") != Some(&json!("object")) {
        return Err("the arguments are not a plain object; strict mode needs one".into());
    }
    rebuild_with_definitions(schema, strict_node)
}

fn strict_node(node: &Value, definitions: &Definitions<'_>) -> Result<Value, String> {
    let input = typed_node(node, "strict mode")?;
    if let Some(standalone) = definitions.standalone(input)? {
        return strict_node(&standalone, definitions);
    }
    if let Some(reference) = input.get("$ref") {
        return Ok(json!({ "$ref": reference }));
    }
    if input.contains_key("allOf") {
        return Err(
            "`allOf` (e.g. from `#[serde(flatten)]`) is not supported in strict mode".into(),
        );
    }

    let mut output = Map::new();
    for keyword in ["description", "title", "enum", "const"] {
        if let Some(value) = input.get(keyword) {
            output.insert(keyword.into(), value.clone());
        }
    }
    for keyword in STRICT_CONSTRAINTS {
        if let Some(value) = input.get(keyword) {
            output.insert(keyword.into(), value.clone());
        }
    }
    if let Some(format) = input.get("format")
        && format
            .as_str()
            .is_some_and(|format| STRICT_FORMATS.contains(&format))
    {
        output.insert("format".into(), format.clone());
    }

    let mut node_type = input.get("type").cloned();
    if node_type.is_none() && input.contains_key("properties") {
        node_type = Some(json!("object"));
    }
    let is_object = type_includes(node_type.as_ref(), "object");
    if let Some(node_type) = node_type {
        output.insert("type".into(), node_type);
    }

    if is_object {
        match input.get("additionalProperties") {
            None | Some(Value::Bool(false)) => {}
            Some(_) => {
                return Err(
                    "a map with free-form keys (e.g. a `HashMap`) has no strict form: \
                     strict mode closes every object"
                        .into(),
                );
            }
        }
        output.insert("additionalProperties".into(), Value::Bool(false));
        let required: Vec<&str> = input
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(Value::Object(properties)) = input.get("properties") {
            // In the names' order whatever order the map keeps (with `preserve_order`, the
            // order of declaration), so that every build exports the same text; the required
            // list follows the properties, as OpenAI's SDK writes it.
            let mut names: Vec<&String> = properties.keys().collect();
            names.sort_unstable();
            let mut strict_properties = Map::new();
            for name in names {
                let mut strict = strict_node(&properties[name], definitions)?;
                if !required.contains(&name.as_str()) {
                    strict = nullable(strict);
                }
                strict_properties.insert(name.clone(), strict);
            }
            output.insert(
                "required".into(),
                Value::Array(strict_properties.keys().cloned().map(Value::from).collect()),
            );
            output.insert("properties".into(), Value::Object(strict_properties));
        }
    }

    match input.get("items") {
        Some(items @ Value::Object(_)) => {
            output.insert("items".into(), strict_node(items, definitions)?);
        }
        Some(_) => return Err("tuples (`prefixItems`) are not supported in strict mode".into()),
        None if input.contains_key("prefixItems") => {
            return Err("tuples (`prefixItems`) are not supported in strict mode".into());
        }
        None => {}
    }

    let mut any_of = Vec::new();
    for keyword in ["anyOf", "oneOf"] {
        if let Some(branches) = input.get(keyword) {
            let Value::Array(branches) = branches else {
                return Err(format!("`{keyword}` is not a list"));
            };
            for branch in branches {
                any_of.push(strict_node(branch, definitions)?);
            }
        }
    }
    if !any_of.is_empty() {
        output.insert("anyOf".into(), Value::Array(any_of));
    }
    Ok(Value::Object(output))
}

/// A schema that also accepts `null`: how strict mode shows an argument that may be left out.
pub(super) fn nullable(schema: Value) -> Value {
    let Value::Object(mut object) = schema else {
        return schema;
    };
    if admits_null(&object) {
        return Value::Object(object);
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.push(Value::Null);
    }
    match object.get_mut("type") {
        Some(Value::String(name)) => {
            let name = std::mem::take(name);
            object.insert("type".into(), json!([name, "null"]));
            return Value::Object(object);
        }
        Some(Value::Array(names)) => {
            names.push(json!("null"));
            return Value::Object(object);
        }
        _ => {}
    }
    if object.contains_key("enum") {
        return Value::Object(object);
    }
    if let Some(Value::Array(branches)) = object.get_mut("anyOf") {
        branches.push(json!({"type": "null"}));
        return Value::Object(object);
    }
    // A reference or a constant: a union of it and null, with its annotations outside.
    let mut union = Map::new();
    for keyword in ["description", "title"] {
        if let Some(value) = object.remove(keyword) {
            union.insert(keyword.into(), value);
        }
    }
    union.insert(
        "anyOf".into(),
        json!([Value::Object(object), {"type": "null"}]),
    );
    Value::Object(union)
}

/// Whether a strict node already lets `null` through: by its type, its values or a branch.
fn admits_null(object: &Map<String, Value>) -> bool {
    let in_type = type_includes(object.get("type"), "null");
    let in_enum = object
        .get("enum")
        .and_then(Value::as_array)
        .is_some_and(|values| values.contains(&Value::Null));
    let in_branches = object
        .get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|branches| {
            branches.iter().any(|branch| {
                branch
                    .as_object()
                    .is_some_and(|branch| admits_null(branch) && !branch.contains_key("$ref"))
            })
        });
    in_type || in_enum || in_branches || object.get("const") == Some(&Value::Null)
}

/// OpenAI's size limits on one strict schema.
fn check_limits(schema: &Value) -> Result<(), String> {
    let mut size = Size::default();
    size.measure(schema);
    if size.properties > MAX_PROPERTIES {
        return Err(format!(
            "the schema has {} properties; strict mode takes at most {MAX_PROPERTIES}",
            size.properties
        ));
    }
    if size.enum_values > MAX_ENUM_VALUES {
        return Err(format!(
            "the schema has {} enum values; strict mode takes at most {MAX_ENUM_VALUES}",
            size.enum_values
        ));
    }
    if size.characters > MAX_SCHEMA_CHARACTERS {
        return Err(format!(
            "property names, enum and const values add up to {} characters; strict mode takes \
             at most {MAX_SCHEMA_CHARACTERS}",
            size.characters
        ));
    }
    let nesting = nesting(schema, &Definitions::of(schema), &mut Vec::new());
    if nesting > MAX_NESTING {
        return Err(format!(
            "objects and arrays nest {nesting} levels deep; strict mode takes at most \
             {MAX_NESTING}"
        ));
    }
    Ok(())
}

#[derive(Default)]
struct Size {
    properties: usize,
    enum_values: usize,
    characters: usize,
}

impl Size {
    fn measure(&mut self, node: &Value) {
        match node {
            Value::Object(object) => {
                for (key, value) in object {
                    match key.as_str() {
                        "properties" | "$defs" => {
                            for (name, schema) in value.as_object().into_iter().flatten() {
                                if key == "properties" {
                                    self.properties += 1;
                                    self.characters += name.chars().count();
                                }
                                self.measure(schema);
                            }
                        }
                        "enum" => {
                            for value in value.as_array().into_iter().flatten() {
                                self.enum_values += 1;
                                self.characters += literal_characters(value);
                            }
                        }
                        "const" => self.characters += literal_characters(value),
                        _ => self.measure(value),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| self.measure(item)),
            _ => {}
        }
    }
}

fn literal_characters(value: &Value) -> usize {
    match value {
        Value::String(text) => text.chars().count(),
        other => other.to_string().chars().count(),
    }
}

/// How many objects and arrays nest inside each other, following references once.
fn nesting(node: &Value, definitions: &Definitions<'_>, following: &mut Vec<String>) -> usize {
    let Value::Object(object) = node else {
        return 0;
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        let Ok((name, definition)) = definitions.resolve(reference) else {
            return 0;
        };
        if following.contains(&name) {
            return 0;
        }
        following.push(name);
        let depth = nesting(definition, definitions, following);
        following.pop();
        return depth;
    }
    let container = object.contains_key("properties") || object.contains_key("items");
    let children = object
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|properties| properties.values())
        .chain(object.get("items"))
        .chain(
            object
                .get("anyOf")
                .and_then(Value::as_array)
                .into_iter()
                .flatten(),
        );
    let deepest = children
        .map(|child| nesting(child, definitions, following))
        .max()
        .unwrap_or(0);
    deepest + usize::from(container)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_properties_become_required_and_nullable() {
        let schema = json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer", "format": "uint64", "minimum": 0},
                "note": {"type": "string", "maxLength": 10},
                "kind": {"type": "string", "enum": ["a", "b"]},
                "money": {"$ref": "#/$defs/Money", "description": "how much"},
            },
            "required": ["id"],
            "additionalProperties": false,
            "$defs": {"Money": {"type": "object", "properties": {"cents": {"type": "integer"}},
                "required": ["cents"]}},
        });
        let strict = strict_schema(&schema).unwrap();
        assert_eq!(
            strict,
            json!({
                "type": "object",
                "additionalProperties": false,
                "required": ["id", "kind", "money", "note"],
                "properties": {
                    "id": {"type": "integer", "minimum": 0},
                    "note": {"type": ["string", "null"]},
                    "kind": {"type": ["string", "null"], "enum": ["a", "b", null]},
                    "money": {
                        "type": ["object", "null"],
                        "description": "how much",
                        "additionalProperties": false,
                        "required": ["cents"],
                        "properties": {"cents": {"type": "integer"}},
                    },
                },
                "$defs": {"Money": {"type": "object", "additionalProperties": false,
                    "required": ["cents"], "properties": {"cents": {"type": "integer"}}}},
            })
        );
    }

    #[test]
    fn one_of_becomes_any_of_and_maps_are_refused() {
        let schema = json!({"type": "object", "properties": {"x": {"oneOf": [
            {"type": "string"}, {"type": "integer"}]}}, "required": ["x"]});
        let strict = strict_schema(&schema).unwrap();
        assert_eq!(
            strict["properties"]["x"],
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})
        );
        let map = json!({"type": "object", "properties": {"tags": {"type": "object",
            "additionalProperties": {"type": "string"}}}, "required": ["tags"]});
        assert!(strict_schema(&map).unwrap_err().contains("map"));
    }

    #[test]
    fn nesting_counts_objects_and_arrays() {
        let mut schema = json!({"type": "string"});
        for _ in 0..11 {
            schema = json!({"type": "object", "properties": {"inner": schema},
                "required": ["inner"]});
        }
        let error = parameters(&schema, true).unwrap_err();
        assert!(error.contains("11 levels"), "{error}");
    }

    #[test]
    fn a_root_union_and_schemas_over_the_size_limits_are_refused() {
        let union = json!({"anyOf": [{"type": "object"}, {"type": "string"}]});
        assert!(
            strict_schema(&union)
                .unwrap_err()
                .contains("union at the root")
        );

        let many: Map<String, Value> = (0..=MAX_PROPERTIES)
            .map(|index| (format!("p{index}"), json!({"type": "boolean"})))
            .collect();
        let wide = json!({"type": "object", "properties": many});
        assert!(
            parameters(&wide, true)
                .unwrap_err()
                .contains("5001 properties")
        );

        let values: Vec<Value> = (0..=MAX_ENUM_VALUES)
            .map(|index| json!(format!("v{index}")))
            .collect();
        let long_enum = json!({"type": "object", "properties": {"v": {"type": "string", "enum": values}},
            "required": ["v"]});
        assert!(
            parameters(&long_enum, true)
                .unwrap_err()
                .contains("1001 enum values")
        );

        let long_names: Map<String, Value> = (0..20)
            .map(|index| {
                (
                    format!("{index}{}", "n".repeat(6_000)),
                    json!({"type": "boolean"}),
                )
            })
            .collect();
        let verbose = json!({"type": "object", "properties": long_names});
        assert!(
            parameters(&verbose, true)
                .unwrap_err()
                .contains("characters")
        );
    }
}
