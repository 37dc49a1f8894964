//! Typed arguments out of a parsed JSON [`Node`], with typed errors and JSON-pointer paths.
//!
//! serde_json's own value deserializer reports problems as text and without a location. This
//! one reports each problem as data ([`Problem`]) with the path to the offending value, so the
//! decode gate can refuse with an exact code and pointer. It also applies JSON Schema's number
//! semantics: `5.0` is an integer, and an integer beyond the target type's range is refused,
//! never wrapped or saturated. Objects are never accepted where a sequence is expected and vice
//! versa (serde's derived structs would otherwise take `["users", 1]` for `{"table", "id"}`).

use std::borrow::Cow;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, EnumAccess, Expected, IntoDeserializer, MapAccess, SeqAccess,
    Unexpected, VariantAccess, Visitor,
};
use serde::forward_to_deserialize_any;
use serde_json::Number;

use crate::json::strict::{Entries, Node};
use crate::pointer::{Segment, pointer};

/// What is wrong with the value, as data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Problem {
    UnknownField {
        field: String,
        expected: &'static [&'static str],
    },
    MissingField(&'static str),
    DuplicateField(&'static str),
    InvalidType {
        found: String,
        expected: String,
    },
    InvalidValue {
        found: String,
        expected: String,
    },
    UnknownVariant {
        variant: String,
        expected: &'static [&'static str],
    },
    InvalidLength {
        len: usize,
        expected: String,
    },
    Custom(String),
}

/// A [`Problem`] and where it is. The path is collected innermost first while the error
/// unwinds through the containers; [`DecodeError::path`] puts it in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DecodeError {
    pub(crate) problem: Problem,
    reversed_path: Vec<Segment>,
}

impl DecodeError {
    fn new(problem: Problem) -> Self {
        DecodeError {
            problem,
            reversed_path: Vec::new(),
        }
    }

    fn within(mut self, segment: Segment) -> Self {
        self.reversed_path.push(segment);
        self
    }

    /// The path to the offending value, outermost first.
    pub(crate) fn path(&self) -> impl Iterator<Item = &Segment> {
        self.reversed_path.iter().rev()
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} at {}", self.problem, pointer(self.path()))
    }
}

impl std::error::Error for DecodeError {}

impl de::Error for DecodeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DecodeError::new(Problem::Custom(msg.to_string()))
    }

    fn invalid_type(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        DecodeError::new(Problem::InvalidType {
            found: describe_found(&unexpected),
            expected: describe_expected(expected),
        })
    }

    fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        DecodeError::new(Problem::InvalidValue {
            found: describe_found(&unexpected),
            expected: describe_expected(expected),
        })
    }

    fn invalid_length(len: usize, expected: &dyn Expected) -> Self {
        DecodeError::new(Problem::InvalidLength {
            len,
            expected: describe_expected(expected),
        })
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        DecodeError::new(Problem::UnknownVariant {
            variant: variant.to_owned(),
            expected,
        })
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        DecodeError::new(Problem::UnknownField {
            field: field.to_owned(),
            expected,
        })
    }

    fn missing_field(field: &'static str) -> Self {
        DecodeError::new(Problem::MissingField(field))
    }

    fn duplicate_field(field: &'static str) -> Self {
        DecodeError::new(Problem::DuplicateField(field))
    }
}

/// Describes a value the model sent without echoing strings, which may be secrets.
fn describe_found(unexpected: &Unexpected<'_>) -> String {
    match unexpected {
        Unexpected::Bool(value) => format!("the boolean {value}"),
        Unexpected::Unsigned(value) => format!("the integer {value}"),
        Unexpected::Signed(value) => format!("the integer {value}"),
        Unexpected::Float(value) => format!("the number {value}"),
        Unexpected::Char(_) | Unexpected::Str(_) => "a string".to_owned(),
        Unexpected::Unit | Unexpected::Option => "null".to_owned(),
        Unexpected::Seq => "an array".to_owned(),
        Unexpected::Map => "an object".to_owned(),
        Unexpected::Enum | Unexpected::UnitVariant => "an enum value".to_owned(),
        other => other.to_string(),
    }
}

