//! Arguments whose allowed values come from a function (`#[one_of]`), asked again at every
//! export and every call: the values in one context, and the schema that shows them.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::tool_contract::{AllowedValues, ToolContract, ValuesApply};
use crate::schema::definitions::drop_unreferenced;
use crate::schema::type_includes;

impl ToolContract {
    /// The JSON Schema of the arguments as `ctx` sees it: [`input_schema`](Self::input_schema)
    /// with the current values of every dynamic argument ([`ContractBuilder::one_of`](crate::ContractBuilder::one_of)) as its
    /// `enum` (on `items` for a list), plus `null` where the argument accepts null. Borrowed
    /// when the tool has no dynamic argument.
    ///
    /// A dynamic argument with no allowed value in `ctx` is left out of the schema when the
    /// call may leave it out (it then takes its default), and makes the whole result `None`
    /// when the call requires it: no call could pass, so the tool is not worth showing.
    ///
    /// A dynamic argument whose values are strings, numbers or booleans is shown as a schema
    /// of its own, their types and the `enum`, keeping only its description and title: the
    /// shape it had (a `$ref` to a Rust enum, a union for an `Option`) says less than the
    /// values, and providers take a `$ref` or a union beside an `enum` badly or not at all.
    pub fn input_schema_for(&self, ctx: &crate::context::CallContext) -> Option<Cow<'_, Value>> {
        if self.dynamic_values.is_empty() {
            return Some(Cow::Borrowed(&self.input_schema));
        }
        let mut schema = self.input_schema.clone();
        for allowed in self.allowed_values(ctx) {
            if allowed.values.iter().all(Value::is_null) {
                if self.requires(allowed.argument) {
                    return None;
                }
                if let Some(Value::Object(properties)) = schema.get_mut("properties") {
                    properties.remove(allowed.argument);
                }
                continue;
            }
            let Some(property) = schema
                .get_mut("properties")
                .and_then(|properties| properties.get_mut(allowed.argument))
            else {
                continue;
            };
            let target = match allowed.applies {
                ValuesApply::Whole => Some(property),
                ValuesApply::EachElement { .. } => property.get_mut("items"),
            };
            if let Some(Value::Object(target)) = target {
                restrict_to(target, allowed.values);
            }
        }
        drop_unreferenced(&mut schema);
        Some(Cow::Owned(schema))
    }

    /// Whether the arguments' schema lists `argument` as required.
    fn requires(&self, argument: &str) -> bool {
        self.input_schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|required| required.iter().any(|name| name == argument))
    }

    /// The arguments whose allowed values come from a function (names as the model sees them).
    pub fn dynamic_arguments(&self) -> impl Iterator<Item = &str> {
        self.dynamic_values
            .iter()
            .map(|dynamic| dynamic.argument.as_str())
    }

    /// Asks every dynamic argument's function for its values in `ctx`, and reads from the
    /// schema where they apply, so that the export and the check agree.
    pub(crate) fn allowed_values(
        &self,
        ctx: &crate::context::CallContext,
    ) -> Vec<AllowedValues<'_>> {
        self.dynamic_values
            .iter()
            .map(|dynamic| {
                let property = self
                    .input_schema
                    .get("properties")
                    .and_then(|properties| properties.get(&dynamic.argument));
                let items = property
                    .filter(|property| type_includes(property.get("type"), "array"))
                    .and_then(|property| property.get("items"));
                let (applies, values_schema) = match (property, items) {
                    (Some(property), Some(items)) => (
                        ValuesApply::EachElement {
                            nullable: accepts_null(property),
                        },
                        Some(items),
                    ),
                    (property, _) => (ValuesApply::Whole, property),
                };
                let mut values = (dynamic.values)(ctx);
                if values_schema.is_some_and(accepts_null) && !values.contains(&Value::Null) {
                    values.push(Value::Null);
                }
                AllowedValues {
                    argument: &dynamic.argument,
                    applies,
                    values,
                }
            })
            .collect()
    }
}

/// Makes `node` the schema of exactly `values` (see [`ToolContract::input_schema_for`]).
fn restrict_to(node: &mut Map<String, Value>, values: Vec<Value>) {
    if let Some(types) = scalar_types(&values) {
        node.retain(|keyword, _| matches!(keyword.as_str(), "description" | "title"));
        let types = match types.as_slice() {
            [single] => Value::from(*single),
            several => Value::from(several.to_vec()),
        };
        node.insert("type".to_owned(), types);
    }
    node.insert("enum".to_owned(), Value::Array(values));
}

/// The JSON types of `values` in order of first use, an integer counting as a number where
/// both occur; `None` if one of them is an object or an array.
fn scalar_types(values: &[Value]) -> Option<Vec<&'static str>> {
    let mut types = Vec::new();
    for value in values {
        let name = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::String(_) => "string",
            Value::Number(number) if number.is_f64() => "number",
            Value::Number(_) => "integer",
            Value::Array(_) | Value::Object(_) => return None,
        };
        if !types.contains(&name) {
            types.push(name);
        }
    }
    if types.contains(&"number") {
        types.retain(|name| *name != "integer");
    }
    Some(types)
}

