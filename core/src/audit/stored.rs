//! A version 2 record read back from its text for its link alone: its texts borrowed from the
//! text where they hold no escape, its JSON values as small trees, so that a long log verifies
//! without building an [`AuditRecord`](super::AuditRecord) for each record. It reads every field
//! as an `AuditRecord` reads it, so its verdict is the record's.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

use super::digest::{Encode, Encoder, Fields, in_key_order, is_link, link, optional};
use super::key::AuditKey;
use super::record::V2;
use crate::contract::ValueSource;
use crate::policy::Ruling;

/// The fields of a record's text.
#[derive(Deserialize)]
pub(super) struct StoredRecord<'a> {
    #[serde(default = "super::record::format_v1")]
    version: u8,
    pub(super) sequence: u64,
    time_ms: u64,
    #[serde(borrow)]
    trace_id: Text<'a>,
    #[serde(borrow)]
    task_id: Text<'a>,
    #[serde(borrow)]
    actor: Text<'a>,
    #[serde(borrow)]
    tenant: Option<Text<'a>>,
    #[serde(borrow)]
    tool: Text<'a>,
    #[serde(borrow)]
    call_id: Text<'a>,
    #[serde(borrow)]
    arguments: Node<'a>,
    #[serde(borrow)]
    decision: Text<'a>,
    #[serde(borrow)]
    gate: Option<Text<'a>>,
    #[serde(borrow)]
    code: Option<Text<'a>>,
    #[serde(borrow)]
    reason: Option<Text<'a>>,
    #[serde(borrow)]
    summary: Text<'a>,
    #[serde(borrow)]
    resolution: Option<Text<'a>>,
    #[serde(borrow)]
    original_arguments: Option<Node<'a>>,
    #[serde(borrow)]
    snapshot_before: Option<Node<'a>>,
    #[serde(borrow)]
    snapshot_after: Option<Node<'a>>,
    #[serde(default, borrow)]
    snapshot_missing: Option<Text<'a>>,
    #[serde(default)]
    sources: Vec<ValueSource>,
    #[serde(default)]
    rulings: Vec<Ruling>,
    budget_calls: u64,
    budget_cost: u64,
    duration_us: u64,
    #[serde(borrow)]
    pub(super) previous_hash: Text<'a>,
    #[serde(borrow)]
    pub(super) hash: Text<'a>,
}

impl<'a> StoredRecord<'a> {
    /// Reads `text`: in the layout its writer gives a record, by a scan of its fields in their
    /// order, which reads texts without escapes in place and leaves only escapes and JSON
    /// values to `serde_json`; any other text by `serde_json` alone, with the same result.
    /// `None` if it is not a record.
    pub(super) fn read(text: &'a str) -> Option<Self> {
        Scan { text, at: 0 }
            .record()
            .or_else(|| serde_json::from_str(text).ok())
    }

    /// Whether the record is in version 2 and matches its own link under `key`; `None` for a
    /// record of another version, which is read as an [`AuditRecord`](super::AuditRecord).
    pub(super) fn is_linked_v2(&self, key: Option<&AuditKey>) -> Option<bool> {
        if self.version != V2 {
            return None;
        }
        let linked = link(
            key,
            self.sequence,
            &self.previous_hash.0,
            &self.fields().digest(),
        );
        Some(is_link(&self.hash.0, linked))
    }

    fn fields(&self) -> Fields<'_> {
        Fields {
            trace_id: &self.trace_id.0,
            task_id: &self.task_id.0,
            actor: &self.actor.0,
            tenant: self.tenant.as_ref().map(|text| &*text.0),
            tool: &self.tool.0,
            call_id: &self.call_id.0,
            arguments: &self.arguments,
            time_ms: self.time_ms,
            decision: &self.decision.0,
            gate: self.gate.as_ref().map(|text| &*text.0),
            code: self.code.as_ref().map(|text| &*text.0),
            reason: self.reason.as_ref().map(|text| &*text.0),
            summary: &self.summary.0,
            resolution: self.resolution.as_ref().map(|text| &*text.0),
            original_arguments: optional(&self.original_arguments),
            snapshot_before: optional(&self.snapshot_before),
            snapshot_after: optional(&self.snapshot_after),
            snapshot_missing: self.snapshot_missing.as_ref().map(|text| &*text.0),
            sources: &self.sources,
            rulings: &self.rulings,
            budget_calls: self.budget_calls,
            budget_cost: self.budget_cost,
            duration_us: self.duration_us,
        }
    }
}

