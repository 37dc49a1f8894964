//! A call's arguments that pass the decode and validate gates, written from the input schema
//! alone: the smallest value each required argument accepts. Where the schema says too little
//! (a `pattern`), the user gives a valid call instead.

use serde_json::{Map, Value, json};

use crate::schema::resolve;

/// Arguments with every required argument at a value its schema accepts, or `None` if one of
/// them cannot be written from the schema.
pub(crate) fn valid_arguments(schema: &Value) -> Option<Map<String, Value>> {
    match valid_value(schema, schema)? {
        Value::Object(arguments) => Some(arguments),
        _ => None,
    }
}

/// A value `property` accepts (`root` holds the definitions its `$ref`s name).
pub(crate) fn valid_value(root: &Value, property: &Value) -> Option<Value> {
    let property = resolve(root, property);
    if let Some(constant) = property.get("const") {
        return Some(constant.clone());
    }
    if let Some(values) = property["enum"].as_array() {
        return values.iter().find(|value| !value.is_null()).cloned();
    }
    for union in ["oneOf", "anyOf"] {
        if let Some(variants) = property[union].as_array() {
            return variants
                .iter()
                .filter(|variant| variant["type"] != "null")
                .find_map(|variant| valid_value(root, variant));
        }
    }
    let kind = match &property["type"] {
        Value::String(kind) => kind.as_str(),
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|kind| *kind != "null")?,
        _ => return None,
    };
    match kind {
        "integer" | "number" => {
            let bound = |key: &str| property[key].as_f64();
            let (low, high) = (bound("minimum"), bound("maximum"));
            let (above, below) = (bound("exclusiveMinimum"), bound("exclusiveMaximum"));
            let inside = |value: f64| {
                low.is_none_or(|low| value >= low)
                    && high.is_none_or(|high| value <= high)
                    && above.is_none_or(|above| value > above)
                    && below.is_none_or(|below| value < below)
            };
            let floor = low.or(above);
            let ceiling = high.or(below);
            // 1 where it may be; otherwise a whole number inside, or the middle of the range.
            let candidates = [
                Some(1.0),
                floor.map(|floor| floor.floor() + 1.0),
                low,
                ceiling.map(|ceiling| ceiling.ceil() - 1.0),
                high,
                floor
                    .zip(ceiling)
                    .map(|(floor, ceiling)| (floor + ceiling) / 2.0),
            ];
            let chosen = candidates
                .into_iter()
                .flatten()
                .find(|value| inside(*value) && (kind == "number" || value.fract() == 0.0))?;
            Some(match chosen.fract() == 0.0 {
                true => json!(chosen as i64),
                false => json!(chosen),
            })
        }
        "string" if property.get("pattern").is_some() || property.get("format").is_some() => None,
        "string" => {
            let shortest = property["minLength"].as_u64().unwrap_or(1).max(1);
            let longest = property["maxLength"].as_u64().unwrap_or(shortest);
            Some(json!(
                "a".repeat(usize::try_from(shortest.min(longest)).ok()?)
            ))
        }
        "boolean" => Some(json!(false)),
        "null" => Some(Value::Null),
        "array" => {
            let count = usize::try_from(property["minItems"].as_u64().unwrap_or(0)).ok()?;
            let item = if count > 0 {
                Some(valid_value(root, &property["items"])?)
            } else {
                None
            };
            Some(Value::Array(
                item.map(|item| vec![item; count]).unwrap_or_default(),
            ))
        }
        "object" => {
            let mut object = Map::new();
            for name in property["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let value = valid_value(root, &property["properties"][name])?;
                object.insert(name.to_owned(), value);
            }
            Some(Value::Object(object))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_required_argument_gets_the_smallest_value_it_accepts() {
        let schema = json!({
            "$defs": {"Money": {"type": "object", "properties": {
                "cents": {"type": "integer", "minimum": 1}, "currency": {"enum": ["EUR", "USD"]}},
                "required": ["cents", "currency"]}},
            "type": "object",
            "properties": {
                "id": {"type": "string", "minLength": 5, "maxLength": 40},
                "amount": {"$ref": "#/$defs/Money"},
                "when": {"oneOf": [{"type": "object", "properties": {"when": {"const": "now"}},
                    "required": ["when"]}]},
                "note": {"type": ["string", "null"]},
            },
            "required": ["id", "amount", "when"],
        });
        assert_eq!(
            Value::Object(valid_arguments(&schema).unwrap()),
            json!({"id": "aaaaa", "amount": {"cents": 1, "currency": "EUR"}, "when": {"when": "now"}})
        );
        let patterned = json!({"type": "object", "properties": {
            "iban": {"type": "string", "pattern": "^[A-Z]{2}"}}, "required": ["iban"]});
        assert_eq!(valid_arguments(&patterned), None);
    }
}