/// Whether `schema` accepts `null`: by its `type`, or by a branch of an `anyOf`/`oneOf` (how
/// schemars writes `Option` of a type with a `$ref`).
fn accepts_null(schema: &Value) -> bool {
    type_includes(schema.get("type"), "null")
        || ["anyOf", "oneOf"].iter().any(|keyword| {
            schema
                .get(keyword)
                .and_then(Value::as_array)
                .is_some_and(|branches| {
                    branches
                        .iter()
                        .any(|branch| type_includes(branch.get("type"), "null"))
                })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn two_products(_: &crate::context::CallContext) -> Vec<Value> {
        vec![json!("p-1"), json!("p-2")]
    }

    #[test]
    fn scalar_values_replace_a_reference_or_a_union_with_their_own_schema() {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "sort": {"$ref": "#/$defs/Sort", "description": "order", "default": "asc"},
                "size": {"anyOf": [{"$ref": "#/$defs/Size"}, {"type": "null"}]},
                "sizes": {"type": "array", "items": {"$ref": "#/$defs/Size"}},
                "weight": {"type": "number"},
            },
            "$defs": {
                "Sort": {"type": "string", "enum": ["asc", "desc"]},
                "Size": {"type": "integer", "minimum": 0},
            },
        });
        let contract = ToolContract::builder("a", "b", schema)
            .one_of("sort", |_| vec![json!("desc")])
            .one_of("size", |_| vec![json!(1), json!(2)])
            .one_of("sizes", |_| vec![json!(3)])
            .one_of("weight", |_| vec![json!(1), json!(2.5)])
            .build();
        let exported = contract
            .input_schema_for(&crate::context::CallContext::new("alice"))
            .unwrap();
        let properties = &exported["properties"];
        assert_eq!(
            properties["sort"],
            json!({"description": "order", "type": "string", "enum": ["desc"]})
        );
        assert_eq!(
            properties["size"],
            json!({"type": ["integer", "null"], "enum": [1, 2, null]})
        );
        assert_eq!(
            properties["sizes"]["items"],
            json!({"type": "integer", "enum": [3]})
        );
        assert_eq!(
            properties["weight"],
            json!({"type": "number", "enum": [1, 2.5]})
        );
    }

    #[test]
    fn structured_values_keep_the_shape_beside_their_enum() {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {"point": {"$ref": "#/$defs/Point"}},
            "$defs": {"Point": {"type": "object"}},
        });
        let contract = ToolContract::builder("a", "b", schema)
            .one_of("point", |_| vec![json!({"x": 1})])
            .build();
        let exported = contract
            .input_schema_for(&crate::context::CallContext::new("alice"))
            .unwrap();
        assert_eq!(
            exported["properties"]["point"],
            json!({"$ref": "#/$defs/Point", "enum": [{"x": 1}]})
        );
    }

    #[test]
    fn a_required_argument_with_no_allowed_value_means_no_schema_to_show() {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "product": {"type": "string"},
                "products": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["product", "products"],
        });
        let ctx = crate::context::CallContext::new("alice");
        let whole = ToolContract::builder("a", "b", schema.clone())
            .one_of("product", |_| Vec::new())
            .build();
        assert!(whole.input_schema_for(&ctx).is_none());
        let each = ToolContract::builder("a", "b", schema)
            .one_of("products", |_| Vec::new())
            .build();
        assert!(each.input_schema_for(&ctx).is_none());
    }

    #[test]
    fn an_optional_argument_with_no_allowed_value_is_not_shown() {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "coupon": {"type": ["string", "null"]},
                "products": {"type": "array", "items": {"type": "string"}, "default": []},
                "quantity": {"type": "integer"},
            },
            "required": ["quantity"],
        });
        let contract = ToolContract::builder("a", "b", schema)
            .one_of("coupon", |_| Vec::new())
            .one_of("products", |_| Vec::new())
            .build();
        let exported = contract
            .input_schema_for(&crate::context::CallContext::new("alice"))
            .unwrap();
        assert_eq!(
            exported["properties"],
            json!({"quantity": {"type": "integer"}})
        );
    }

    #[test]
    fn only_dynamic_arguments_make_a_schema_of_their_own() {
        let ctx = crate::context::CallContext::new("alice");
        let fixed = ToolContract::builder(
            "a",
            "b",
            json!({"type": "object", "additionalProperties": false}),
        )
        .build();
        assert!(matches!(
            fixed.input_schema_for(&ctx),
            Some(Cow::Borrowed(_))
        ));

        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "product": {"type": ["string", "null"]},
                "products": {"type": "array", "items": {"type": "string"}},
            },
        });
        let dynamic = ToolContract::builder("a", "b", schema)
            .one_of("product", two_products)
            .one_of("products", two_products)
            .build();
        let exported = dynamic.input_schema_for(&ctx).unwrap();
        assert_eq!(
            exported["properties"]["product"],
            json!({"type": ["string", "null"], "enum": ["p-1", "p-2", null]})
        );
        assert_eq!(
            exported["properties"]["products"]["items"]["enum"],
            json!(["p-1", "p-2"])
        );
        assert!(
            dynamic.input_schema()["properties"]["product"]
                .get("enum")
                .is_none()
        );
        assert_eq!(
            serde_json::to_value(&dynamic).unwrap()["one_of"],
            json!(["product", "products"])
        );
    }
}
