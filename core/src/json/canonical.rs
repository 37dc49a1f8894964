//! The canonical text by which two JSON values are compared, and the view through which the
//! gates read a value alike whether it was parsed from the model's text or built.

use std::fmt::Write as _;

use serde_json::{Number, Value};

use super::strict::Node;

/// A JSON value, parsed from the model's text ([`Node`]) or built ([`Value`]), as the gates
/// that compare and check values read it.
pub(crate) trait JsonView: Sized {
    /// The value's kind and contents; an object's members through the methods below.
    fn view(&self) -> View<'_, Self>;

    /// The member `key` of an object.
    fn member(&self, key: &str) -> Option<&Self>;

    /// Every member of an object, in the object's order.
    fn for_each_member<'a>(&'a self, visit: &mut dyn FnMut(&'a str, &'a Self));
}

/// One JSON value, borrowed.
pub(crate) enum View<'a, J> {
    Null,
    Bool(bool),
    Number(&'a Number),
    String(&'a str),
    Array(&'a [J]),
    /// An object, of so many members.
    Object(usize),
}

impl JsonView for Value {
    fn view(&self) -> View<'_, Value> {
        match self {
            Value::Null => View::Null,
            Value::Bool(value) => View::Bool(*value),
            Value::Number(number) => View::Number(number),
            Value::String(text) => View::String(text),
            Value::Array(items) => View::Array(items),
            Value::Object(members) => View::Object(members.len()),
        }
    }

    fn member(&self, key: &str) -> Option<&Value> {
        self.as_object()?.get(key)
    }

    fn for_each_member<'a>(&'a self, visit: &mut dyn FnMut(&'a str, &'a Value)) {
        if let Value::Object(members) = self {
            members.iter().for_each(|(key, value)| visit(key, value));
        }
    }
}

impl<'n> JsonView for Node<'n> {
    fn view(&self) -> View<'_, Node<'n>> {
        match self {
            Node::Null => View::Null,
            Node::Bool(value) => View::Bool(*value),
            Node::Number(number) => View::Number(number),
            Node::String(text) => View::String(text),
            Node::Array(items) => View::Array(items),
            Node::Object(entries) => View::Object(entries.len()),
        }
    }

    fn member(&self, key: &str) -> Option<&Node<'n>> {
        match self {
            Node::Object(entries) => entries
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, value)| value),
            _ => None,
        }
    }

    fn for_each_member<'a>(&'a self, visit: &mut dyn FnMut(&'a str, &'a Node<'n>)) {
        if let Node::Object(entries) = self {
            entries.iter().for_each(|(key, value)| visit(key, value));
        }
    }
}

/// The canonical text of `value`: compact JSON with every object's members sorted by key and
/// every number written by its value, so that two values JSON Schema calls equal have the same
/// text, and two it calls different do not. Costs one pass and one string.
pub(crate) fn canonical_text<J: JsonView>(value: &J) -> String {
    // Room for the arguments of a typical call, so that writing them grows the string once.
    let mut out = String::with_capacity(256);
    write_canonical(value, &InOrder, &mut out);
    out
}

/// The canonical text of a JSON value: the same text for two values
/// JSON Schema calls equal (`1` and `1.0`, members in any order), another for two it calls
/// different.
///
/// ```
/// use portcullis_core::json::canonical;
/// use serde_json::json;
///
/// assert_eq!(canonical(&json!({"b": 1.0, "a": [true]})), r#"{"a":[true],"b":1}"#);
/// ```
pub fn canonical(value: &Value) -> String {
    canonical_text(value)
}

