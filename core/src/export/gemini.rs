//! Gemini's function declarations, with `parameters` in Gemini's OpenAPI 3.0 subset or with
//! `parametersJsonSchema`.

use serde_json::{Map, Value, json};

use crate::contract::ToolContract;
use crate::schema::definitions::Definitions;

/// Keywords of Gemini's subset copied as they are (`type`, `nullable`, `enum`, `anyOf`,
/// `properties`, `items` and `required` are rebuilt).
const KEPT: [&str; 13] = [
    "title",
    "description",
    "default",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
    "pattern",
    "example",
];

/// Constraints outside the subset, shown in the description; the validate gate enforces them.
const DESCRIBED: [&str; 4] = [
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "uniqueItems",
];

const MAX_NAME_LENGTH: usize = 128;

/// `{"name", "description", "parameters"}` in the OpenAPI subset.
pub(super) fn declaration(contract: &ToolContract, schema: &Value) -> Result<Value, String> {
    check_name(contract.name())?;
    let parameters = parameters(schema)?;
    Ok(json!({
        "name": contract.name(),
        "description": contract.description(),
        "parameters": parameters,
    }))
}

/// `{"name", "description", "parametersJsonSchema"}`: the JSON Schema as it is.
pub(super) fn json_schema_declaration(
    contract: &ToolContract,
    schema: &Value,
) -> Result<Value, String> {
    check_name(contract.name())?;
    Ok(json!({
        "name": contract.name(),
        "description": contract.description(),
        "parametersJsonSchema": schema,
    }))
}

/// Gemini's `tools` field: one tool holding every declaration.
pub(super) fn tools_field(declarations: Vec<Value>) -> Value {
    if declarations.is_empty() {
        return json!([]);
    }
    json!([{ "functionDeclarations": declarations }])
}

fn check_name(name: &str) -> Result<(), String> {
    let starts_well = name
        .chars()
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_');
    if !starts_well {
        return Err(format!(
            "Gemini function names start with a letter or `_`; rename `{name}` with \
             `#[tool(name = \"...\")]`"
        ));
    }
    if name.len() > MAX_NAME_LENGTH {
        return Err(format!(
            "Gemini function names are at most {MAX_NAME_LENGTH} characters"
        ));
    }
    Ok(())
}

/// The schema in Gemini's OpenAPI subset.
pub(super) fn parameters(schema: &Value) -> Result<Value, String> {
    subset_node(schema, &Definitions::of(schema), &mut Vec::new())
}

