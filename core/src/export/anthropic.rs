//! Anthropic's tool definitions, and the schema its strict tool use takes.
//!
//! Strict tool use holds the model to types, enums, required fields and a few string formats;
//! every other constraint (a minimum, a length, a pattern) is moved into the description,
//! where the model may follow it, and stays enforced by the validate gate.

use serde_json::{Map, Value, json};

use crate::contract::ToolContract;
use crate::schema::definitions::{ANY_VALUE, Definitions, rebuild_with_definitions, typed_node};

/// String formats strict tool use supports.
const STRICT_FORMATS: [&str; 10] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "uri",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Constraints strict tool use does not hold the model to; shown in the description instead.
/// (An integer's `format`, such as `uint32`, is a Rust type's name, already stated as a
/// range, and is dropped.)
const DESCRIBED_CONSTRAINTS: [&str; 13] = [
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
];

const MAX_STRICT_TOOLS: usize = 20;
const MAX_OPTIONAL_PARAMETERS: usize = 24;
const MAX_UNION_PARAMETERS: usize = 16;

/// `{"name", "description", "input_schema", "strict"?}`.
pub(super) fn tool(contract: &ToolContract, schema: &Value, strict: bool) -> Result<Value, String> {
    let mut tool = json!({
        "name": contract.name(),
        "description": contract.description(),
    });
    if strict {
        tool["input_schema"] = strict_schema(schema)?;
        tool["strict"] = Value::Bool(true);
    } else {
        tool["input_schema"] = schema.clone();
    }
    Ok(tool)
}

/// The schema in strict tool use's form.
pub(super) fn strict_schema(schema: &Value) -> Result<Value, String> {
    if schema.get("anyOf").is_some() || schema.get("oneOf").is_some() {
        return Err("the arguments are a union at the root; strict tool use refuses it".into());
    }
    rebuild_with_definitions(schema, strict_node)
}

fn strict_node(node: &Value, definitions: &Definitions<'_>) -> Result<Value, String> {
    let input = typed_node(node, "strict tool use")?;
    if let Some(standalone) = definitions.standalone(input)? {
        return strict_node(&standalone, definitions);
    }
    if let Some(reference) = input.get("$ref") {
        return Ok(json!({ "$ref": reference }));
    }
    // A type union is written as `anyOf` of single types: strict tool use takes no type lists.
    if let Some(Value::Array(types)) = input.get("type") {
        return strict_node(&split_type_union(input, types), definitions);
    }

    let mut output = Map::new();
    let mut described = Map::new();
    // With an enum or a constant, the type says nothing more, and the SDK drops it.
    let mut literal = false;
    for keyword in ["enum", "const"] {
        if let Some(value) = input.get(keyword) {
            output.insert(keyword.into(), value.clone());
            literal = true;
        }
    }

    let union = ["anyOf", "oneOf"]
        .into_iter()
        .find_map(|keyword| input.get(keyword));
    if let Some(branches) = union {
        let branches = branches
            .as_array()
            .ok_or("`anyOf` is not a list")?
            .iter()
            .map(|branch| strict_node(branch, definitions))
            .collect::<Result<Vec<Value>, String>>()?;
        output.insert("anyOf".into(), Value::Array(branches));
    } else if input.contains_key("allOf") {
        return Err(
            "`allOf` (e.g. from `#[serde(flatten)]`) is not supported in strict tool use".into(),
        );
    } else if !literal {
        let Some(node_type) = input.get("type") else {
            return Err(ANY_VALUE.into());
        };
        output.insert("type".into(), node_type.clone());
    }
    for keyword in ["description", "title"] {
        if let Some(value) = input.get(keyword) {
            output.insert(keyword.into(), value.clone());
        }
    }

    match input
        .get("type")
        .and_then(Value::as_str)
        .filter(|_| !literal)
    {
        Some("object") => {
            if input
                .get("additionalProperties")
                .is_some_and(|extra| extra != &Value::Bool(false))
            {
                return Err(
                    "a map with free-form keys (e.g. a `HashMap`) has no strict form: \
                     strict tool use closes every object"
                        .into(),
                );
            }
            let properties = input
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(name, property)| Ok((name.clone(), strict_node(property, definitions)?)))
                .collect::<Result<Map<String, Value>, String>>()?;
            output.insert("properties".into(), Value::Object(properties));
            output.insert("additionalProperties".into(), Value::Bool(false));
            if let Some(required) = input.get("required") {
                output.insert("required".into(), required.clone());
            }
        }
        Some("string") => {
            if let Some(format) = input.get("format") {
                if format
                    .as_str()
                    .is_some_and(|format| STRICT_FORMATS.contains(&format))
                {
                    output.insert("format".into(), format.clone());
                } else {
                    described.insert("format".into(), format.clone());
                }
            }
        }
        Some("array") => {
            if let Some(items) = input.get("items") {
                output.insert("items".into(), strict_node(items, definitions)?);
            }
            if let Some(min_items) = input.get("minItems") {
                if min_items == &json!(0) || min_items == &json!(1) {
                    output.insert("minItems".into(), min_items.clone());
                } else {
                    described.insert("minItems".into(), min_items.clone());
                }
            }
        }
        _ => {}
    }
    for keyword in DESCRIBED_CONSTRAINTS {
        if let Some(value) = input.get(keyword)
            && !output.contains_key(keyword)
            && !described.contains_key(keyword)
        {
            described.insert(keyword.into(), value.clone());
        }
    }
    if !described.is_empty() {
        describe(&mut output, &described);
    }
    Ok(Value::Object(output))
}

