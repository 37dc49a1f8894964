//! The `$defs` of a schema and the `$ref`s that point into them, which every profile has to
//! treat in its provider's way: kept, inlined, or made to stand alone.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// Keywords that describe a `$ref`'s use site without constraining its values.
const ANNOTATIONS: [&str; 5] = ["description", "title", "default", "examples", "deprecated"];

/// The definitions of one root schema.
pub(crate) struct Definitions<'a> {
    defs: Option<&'a Map<String, Value>>,
}

impl<'a> Definitions<'a> {
    pub(crate) fn of(root: &'a Value) -> Self {
        Definitions {
            defs: root.get("$defs").and_then(Value::as_object),
        }
    }

    /// The definitions by name, in a stable order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&'a String, &'a Value)> {
        self.defs.into_iter().flatten()
    }

    /// The name of the definition `reference` points at, e.g. `Money` for `#/$defs/Money`:
    /// the URI fragment percent-decoded (schemars encodes `Page<T>` as `Page%3CT%3E`), then
    /// the JSON pointer's `~1` and `~0` unescaped.
    pub(crate) fn name(reference: &str) -> Option<String> {
        let name = percent_decoded(reference.strip_prefix("#/$defs/")?)?;
        Some(name.replace("~1", "/").replace("~0", "~"))
    }

    /// The definition `reference` points at.
    pub(crate) fn resolve(&self, reference: &str) -> Result<(String, &'a Value), String> {
        let name = Self::name(reference)
            .ok_or_else(|| format!("the reference `{reference}` does not point into `$defs`"))?;
        match self.defs.and_then(|defs| defs.get(&name)) {
            Some(definition) => Ok((name, definition)),
            None => Err(format!("the reference `{reference}` points at nothing")),
        }
    }

    /// Whether the definition named `name` refers to itself, directly or through others.
    pub(crate) fn is_recursive(&self, name: &str) -> bool {
        let mut seen = BTreeSet::new();
        let mut pending: Vec<&str> = Vec::new();
        if let Some((_, definition)) = self.defs.and_then(|defs| defs.get_key_value(name)) {
            collect_refs(definition, &mut pending);
        }
        while let Some(reference) = pending.pop() {
            let Some(target) = Self::name(reference) else {
                continue;
            };
            if target == name {
                return true;
            }
            if seen.insert(target.clone())
                && let Some(definition) = self.defs.and_then(|defs| defs.get(&target))
            {
                collect_refs(definition, &mut pending);
            }
        }
        false
    }

    /// A `$ref` that carries annotations beside it (a field's description), as a schema
    /// without siblings: the definition merged with the annotations where it is not recursive,
    /// else the reference wrapped in a one-branch `anyOf` that can carry them. Providers
    /// either drop a `$ref`'s siblings or inline the reference themselves; both ways the
    /// export would not be what they use.
    pub(crate) fn standalone(&self, node: &Map<String, Value>) -> Result<Option<Value>, String> {
        let Some(reference) = node.get("$ref").and_then(Value::as_str) else {
            return Ok(None);
        };
        if node.len() == 1 {
            return Ok(None);
        }
        if let Some(keyword) = node
            .keys()
            .find(|key| *key != "$ref" && !ANNOTATIONS.contains(&key.as_str()))
        {
            return Err(format!(
                "a reference to `{reference}` is constrained by `{keyword}` beside it"
            ));
        }
        let (name, definition) = self.resolve(reference)?;
        let mut merged = Map::new();
        if self.is_recursive(&name) {
            merged.insert(
                "anyOf".into(),
                Value::Array(vec![Value::Object(Map::from_iter([(
                    "$ref".to_owned(),
                    Value::String(reference.to_owned()),
                )]))]),
            );
        } else if let Value::Object(definition) = definition {
            merged.extend(definition.clone());
        }
        for (key, value) in node {
            if key != "$ref" {
                merged.insert(key.clone(), value.clone());
            }
        }
        Ok(Some(Value::Object(merged)))
    }
}

