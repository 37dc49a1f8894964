//! JSON text into a value, refusing what lenient parsers let through: a key named twice in one
//! object (`{"amount":1,"amount":99999999}`: which one did the model mean, and which one did the
//! reviewer see?) at any depth, and nesting beyond the limit.

use std::cell::RefCell;
use std::fmt;
use std::io;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::deserializer::Segment;

/// Why strict parsing refused the text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StrictJsonError {
    Malformed(String),
    DuplicateKey { key: String, path: Vec<Segment> },
    TooDeep { path: Vec<Segment> },
}

/// Parses `text` into a value, refusing duplicate keys and nesting deeper than `max_depth`
/// (the top-level object is depth 1).
pub(crate) fn parse(text: &str, max_depth: usize) -> Result<Value, StrictJsonError> {
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
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        // serde_json never yields a non-finite number, so `from` never maps to null here.
        Ok(Value::from(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.enter()?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        loop {
            let index = items.len();
            match seq
                .next_element_seed(inner)
                .map_err(inner.note(|| Segment::Index(index)))?
            {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.enter()?;
        let mut entries = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map
                .next_value_seed(inner)
                .map_err(inner.note(|| Segment::Key(key.clone())))?;
            if entries.contains_key(&key) {
                *self.found.borrow_mut() = Some(Found {
                    duplicate_key: Some(key.clone()),
                    reversed_path: vec![Segment::Key(key)],
                });
                return Err(de::Error::custom("duplicate key"));
            }
            entries.insert(key, value);
        }
        Ok(Value::Object(entries))
    }
}

/// The first path at which `value` nests deeper than `max_depth`, if it does.
pub(crate) fn too_deep(value: &Value, max_depth: usize) -> Option<Vec<Segment>> {
    fn walk(value: &Value, depth_left: usize, path: &mut Vec<Segment>) -> bool {
        let children: Box<dyn Iterator<Item = (Segment, &Value)>> = match value {
            Value::Array(items) => Box::new(
                items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| (Segment::Index(index), item)),
            ),
            Value::Object(entries) => Box::new(
                entries
                    .iter()
                    .map(|(key, item)| (Segment::Key(key.clone()), item)),
            ),
            _ => return false,
        };
        if depth_left == 0 {
            return true;
        }
        for (segment, child) in children {
            path.push(segment);
            if walk(child, depth_left - 1, path) {
                return true;
            }
            path.pop();
        }
        false
    }
    let mut path = Vec::new();
    walk(value, max_depth, &mut path).then_some(path)
}

/// Whether `value`, written as compact JSON, is longer than `max_bytes`. Stops writing as soon
/// as the limit is passed.
pub(crate) fn longer_than(value: &Value, max_bytes: usize) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(name: &str) -> Segment {
        Segment::Key(name.into())
    }

    #[test]
    fn parses_ordinary_json() {
        assert_eq!(
            parse(r#"{"a": [1, -2, 3.5, "x", null, true], "b": {}}"#, 8).unwrap(),
            json!({"a": [1, -2, 3.5, "x", null, true], "b": {}})
        );
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
}
