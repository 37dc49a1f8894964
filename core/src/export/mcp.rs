//! MCP `tools/list` entries, with annotations derived from the contract.
//!
//! Annotations are hints for the client's user interface; MCP says clients must not rely on
//! them for safety, and the gates do not: they enforce the contract themselves.
//!
//! The schemas carry only the `format`s JSON Schema 2020-12 defines (the MCP specification
//! names no others). schemars gives each Rust number type one of its own (`uint64`, `int32`,
//! `double`, ...), which clients that compile the schemas meet as unknown: the TypeScript SDK's
//! ajv prints `unknown format "uint64" ignored` for each. Those are dropped; the type's range
//! stays in `minimum` and `maximum`, which [`schema_for`](crate::schema_for) states in full
//! (and this profile states where a schema written by hand gives the format alone).

use serde_json::{Map, Value, json};

use crate::contract::{Risk, ToolContract};
use crate::schema::format_range;

/// `{"name", "description", "inputSchema", "outputSchema"?, "annotations"}`.
pub(super) fn tool(contract: &ToolContract, schema: &Value) -> Result<Value, String> {
    let read_only = contract.read_only();
    let destructive =
        !read_only && (contract.irreversible().is_some() || contract.risk() >= Risk::High);
    let mut tool = Map::new();
    tool.insert("name".into(), json!(contract.name()));
    tool.insert("description".into(), json!(contract.description()));
    tool.insert("inputSchema".into(), standard_formats_only(schema.clone()));
    // MCP's output schema describes `structuredContent`, which is always an object.
    if let Some(output) = contract
        .output_schema()
        .filter(|output| output.get("type") == Some(&json!("object")))
    {
        tool.insert("outputSchema".into(), standard_formats_only(output.clone()));
    }
    tool.insert(
        "annotations".into(),
        json!({
            "readOnlyHint": read_only,
            "destructiveHint": destructive,
            "idempotentHint": read_only || contract.idempotent(),
            "openWorldHint": contract.open_world(),
        }),
    );
    Ok(Value::Object(tool))
}

/// The formats JSON Schema 2020-12 defines (Validation, section 7.3).
const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// `schema` without a `format` that is not a [standard one](STANDARD_FORMATS), in it or in
/// any of its subschemas.
fn standard_formats_only(mut schema: Value) -> Value {
    drop_other_formats(&mut schema);
    schema
}

