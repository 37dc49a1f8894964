//! JSON text into a [`Node`] tree, refusing what lenient parsers let through: a key named twice
//! in one object (`{"amount":1,"amount":99999999}`: which one did the model mean, and which one
//! did the reviewer see?) at any depth, and nesting beyond the limit.
//!
//! A node borrows its strings from the text wherever the text has no escapes, and keeps an
//! object's entries in order in a vector: decoding then copies each string once, into the
//! typed arguments, as a plain `serde_json::from_str` would.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::io;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

use crate::pointer::Segment;

/// An object's entries, in document order, keys unique.
pub(crate) type Entries<'a> = Vec<(Cow<'a, str>, Node<'a>)>;

/// One parsed JSON value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    Object(Entries<'a>),
}

impl<'a> Node<'a> {
    /// Removes every object member whose value is `null`, at every depth.
    pub(crate) fn drop_null_members(&mut self) {
        match self {
            Node::Object(entries) => {
                entries.retain(|(_, value)| !matches!(value, Node::Null));
                entries
                    .iter_mut()
                    .for_each(|(_, value)| value.drop_null_members());
            }
            Node::Array(items) => items.iter_mut().for_each(Node::drop_null_members),
            _ => {}
        }
    }

    /// The value the node was parsed as, for a reader that goes on with a `serde_json::Value`.
    pub(crate) fn into_value(self) -> Value {
        match self {
            Node::Null => Value::Null,
            Node::Bool(value) => Value::Bool(value),
            Node::Number(number) => Value::Number(number),
            Node::String(text) => Value::String(text.into_owned()),
            Node::Array(items) => Value::Array(items.into_iter().map(Node::into_value).collect()),
            Node::Object(entries) => Value::Object(
                entries
                    .into_iter()
                    .map(|(key, item)| (key.into_owned(), item.into_value()))
                    .collect(),
            ),
        }
    }

    /// A node that borrows the strings of an already parsed value.
    pub(crate) fn borrowed(value: &'a Value) -> Node<'a> {
        match value {
            Value::Null => Node::Null,
            Value::Bool(value) => Node::Bool(*value),
            Value::Number(number) => Node::Number(number.clone()),
            Value::String(text) => Node::String(Cow::Borrowed(text)),
            Value::Array(items) => Node::Array(items.iter().map(Node::borrowed).collect()),
            Value::Object(entries) => Node::Object(
                entries
                    .iter()
                    .map(|(key, item)| (Cow::Borrowed(key.as_str()), Node::borrowed(item)))
                    .collect(),
            ),
        }
    }
}

/// Objects with at least this many keys check for duplicates with a hash set rather than by
/// comparing each key with the ones before it, so that no object costs quadratic time.
const LINEAR_KEY_CHECK_LIMIT: usize = 16;

/// Why strict parsing refused the text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StrictJsonError {
    Malformed(String),
    DuplicateKey { key: String, path: Vec<Segment> },
    TooDeep { path: Vec<Segment> },
}

/// Parses `text` into a value, refusing duplicate keys and nesting deeper than `max_depth`
/// (the top-level object is depth 1).
pub(crate) fn parse(text: &str, max_depth: usize) -> Result<Node<'_>, StrictJsonError> {
    let found = RefCell::new(None);
    let seed = StrictValue {
        depth: 0,
        max_depth,
        found: &found,
    };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let result = seed
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    match (result, found.into_inner()) {
        (Ok(value), _) => Ok(value),
        (Err(_), Some(found)) => Err(found.into_error()),
        (Err(error), None) => Err(StrictJsonError::Malformed(describe_syntax_error(&error))),
    }
}

fn describe_syntax_error(error: &serde_json::Error) -> String {
    let text = error.to_string();
    if error.is_eof() {
        format!("the JSON ends too early ({text})")
    } else {
        text
    }
}

/// What the seed found, with the path collected innermost first while parsing unwinds.
struct Found {
    duplicate_key: Option<String>,
    reversed_path: Vec<Segment>,
}