/// `value` with every object's members in key order, whichever map serde_json keeps (a build
/// with its `preserve_order` feature keeps them in insertion order): for text that must not
/// depend on the build, such as a lock file.
pub(crate) fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(members) => {
            let mut keys: Vec<&String> = members.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|key| (key.clone(), sorted(&members[key])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Which lists of a value `J` are sets, as its schema says: a set (a `HashSet`) writes its
/// elements in an order of its own, different from one instance to the next.
pub(crate) trait Sets<J>: Sized {
    /// Whether the list here is a set.
    fn is_set(&self) -> bool;
    /// Where `item`, the element `index` of the list here, stands.
    fn item(&self, index: usize, item: &J) -> Self;
    /// Where `member`, the member `key` of the object here, stands.
    fn member(&self, key: &str, member: &J) -> Self;
}

/// No list is a set.
struct InOrder;

impl<J> Sets<J> for &InOrder {
    fn is_set(&self) -> bool {
        false
    }
    fn item(&self, _: usize, _: &J) -> Self {
        self
    }
    fn member(&self, _: &str, _: &J) -> Self {
        self
    }
}

/// The text by which two calls are told apart as calls (a repeat under one id, a stalled loop,
/// arguments read back): the canonical text, with the elements of every set in one order, so
/// that the order a set happens to write its elements in does not make one call many. The
/// order of any other list is part of the call.
pub(crate) fn identity_text<J: JsonView>(value: &J, sets: impl Sets<J>) -> String {
    let mut out = String::with_capacity(256);
    write_canonical(value, sets, &mut out);
    out
}

fn write_canonical<J: JsonView, S: Sets<J>>(value: &J, sets: S, out: &mut String) {
    match value.view() {
        View::Null => out.push_str("null"),
        View::Bool(value) => out.push_str(if value { "true" } else { "false" }),
        View::Number(number) => write_number(number, out),
        View::String(text) => write_string(text, out),
        View::Array(items) if items.len() > 1 && sets.is_set() => {
            let mut texts: Vec<String> = items
                .iter()
                .enumerate()
                .map(|(index, item)| {
                    let mut text = String::new();
                    write_canonical(item, sets.item(index, item), &mut text);
                    text
                })
                .collect();
            texts.sort_unstable();
            out.push('[');
            out.push_str(&texts.join(","));
            out.push(']');
        }
        View::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, sets.item(index, item), out);
            }
            out.push(']');
        }
        View::Object(len) => {
            let mut sorted: Vec<(&str, &J)> = Vec::with_capacity(len);
            value.for_each_member(&mut |key, item| sorted.push((key, item)));
            sorted.sort_unstable_by_key(|(key, _)| *key);
            out.push('{');
            for (index, (key, item)) in sorted.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_canonical(item, sets.member(key, item), out);
            }
            out.push('}');
        }
    }
}

/// `text` as a JSON string, escaped exactly as serde_json escapes it (manifest hashes and call
/// fingerprints are hashes of this text): `"` and `\\` with a backslash, the five control
/// characters with short escapes as such, the other controls as `\\u00xx`, everything else
/// as it is. Unescaped runs are copied whole.
pub(super) fn write_string(text: &str, out: &mut String) {
    out.reserve(text.len() + 2);
    out.push('"');
    // Most texts need no escape: one pass the compiler vectorizes tells, and they are copied
    // whole.
    if !text
        .bytes()
        .any(|byte| byte < 0x20 || byte == b'"' || byte == b'\\')
    {
        out.push_str(text);
        out.push('"');
        return;
    }
    let mut start = 0;
    for (index, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[start..index]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escape);
        }
        start = index + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// A number by its value: integers (and integral floats, exactly) in decimal, other floats in
/// the shortest form that reads back as the same float.
pub(super) fn write_number(number: &Number, out: &mut String) {
    if let Some(value) = integer_value(number) {
        let _ = write!(out, "{value}");
    } else if let Some(value) = number.as_f64() {
        let _ = write!(out, "{value:?}");
    }
}

/// The number as an exact integer, where it is one: `5`, `5.0` and `5e0` alike. Floats are
/// integral only as far as they are exact, which every float within `i128` is.
pub(crate) fn integer_value(number: &Number) -> Option<i128> {
    if let Some(value) = number.as_u64() {
        return Some(value.into());
    }
    if let Some(value) = number.as_i64() {
        return Some(value.into());
    }
    let value = number.as_f64()?;
    const LIMIT: f64 = 1.0e38;
    (value.fract() == 0.0 && value.abs() < LIMIT).then_some(value as i128)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut every: String = (0u8..0x80).map(char::from).collect();
        every.push_str("é ü 日本 🚀 \u{2028} \u{7f}");
        for text in [every.as_str(), "", "plain", "\"quoted\"", "a\\b", "\u{0}"] {
            let mut ours = String::new();
            write_string(text, &mut ours);
            assert_eq!(ours, Value::from(text).to_string(), "{text:?}");
        }
    }

    #[test]
    fn equal_values_have_one_text() {
        assert_eq!(canonical_text(&json!(12)), canonical_text(&json!(12.0)));
        assert_eq!(
            canonical_text(&json!({"b": [1, {"d": 2.0, "c": "x"}], "a": null})),
            r#"{"a":null,"b":[1,{"c":"x","d":2}]}"#
        );
        assert_ne!(canonical_text(&json!(1)), canonical_text(&json!("1")));
        assert_ne!(canonical_text(&json!(-1)), canonical_text(&json!(u64::MAX)));
        assert_ne!(
            canonical_text(&json!(u64::MAX)),
            canonical_text(&json!(18_446_744_073_709_551_616.0)),
            "2^64 is not u64::MAX"
        );
        assert_eq!(canonical_text(&json!(0.5)), "0.5");
        assert_eq!(canonical_text(&json!(-0.0)), "0");
    }

    #[test]
    fn parsed_text_and_values_agree() {
        let text = r#"{"z": 1e0, "a": ["é\n", true]}"#;
        let node = crate::json::strict::parse(text, 8).unwrap();
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(canonical_text(&node), canonical_text(&value));
    }
}