/// A record's text read in the layout its writer gives it: its fields in the order of
/// [`AuditRecord`](super::AuditRecord), without spaces. Whatever it reads, `serde_json` reads
/// the same; it gives up (`None`) on anything else, which `serde_json` then reads: a control
/// character, a number the writer would not write, fields in another order, the rare `sources`
/// and `rulings`.
struct Scan<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scan<'a> {
    fn record(mut self) -> Option<StoredRecord<'a>> {
        self.literal("{\"version\":")?;
        let version = u8::try_from(self.number()?).ok()?;
        self.literal(",\"sequence\":")?;
        let sequence = self.number()?;
        let time_ms = self.field("time_ms", Self::number)?;
        let trace_id = self.field("trace_id", Self::text)?;
        let task_id = self.field("task_id", Self::text)?;
        let actor = self.field("actor", Self::text)?;
        let tenant = self.field("tenant", Self::optional_text)?;
        let tool = self.field("tool", Self::text)?;
        let call_id = self.field("call_id", Self::text)?;
        let arguments = self.field("arguments", Self::value)?;
        let decision = self.field("decision", Self::text)?;
        let gate = self.field("gate", Self::optional_text)?;
        let code = self.field("code", Self::optional_text)?;
        let reason = self.field("reason", Self::optional_text)?;
        let summary = self.field("summary", Self::text)?;
        let resolution = self.field("resolution", Self::optional_text)?;
        let original_arguments = self.field("original_arguments", Self::optional_value)?;
        let snapshot_before = self.field("snapshot_before", Self::optional_value)?;
        let snapshot_after = self.field("snapshot_after", Self::optional_value)?;
        let snapshot_missing = match self.literal(",\"snapshot_missing\":") {
            Some(()) => Some(self.text()?),
            None => None,
        };
        let budget_calls = self.field("budget_calls", Self::number)?;
        let budget_cost = self.field("budget_cost", Self::number)?;
        let duration_us = self.field("duration_us", Self::number)?;
        let previous_hash = self.field("previous_hash", Self::text)?;
        let hash = self.field("hash", Self::text)?;
        self.literal("}")?;
        (self.at == self.text.len()).then_some(StoredRecord {
            version,
            sequence,
            time_ms,
            trace_id,
            task_id,
            actor,
            tenant,
            tool,
            call_id,
            arguments,
            decision,
            gate,
            code,
            reason,
            summary,
            resolution,
            original_arguments,
            snapshot_before,
            snapshot_after,
            snapshot_missing,
            sources: Vec::new(),
            rulings: Vec::new(),
            budget_calls,
            budget_cost,
            duration_us,
            previous_hash,
            hash,
        })
    }

    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn literal(&mut self, literal: &str) -> Option<()> {
        self.rest()
            .starts_with(literal)
            .then(|| self.at += literal.len())
    }

    /// `,"name":` and the field's value, read by `read`.
    fn field<T>(&mut self, name: &str, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        self.literal(",\"")?;
        self.literal(name)?;
        self.literal("\":")?;
        read(self)
    }

    /// An unsigned integer as `serde_json` writes one: digits, no leading zero.
    fn number(&mut self) -> Option<u64> {
        let rest = self.rest();
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let number = &rest[..digits];
        if digits == 0 || (digits > 1 && number.starts_with('0')) {
            return None;
        }
        self.at += digits;
        number.parse().ok()
    }

    /// A text: read in place when it holds no escape, by `serde_json` when it does.
    fn text(&mut self) -> Option<Text<'a>> {
        let rest = self.rest().strip_prefix('"')?;
        let end = rest
            .bytes()
            .position(|byte| matches!(byte, b'"' | b'\\' | ..0x20))?;
        match rest.as_bytes()[end] {
            b'"' => {
                self.at += end + 2;
                Some(Text(Cow::Borrowed(&rest[..end])))
            }
            b'\\' => self.by_serde(),
            _ => None,
        }
    }

    fn optional_text(&mut self) -> Option<Option<Text<'a>>> {
        match self.literal("null") {
            Some(()) => Some(None),
            None => self.text().map(Some),
        }
    }

    /// A JSON value, read by `serde_json` from where it starts to where it ends.
    fn value(&mut self) -> Option<Node<'a>> {
        self.by_serde()
    }

    /// What starts here, read by `serde_json`.
    fn by_serde<T: Deserialize<'a>>(&mut self) -> Option<T> {
        let mut values = serde_json::Deserializer::from_str(self.rest()).into_iter::<T>();
        let value = values.next()?.ok()?;
        self.at += values.byte_offset();
        Some(value)
    }

    fn optional_value(&mut self) -> Option<Option<Node<'a>>> {
        match self.literal("null") {
            Some(()) => Some(None),
            None => self.value().map(Some),
        }
    }
}