/// Translates what a Rust deserializer expects into the JSON vocabulary a model understands.
fn describe_expected(expected: &dyn Expected) -> String {
    let rust = expected.to_string();
    let json = match rust.as_str() {
        "u8" => "an integer from 0 to 255",
        "u16" => "an integer from 0 to 65535",
        "u32" => "an integer from 0 to 4294967295",
        "u64" | "usize" => "an integer from 0 to 18446744073709551615",
        "i8" => "an integer from -128 to 127",
        "i16" => "an integer from -32768 to 32767",
        "i32" => "an integer from -2147483648 to 2147483647",
        "i64" | "isize" => "an integer from -9223372036854775808 to 9223372036854775807",
        "f32" | "f64" => "a number",
        "a sequence" => "an array",
        "a map" => "an object",
        "unit" => "null",
        "a boolean" | "a string" | "a character" => return rust,
        other if other.starts_with("struct ") => "an object",
        other if other.starts_with("enum ") => "one of the allowed values",
        other if other.starts_with("tuple of ") || other.starts_with("an array of length") => {
            return format!("an array ({other})");
        }
        _ => return rust,
    };
    json.to_owned()
}

/// Deserializes typed values out of a parsed JSON node, borrowing strings where it can.
pub(crate) struct NodeDeserializer<'de> {
    node: Node<'de>,
}

impl<'de> NodeDeserializer<'de> {
    pub(crate) fn new(node: Node<'de>) -> Self {
        NodeDeserializer { node }
    }

    fn integer<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.node {
            Node::Number(number) => visit_integer(&number, visitor),
            other => NodeDeserializer::new(other).visit_any(visitor),
        }
    }

    fn visit_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.node {
            Node::Null => visitor.visit_unit(),
            Node::Bool(value) => visitor.visit_bool(value),
            // A whole number is an integer wherever the target is not known yet (an untagged or
            // internally tagged enum buffers it first), as where it is: `5.0` is `5`.
            Node::Number(number) => visit_number(&number, visitor),
            Node::String(Cow::Borrowed(value)) => visitor.visit_borrowed_str(value),
            Node::String(Cow::Owned(value)) => visitor.visit_string(value),
            Node::Array(items) => visit_array(items, visitor),
            Node::Object(entries) => visit_object(entries, visitor),
        }
    }
}

/// The number as an integer a float holds exactly: `5`, `5.0`, `5e0`, but not `1.9e18`, which
/// may stand for another number than the one written.
fn exact_integer(number: &Number) -> Option<i128> {
    const EXACT_LIMIT: f64 = 9_007_199_254_740_992.0;
    if let Some(value) = number.as_u64() {
        return Some(value.into());
    }
    if let Some(value) = number.as_i64() {
        return Some(value.into());
    }
    let value = number.as_f64()?;
    (value.fract() == 0.0 && value.abs() <= EXACT_LIMIT).then_some(value as i128)
}

/// Integers in the JSON Schema sense: `5` and `5.0` alike. A number written with a fraction or
/// an exponent is accepted as an integer only where it is exactly one: integral, and within
/// 2^53, beyond which a float no longer holds every integer (`12345678901234567890.0` would
/// silently become another record id). A fractional one is handed on as a float for the
/// visitor to refuse.
fn visit_integer<'de, V: Visitor<'de>>(
    number: &Number,
    visitor: V,
) -> Result<V::Value, DecodeError> {
    let value = number.as_f64().unwrap_or(f64::NAN);
    if exact_integer(number).is_none() && value.fract() == 0.0 && value.is_finite() {
        return Err(de::Error::invalid_value(Unexpected::Float(value), &visitor));
    }
    visit_number(number, visitor)
}

/// A number as an integer where it is exactly one, as a float otherwise.
fn visit_number<'de, V: Visitor<'de>>(
    number: &Number,
    visitor: V,
) -> Result<V::Value, DecodeError> {
    match exact_integer(number) {
        // Within `u64` and `i64`: the conversions are exact.
        Some(value) if value >= 0 => visitor.visit_u64(value as u64),
        Some(value) => visitor.visit_i64(value as i64),
        None => visitor.visit_f64(number.as_f64().unwrap_or(f64::NAN)),
    }
}

fn visit_array<'de, V: Visitor<'de>>(
    items: Vec<Node<'de>>,
    visitor: V,
) -> Result<V::Value, DecodeError> {
    let len = items.len();
    let mut access = ArrayAccess {
        items: items.into_iter().enumerate(),
    };
    let value = visitor.visit_seq(&mut access)?;
    if access.items.len() > 0 {
        return Err(de::Error::invalid_length(len, &"fewer elements in array"));
    }
    Ok(value)
}

fn visit_object<'de, V: Visitor<'de>>(
    entries: Entries<'de>,
    visitor: V,
) -> Result<V::Value, DecodeError> {
    let mut access = ObjectAccess {
        entries: entries.into_iter(),
        pending: None,
    };
    visitor.visit_map(&mut access)
}

