//! The canonical text of a value written straight from its `Serialize`, with no tree built on
//! the way: what a call's fingerprint hashes when no gate needs the arguments as a `Value`.
//!
//! The text is the one [`canonical_text`](super::canonical_text) writes of
//! `serde_json::to_value(value)`: the same objects (structs, maps and enum variants as
//! `serde_json` spells them), members sorted by key and a key given twice kept with its last
//! value, the same numbers and escapes. Whatever that equivalence is not certain for (a
//! `serde_json` special type, a map key `serde_json` would refuse or spell otherwise, an integer
//! beyond 64 bits, a failing `Serialize`, even one that goes on past the error) stops the
//! writer, and its caller builds the `Value`.

use std::fmt::{self, Display, Write as _};
use std::ops::Range;

use serde::ser::{self, Serialize};
use serde_json::Value;

use super::canonical::{write_number, write_string};

/// Writes the canonical text of `value` into `out`; `false` (with `out` in no defined state)
/// where it cannot be sure to write what `serde_json::to_value` would give.
pub(crate) fn write_canonical_of<T: Serialize + ?Sized>(value: &T, out: &mut String) -> bool {
    let mut writer = Writer {
        out,
        members: Vec::with_capacity(16),
        keys: String::new(),
        scratch: String::new(),
        stopped: false,
    };
    value.serialize(&mut writer).is_ok() && !writer.stopped
}

/// Where the text goes, and the members of the objects being written: an object's members are
/// written as they come, and put in order when it ends, if they are not.
struct Writer<'o> {
    out: &'o mut String,
    /// The members of every object being written, innermost last.
    members: Vec<Member>,
    /// The keys of maps' members, which are not `'static` as fields' names are.
    keys: String,
    /// The text of an object's members while they are put in order.
    scratch: String,
    /// A part of the value stopped the writer. A `Serialize` may go on past a part's error
    /// (`let _ = map.serialize_entry(…)`) where `serde_json` would have taken that part: the
    /// text is then not the `Value`'s, whatever follows.
    stopped: bool,
}

/// One member of an object being written: its key and where its text, `"key":value`, is in
/// the output.
struct Member {
    key: Key,
    text: Range<usize>,
}

enum Key {
    Field(&'static str),
    /// A range of [`Writer::keys`].
    Map(Range<usize>),
}

impl Key {
    fn name<'k>(&'k self, keys: &'k str) -> &'k str {
        match self {
            Key::Field(name) => name,
            Key::Map(range) => &keys[range.clone()],
        }
    }
}

/// Why the writer stopped: the caller builds the `Value` instead, which says why if it fails.
#[derive(Debug)]
pub(crate) struct Stop;

impl Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not written as canonical text")
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<M: Display>(_: M) -> Self {
        Stop
    }
}

impl<'o> Writer<'o> {
    /// `result`, remembered if it stopped the writer.
    fn noted(&mut self, result: Result<(), Stop>) -> Result<(), Stop> {
        self.stopped |= result.is_err();
        result
    }

    fn integer(&mut self, value: impl Display) -> Result<(), Stop> {
        let _ = write!(self.out, "{value}");
        Ok(())
    }

    fn built(&mut self, value: Value) -> Result<(), Stop> {
        match &value {
            Value::Number(number) => write_number(number, self.out),
            _ => self.out.push_str("null"),
        }
        Ok(())
    }

    /// Opens an object `{"variant":` around what follows.
    fn open_variant(&mut self, variant: &str) {
        self.out.push('{');
        write_string(variant, self.out);
        self.out.push(':');
    }

    /// An object whose members follow, and end with [`Object::end`].
    fn object<'w>(&'w mut self, variant: Option<&'static str>) -> Object<'w, 'o> {
        if let Some(variant) = variant {
            self.open_variant(variant);
        }
        self.out.push('{');
        Object {
            first: self.members.len(),
            start: self.out.len(),
            pending_key: None,
            variant: variant.is_some(),
            writer: self,
        }
    }
}

/// An object being written: its members from `first` in [`Writer::members`], their text from
/// `start` in the output.
struct Object<'w, 'o> {
    writer: &'w mut Writer<'o>,
    first: usize,
    start: usize,
    /// A map's key, written before its value.
    pending_key: Option<Range<usize>>,
    /// Whether it is a struct variant's, within `{"variant":…}`.
    variant: bool,
}