impl Found {
    fn into_error(mut self) -> StrictJsonError {
        self.reversed_path.reverse();
        match self.duplicate_key {
            Some(key) => StrictJsonError::DuplicateKey {
                key,
                path: self.reversed_path,
            },
            None => StrictJsonError::TooDeep {
                path: self.reversed_path,
            },
        }
    }
}

/// Room reserved for an object's entries when its first key arrives: most tool arguments fit,
/// so reading them costs one allocation.
const ENTRIES_RESERVED: usize = 8;

/// Gives back a container's unused room, so that a megabyte of tiny objects cannot hold a
/// hundred: what is kept is at most twice what is used.
fn trimmed<T>(mut members: Vec<T>) -> Vec<T> {
    if members.capacity() > 2 * members.len() {
        members.shrink_to_fit();
    }
    members
}

#[derive(Clone, Copy)]
struct StrictValue<'a> {
    depth: usize,
    max_depth: usize,
    found: &'a RefCell<Option<Found>>,
}

impl StrictValue<'_> {
    fn enter<E: de::Error>(self) -> Result<Self, E> {
        if self.depth >= self.max_depth {
            *self.found.borrow_mut() = Some(Found {
                duplicate_key: None,
                reversed_path: Vec::new(),
            });
            return Err(E::custom("nesting too deep"));
        }
        Ok(StrictValue {
            depth: self.depth + 1,
            ..self
        })
    }

    /// Records `segment` on the path of what was found below it, if anything was.
    fn note<E>(self, segment: impl FnOnce() -> Segment) -> impl FnOnce(E) -> E {
        move |error| {
            if let Some(found) = self.found.borrow_mut().as_mut() {
                found.reversed_path.push(segment());
            }
            error
        }
    }
}

impl<'de> DeserializeSeed<'de> for StrictValue<'_> {
    type Value = Node<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Node<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_> {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_bool<E>(self, value: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Node<'de>, E> {
        Ok(Node::Number(value.into()))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Node<'de>, E> {
        Ok(Node::Number(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Node<'de>, E> {
        // serde_json never yields a non-finite number.
        Number::from_f64(value)
            .map(Node::Number)
            .ok_or_else(|| E::custom("a number must be finite"))
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Owned(value)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        let inner = self.enter()?;
        let mut items = Vec::new();
        loop {
            let index = items.len();
            let next = seq
                .next_element_seed(inner)
                .map_err(inner.note(|| Segment::Index(index)))?;
            match next {
                Some(item) => items.push(item),
                None => return Ok(Node::Array(trimmed(items))),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        let inner = self.enter()?;
        let mut entries: Entries<'de> = Vec::new();
        let mut seen: Option<HashSet<Cow<'de, str>>> = None;
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let duplicate = match &mut seen {
                Some(seen) => !seen.insert(key.clone()),
                None => {
                    let duplicate = entries.iter().any(|(earlier, _)| *earlier == key);
                    if entries.len() + 1 >= LINEAR_KEY_CHECK_LIMIT {
                        let keys = entries.iter().map(|(earlier, _)| earlier.clone());
                        seen = Some(keys.chain([key.clone()]).collect());
                    }
                    duplicate
                }
            };
            if duplicate {
                *self.found.borrow_mut() = Some(Found {
                    reversed_path: vec![Segment::Key(key.to_string())],
                    duplicate_key: Some(key.into_owned()),
                });
                return Err(de::Error::custom("duplicate key"));
            }
            let value = map
                .next_value_seed(inner)
                .map_err(inner.note(|| Segment::Key(key.to_string())))?;
            if entries.is_empty() {
                entries.reserve(ENTRIES_RESERVED);
            }
            entries.push((key, value));
        }
        Ok(Node::Object(trimmed(entries)))
    }
}

/// Reads an object key, borrowing it from the text when it has no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(key))
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(key.to_owned()))
    }

    fn visit_string<E>(self, key: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(key))
    }
}