/// A text of the record, borrowed where it holds no escape.
pub(super) struct Text<'a>(pub(super) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Borrowed(text)))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(text.to_owned())))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(text)))
    }
}

/// A JSON value of the record, read as `serde_json` reads a `Value`: a key held twice keeps
/// its last value. An object's members are kept in the order the digest encodes them.
enum Node<'a> {
    Null,
    Boolean(bool),
    Integer(i64),
    Large(u64),
    Float(f64),
    Text(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

impl Encode for Node<'_> {
    fn encode(&self, encoder: &mut Encoder) {
        match self {
            Node::Null => encoder.null(),
            Node::Boolean(boolean) => encoder.boolean(*boolean),
            Node::Integer(integer) => encoder.integer(*integer),
            Node::Large(large) => encoder.large(*large),
            Node::Float(float) => encoder.float(*float),
            Node::Text(text) => encoder.string(text),
            Node::Array(items) => {
                encoder.array(items.len());
                items.iter().for_each(|item| item.encode(encoder));
            }
            Node::Object(members) => {
                encoder.object(members.iter().map(|(key, value)| (key, value)));
            }
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, Node::Null)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Node<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Node::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Node::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        Node::deserialize(deserializer)
    }

    fn visit_bool<E: de::Error>(self, boolean: bool) -> Result<Self::Value, E> {
        Ok(Node::Boolean(boolean))
    }

    fn visit_i64<E: de::Error>(self, integer: i64) -> Result<Self::Value, E> {
        Ok(Node::Integer(integer))
    }

    fn visit_u64<E: de::Error>(self, integer: u64) -> Result<Self::Value, E> {
        Ok(i64::try_from(integer).map_or(Node::Large(integer), Node::Integer))
    }

    fn visit_f64<E: de::Error>(self, float: f64) -> Result<Self::Value, E> {
        Ok(Node::Float(float))
    }

    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Node::Text(Cow::Borrowed(text)))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Node::Text(Cow::Owned(text.to_owned())))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
        Ok(Node::Text(Cow::Owned(text)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Self::Value, A::Error> {
        let mut array = Vec::with_capacity(items.size_hint().unwrap_or(0).min(64));
        while let Some(item) = items.next_element()? {
            array.push(item);
        }
        Ok(Node::Array(array))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Self::Value, A::Error> {
        let mut object = Vec::with_capacity(members.size_hint().unwrap_or(0).min(64));
        while let Some((Text(key), value)) = members.next_entry()? {
            object.push((key, value));
        }
        in_key_order(&mut object);
        Ok(Node::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::tests::mixed_log;

    /// What a reading of a record gives, to compare two readings: its place and its digest.
    fn reading(record: &StoredRecord<'_>) -> (u8, u64, String, String, [u8; 32]) {
        (
            record.version,
            record.sequence,
            record.previous_hash.0.to_string(),
            record.hash.0.to_string(),
            record.fields().digest(),
        )
    }

    #[test]
    fn the_scan_reads_what_serde_reads_or_gives_up() {
        let records = mixed_log(24, 0);
        let texts: Vec<String> = records
            .iter()
            .map(|record| serde_json::to_string(record).unwrap())
            .collect();
        let pieces = [
            " ", "\\", "\"", "0", "9", "-", "null", "\n", "é", "{", "}", ",", ":", "1.0",
            "\\u0041", "\u{1}", "\"x\"", "[]", "01", "true",
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut random = |below: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            usize::try_from(seed % below as u64).unwrap()
        };
        let (mut scanned, mut left) = (0, 0);
        for text in &texts {
            let written = Scan { text, at: 0 }.record().expect("the writer's layout");
            let parsed: StoredRecord<'_> = serde_json::from_str(text).unwrap();
            assert_eq!(reading(&written), reading(&parsed));
            for _ in 0..400 {
                let mut at = random(text.len());
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                let piece = pieces[random(pieces.len())];
                let mut end = (at + random(3)).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                let mut mutated = text.clone();
                mutated.replace_range(at..end, piece);
                let parsed = serde_json::from_str::<StoredRecord<'_>>(&mutated).ok();
                let scan = Scan {
                    text: &mutated,
                    at: 0,
                };
                match scan.record() {
                    Some(record) => {
                        let parsed = parsed.unwrap_or_else(|| panic!("serde reads {mutated}"));
                        assert_eq!(reading(&record), reading(&parsed), "{mutated}");
                        scanned += 1;
                    }
                    None => left += 1,
                }
            }
        }
        // Both ways were taken: texts that still have the writer's layout, and others.
        assert!(
            scanned > 500 && left > 500,
            "{scanned} scanned, {left} left to serde"
        );
    }
}