fn drop_other_formats(schema: &mut Value) {
    let Value::Object(object) = schema else {
        return;
    };
    let format = object
        .get("format")
        .map(|format| format.as_str().unwrap_or_default().to_owned());
    if let Some(format) = format.filter(|format| !STANDARD_FORMATS.contains(&format.as_str())) {
        // A number type's range, which the validate gate enforces, stays in the schema: a
        // schema written by hand may state the format alone.
        if let Some((min, max)) = format_range(&format) {
            object.entry("minimum").or_insert(min);
            object.entry("maximum").or_insert(max);
        }
        object.remove("format");
    }
    for (keyword, value) in object.iter_mut() {
        match (keyword.as_str(), value) {
            // Names to subschemas: a property may well be named `format`.
            (
                "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas",
                Value::Object(named),
            ) => named.values_mut().for_each(drop_other_formats),
            // Lists of subschemas (`items` was one before 2020-12).
            (
                "allOf" | "anyOf" | "oneOf" | "prefixItems" | "items" | "additionalItems",
                Value::Array(listed),
            ) => listed.iter_mut().for_each(drop_other_formats),
            // One subschema.
            (
                "items"
                | "additionalItems"
                | "additionalProperties"
                | "unevaluatedItems"
                | "unevaluatedProperties"
                | "contains"
                | "propertyNames"
                | "not"
                | "if"
                | "then"
                | "else",
                subschema,
            ) => drop_other_formats(subschema),
            // Values (`default`, `const`, `enum`, `examples`) and annotations: data, not
            // schemas.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;

    use super::*;
    use crate::schema_for;

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Reading {
        count: u64,
        offset: i32,
        ratio: f32,
        precise: f64,
        #[schemars(range(min = 1, max = 50))]
        small: u8,
        maybe: Option<u16>,
        many: Vec<u32>,
        inner: Inner,
        either: Either,
        /// A property named `format`: a name, not the keyword.
        format: String,
        #[schemars(email)]
        contact: String,
        #[schemars(url)]
        site: String,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        wide: i64,
        huge: u128,
        tiny: i8,
        index: usize,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    #[serde(untagged)]
    enum Either {
        Number(u32),
        Pair(i16, i16),
    }

    /// Every `format` of a schema's subschemas, with the path to it.
    fn formats(node: &Value, path: &str, found: &mut Vec<(String, String)>) {
        match node {
            Value::Object(object) => {
                if let Some(Value::String(format)) = object.get("format") {
                    found.push((path.to_owned(), format.clone()));
                }
                for (key, value) in object {
                    formats(value, &format!("{path}/{key}"), found);
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    formats(item, &format!("{path}/{index}"), found);
                }
            }
            _ => {}
        }
    }

    fn exported() -> Value {
        let contract = ToolContract::builder("read", "Reads.", schema_for::<Reading>())
            .output_schema(Some(schema_for::<Reading>()))
            .build();
        let schema = contract.input_schema().clone();
        tool(&contract, &schema).unwrap()
    }

    #[test]
    fn only_json_schemas_own_formats_are_exported() {
        // schemars writes its own formats for Rust's number types, in every subschema.
        let mut declared = Vec::new();
        formats(&schema_for::<Reading>(), "", &mut declared);
        let declared: Vec<&str> = declared.iter().map(|(_, format)| format.as_str()).collect();
        for rust in [
            "uint64", "int32", "float", "double", "uint8", "uint16", "uint32", "int64",
        ] {
            assert!(declared.contains(&rust), "{rust} not in {declared:?}");
        }

        let exported = exported();
        let mut found = Vec::new();
        formats(&exported, "", &mut found);
        let mut kept: Vec<&str> = found.iter().map(|(_, format)| format.as_str()).collect();
        kept.sort_unstable();
        // The email and the URL, in the input and in the output schema.
        assert_eq!(kept, ["email", "email", "uri", "uri"], "{found:?}");
        for (path, format) in &found {
            assert!(
                STANDARD_FORMATS.contains(&format.as_str()),
                "{path}: {format}"
            );
        }
        assert!(!exported.to_string().contains("uint"), "{exported}");
        // The property named `format` is still there, as it was.
        let properties = &exported["inputSchema"]["properties"];
        assert_eq!(properties["format"]["type"], "string");
    }

    #[test]
    fn a_dropped_format_leaves_the_types_range() {
        let exported = exported();
        for side in ["inputSchema", "outputSchema"] {
            let schema = &exported[side];
            let properties = &schema["properties"];
            let range =
                |property: &Value| (property["minimum"].clone(), property["maximum"].clone());
            assert_eq!(
                range(&properties["count"]),
                (json!(0), json!(u64::MAX)),
                "{side}"
            );
            assert_eq!(
                range(&properties["offset"]),
                (json!(i32::MIN), json!(i32::MAX)),
                "{side}"
            );
            assert_eq!(
                range(&properties["ratio"]),
                (json!(f64::from(f32::MIN)), json!(f64::from(f32::MAX))),
                "{side}"
            );
            // A declared range tighter than the type's stays as declared.
            assert_eq!(range(&properties["small"]), (json!(1), json!(50)), "{side}");
            assert_eq!(properties["maybe"]["maximum"], json!(u16::MAX), "{side}");
            assert_eq!(
                properties["many"]["items"]["maximum"],
                json!(u32::MAX),
                "{side}"
            );
            let inner = &schema["$defs"]["Inner"]["properties"];
            assert_eq!(
                range(&inner["wide"]),
                (json!(i64::MIN), json!(i64::MAX)),
                "{side}"
            );
            assert_eq!(
                range(&inner["tiny"]),
                (json!(i8::MIN), json!(i8::MAX)),
                "{side}"
            );
            assert_eq!(inner["huge"]["maximum"], json!(u64::MAX), "{side}");
            assert_eq!(inner["index"]["minimum"], json!(0), "{side}");
        }
    }

    #[test]
    fn a_schema_written_by_hand_keeps_its_formats_range() {
        let schema = json!({"type": "object", "additionalProperties": false,
        "properties": {
            "id": {"type": "integer", "format": "uint32"},
            "level": {"type": "integer", "format": "int8", "minimum": 0},
            "at": {"type": "string", "format": "date-time"},
            "price": {"type": "string", "format": "decimal"},
            "default": {"type": "object", "default": {"format": "uint8"}},
        }});
        let contract = ToolContract::builder("hand", "Written by hand.", schema.clone()).build();
        let exported = tool(&contract, &schema).unwrap();
        assert_eq!(
            exported["inputSchema"]["properties"],
            json!({
                "id": {"type": "integer", "minimum": 0, "maximum": u32::MAX},
                "level": {"type": "integer", "minimum": 0, "maximum": 127},
                "at": {"type": "string", "format": "date-time"},
                "price": {"type": "string"},
                // A value is data: it is exported as written.
                "default": {"type": "object", "default": {"format": "uint8"}},
            })
        );
    }

    fn annotations(contract: ToolContract) -> Value {
        let schema = contract.input_schema().clone();
        tool(&contract, &schema).unwrap()["annotations"].clone()
    }

    #[test]
    fn annotations_follow_the_contract() {
        let schema = json!({"type": "object", "additionalProperties": false});
        let read = ToolContract::builder("read", "Reads.", schema.clone())
            .read_only()
            .closed_world()
            .build();
        assert_eq!(
            annotations(read),
            json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true,
                "openWorldHint": false})
        );
        let wipe = ToolContract::builder("wipe", "Wipes.", schema.clone())
            .risk(Risk::Low)
            .irreversible("gone")
            .build();
        assert_eq!(annotations(wipe)["destructiveHint"], json!(true));
        let tag = ToolContract::builder("tag", "Tags.", schema)
            .risk(Risk::Medium)
            .idempotent()
            .build();
        assert_eq!(
            annotations(tag),
            json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true,
                "openWorldHint": true})
        );
    }
}