/// The first path at which `value` nests deeper than `max_depth`, if it does.
pub(crate) fn too_deep(value: &Value, max_depth: usize) -> Option<Vec<Segment>> {
    /// The path to the first container beyond the limit, innermost segment first.
    fn walk(value: &Value, depth_left: usize) -> Option<Vec<Segment>> {
        let within = |segment: Segment| {
            move |mut path: Vec<Segment>| {
                path.push(segment);
                path
            }
        };
        match value {
            Value::Array(_) | Value::Object(_) if depth_left == 0 => Some(Vec::new()),
            Value::Array(items) => items.iter().enumerate().find_map(|(index, item)| {
                walk(item, depth_left - 1).map(within(Segment::Index(index)))
            }),
            Value::Object(entries) => entries.iter().find_map(|(key, item)| {
                walk(item, depth_left - 1).map(within(Segment::Key(key.clone())))
            }),
            _ => None,
        }
    }
    walk(value, max_depth).map(|mut path| {
        path.reverse();
        path
    })
}

/// Whether `value`, written as compact JSON, is longer than `max_bytes`. A bound from above,
/// which writes nothing, settles almost every value; the others are written, and the writing
/// stops as soon as the limit is passed.
pub(crate) fn longer_than(value: &Value, max_bytes: usize) -> bool {
    if at_most(value) <= max_bytes {
        return false;
    }
    struct Budget(usize);
    impl io::Write for Budget {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 = self
                .0
                .checked_sub(buf.len())
                .ok_or_else(|| io::Error::other("limit passed"))?;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(Budget(max_bytes), value).is_err()
}

/// The most bytes `value` can take as compact JSON: every byte of a string escaped as
/// `\u00XX`, every number as long as a number can be written.
fn at_most(value: &Value) -> usize {
    /// `-2.2250738585072014e-308`: no float is written longer; integers are shorter.
    const LONGEST_NUMBER: usize = 24;
    let quoted = |text: &str| text.len().saturating_mul(6).saturating_add(2);
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => LONGEST_NUMBER,
        Value::String(text) => quoted(text),
        Value::Array(items) => items
            .iter()
            .fold(items.len().saturating_add(2), |sum, item| {
                sum.saturating_add(at_most(item))
            }),
        Value::Object(members) => members.iter().fold(
            members.len().saturating_mul(2).saturating_add(2),
            |sum, (key, item)| {
                sum.saturating_add(quoted(key))
                    .saturating_add(at_most(item))
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(name: &str) -> Segment {
        Segment::Key(name.into())
    }

    #[test]
    fn a_node_becomes_the_value_serde_json_reads() {
        let text = r#"{"b": [1, -2, 3.5, 1e3, 18446744073709551615, null, true],
            "a\u00e9": {"x": "line\nbreak", "y": {}}, "c": []}"#;
        let node = parse(text, 8).unwrap();
        assert_eq!(
            node.into_value(),
            serde_json::from_str::<Value>(text).unwrap()
        );
    }

    #[test]
    fn parses_ordinary_json() {
        let expected = json!({"a": [1, -2, 3.5, "x\ny", null, true], "b": {}});
        assert_eq!(
            parse(r#"{"a": [1, -2, 3.5, "x\ny", null, true], "b": {}}"#, 8).unwrap(),
            Node::borrowed(&expected)
        );
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let Ok(Node::Object(entries)) = parse(r#"{"plain": "text", "esc\u0061ped": "a\tb"}"#, 8)
        else {
            panic!("an object");
        };
        assert!(matches!(
            entries[0],
            (Cow::Borrowed("plain"), Node::String(Cow::Borrowed("text")))
        ));
        assert!(matches!(&entries[1].0, Cow::Owned(key) if key == "escaped"));
    }

    #[test]
    fn large_objects_still_find_duplicates() {
        let mut text = String::from("{");
        for index in 0..1000 {
            text.push_str(&format!(r#""k{index}":{index},"#));
        }
        text.push_str(r#""k500":0}"#);
        assert_eq!(
            parse(&text, 8),
            Err(StrictJsonError::DuplicateKey {
                key: "k500".into(),
                path: vec![key("k500")]
            })
        );
        let unique = text.replace(r#""k500":0}"#, r#""k1000":0}"#);
        assert!(parse(&unique, 8).is_ok());
    }

    #[test]
    fn refuses_duplicate_keys_at_any_depth() {
        assert_eq!(
            parse(r#"{"amount":1,"amount":99999999}"#, 8),
            Err(StrictJsonError::DuplicateKey {
                key: "amount".into(),
                path: vec![key("amount")]
            })
        );
        assert_eq!(
            parse(r#"{"order":{"lines":[{"qty":1},{"qty":1,"qty":500}]}}"#, 8),
            Err(StrictJsonError::DuplicateKey {
                key: "qty".into(),
                path: vec![key("order"), key("lines"), Segment::Index(1), key("qty")]
            })
        );
    }

    #[test]
    fn paths_through_nested_arrays_count_each_array_alone() {
        assert_eq!(
            parse(r#"{"a":[[1,{"k":1,"k":2}]]}"#, 8),
            Err(StrictJsonError::DuplicateKey {
                key: "k".into(),
                path: vec![key("a"), Segment::Index(0), Segment::Index(1), key("k")]
            })
        );
        assert_eq!(
            parse(r#"{"a":[{"x":[1,2]},{"k":1,"k":2}]}"#, 8),
            Err(StrictJsonError::DuplicateKey {
                key: "k".into(),
                path: vec![key("a"), Segment::Index(1), key("k")]
            })
        );
    }

    #[test]
    fn escaped_spellings_of_one_key_are_duplicates() {
        assert!(matches!(
            parse(r#"{"role":"user","r\u006fle":"admin"}"#, 8),
            Err(StrictJsonError::DuplicateKey { .. })
        ));
    }

    #[test]
    fn refuses_nesting_beyond_the_limit() {
        assert!(parse(r#"{"a":{"b":{}}}"#, 3).is_ok());
        assert_eq!(
            parse(r#"{"a":{"b":{"c":{}}}}"#, 3),
            Err(StrictJsonError::TooDeep {
                path: vec![key("a"), key("b"), key("c")]
            })
        );
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(matches!(
            parse(&deep, 32),
            Err(StrictJsonError::TooDeep { .. })
        ));
    }

    #[test]
    fn malformed_text_is_described() {
        assert!(matches!(
            parse(r#"{"a":1,}"#, 8),
            Err(StrictJsonError::Malformed(_))
        ));
        assert!(matches!(
            parse(r#"{"a":1} {}"#, 8),
            Err(StrictJsonError::Malformed(_))
        ));
        assert!(
            matches!(parse(r#"{"a":"#, 8), Err(StrictJsonError::Malformed(m)) if m.contains("too early"))
        );
        assert!(matches!(parse("", 8), Err(StrictJsonError::Malformed(_))));
    }

    #[test]
    fn value_depth_and_size_checks() {
        let value = json!({"a": {"b": [1]}});
        assert_eq!(too_deep(&value, 3), None);
        assert_eq!(too_deep(&value, 2), Some(vec![key("a"), key("b")]));
        assert!(!longer_than(&value, 15));
        assert!(longer_than(&value, 14));
    }

    #[test]
    fn the_length_bound_is_never_below_the_written_length() {
        let values = [
            json!({"a": {"b": [1]}}),
            json!({"\u{0}\u{1f}\"\\": ["\u{7f}\n", -2.2250738585072014e-308, u64::MAX, i64::MIN]}),
            json!([null, true, false, {}, [], "", 0.1]),
            json!({"x": "\u{2028}é漢".repeat(40)}),
        ];
        for value in values {
            let written = value.to_string().len();
            assert!(at_most(&value) >= written, "{value}");
            // Just at the limit and just past it, where the bound cannot settle it.
            assert!(!longer_than(&value, written), "{value}");
            assert!(longer_than(&value, written - 1), "{value}");
        }
    }
}