/// Rebuilds a root schema and each of its definitions with `rebuild_node`, one provider's
/// transformation of a schema node.
pub(crate) fn rebuild_with_definitions(
    schema: &Value,
    rebuild_node: impl Fn(&Value, &Definitions<'_>) -> Result<Value, String>,
) -> Result<Value, String> {
    let definitions = Definitions::of(schema);
    let mut rebuilt = rebuild_node(schema, &definitions)?;
    let defs = definitions
        .iter()
        .map(|(name, definition)| Ok((name.clone(), rebuild_node(definition, &definitions)?)))
        .collect::<Result<Map<String, Value>, String>>()?;
    if let (Value::Object(root), false) = (&mut rebuilt, defs.is_empty()) {
        root.insert("$defs".into(), Value::Object(defs));
    }
    Ok(rebuilt)
}

/// Why a strict mode refuses a schema node that accepts any value.
pub(crate) const ANY_VALUE: &str =
    "a value of any type (e.g. `serde_json::Value`) has no strict form; give it a type";

/// The keywords of a schema node that gives a strict mode something to hold the model to:
/// refuses `true` and `{}`, which accept any value, and anything that is not a schema.
pub(crate) fn typed_node<'v>(
    node: &'v Value,
    mode: &str,
) -> Result<&'v Map<String, Value>, String> {
    match node {
        Value::Object(input) if !input.is_empty() => Ok(input),
        Value::Object(_) | Value::Bool(true) => Err(ANY_VALUE.into()),
        _ => Err(format!(
            "the schema `{node}` is not an object; {mode} cannot take it"
        )),
    }
}

/// Removes the definitions that nothing outside `$defs` refers to, directly or through other
/// definitions: after a dynamic argument's `$ref` gives way to its current values, its
/// definition would only show the model values it may not use.
pub(crate) fn drop_unreferenced(root: &mut Value) {
    let Value::Object(root) = root else {
        return;
    };
    let Some(Value::Object(defs)) = root.get("$defs") else {
        return;
    };
    let mut pending = Vec::new();
    for (key, value) in root.iter().filter(|(key, _)| *key != "$defs") {
        collect_refs_of_keyword(key, value, &mut pending);
    }
    let mut reached = BTreeSet::new();
    while let Some(reference) = pending.pop() {
        let Some((name, definition)) = Definitions::name(reference)
            .and_then(|name| defs.get(&name).map(|definition| (name, definition)))
        else {
            // A reference this cannot follow: keep every definition rather than guess.
            return;
        };
        if reached.insert(name) {
            collect_refs(definition, &mut pending);
        }
    }
    if reached.len() == defs.len() {
        return;
    }
    if let Some(Value::Object(defs)) = root.get_mut("$defs") {
        defs.retain(|name, _| reached.contains(name));
        if defs.is_empty() {
            root.remove("$defs");
        }
    }
}

/// `text` with every `%XX` replaced by its byte; `None` for a broken escape or bytes that are
/// not UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_owned());
    }
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, after)) = rest.split_first() {
        if byte == b'%' {
            let [high, low, after @ ..] = after else {
                return None;
            };
            let digit = |byte: u8| char::from(byte).to_digit(16);
            let value = digit(*high)? * 16 + digit(*low)?;
            bytes.push(u8::try_from(value).ok()?);
            rest = after;
        } else {
            bytes.push(byte);
            rest = after;
        }
    }
    String::from_utf8(bytes).ok()
}

/// Every `$ref` under `schema`.
fn collect_refs<'v>(schema: &'v Value, found: &mut Vec<&'v str>) {
    match schema {
        Value::Object(object) => {
            for (key, value) in object {
                collect_refs_of_keyword(key, value, found);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_refs(item, found)),
        _ => {}
    }
}