impl<'de> de::Deserializer<'de> for NodeDeserializer<'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.visit_any(visitor)
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.integer(visitor)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.integer(visitor)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.integer(visitor)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.integer(visitor)
    }
    fn deserialize_i128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.integer(visitor)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.integer(visitor)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.integer(visitor)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.integer(visitor)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.integer(visitor)
    }
    fn deserialize_u128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.integer(visitor)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        // serde would turn a finite number beyond f32's range into infinity.
        if let Node::Number(number) = &self.node {
            let value = number.as_f64().unwrap_or(f64::NAN);
            if value.abs() > f64::from(f32::MAX) {
                return Err(de::Error::invalid_value(Unexpected::Float(value), &visitor));
            }
        }
        self.visit_any(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.node {
            Node::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.node {
            Node::Null => visitor.visit_unit(),
            other => NodeDeserializer::new(other).visit_any(visitor),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.node {
            Node::Array(items) => visit_array(items, visitor),
            other => Err(de::Error::invalid_type(unexpected(&other), &visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.node {
            Node::Object(entries) => visit_object(entries, visitor),
            other => Err(de::Error::invalid_type(unexpected(&other), &visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        match self.node {
            Node::String(variant) => visitor.visit_enum(VariantValue {
                variant,
                value: None,
            }),
            Node::Object(entries) if entries.len() == 1 => {
                let (variant, value) = entries.into_iter().next().expect("one entry");
                let segment = Segment::Key(variant.to_string());
                visitor
                    .visit_enum(VariantValue {
                        variant,
                        value: Some(value),
                    })
                    .map_err(|error| match error.problem {
                        Problem::UnknownVariant { .. } => error,
                        _ => error.within(segment),
                    })
            }
            other => Err(de::Error::invalid_type(unexpected(&other), &visitor)),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_unit()
    }

    /// A field or variant name is a string: an enum's tag is never its variant's index
    /// (`{"kind": 0}` is not the first variant).
    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.node {
            Node::String(Cow::Borrowed(value)) => visitor.visit_borrowed_str(value),
            Node::String(Cow::Owned(value)) => visitor.visit_string(value),
            other => Err(de::Error::invalid_type(unexpected(&other), &"a string")),
        }
    }

    forward_to_deserialize_any! {
        bool f64 char str string bytes byte_buf
    }
}

fn unexpected<'a>(node: &'a Node<'_>) -> Unexpected<'a> {
    match node {
        Node::Null => Unexpected::Unit,
        Node::Bool(value) => Unexpected::Bool(*value),
        Node::Number(number) => {
            if let Some(value) = number.as_u64() {
                Unexpected::Unsigned(value)
            } else if let Some(value) = number.as_i64() {
                Unexpected::Signed(value)
            } else {
                Unexpected::Float(number.as_f64().unwrap_or(f64::NAN))
            }
        }
        Node::String(value) => Unexpected::Str(value),
        Node::Array(_) => Unexpected::Seq,
        Node::Object(_) => Unexpected::Map,
    }
}

struct ArrayAccess<'de> {
    items: std::iter::Enumerate<std::vec::IntoIter<Node<'de>>>,
}

impl<'de> SeqAccess<'de> for ArrayAccess<'de> {
    type Error = DecodeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        match self.items.next() {
            Some((index, value)) => seed
                .deserialize(NodeDeserializer::new(value))
                .map(Some)
                .map_err(|error| error.within(Segment::Index(index))),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct ObjectAccess<'de> {
    entries: std::vec::IntoIter<(Cow<'de, str>, Node<'de>)>,
    pending: Option<(Cow<'de, str>, Node<'de>)>,
}

impl<'de> MapAccess<'de> for ObjectAccess<'de> {
    type Error = DecodeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DecodeError> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        match seed.deserialize(KeyDeserializer { key: key.clone() }) {
            Ok(decoded) => {
                self.pending = Some((key, value));
                Ok(Some(decoded))
            }
            Err(error) => Err(error.within(Segment::Key(key.into_owned()))),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DecodeError> {
        let (key, value) = self
            .pending
            .take()
            .ok_or_else(|| de::Error::custom("a value was requested before its key"))?;
        seed.deserialize(NodeDeserializer::new(value))
            .map_err(|error| error.within(Segment::Key(key.into_owned())))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// Object keys: strings, read as numbers where the target is a map keyed by integers.
struct KeyDeserializer<'de> {
    key: Cow<'de, str>,
}

impl<'de> KeyDeserializer<'de> {
    fn parse<V: Visitor<'de>, N>(self, visitor: V) -> Result<V::Value, DecodeError>
    where
        N: std::str::FromStr + ToString + IntoDeserializer<'de, DecodeError>,
    {
        // Only the canonical spelling: "07" and "+7" would otherwise name the same entry as
        // "7", a duplicate key the strict parser cannot see.
        match self.key.parse::<N>() {
            Ok(number) if number.to_string() == self.key => {
                de::Deserializer::deserialize_any(number.into_deserializer(), visitor)
            }
            _ => Err(de::Error::invalid_type(
                Unexpected::Str(&self.key),
                &visitor,
            )),
        }
    }
}

macro_rules! parse_key_as {
    ($($method:ident => $ty:ty),*) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
            self.parse::<V, $ty>(visitor)
        })*
    };
}

impl<'de> de::Deserializer<'de> for KeyDeserializer<'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.key {
            Cow::Borrowed(key) => visitor.visit_borrowed_str(key),
            Cow::Owned(key) => visitor.visit_string(key),
        }
    }

    parse_key_as! {
        deserialize_i8 => i8, deserialize_i16 => i16, deserialize_i32 => i32,
        deserialize_i64 => i64, deserialize_u8 => u8, deserialize_u16 => u16,
        deserialize_u32 => u32, deserialize_u64 => u64, deserialize_i128 => i128,
        deserialize_u128 => u128
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        visitor.visit_enum(VariantValue {
            variant: self.key,
            value: None,
        })
    }

    forward_to_deserialize_any! {
        bool f32 f64 char str string bytes byte_buf option unit unit_struct
        seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// An enum value: a bare string for a unit variant, or `{"Variant": content}` for the others,
/// as JSON Schema describes them (`{"Variant": null}` is not a unit variant).
struct VariantValue<'de> {
    variant: Cow<'de, str>,
    value: Option<Node<'de>>,
}

impl<'de> EnumAccess<'de> for VariantValue<'de> {
    type Error = DecodeError;
    type Variant = VariantContent<'de>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, VariantContent<'de>), DecodeError> {
        let tag = seed.deserialize(KeyDeserializer { key: self.variant })?;
        Ok((tag, VariantContent { value: self.value }))
    }
}

