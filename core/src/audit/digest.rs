//! What a record's link covers, in each version of the record format: the digest of its
//! fields, and the keyed link that chains it after the record before it.
//!
//! - **Version 1** (records written before version 2): the digest is the SHA-256 of the record
//!   as `serde_json` writes it, its place left empty; the link is the MAC of the text
//!   `{sequence}\n{previous_hash}\n{digest}`, hashes in hex.
//! - **Version 2**: the digest is the SHA-256 of a binary encoding of the fields (fixed order,
//!   every length given before its bytes, object keys sorted), which starts with the digest of
//!   the fields the records of one call share; the link is the MAC of the sequence (8 bytes,
//!   big-endian), the hash before and the digest (32 bytes each). The audit page of the guide
//!   spells the encoding out, for a verifier in another language.

use hmac::Mac;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::key::AuditKey;
use super::record::{AuditRecord, V1, V2};
use crate::contract::ValueSource;
use crate::encoding::{hash_bytes, hex};
use crate::policy::Ruling;

/// Where the encoding of a call's shared fields starts.
const CALL_TAG: &[u8] = b"portcullis audit call v2\n";
/// Where the encoding of a record's own fields starts.
const RECORD_TAG: &[u8] = b"portcullis audit record v2\n";

impl AuditRecord {
    /// The SHA-256 of the record's fields, its place in the chain left out: computed before
    /// the record is ordered, so that no writer waits for it.
    pub(super) fn digest(&self) -> [u8; 32] {
        match self.version {
            V1 => self.digest_v1(),
            _ => self.fields().digest(),
        }
    }

    /// Whether the record's link in the chain was made with `key` (with SHA-256 alone,
    /// without one): a writer beside the application tells from the log's last record how
    /// the log is linked, and does not break a keyed chain with a link of another kind.
    pub fn is_linked_with(&self, key: Option<&AuditKey>) -> bool {
        match self.version {
            V1 => {
                let digest = hex(&self.digest_v1());
                link_v1(key, self.sequence, &self.previous_hash, &digest) == self.hash
            }
            V2 => {
                let linked = link(key, self.sequence, &self.previous_hash, &self.digest());
                is_link(&self.hash, linked)
            }
            _ => false,
        }
    }

    /// The version 1 digest: of the record's JSON, with its place emptied.
    fn digest_v1(&self) -> [u8; 32] {
        let unplaced = AuditRecord {
            sequence: 0,
            previous_hash: String::new(),
            hash: String::new(),
            ..self.clone()
        };
        let mut hashing = Hashing(Sha256::new());
        serde_json::to_writer(&mut hashing, &unplaced)
            .expect("a record of strings and JSON values serializes");
        hashing.0.finalize().into()
    }

    /// The fields the version 2 digest covers.
    pub(super) fn fields(&self) -> Fields<'_> {
        Fields {
            trace_id: &self.trace_id,
            task_id: &self.task_id,
            actor: &self.actor,
            tenant: self.tenant.as_deref(),
            tool: &self.tool,
            call_id: &self.call_id,
            arguments: &self.arguments,
            time_ms: self.time_ms,
            decision: &self.decision,
            gate: self.gate.as_deref(),
            code: self.code.as_deref(),
            reason: self.reason.as_deref(),
            summary: &self.summary,
            resolution: self.resolution.as_deref(),
            original_arguments: optional(&self.original_arguments),
            snapshot_before: optional(&self.snapshot_before),
            snapshot_after: optional(&self.snapshot_after),
            snapshot_missing: self.snapshot_missing.as_deref(),
            sources: &self.sources,
            rulings: &self.rulings,
            budget_calls: self.budget_calls,
            budget_cost: self.budget_cost,
            duration_us: self.duration_us,
        }
    }
}

/// The fields a version 2 digest covers, in the order it covers them, borrowed from a record
/// as its writer holds it or as read back from its text.
pub(super) struct Fields<'r> {
    pub(super) trace_id: &'r str,
    pub(super) task_id: &'r str,
    pub(super) actor: &'r str,
    pub(super) tenant: Option<&'r str>,
    pub(super) tool: &'r str,
    pub(super) call_id: &'r str,
    pub(super) arguments: &'r dyn Encode,
    pub(super) time_ms: u64,
    pub(super) decision: &'r str,
    pub(super) gate: Option<&'r str>,
    pub(super) code: Option<&'r str>,
    pub(super) reason: Option<&'r str>,
    pub(super) summary: &'r str,
    pub(super) resolution: Option<&'r str>,
    pub(super) original_arguments: Option<&'r dyn Encode>,
    pub(super) snapshot_before: Option<&'r dyn Encode>,
    pub(super) snapshot_after: Option<&'r dyn Encode>,
    pub(super) snapshot_missing: Option<&'r str>,
    pub(super) sources: &'r [ValueSource],
    pub(super) rulings: &'r [Ruling],
    pub(super) budget_calls: u64,
    pub(super) budget_cost: u64,
    pub(super) duration_us: u64,
}