/// Every `$ref` under the value of one keyword of a schema.
fn collect_refs_of_keyword<'v>(keyword: &str, value: &'v Value, found: &mut Vec<&'v str>) {
    match (keyword, value) {
        ("$ref", Value::String(reference)) => found.push(reference),
        // Data, not schemas.
        ("enum" | "const" | "default" | "examples", _) => {}
        // Schemas by name: a property may be named like a keyword.
        ("properties" | "patternProperties" | "$defs", Value::Object(schemas)) => schemas
            .values()
            .for_each(|schema| collect_refs(schema, found)),
        _ => collect_refs(value, found),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn recursion_is_found_through_other_definitions() {
        let root = json!({"$defs": {
            "Tree": {"type": "object", "properties": {"branch": {"$ref": "#/$defs/Branch"}}},
            "Branch": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
            "Leaf": {"type": "string"},
        }});
        let definitions = Definitions::of(&root);
        assert!(definitions.is_recursive("Tree"));
        assert!(definitions.is_recursive("Branch"));
        assert!(!definitions.is_recursive("Leaf"));
    }

    #[test]
    fn a_property_named_like_a_keyword_is_still_searched() {
        let root = json!({"$defs": {
            "Tree": {"type": "object", "properties": {"enum": {"$ref": "#/$defs/Tree"}}},
        }});
        assert!(Definitions::of(&root).is_recursive("Tree"));
    }

    #[test]
    fn definitions_nothing_reaches_are_dropped() {
        let mut root = json!({
            "properties": {"sort": {"type": "string", "enum": ["asc"]},
                           "tree": {"$ref": "#/$defs/Tree"}},
            "$defs": {
                "Sort": {"type": "string", "enum": ["asc", "desc"]},
                "Tree": {"type": "array", "items": {"$ref": "#/$defs/Leaf"}},
                "Leaf": {"type": "string"},
            },
        });
        drop_unreferenced(&mut root);
        assert_eq!(
            root["$defs"],
            json!({"Tree": {"type": "array", "items": {"$ref": "#/$defs/Leaf"}},
                   "Leaf": {"type": "string"}})
        );
        let mut root = json!({"properties": {}, "$defs": {"Sort": {"type": "string"}}});
        drop_unreferenced(&mut root);
        assert_eq!(root, json!({"properties": {}}));
    }

    #[test]
    fn references_are_percent_decoded_then_unescaped() {
        assert_eq!(
            Definitions::name("#/$defs/Page%3CT%3E").as_deref(),
            Some("Page<T>")
        );
        assert_eq!(
            Definitions::name("#/$defs/a~1b~0c").as_deref(),
            Some("a/b~c")
        );
        assert_eq!(
            Definitions::name("#/$defs/caf%C3%A9").as_deref(),
            Some("café")
        );
        assert_eq!(Definitions::name("#/$defs/bad%2"), None);
        assert_eq!(Definitions::name("#/$defs/bad%+1"), None);
        let mut root = json!({
            "properties": {"page": {"$ref": "#/$defs/Page%3CT%3E"}, "x": {"$ref": "#/$defs/Gone"}},
            "$defs": {"Page<T>": {"type": "string"}, "Unused": {"type": "string"}},
        });
        let unchanged = root.clone();
        drop_unreferenced(&mut root);
        assert_eq!(
            root, unchanged,
            "an unresolvable reference keeps every definition"
        );
        let mut root = json!({
            "properties": {"page": {"$ref": "#/$defs/Page%3CT%3E"}},
            "$defs": {"Page<T>": {"type": "string"}, "Unused": {"type": "string"}},
        });
        drop_unreferenced(&mut root);
        assert_eq!(root["$defs"], json!({"Page<T>": {"type": "string"}}));
    }

    #[test]
    fn a_described_reference_is_inlined_or_wrapped() {
        let root = json!({"$defs": {
            "Leaf": {"type": "string"},
            "Tree": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
        }});
        let definitions = Definitions::of(&root);
        let leaf = json!({"$ref": "#/$defs/Leaf", "description": "a leaf"});
        assert_eq!(
            definitions.standalone(leaf.as_object().unwrap()).unwrap(),
            Some(json!({"type": "string", "description": "a leaf"}))
        );
        let tree = json!({"$ref": "#/$defs/Tree", "description": "a tree"});
        assert_eq!(
            definitions.standalone(tree.as_object().unwrap()).unwrap(),
            Some(json!({"anyOf": [{"$ref": "#/$defs/Tree"}], "description": "a tree"}))
        );
        let constrained = json!({"$ref": "#/$defs/Leaf", "maxLength": 3});
        assert!(
            definitions
                .standalone(constrained.as_object().unwrap())
                .is_err()
        );
    }
}
