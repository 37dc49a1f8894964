//! Reading an input schema as the gates read it: a `$ref` stands for the definition it names.

use serde_json::Value;

/// `property` itself, or the definition its `$ref` names.
pub(crate) fn resolve<'a>(schema: &'a Value, property: &'a Value) -> &'a Value {
    property["$ref"]
        .as_str()
        .and_then(|reference| reference.strip_prefix("#/$defs/"))
        .and_then(|name| schema["$defs"].get(name))
        .unwrap_or(property)
}