impl Object<'_, '_> {
    fn member<T: Serialize + ?Sized>(&mut self, key: Key, value: &T) -> Result<(), Stop> {
        let writer = &mut *self.writer;
        if writer.members.len() > self.first {
            writer.out.push(',');
        }
        let start = writer.out.len();
        write_string(key.name(&writer.keys), writer.out);
        writer.out.push(':');
        let written = value.serialize(&mut *writer);
        writer.noted(written)?;
        writer.members.push(Member {
            key,
            text: start..writer.out.len(),
        });
        Ok(())
    }

    /// Puts the members in key order, keeping the last of a key given twice, as `serde_json`'s
    /// map keeps them; members written in order already stay where they are.
    fn end(self) -> Result<(), Stop> {
        let Writer {
            out,
            members,
            keys,
            scratch,
            ..
        } = self.writer;
        let own = &mut members[self.first..];
        let in_order = own
            .windows(2)
            .all(|pair| pair[0].key.name(keys) < pair[1].key.name(keys));
        if !in_order {
            own.sort_by(|a, b| a.key.name(keys).cmp(b.key.name(keys)));
            scratch.clear();
            scratch.push_str(&out[self.start..]);
            out.truncate(self.start);
            let mut written = false;
            for (index, member) in own.iter().enumerate() {
                let key = member.key.name(keys);
                if own
                    .get(index + 1)
                    .is_some_and(|next| next.key.name(keys) == key)
                {
                    continue;
                }
                if written {
                    out.push(',');
                }
                out.push_str(
                    &scratch[member.text.start - self.start..member.text.end - self.start],
                );
                written = true;
            }
        }
        out.push('}');
        if self.variant {
            out.push('}');
        }
        members.truncate(self.first);
        Ok(())
    }
}

/// A list being written; `variant` when it is a tuple variant's, within `{"variant":…}`.
struct List<'w, 'o> {
    writer: &'w mut Writer<'o>,
    first: bool,
    variant: bool,
}

impl List<'_, '_> {
    fn item<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        if !self.first {
            self.writer.out.push(',');
        }
        self.first = false;
        let written = value.serialize(&mut *self.writer);
        self.writer.noted(written)
    }

    fn end(self) -> Result<(), Stop> {
        self.writer.out.push(']');
        if self.variant {
            self.writer.out.push('}');
        }
        Ok(())
    }
}

impl<'w, 'o> ser::Serializer for &'w mut Writer<'o> {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = List<'w, 'o>;
    type SerializeTuple = List<'w, 'o>;
    type SerializeTupleStruct = List<'w, 'o>;
    type SerializeTupleVariant = List<'w, 'o>;
    type SerializeMap = Object<'w, 'o>;
    type SerializeStruct = Object<'w, 'o>;
    type SerializeStructVariant = Object<'w, 'o>;

    fn serialize_bool(self, value: bool) -> Result<(), Stop> {
        self.out.push_str(if value { "true" } else { "false" });
        Ok(())
    }

    fn serialize_i8(self, value: i8) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_i16(self, value: i16) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_i32(self, value: i32) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_i64(self, value: i64) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_i128(self, value: i128) -> Result<(), Stop> {
        match i64::try_from(value) {
            Ok(value) => self.integer(value),
            Err(_) => match u64::try_from(value) {
                Ok(value) => self.integer(value),
                Err(_) => Err(Stop),
            },
        }
    }

    fn serialize_u8(self, value: u8) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_u16(self, value: u16) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_u32(self, value: u32) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_u64(self, value: u64) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_u128(self, value: u128) -> Result<(), Stop> {
        u64::try_from(value)
            .map_err(|_| Stop)
            .and_then(|value| self.integer(value))
    }

    fn serialize_f32(self, value: f32) -> Result<(), Stop> {
        self.built(Value::from(value))
    }

    fn serialize_f64(self, value: f64) -> Result<(), Stop> {
        self.built(Value::from(value))
    }

    fn serialize_char(self, value: char) -> Result<(), Stop> {
        write_string(value.encode_utf8(&mut [0; 4]), self.out);
        Ok(())
    }

    fn serialize_str(self, value: &str) -> Result<(), Stop> {
        write_string(value, self.out);
        Ok(())
    }

    fn serialize_bytes(self, value: &[u8]) -> Result<(), Stop> {
        let mut list = ser::Serializer::serialize_seq(self, Some(value.len()))?;
        for byte in value {
            ser::SerializeSeq::serialize_element(&mut list, byte)?;
        }
        list.end()
    }