/// `{"type": ["string", "null"], "maxLength": 3}` as
/// `{"anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"}]}`.
fn split_type_union(input: &Map<String, Value>, types: &[Value]) -> Value {
    let mut union = Map::new();
    let mut branches = Vec::new();
    for node_type in types {
        let mut branch = Map::from_iter([("type".to_owned(), node_type.clone())]);
        for (key, value) in input {
            let shared = matches!(key.as_str(), "type" | "description" | "title");
            let literal = matches!(key.as_str(), "enum" | "const");
            if !shared && !literal && applies_to(key, node_type) {
                branch.insert(key.clone(), value.clone());
            }
        }
        branches.push(Value::Object(branch));
    }
    for (key, value) in input {
        if matches!(key.as_str(), "description" | "title" | "enum" | "const") {
            union.insert(key.clone(), value.clone());
        }
    }
    if union.contains_key("enum") || union.contains_key("const") {
        // The literals already say everything the types did.
        return Value::Object(union);
    }
    union.insert("anyOf".into(), Value::Array(branches));
    Value::Object(union)
}

/// Whether `keyword` constrains values of JSON type `node_type`.
fn applies_to(keyword: &str, node_type: &Value) -> bool {
    let Some(node_type) = node_type.as_str() else {
        return false;
    };
    match keyword {
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => {
            matches!(node_type, "integer" | "number")
        }
        "minLength" | "maxLength" | "pattern" | "format" => node_type == "string",
        "items" | "minItems" | "maxItems" | "uniqueItems" | "prefixItems" => node_type == "array",
        "properties" | "required" | "additionalProperties" | "minProperties" | "maxProperties" => {
            node_type == "object"
        }
        _ => false,
    }
}

/// Appends `{maximum: 10, minimum: 1}` to the description, as Anthropic's own SDK writes it,
/// the keywords in their alphabetical order whatever order the map keeps (serde_json keeps
/// insertion order when a crate in the build turns on `preserve_order`).
fn describe(output: &mut Map<String, Value>, constraints: &Map<String, Value>) {
    let mut listed: Vec<(&String, &Value)> = constraints.iter().collect();
    listed.sort_unstable_by_key(|(key, _)| *key);
    let listed: Vec<String> = listed
        .into_iter()
        .map(|(key, value)| format!("{key}: {value}"))
        .collect();
    let note = format!("{{{}}}", listed.join(", "));
    let description = match output.get("description").and_then(Value::as_str) {
        Some(description) => format!("{description}\n\n{note}"),
        None => note,
    };
    output.insert("description".into(), Value::String(description));
}