fn subset_node(
    node: &Value,
    definitions: &Definitions<'_>,
    inlining: &mut Vec<String>,
) -> Result<Value, String> {
    let input = match node {
        Value::Object(input) => input,
        // A value of any type: a schema that says nothing.
        Value::Bool(true) => return Ok(json!({})),
        _ => {
            return Err(format!(
                "the schema `{node}` is not an object; Gemini cannot take it"
            ));
        }
    };
    if let Some(reference) = input.get("$ref").and_then(Value::as_str) {
        let (name, definition) = definitions.resolve(reference)?;
        if inlining.contains(&name) {
            return Err(format!(
                "the type `{name}` contains itself; Gemini's `parameters` cannot express \
                 recursion: serve this tool with `gemini-json-schema`"
            ));
        }
        let mut merged = definition.as_object().cloned().unwrap_or_default();
        for (key, value) in input {
            if key != "$ref" {
                merged.insert(key.clone(), value.clone());
            }
        }
        inlining.push(name);
        let inlined = subset_node(&Value::Object(merged), definitions, inlining);
        inlining.pop();
        return inlined;
    }
    if input.contains_key("allOf") {
        return Err("`allOf` (e.g. from `#[serde(flatten)]`) is not supported by Gemini".into());
    }

    let mut output = Map::new();
    let mut nullable = false;
    let mut described = Vec::new();
    for keyword in KEPT {
        if let Some(value) = input.get(keyword) {
            output.insert(keyword.into(), value.clone());
        }
    }
    for keyword in DESCRIBED {
        if let Some(value) = input.get(keyword) {
            described.push(format!("{keyword}: {value}"));
        }
    }

    let mut types: Vec<&str> = match input.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.contains(&"null") {
        nullable = true;
        types.retain(|name| *name != "null");
    }

    let mut literals: Vec<Value> = input
        .get("enum")
        .and_then(Value::as_array)
        .cloned()
        .or_else(|| input.get("const").map(|value| vec![value.clone()]))
        .unwrap_or_default();
    if literals.contains(&Value::Null) {
        nullable = true;
        literals.retain(|value| !value.is_null());
    }
    if !literals.is_empty() {
        if literals.iter().all(Value::is_string) {
            // Gemini's enums are strings, and need the type said.
            types = vec!["string"];
            output.insert("enum".into(), Value::Array(literals));
        } else {
            let listed: Vec<String> = literals.iter().map(Value::to_string).collect();
            described.push(format!("one of: {}", listed.join(", ")));
        }
    }

    match types.as_slice() {
        [] => {}
        [single] => {
            output.insert("type".into(), json!(single));
        }
        several => {
            let branches = several
                .iter()
                .map(|name| {
                    let mut branch = input.clone();
                    branch.insert("type".into(), json!(name));
                    branch.remove("description");
                    branch.remove("title");
                    subset_node(&Value::Object(branch), definitions, inlining)
                })
                .collect::<Result<Vec<Value>, String>>()?;
            output.insert("anyOf".into(), Value::Array(branches));
        }
    }
    if let Some(format) = input.get("format").and_then(Value::as_str)
        && supported_format(types.first().copied(), format)
    {
        output.insert("format".into(), json!(format));
    }

    if let Some(Value::Object(properties)) = input.get("properties") {
        let properties = properties
            .iter()
            .map(|(name, property)| {
                Ok((name.clone(), subset_node(property, definitions, inlining)?))
            })
            .collect::<Result<Map<String, Value>, String>>()?;
        output.insert("type".into(), json!("object"));
        output.insert("properties".into(), Value::Object(properties));
        if let Some(required) = input.get("required") {
            output.insert("required".into(), required.clone());
        }
    }
    match input.get("items") {
        Some(items @ Value::Object(_)) => {
            output.insert("items".into(), subset_node(items, definitions, inlining)?);
        }
        Some(_) => return Err("tuples (`prefixItems`) are not supported by Gemini".into()),
        None if input.contains_key("prefixItems") => {
            return Err("tuples (`prefixItems`) are not supported by Gemini".into());
        }
        None => {}
    }

    let branches = ["anyOf", "oneOf"]
        .into_iter()
        .filter_map(|keyword| input.get(keyword).and_then(Value::as_array))
        .flatten();
    let mut kept_branches = Vec::new();
    for branch in branches {
        if branch.get("type") == Some(&json!("null")) && branch.as_object().map(Map::len) == Some(1)
        {
            nullable = true;
        } else {
            kept_branches.push(subset_node(branch, definitions, inlining)?);
        }
    }
    match kept_branches.len() {
        0 => {}
        // `Option<T>` of a type with a definition: T itself, nullable.
        1 if !output.contains_key("type") => {
            if let Some(Value::Object(only)) = kept_branches.pop() {
                for (key, value) in only {
                    if key == "nullable" {
                        nullable = true;
                    } else {
                        output.entry(key).or_insert(value);
                    }
                }
            }
        }
        _ => {
            output.insert("anyOf".into(), Value::Array(kept_branches));
        }
    }

    if nullable {
        output.insert("nullable".into(), Value::Bool(true));
    }
    if !described.is_empty() {
        let note = format!("({})", described.join("; "));
        let description = match output.get("description").and_then(Value::as_str) {
            Some(description) => format!("{description} {note}"),
            None => note,
        };
        output.insert("description".into(), Value::String(description));
    }
    Ok(Value::Object(output))
}

/// The formats Gemini documents for each type; a Rust type's format such as `uint64` is left
/// out (its range is stated by `minimum` and `maximum`).
fn supported_format(node_type: Option<&str>, format: &str) -> bool {
    match node_type {
        Some("integer") => matches!(format, "int32" | "int64"),
        Some("number") => matches!(format, "float" | "double"),
        Some("string") => matches!(format, "date-time" | "enum"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_inlined_and_unions_with_null_become_nullable() {
        let schema = json!({
            "type": "object",
            "properties": {
                "money": {"anyOf": [{"$ref": "#/$defs/Money"}, {"type": "null"}],
                    "description": "how much"},
                "note": {"type": ["string", "null"], "maxLength": 5},
                "count": {"type": "integer", "format": "uint64", "minimum": 0,
                    "exclusiveMaximum": 10},
                "level": {"enum": [1, 2, 3]},
                "kind": {"const": "card"},
            },
            "required": ["count"],
            "additionalProperties": false,
            "$defs": {"Money": {"type": "object", "properties": {"cents": {"type": "integer"}},
                "required": ["cents"], "additionalProperties": false}},
        });
        assert_eq!(
            parameters(&schema).unwrap(),
            json!({
                "type": "object",
                "required": ["count"],
                "properties": {
                    "money": {"type": "object", "description": "how much", "nullable": true,
                        "properties": {"cents": {"type": "integer"}}, "required": ["cents"]},
                    "note": {"type": "string", "maxLength": 5, "nullable": true},
                    "count": {"type": "integer", "minimum": 0,
                        "description": "(exclusiveMaximum: 10)"},
                    "level": {"description": "(one of: 1, 2, 3)"},
                    "kind": {"type": "string", "enum": ["card"]},
                },
            })
        );
    }

    #[test]
    fn recursion_and_bad_names_are_refused() {
        let schema = json!({"type": "object", "properties": {"tree": {"$ref": "#/$defs/Tree"}},
            "$defs": {"Tree": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}});
        assert!(parameters(&schema).unwrap_err().contains("recursion"));
        assert!(check_name("2fa_reset").is_err());
        assert!(check_name("_reset.v2:x-y").is_ok());
    }
}