    fn serialize_none(self) -> Result<(), Stop> {
        self.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Stop> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Stop> {
        self.out.push_str("null");
        Ok(())
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Stop> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Stop> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        self.open_variant(variant);
        value.serialize(&mut *self)?;
        self.out.push('}');
        Ok(())
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<List<'w, 'o>, Stop> {
        self.out.push('[');
        Ok(List {
            writer: self,
            first: true,
            variant: false,
        })
    }

    fn serialize_tuple(self, len: usize) -> Result<List<'w, 'o>, Stop> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<List<'w, 'o>, Stop> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<List<'w, 'o>, Stop> {
        self.open_variant(variant);
        self.out.push('[');
        Ok(List {
            writer: self,
            first: true,
            variant: true,
        })
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Object<'w, 'o>, Stop> {
        Ok(self.object(None))
    }

    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Object<'w, 'o>, Stop> {
        // serde_json's own types (a raw value, an exact number) serialize as structs it reads
        // back in its own way.
        if name.starts_with("$serde_json::") {
            return Err(Stop);
        }
        Ok(self.object(None))
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Object<'w, 'o>, Stop> {
        Ok(self.object(Some(variant)))
    }
}

/// serde's four kinds of list, written alike.
macro_rules! lists {
    ($($kind:ident :: $add:ident),*) => {$(
        impl ser::$kind for List<'_, '_> {
            type Ok = ();
            type Error = Stop;

            fn $add<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
                self.item(value)
            }

            fn end(self) -> Result<(), Stop> {
                List::end(self)
            }
        }
    )*};
}

lists!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Object<'_, '_> {
    type Ok = ();
    type Error = Stop;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Stop> {
        let start = self.writer.keys.len();
        let written = key.serialize(MapKey(&mut self.writer.keys));
        self.writer.noted(written)?;
        self.pending_key = Some(start..self.writer.keys.len());
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        match self.pending_key.take() {
            Some(key) => self.member(Key::Map(key), value),
            None => self.writer.noted(Err(Stop)),
        }
    }

    fn end(self) -> Result<(), Stop> {
        Object::end(self)
    }
}

/// A struct and a struct variant, written alike.
macro_rules! structs {
    ($($kind:ident),*) => {$(
        impl ser::$kind for Object<'_, '_> {
            type Ok = ();
            type Error = Stop;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Stop> {
                self.member(Key::Field(key), value)
            }

            fn end(self) -> Result<(), Stop> {
                Object::end(self)
            }
        }
    )*};
}

structs!(SerializeStruct, SerializeStructVariant);

/// A map's key, as `serde_json` spells the keys it accepts: a string, a character, a unit
/// variant's name, or an integer in decimal. Any other (a float, a `bool`, which versions of
/// `serde_json` spell differently or refuse) stops the writer.
struct MapKey<'k>(&'k mut String);

impl MapKey<'_> {
    fn integer(self, value: impl Display) -> Result<(), Stop> {
        let _ = write!(self.0, "{value}");
        Ok(())
    }
}

impl ser::Serializer for MapKey<'_> {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = ser::Impossible<(), Stop>;
    type SerializeTuple = ser::Impossible<(), Stop>;
    type SerializeTupleStruct = ser::Impossible<(), Stop>;
    type SerializeTupleVariant = ser::Impossible<(), Stop>;
    type SerializeMap = ser::Impossible<(), Stop>;
    type SerializeStruct = ser::Impossible<(), Stop>;
    type SerializeStructVariant = ser::Impossible<(), Stop>;

    fn serialize_str(self, value: &str) -> Result<(), Stop> {
        self.0.push_str(value);
        Ok(())
    }

    fn serialize_char(self, value: char) -> Result<(), Stop> {
        self.0.push(value);
        Ok(())
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Stop> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        value.serialize(self)
    }

    fn serialize_i8(self, value: i8) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_i16(self, value: i16) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_i32(self, value: i32) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_i64(self, value: i64) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_u8(self, value: u8) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_u16(self, value: u16) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_u32(self, value: u32) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_u64(self, value: u64) -> Result<(), Stop> {
        self.integer(value)
    }

    fn serialize_bool(self, _: bool) -> Result<(), Stop> {
        Err(Stop)
    }

    fn serialize_f32(self, _: f32) -> Result<(), Stop> {
        Err(Stop)
    }