/// The per-request limits of strict tool use, over every tool the registry may send: at most
/// 20 strict tools, 24 optional parameters and 16 parameters with a union type.
pub(super) fn check_request(contracts: &[&ToolContract]) -> Result<(), (String, String)> {
    let mut optional = 0;
    let mut unions = 0;
    for (index, contract) in contracts.iter().enumerate() {
        if index == MAX_STRICT_TOOLS {
            return Err((
                contract.name().to_owned(),
                format!(
                    "strict tool use takes at most {MAX_STRICT_TOOLS} tools a request, and the \
                     registry has {}; serve the rest with `anthropic` (not strict)",
                    contracts.len()
                ),
            ));
        }
        let counts = count_parameters(contract.input_schema());
        optional += counts.0;
        unions += counts.1;
        if optional > MAX_OPTIONAL_PARAMETERS {
            return Err((
                contract.name().to_owned(),
                format!(
                    "the tools up to this one have {optional} optional parameters; strict tool \
                     use takes at most {MAX_OPTIONAL_PARAMETERS} a request"
                ),
            ));
        }
        if unions > MAX_UNION_PARAMETERS {
            return Err((
                contract.name().to_owned(),
                format!(
                    "the tools up to this one have {unions} parameters of a union type (an \
                     `Option` or an untagged enum); strict tool use takes at most \
                     {MAX_UNION_PARAMETERS} a request"
                ),
            ));
        }
    }
    Ok(())
}

/// The optional and the union-typed properties anywhere in `schema`.
fn count_parameters(schema: &Value) -> (usize, usize) {
    let mut optional = 0;
    let mut unions = 0;
    let mut pending = vec![schema];
    while let Some(node) = pending.pop() {
        match node {
            Value::Object(object) => {
                if let Some(Value::Object(properties)) = object.get("properties") {
                    let required = object.get("required").and_then(Value::as_array);
                    for (name, property) in properties {
                        if !required.is_some_and(|required| required.contains(&json!(name))) {
                            optional += 1;
                        }
                        if property.get("anyOf").is_some()
                            || property.get("oneOf").is_some()
                            || property.get("type").is_some_and(Value::is_array)
                        {
                            unions += 1;
                        }
                    }
                }
                for (key, value) in object {
                    if !matches!(key.as_str(), "enum" | "const" | "default" | "examples") {
                        pending.push(value);
                    }
                }
            }
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    (optional, unions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constraints_move_into_the_description() {
        let schema = json!({
            "type": "object",
            "properties": {
                "amount": {"type": "integer", "format": "uint32", "minimum": 1,
                    "maximum": 100, "description": "cents"},
                "note": {"type": ["string", "null"], "maxLength": 5},
                "kind": {"type": "string", "enum": ["a", "b"]},
            },
            "required": ["amount"],
            "additionalProperties": false,
        });
        assert_eq!(
            strict_schema(&schema).unwrap(),
            json!({
                "type": "object",
                "additionalProperties": false,
                "required": ["amount"],
                "properties": {
                    "amount": {"type": "integer",
                        "description": "cents\n\n{maximum: 100, minimum: 1}"},
                    "note": {"anyOf": [
                        {"type": "string", "description": "{maxLength: 5}"},
                        {"type": "null"},
                    ]},
                    "kind": {"enum": ["a", "b"]},
                },
            })
        );
    }

    #[test]
    fn the_request_limits_count_every_tool() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": ["string", "null"]}, "b": {"type": "string"}}});
        assert_eq!(count_parameters(&schema), (2, 1));
    }
}