struct VariantContent<'de> {
    value: Option<Node<'de>>,
}

impl<'de> VariantContent<'de> {
    fn content(self, expected: &dyn Expected) -> Result<NodeDeserializer<'de>, DecodeError> {
        self.value
            .map(NodeDeserializer::new)
            .ok_or_else(|| de::Error::invalid_type(Unexpected::UnitVariant, expected))
    }
}

impl<'de> VariantAccess<'de> for VariantContent<'de> {
    type Error = DecodeError;

    fn unit_variant(self) -> Result<(), DecodeError> {
        match self.value {
            None => Ok(()),
            Some(other) => Err(de::Error::invalid_type(unexpected(&other), &"a string")),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, DecodeError> {
        seed.deserialize(self.content(&"a variant with content")?)
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        de::Deserializer::deserialize_seq(self.content(&visitor)?, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        de::Deserializer::deserialize_map(self.content(&visitor)?, visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::{Value, json};

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Order {
        id: u8,
        items: Vec<Item>,
        #[serde(default)]
        note: Option<String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Item {
        sku_code: String,
        kind: Kind,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Physical,
        Digital,
    }

    fn decode(value: Value) -> Result<Order, DecodeError> {
        Order::deserialize(NodeDeserializer::new(Node::borrowed(&value)))
    }

    fn problem_at(value: Value) -> (Problem, String) {
        let error = decode(value).unwrap_err();
        let path = pointer(error.path());
        (error.problem, path)
    }

    #[test]
    fn decodes_a_valid_value() {
        let order =
            decode(json!({"id": 7.0, "items": [{"skuCode": "a", "kind": "digital"}]})).unwrap();
        assert_eq!(order.id, 7);
        assert_eq!(order.items[0].kind, Kind::Digital);
    }

    #[test]
    fn unknown_field_points_at_the_field() {
        let (problem, path) =
            problem_at(json!({"id": 1, "items": [{"skuCode": "a", "kind": "digital", "sku": 1}]}));
        assert!(matches!(problem, Problem::UnknownField { ref field, .. } if field == "sku"));
        assert_eq!(path, "/items/0/sku");
    }

    #[test]
    fn missing_field_is_named() {
        let (problem, path) = problem_at(json!({"id": 1, "items": [{"kind": "digital"}]}));
        assert_eq!(problem, Problem::MissingField("skuCode"));
        assert_eq!(path, "/items/0");
    }

    #[test]
    fn out_of_range_integers_are_refused_not_wrapped() {
        let (problem, path) = problem_at(json!({"id": 256, "items": []}));
        assert!(
            matches!(problem, Problem::InvalidValue { .. }),
            "{problem:?}"
        );
        assert_eq!(path, "/id");
        let (problem, _) = problem_at(json!({"id": -1, "items": []}));
        assert!(
            matches!(problem, Problem::InvalidValue { .. }),
            "{problem:?}"
        );
        let (problem, _) = problem_at(json!({"id": 1e300, "items": []}));
        assert!(
            matches!(problem, Problem::InvalidValue { .. }),
            "{problem:?}"
        );
    }

    #[test]
    fn integral_floats_are_integers_only_where_exact() {
        let decode_u64 =
            |value: Value| u64::deserialize(NodeDeserializer::new(Node::borrowed(&value)));
        assert_eq!(decode_u64(json!(5.0)).unwrap(), 5);
        assert_eq!(decode_u64(json!(9_007_199_254_740_992.0)).unwrap(), 1 << 53);
        let beyond = decode_u64(json!(12_345_678_901_234_567_890.0)).unwrap_err();
        assert!(
            matches!(beyond.problem, Problem::InvalidValue { .. }),
            "{beyond:?}"
        );
        let below_i64 = json!(-9.3e18);
        assert!(i64::deserialize(NodeDeserializer::new(Node::borrowed(&below_i64))).is_err());
    }

    #[test]
    fn fractions_and_strings_are_not_integers() {
        let (problem, _) = problem_at(json!({"id": 5.5, "items": []}));
        assert!(
            matches!(problem, Problem::InvalidType { .. }),
            "{problem:?}"
        );
        let (problem, _) = problem_at(json!({"id": "5", "items": []}));
        assert_eq!(
            problem,
            Problem::InvalidType {
                found: "a string".into(),
                expected: "an integer from 0 to 255".into()
            }
        );
    }

    #[test]
    fn unknown_variant_lists_allowed_values() {
        let (problem, path) =
            problem_at(json!({"id": 1, "items": [{"skuCode": "a", "kind": "gift"}]}));
        assert_eq!(
            problem,
            Problem::UnknownVariant {
                variant: "gift".into(),
                expected: &["physical", "digital"]
            }
        );
        assert_eq!(path, "/items/0/kind");
    }

    #[test]
    fn unit_variants_are_bare_strings() {
        let (problem, path) =
            problem_at(json!({"id": 1, "items": [{"skuCode": "a", "kind": {"digital": null}}]}));
        assert!(
            matches!(problem, Problem::InvalidType { ref found, .. } if found == "null"),
            "{problem:?}"
        );
        assert_eq!(path, "/items/0/kind/digital");
    }

    #[test]
    fn arrays_are_not_structs() {
        let (problem, path) = problem_at(json!([1, []]));
        assert!(matches!(problem, Problem::InvalidType { ref found, .. } if found == "an array"));
        assert_eq!(path, "");
    }

    #[test]
    fn fixed_size_arrays_refuse_extra_elements() {
        let value = json!([1, 2, 3]);
        let result = <[u8; 2]>::deserialize(NodeDeserializer::new(Node::borrowed(&value)));
        assert!(matches!(
            result.unwrap_err().problem,
            Problem::InvalidLength { len: 3, .. }
        ));
    }

    #[test]
    fn integer_keyed_maps_parse_keys() {
        type Flags = std::collections::BTreeMap<u32, bool>;
        let value = json!({"1": true, "20": false});
        let map = Flags::deserialize(NodeDeserializer::new(Node::borrowed(&value))).unwrap();
        assert_eq!(map.len(), 2);
        for key in ["07", "+7", "-0"] {
            let value = json!({ key: true });
            let error =
                Flags::deserialize(NodeDeserializer::new(Node::borrowed(&value))).unwrap_err();
            assert_eq!(pointer(error.path()), format!("/{key}"));
        }
        let value = json!({"x": true});
        let error = Flags::deserialize(NodeDeserializer::new(Node::borrowed(&value))).unwrap_err();
        assert_eq!(pointer(error.path()), "/x");
    }

    #[test]
    fn json_pointer_escapes() {
        let segments = [Segment::Key("a/b~c".into()), Segment::Index(3)];
        assert_eq!(pointer(&segments), "/a~1b~0c/3");
    }
}