impl Fields<'_> {
    /// The version 2 digest.
    pub(super) fn digest(&self) -> [u8; 32] {
        self.digest_after(&self.call_digest())
    }

    /// The digest of the fields every record of one call shares: who called, in which trace
    /// and task, which tool, the call's id and its arguments as recorded. A writer computes it
    /// once for a call's records.
    pub(super) fn call_digest(&self) -> [u8; 32] {
        Encoder::digest(|encoder| {
            encoder.bytes(CALL_TAG);
            encoder.text(self.trace_id);
            encoder.text(self.task_id);
            encoder.text(self.actor);
            encoder.optional_text(self.tenant);
            encoder.text(self.tool);
            encoder.text(self.call_id);
            self.arguments.encode(encoder);
        })
    }

    /// The version 2 digest, the call's shared fields having digest `call`.
    pub(super) fn digest_after(&self, call: &[u8; 32]) -> [u8; 32] {
        Encoder::digest(|encoder| {
            encoder.bytes(RECORD_TAG);
            encoder.bytes(call);
            encoder.number(self.time_ms);
            encoder.text(self.decision);
            encoder.optional_text(self.gate);
            encoder.optional_text(self.code);
            encoder.optional_text(self.reason);
            encoder.text(self.summary);
            encoder.optional_text(self.resolution);
            encoder.optional_value(self.original_arguments);
            encoder.optional_value(self.snapshot_before);
            encoder.optional_value(self.snapshot_after);
            encoder.optional_text(self.snapshot_missing);
            encoder.list(self.sources);
            encoder.list(self.rulings);
            encoder.number(self.budget_calls);
            encoder.number(self.budget_cost);
            encoder.number(self.duration_us);
        })
    }
}