    fn serialize_f64(self, _: f64) -> Result<(), Stop> {
        Err(Stop)
    }

    fn serialize_bytes(self, _: &[u8]) -> Result<(), Stop> {
        Err(Stop)
    }

    fn serialize_none(self) -> Result<(), Stop> {
        Err(Stop)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Stop> {
        Err(Stop)
    }

    fn serialize_unit(self) -> Result<(), Stop> {
        Err(Stop)
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Stop> {
        Err(Stop)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Stop> {
        Err(Stop)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Stop> {
        Err(Stop)
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Stop> {
        Err(Stop)
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Stop> {
        Err(Stop)
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Stop> {
        Err(Stop)
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Stop> {
        Err(Stop)
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Stop> {
        Err(Stop)
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Stop> {
        Err(Stop)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Serialize;
    use serde_json::{Map, Number, Value, json};

    use super::write_canonical_of;
    use crate::json::canonical_text;

    /// What the writer writes of `value`, which must be what the canonical text of its
    /// `Value` is, or `None` where it stops.
    fn streamed<T: Serialize>(value: &T) -> Option<String> {
        let mut out = String::new();
        let written = write_canonical_of(value, &mut out).then_some(out);
        if let Some(text) = &written {
            let built =
                serde_json::to_value(value).expect("what the writer writes, serde_json builds");
            assert_eq!(*text, canonical_text(&built));
        }
        written
    }

    #[derive(Serialize)]
    struct Unit;

    #[derive(Serialize)]
    struct Pair(u8, &'static str);

    #[derive(Serialize)]
    struct Wrapped(i64);

    #[derive(Serialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
    enum Colour {
        Red,
        Blue,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Shape {
        Dot,
        Circle(f64),
        Segment(i32, i32),
        Box { width: u32, height: Option<u32> },
    }

    #[derive(Serialize)]
    struct Extra {
        zeta: bool,
        alpha: u64,
    }

    #[derive(Serialize)]
    struct Arguments {
        table: String,
        id: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        ratio: f32,
        shapes: Vec<Shape>,
        colours: BTreeMap<Colour, i8>,
        counts: HashMap<u16, ()>,
        letters: BTreeMap<char, Unit>,
        pair: Pair,
        wrapped: Wrapped,
        #[serde(with = "bytes")]
        raw: Vec<u8>,
        #[serde(flatten)]
        extra: Extra,
        #[serde(rename = "alpha")]
        shadowing: i8,
    }

    mod bytes {
        pub fn serialize<S: serde::Serializer>(bytes: &[u8], to: S) -> Result<S::Ok, S::Error> {
            to.serialize_bytes(bytes)
        }
    }

    #[test]
    fn typed_arguments_are_written_as_their_value_is() {
        let arguments = Arguments {
            table: "users \"main\"\n\u{1}é🚀".into(),
            id: u64::MAX,
            reason: None,
            ratio: 0.1,
            shapes: vec![
                Shape::Dot,
                Shape::Circle(2.0),
                Shape::Circle(f64::NAN),
                Shape::Segment(-1, i32::MIN),
                Shape::Box {
                    width: 3,
                    height: None,
                },
            ],
            colours: BTreeMap::from([(Colour::Red, -3), (Colour::Blue, 0)]),
            counts: HashMap::from([(7, ()), (65535, ())]),
            letters: BTreeMap::from([('"', Unit), ('a', Unit)]),
            pair: Pair(1, "one"),
            wrapped: Wrapped(i64::MIN),
            raw: vec![0, 255],
            extra: Extra {
                zeta: true,
                alpha: 9,
            },
            shadowing: -1,
        };
        let text = streamed(&arguments).expect("every part is written");
        assert!(
            text.contains(r#""alpha":-1"#),
            "the last of a key twice: {text}"
        );
        assert!(
            text.contains(r#""circle":2"#),
            "an integral float as an integer: {text}"
        );
    }

    #[test]
    fn keys_are_sorted_by_their_text_not_their_escapes() {
        let map = BTreeMap::from([("a\"", 1), ("a#", 2), ("a", 3), ("", 4)]);
        assert_eq!(streamed(&map).unwrap(), r#"{"":4,"a":3,"a\"":1,"a#":2}"#);
        let nested = json!({"b": {"y": [{"q": 1, "p": {}}], "x": []}, "a": {}});
        assert_eq!(
            streamed(&nested).unwrap(),
            r#"{"a":{},"b":{"x":[],"y":[{"p":{},"q":1}]}}"#
        );
    }

    /// What serde_json's raw value looks like to a serializer.
    struct Raw;

    impl Serialize for Raw {
        fn serialize<S: serde::Serializer>(&self, to: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeStruct;
            let token = "$serde_json::private::RawValue";
            let mut raw = to.serialize_struct(token, 1)?;
            raw.serialize_field(token, "{\"b\":1, \"a\":2}")?;
            raw.end()
        }
    }

    #[test]
    fn what_serde_json_writes_otherwise_is_left_to_it() {
        assert_eq!(
            streamed(&HashMap::from([(-7i32, 1)])).as_deref(),
            Some(r#"{"-7":1}"#)
        );
        assert_eq!(streamed(&BTreeMap::from([(true, 1)])), None, "a bool key");
        assert_eq!(
            streamed(&BTreeMap::from([((1, 2), 1)])),
            None,
            "a tuple key"
        );
        assert_eq!(
            streamed(&(u128::from(u64::MAX) + 1)),
            None,
            "beyond 64 bits"
        );
        assert_eq!(streamed(&i128::from(i64::MIN)), Some(i64::MIN.to_string()));
        assert_eq!(streamed(&Raw), None, "a raw value");
        assert_eq!(
            streamed(&Number::from_f64(1e300).unwrap()).as_deref(),
            Some("1e300")
        );
    }

    /// A `Serialize` that goes on past its parts' errors, as `serde_json` would have taken them.
    struct Lenient<K, V>(Vec<(K, V)>);

    impl<K: Serialize, V: Serialize> Serialize for Lenient<K, V> {
        fn serialize<S: serde::Serializer>(&self, to: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = to.serialize_map(None)?;
            for (key, value) in &self.0 {
                let _ = map.serialize_entry(key, value);
            }
            map.end()
        }
    }

    struct LenientList(Vec<u128>);

    impl Serialize for LenientList {
        fn serialize<S: serde::Serializer>(&self, to: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeSeq;
            let mut list = to.serialize_seq(None)?;
            for item in &self.0 {
                let _ = list.serialize_element(item);
            }
            list.end()
        }
    }

    #[test]
    fn a_part_that_stopped_the_writer_stops_it_whatever_follows() {
        // serde_json takes a `bool` key the writer leaves to it: two maps of other values
        // must not both be written as `{}`.
        assert_eq!(streamed(&Lenient(vec![(true, 1)])), None);
        assert_eq!(streamed(&Lenient(vec![(true, 2)])), None);
        assert_eq!(streamed(&Lenient(vec![("a", Raw), ("b", Raw)])), None);
        assert_eq!(streamed(&Lenient(vec![("a", 1u128 << 70), ("b", 2)])), None);
        assert_eq!(streamed(&LenientList(vec![1, u128::MAX, 2])), None);
        assert_eq!(
            streamed(&Lenient(vec![("b", 2u8), ("a", 1)])).as_deref(),
            Some(r#"{"a":1,"b":2}"#)
        );
    }

    /// Random values, with numbers of every kind, written through their `Serialize` as a tool's
    /// arguments are.
    #[test]
    fn random_values_are_written_as_their_canonical_text() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut random = move |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        fn value(random: &mut dyn FnMut(u64) -> u64, depth: u32) -> Value {
            let keys = ["a", "b", "é", "a\"", "", "\u{7f}", "A", "aa"];
            match random(if depth > 3 { 6 } else { 8 }) {
                0 => Value::Null,
                1 => Value::Bool(random(2) == 0),
                2 => json!(random(u64::MAX) as i64),
                3 => json!(random(u64::MAX)),
                4 => json!(f64::from_bits(random(u64::MAX)))
                    .as_f64()
                    .map_or(Value::Null, |float| json!(float / 1e3)),
                5 => Value::String(keys[random(8) as usize].repeat(random(3) as usize)),
                6 => Value::Array((0..random(4)).map(|_| value(random, depth + 1)).collect()),
                _ => Value::Object(
                    (0..random(5))
                        .map(|_| {
                            (
                                keys[random(8) as usize].to_owned(),
                                value(random, depth + 1),
                            )
                        })
                        .collect::<Map<_, _>>(),
                ),
            }
        }
        for _ in 0..2000 {
            let value = value(&mut random, 0);
            assert_eq!(streamed(&value), Some(canonical_text(&value)));
        }
    }
}