/// A value that may be absent, as the digest reads it.
pub(super) fn optional<'r, V: Encode + 'r>(value: &'r Option<V>) -> Option<&'r (dyn Encode + 'r)> {
    value.as_ref().map(|value| value as &dyn Encode)
}

/// A JSON value, as the version 2 digest encodes it.
pub(super) trait Encode {
    /// Writes the value's encoding.
    fn encode(&self, encoder: &mut Encoder);

    /// Whether the value is `null`, which an optional value encodes as absent.
    fn is_null(&self) -> bool;
}

impl Encode for Value {
    fn encode(&self, encoder: &mut Encoder) {
        match self {
            Value::Null => encoder.null(),
            Value::Bool(boolean) => encoder.boolean(*boolean),
            Value::Number(number) => match (number.as_i64(), number.as_u64()) {
                (Some(integer), _) => encoder.integer(integer),
                (None, Some(large)) => encoder.large(large),
                (None, None) => encoder.float(
                    number
                        .as_f64()
                        .expect("a JSON number is an integer or a double"),
                ),
            },
            Value::String(text) => encoder.string(text),
            Value::Array(items) => {
                encoder.array(items.len());
                items.iter().for_each(|item| item.encode(encoder));
            }
            Value::Object(members) => {
                let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
                in_key_order(&mut sorted);
                encoder.object(sorted.iter().map(|(key, value)| (*key, *value)));
            }
        }
    }

    fn is_null(&self) -> bool {
        self.is_null()
    }
}

/// The version 2 link of a record at `sequence` after `previous_hash`, whose fields have
/// `digest`; `None` if `previous_hash` is not 32 bytes in lowercase hex.
pub(super) fn link(
    key: Option<&AuditKey>,
    sequence: u64,
    previous_hash: &str,
    digest: &[u8; 32],
) -> Option<[u8; 32]> {
    let previous = hash_bytes(previous_hash)?;
    let parts: [&[u8]; 3] = [&sequence.to_be_bytes(), &previous, digest];
    Some(mac(key, &parts))
}

/// Whether `hash`, in lowercase hex, is `link`.
pub(super) fn is_link(hash: &str, link: Option<[u8; 32]>) -> bool {
    link.is_some_and(|link| hash_bytes(hash) == Some(link))
}

/// The version 1 link: the MAC (or hash) of `{sequence}\n{previous_hash}\n{digest}`.
pub(super) fn link_v1(
    key: Option<&AuditKey>,
    sequence: u64,
    previous_hash: &str,
    digest: &str,
) -> String {
    let sequence = sequence.to_string();
    let parts: [&[u8]; 5] = [
        sequence.as_bytes(),
        b"\n",
        previous_hash.as_bytes(),
        b"\n",
        digest.as_bytes(),
    ];
    hex(&mac(key, &parts))
}

/// HMAC-SHA-256 under `key` of `parts` one after the other, or their SHA-256 without a key.
fn mac(key: Option<&AuditKey>, parts: &[&[u8]]) -> [u8; 32] {
    match key {
        Some(key) => {
            let mut mac = key.keyed();
            parts.iter().for_each(|part| mac.update(part));
            mac.finalize().into_bytes().into()
        }
        None => {
            let mut hash = Sha256::new();
            parts.iter().for_each(|part| hash.update(part));
            hash.finalize().into()
        }
    }
}

/// Bytes written into a SHA-256, so that what is hashed is never held as a whole.
struct Hashing(Sha256);

impl std::io::Write for Hashing {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The version 2 encoding, written straight into a SHA-256.
pub(super) struct Encoder(Sha256);

impl Encoder {
    /// The SHA-256 of what `write` encodes.
    fn digest(write: impl FnOnce(&mut Encoder)) -> [u8; 32] {
        let mut encoder = Encoder(Sha256::new());
        write(&mut encoder);
        encoder.0.finalize().into()
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn number(&mut self, number: u64) {
        self.bytes(&number.to_be_bytes());
    }

    /// A length or a count: 4 bytes, big-endian.
    fn length(&mut self, length: usize) {
        let length = u32::try_from(length).expect("a record's text and lists are under 4 GiB");
        self.bytes(&length.to_be_bytes());
    }

    fn text(&mut self, text: &str) {
        self.length(text.len());
        self.bytes(text.as_bytes());
    }

    fn optional_text(&mut self, text: Option<&str>) {
        match text {
            None => self.bytes(&[0]),
            Some(text) => {
                self.bytes(&[1]);
                self.text(text);
            }
        }
    }

    /// A value that may be absent: `null` is absent, as a record's text cannot tell them
    /// apart.
    fn optional_value(&mut self, value: Option<&dyn Encode>) {
        match value.filter(|value| !value.is_null()) {
            None => self.bytes(&[0]),
            Some(value) => {
                self.bytes(&[1]);
                value.encode(self);
            }
        }
    }

    /// Items encoded as the JSON array the record's text holds for them.
    fn list<T: Serialize>(&mut self, items: &[T]) {
        if items.is_empty() {
            return self.array(0);
        }
        let items = serde_json::to_value(items).expect("sources and rulings serialize");
        items.encode(self);
    }

    // A JSON value is a tag byte and what follows it: `0` null, `1` false, `2` true; `3` an
    // integer that fits an `i64` and `4` a larger one that fits a `u64` (8 bytes, big-endian);
    // `5` any other number, as an IEEE 754 double (8 bytes, big-endian); `6` a text; `7` an
    // array, its count then its items; `8` an object, its count then each member, key (a text
    // without a tag) then value, keys in the order of their UTF-8 bytes.

    pub(super) fn null(&mut self) {
        self.bytes(&[0]);
    }

    pub(super) fn boolean(&mut self, boolean: bool) {
        self.bytes(&[1 + u8::from(boolean)]);
    }

    pub(super) fn integer(&mut self, integer: i64) {
        self.bytes(&[3]);
        self.bytes(&integer.to_be_bytes());
    }

    pub(super) fn large(&mut self, integer: u64) {
        self.bytes(&[4]);
        self.number(integer);
    }

    pub(super) fn float(&mut self, float: f64) {
        self.bytes(&[5]);
        self.bytes(&float.to_be_bytes());
    }

    pub(super) fn string(&mut self, text: &str) {
        self.bytes(&[6]);
        self.text(text);
    }

    /// The start of an array of `count` items, which follow.
    pub(super) fn array(&mut self, count: usize) {
        self.bytes(&[7]);
        self.length(count);
    }

    /// An object of `members`, in the order of their keys' bytes, each key once (see
    /// [`in_key_order`]).
    pub(super) fn object<'m, K: AsRef<str> + 'm, V: Encode + 'm>(
        &mut self,
        members: impl ExactSizeIterator<Item = (&'m K, &'m V)>,
    ) {
        self.bytes(&[8]);
        self.length(members.len());
        for (key, value) in members {
            self.text(key.as_ref());
            value.encode(self);
        }
    }
}

/// `members` in the order of their keys' bytes, a key held twice keeping its last value, as a
/// JSON reader keeps it.
pub(super) fn in_key_order<K: AsRef<str>, V>(members: &mut Vec<(K, V)>) {
    members.reverse();
    members.sort_by(|(a, _), (b, _)| a.as_ref().as_bytes().cmp(b.as_ref().as_bytes()));
    members.dedup_by(|(later, _), (earlier, _)| later.as_ref() == earlier.as_ref());
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::audit::Checkpoint;

    /// `record` as version 1 wrote it, the next after `head`.
    pub(in crate::audit) fn chained_v1(
        record: AuditRecord,
        head: &Checkpoint,
        key: &AuditKey,
    ) -> AuditRecord {
        let mut record = AuditRecord {
            version: V1,
            sequence: head.length,
            previous_hash: head.head.clone(),
            ..record
        };
        record.hash = link_v1(
            Some(key),
            record.sequence,
            &record.previous_hash,
            &hex(&record.digest_v1()),
        );
        record
    }
    use crate::digest::sha256_hex;
    use hmac::{Hmac, KeyInit};
    use serde_json::json;

    #[test]
    fn a_v1_link_covers_the_sequence_the_previous_hash_and_the_digest_as_one_text() {
        let message = "18446744073709551615\nprevious\ndigest";
        assert_eq!(
            link_v1(None, u64::MAX, "previous", "digest"),
            sha256_hex(message.as_bytes())
        );
        let key = AuditKey::new([7u8; 32].to_vec()).unwrap();
        let mut mac = Hmac::<Sha256>::new_from_slice(&[7u8; 32]).unwrap();
        mac.update(b"0\nprevious\ndigest");
        assert_eq!(
            link_v1(Some(&key), 0, "previous", "digest"),
            hex(&mac.finalize().into_bytes())
        );
    }

    #[test]
    fn a_v2_link_covers_the_sequence_and_both_hashes_as_bytes() {
        let previous = [0xab; 32];
        let digest = [0x01; 32];
        let mut message = 258u64.to_be_bytes().to_vec();
        message.extend(previous);
        message.extend(digest);
        let linked = link(None, 258, &hex(&previous), &digest);
        assert_eq!(
            linked.map(|linked| hex(&linked)),
            Some(sha256_hex(&message))
        );
        assert!(is_link(&sha256_hex(&message), linked));
        assert!(!is_link(&sha256_hex(&message).to_uppercase(), linked));
        assert_eq!(link(None, 258, "ab", &digest), None);
        assert_eq!(link(None, 258, &"g".repeat(64), &digest), None);
        assert_eq!(link(None, 258, &"AB".repeat(32), &digest), None);
        assert_eq!(hash_bytes(&"ab".repeat(32)), Some(previous));
    }

    /// The SHA-256 of the encoding of `value`, to compare with that of the bytes expected.
    fn encoded(value: &Value) -> Vec<u8> {
        Encoder::digest(|encoder| value.encode(encoder)).to_vec()
    }

    #[test]
    fn a_value_is_encoded_by_its_tags_with_keys_in_byte_order() {
        let mut expected = vec![8, 0, 0, 0, 3];
        for (key, tail) in [
            ("B", vec![3, 255, 255, 255, 255, 255, 255, 255, 255]),
            ("a", vec![7, 0, 0, 0, 2, 0, 2]),
            ("é", vec![5, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0]),
        ] {
            expected.extend((key.len() as u32).to_be_bytes());
            expected.extend(key.as_bytes());
            expected.extend(tail);
        }
        let value = json!({"é": 1.5, "a": [null, true], "B": -1});
        assert_eq!(encoded(&value), Sha256::digest(&expected).to_vec());
        let mut large = vec![4];
        large.extend(u64::MAX.to_be_bytes());
        assert_eq!(encoded(&json!(u64::MAX)), Sha256::digest(&large).to_vec());
    }
}
