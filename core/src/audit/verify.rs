//! Checking a log's chain: one record at a time ([`Verifier`]), so that a log of any length is
//! checked in constant memory, from a store's pages, a JSON Lines file, or records in memory
//! ([`verify`], [`verify_to`]).

use std::borrow::Cow;
use std::fmt;

use sha2::{Digest, Sha256};

use super::digest::link_v1;
use super::stored::StoredRecord;
use super::{AuditKey, AuditRecord, Checkpoint, GENESIS_HASH};
use crate::encoding::hex;

/// Where a log's chain breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainBreak {
    /// The record at this position does not match its own link: it was altered, or written
    /// with another key.
    Altered {
        /// The record's position in the sequence given to [`verify`].
        position: usize,
    },
    /// The record at this position does not follow the one before it: a record between them
    /// was dropped, or records were reordered.
    Broken {
        /// The record's position in the sequence given to [`verify`].
        position: usize,
        /// The sequence number expected there.
        expected_sequence: u64,
        /// The sequence number found.
        found_sequence: u64,
    },
    /// The log is shorter than a checkpoint taken of it: its tail was cut.
    CutShort {
        /// The length the checkpoint recorded.
        expected_length: u64,
        /// The length found.
        found_length: u64,
    },
    /// The record a checkpoint ends at is not the one the checkpoint recorded: the log was
    /// rewritten from there.
    Diverged {
        /// The checkpoint's last record's position.
        position: u64,
    },
}

impl fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChainBreak::Altered { position } => {
                write!(
                    f,
                    "record {position} was altered or written with another key"
                )
            }
            ChainBreak::Broken {
                position,
                expected_sequence,
                found_sequence,
            } => write!(
                f,
                "record {position} is number {found_sequence} where {expected_sequence} was expected: records were dropped or reordered"
            ),
            ChainBreak::CutShort {
                expected_length,
                found_length,
            } => write!(
                f,
                "the log holds {found_length} records where a checkpoint saw {expected_length}: its tail was cut"
            ),
            ChainBreak::Diverged { position } => write!(
                f,
                "record {position} is not the one the checkpoint saw: the log was rewritten"
            ),
        }
    }
}

impl std::error::Error for ChainBreak {}

/// A version 1 record's text as `serde_json` writes an [`AuditRecord`], split around its
/// place in the chain: `{"sequence":N,` first, `,"previous_hash":"P","hash":"H"}` last (the struct's first
/// and last fields), the record's other fields between.
struct PlacedText<'a> {
    sequence: u64,
    fields: &'a str,
    previous_hash: &'a str,
    hash: &'a str,
}

impl<'a> PlacedText<'a> {
    const HEAD: &'static str = "{\"sequence\":";
    const PREVIOUS: &'static str = ",\"previous_hash\":\"";
    const HASH: &'static str = "\",\"hash\":\"";
    const END: &'static str = "\"}";
    /// The text of an unplaced record after its other fields, as the version 1 digest
    /// hashes it.
    const UNPLACED_END: &'static str = ",\"previous_hash\":\"\",\"hash\":\"\"}";

    /// `text` split, or `None` if it is not in that form: a sequence number written as
    /// `serde_json` writes one, and two hashes of 64 hex digits.
    fn of(text: &'a str) -> Option<Self> {
        let rest = text.strip_prefix(Self::HEAD)?;
        let (number, rest) = rest.split_once(',')?;
        let canonical = !number.is_empty()
            && number.bytes().all(|byte| byte.is_ascii_digit())
            && (number == "0" || !number.starts_with('0'));
        if !canonical {
            return None;
        }
        let rest = rest.strip_suffix(Self::END)?;
        let hash = hex_tail(rest)?;
        let rest = rest[..rest.len() - 64].strip_suffix(Self::HASH)?;
        let previous_hash = hex_tail(rest)?;
        let fields = rest[..rest.len() - 64].strip_suffix(Self::PREVIOUS)?;
        Some(PlacedText {
            sequence: number.parse().ok()?,
            fields,
            previous_hash,
            hash,
        })
    }

    /// Whether the record's link is the one made with `key` of its place and its digest.
    fn is_linked(&self, key: Option<&AuditKey>) -> bool {
        self.hash == link_v1(key, self.sequence, self.previous_hash, &self.digest())
    }

    /// The version 1 digest of the record: of its text with
    /// its place left out.
    fn digest(&self) -> String {
        let mut hash = Sha256::new();
        hash.update(Self::HEAD);
        hash.update("0,");
        hash.update(self.fields);
        hash.update(Self::UNPLACED_END);
        hex(&hash.finalize())
    }
}

/// A record's place in the chain, read from its text.
struct Place<'a> {
    sequence: u64,
    previous_hash: Cow<'a, str>,
    hash: Cow<'a, str>,
}

impl<'a> Place<'a> {
    /// The place of the record stored as `text`, if the record matches its own link under
    /// `key`: a version 1 record as its writer wrote it is checked from its text, a version 2
    /// record from its fields read without copies. `None` leaves the record to be read as an
    /// [`AuditRecord`], for the verdict.
    fn of_linked(text: &'a str, key: Option<&AuditKey>) -> Option<Self> {
        if let Some(placed) = PlacedText::of(text) {
            return placed.is_linked(key).then_some(Place {
                sequence: placed.sequence,
                previous_hash: Cow::Borrowed(placed.previous_hash),
                hash: Cow::Borrowed(placed.hash),
            });
        }
        let stored = StoredRecord::read(text)?;
        stored.is_linked_v2(key)?.then_some(Place {
            sequence: stored.sequence,
            previous_hash: stored.previous_hash.0,
            hash: stored.hash.0,
        })
    }
}

/// The last 64 characters of `text`, if they are hex digits.
fn hex_tail(text: &str) -> Option<&str> {
    let tail = text.get(text.len().checked_sub(64)?..)?;
    tail.bytes()
        .all(|byte| byte.is_ascii_hexdigit())
        .then_some(tail)
}

/// Why a log read back from where it is kept does not verify: it could not be read, or its
/// chain is broken.
#[derive(Debug)]
pub enum VerifyError {
    /// The log could not be read, or a record in it could not be read as one.
    Unreadable(std::io::Error),
    /// The records read form no unbroken chain.
    Broken(ChainBreak),
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::Unreadable(error) => write!(f, "the audit log could not be read: {error}"),
            VerifyError::Broken(chain_break) => {
                write!(f, "the audit chain is broken: {chain_break}")
            }
        }
    }
}

impl std::error::Error for VerifyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            VerifyError::Unreadable(error) => Some(error),
            VerifyError::Broken(chain_break) => Some(chain_break),
        }
    }
}

impl From<ChainBreak> for VerifyError {
    fn from(chain_break: ChainBreak) -> Self {
        VerifyError::Broken(chain_break)
    }
}

impl From<std::io::Error> for VerifyError {
    fn from(error: std::io::Error) -> Self {
        VerifyError::Unreadable(error)
    }
}

/// Checks that `records`, read back from a sink, form an unbroken chain from the log's first
/// record: each matches its own link under `key`, follows the one before it, and carries the
/// next sequence number. Returns the checkpoint the log reached.
///
/// Without a checkpoint kept elsewhere, a log whose last records were cut off still verifies:
/// see [`verify_to`]. A log too long to hold goes through a [`Verifier`] a record at a time.
///
/// ```
/// use portcullis_core::audit::{verify, Checkpoint};
///
/// assert_eq!(verify(&[], None), Ok(Checkpoint::genesis()));
/// ```
pub fn verify(records: &[AuditRecord], key: Option<&AuditKey>) -> Result<Checkpoint, ChainBreak> {
    let mut verifier = Verifier::new(key);
    records
        .iter()
        .try_for_each(|record| verifier.push(record))?;
    verifier.finish()
}

/// [`verify`], and that the log still holds every record `checkpoint` saw, unchanged: a cut
/// tail or a log rewritten after the checkpoint fails.
pub fn verify_to(
    records: &[AuditRecord],
    key: Option<&AuditKey>,
    checkpoint: &Checkpoint,
) -> Result<Checkpoint, ChainBreak> {
    let mut verifier = Verifier::new(key).to(Some(checkpoint));
    records
        .iter()
        .try_for_each(|record| verifier.push(record))?;
    verifier.finish()
}

/// The chain check of [`verify`] and [`verify_to`], fed one record at a time, in the log's
/// order: it holds the head it reached and nothing else, so a log of any length verifies in
/// constant memory, read a page or a line at a time.
///
/// ```
/// use portcullis_core::audit::{Checkpoint, Verifier};
///
/// let mut verifier = Verifier::new(None).to(Some(&Checkpoint::genesis()));
/// for record in [] {
///     verifier.push(&record).unwrap();
/// }
/// assert_eq!(verifier.finish(), Ok(Checkpoint::genesis()));
/// ```
#[derive(Debug, Clone)]
pub struct Verifier {
    key: Option<AuditKey>,
    reached: Checkpoint,
    /// The checkpoint the log must still hold, and the hash of the record it ends at, once
    /// that record went by.
    kept: Option<(Checkpoint, Option<String>)>,
}

impl Verifier {
    /// A check of a log from its first record, linked under `key` (plain SHA-256 without one).
    pub fn new(key: Option<&AuditKey>) -> Self {
        Verifier {
            key: key.cloned(),
            reached: Checkpoint::genesis(),
            kept: None,
        }
    }

    /// The same check, which [`finish`](Verifier::finish) also fails if the log no longer
    /// holds every record `checkpoint` saw, unchanged (as [`verify_to`]); without a
    /// checkpoint, the check as it was.
    pub fn to(self, checkpoint: Option<&Checkpoint>) -> Self {
        Verifier {
            kept: checkpoint.map(|checkpoint| (checkpoint.clone(), None)),
            ..self
        }
    }

    /// How far the records pushed so far reach.
    pub fn reached(&self) -> &Checkpoint {
        &self.reached
    }

    /// Checks `record`, the next of the log: it carries the next sequence number, follows the
    /// record before it, and matches its own link. After a break, the log is broken: stop.
    pub fn push(&mut self, record: &AuditRecord) -> Result<(), ChainBreak> {
        let position = self.reached.length as usize;
        if record.sequence != self.reached.length || record.previous_hash != self.reached.head {
            return Err(ChainBreak::Broken {
                position,
                expected_sequence: self.reached.length,
                found_sequence: record.sequence,
            });
        }
        if !record.is_linked_with(self.key.as_ref()) {
            return Err(ChainBreak::Altered { position });
        }
        self.advance(record.sequence, &record.hash);
        Ok(())
    }

    /// [`push`](Verifier::push) for the record stored as `text`, its JSON, as the sinks
    /// and stores write it. A version 1 record stored as its writer serialized it is checked
    /// from the text, without being read into a record: its link covers the digest of those
    /// very bytes, so text that matches its link is the record as written. A version 2 record
    /// is checked from its fields, read without copying them. Any other text is read and
    /// checked as a record, with the same verdict.
    pub fn push_text(&mut self, text: &str) -> Result<(), VerifyError> {
        if let Some(place) = Place::of_linked(text, self.key.as_ref())
            && place.sequence == self.reached.length
            && place.previous_hash == self.reached.head
        {
            self.advance(place.sequence, &place.hash);
            return Ok(());
        }
        let record: AuditRecord = serde_json::from_str(text)
            .map_err(|error| VerifyError::Unreadable(std::io::Error::other(error)))?;
        Ok(self.push(&record)?)
    }

    /// [`push_text`](Verifier::push_text) for each of `texts`, in order, with the same
    /// verdict: the records are read and their links, which depend on nothing but each
    /// record's own text, checked on as many threads as the machine has, and only the order of
    /// the records one after the other.
    pub fn push_texts<'t, T: AsRef<str> + Sync>(
        &mut self,
        texts: &'t [T],
    ) -> Result<(), VerifyError> {
        let threads = std::thread::available_parallelism()
            .map_or(1, std::num::NonZero::get)
            .min(texts.len() / Self::RECORDS_PER_THREAD)
            .max(1);
        let key = self.key.as_ref();
        // Each record's place, if it matches its own link.
        let linked = |texts: &'t [T]| -> Vec<Option<Place<'t>>> {
            texts
                .iter()
                .map(|text| Place::of_linked(text.as_ref(), key))
                .collect()
        };
        let chunk = texts.len().div_ceil(threads).max(1);
        let linked = std::thread::scope(|scope| {
            let mut chunks = texts.chunks(chunk);
            let first = chunks.next().unwrap_or_default();
            let others: Vec<_> = chunks
                .map(|texts| scope.spawn(move || linked(texts)))
                .collect();
            let mut all = linked(first);
            for other in others {
                // A thread that failed leaves its records to the check one at a time below.
                all.extend(other.join().unwrap_or_default());
            }
            all
        });
        for (index, text) in texts.iter().enumerate() {
            if let Some(Some(place)) = linked.get(index)
                && place.sequence == self.reached.length
                && place.previous_hash == self.reached.head
            {
                self.advance(place.sequence, &place.hash);
                continue;
            }
            self.push_text(text.as_ref())?;
        }
        Ok(())
    }

    /// Below this many records a thread, checking the links on one thread is as fast.
    const RECORDS_PER_THREAD: usize = 64;

    /// Takes the record at `sequence`, whose link is `hash`, as checked.
    fn advance(&mut self, sequence: u64, hash: &str) {
        if let Some((checkpoint, seen)) = &mut self.kept
            && checkpoint.length == sequence + 1
        {
            *seen = Some(hash.to_owned());
        }
        self.reached.length = sequence + 1;
        self.reached.head.clear();
        self.reached.head.push_str(hash);
    }

    /// The checkpoint the log reached, once every record was pushed; with a checkpoint to
    /// keep, a log shorter than it, or whose record at its end is another, fails.
    pub fn finish(self) -> Result<Checkpoint, ChainBreak> {
        let Some((checkpoint, seen)) = self.kept else {
            return Ok(self.reached);
        };
        if self.reached.length < checkpoint.length {
            return Err(ChainBreak::CutShort {
                expected_length: checkpoint.length,
                found_length: self.reached.length,
            });
        }
        let head = match checkpoint.length {
            0 => GENESIS_HASH,
            _ => seen.as_deref().unwrap_or_default(),
        };
        if head != checkpoint.head {
            return Err(ChainBreak::Diverged {
                position: checkpoint.length.saturating_sub(1),
            });
        }
        Ok(self.reached)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::tests::{key, mixed_log};
    use crate::encoding::hex;

    #[test]
    fn a_record_verifies_from_its_text_with_the_same_verdict() {
        // Enough records for the page's links to be checked on more than one thread; a log
        // written in version 1, then continued in version 2.
        let records = mixed_log(300, 150);
        let texts: Vec<String> = records
            .iter()
            .map(|record| serde_json::to_string(record).unwrap())
            .collect();
        for (record, text) in records.iter().zip(&texts) {
            // Version 1 text is checked as written; version 2 text is read.
            let Some(placed) = PlacedText::of(text) else {
                assert_eq!(record.version, 2, "{text}");
                assert!(text.starts_with("{\"version\":2,\"sequence\":"));
                continue;
            };
            assert_eq!(record.version, 1);
            assert_eq!(placed.digest(), hex(&record.digest()));
            assert_eq!(
                (placed.sequence, placed.hash),
                (record.sequence, &*record.hash)
            );
        }
        let by_text = |texts: &[String], checkpoint: Option<&Checkpoint>| {
            let mut verifier = Verifier::new(Some(&key())).to(checkpoint);
            // A page at a time, the links checked on several threads, with the same verdict.
            let mut by_page = verifier.clone();
            let paged = match by_page.push_texts(texts) {
                Ok(()) => by_page.finish(),
                Err(VerifyError::Broken(chain_break)) => Err(chain_break),
                Err(VerifyError::Unreadable(error)) => panic!("{error}"),
            };
            for text in texts {
                match verifier.push_text(text) {
                    Ok(()) => {}
                    Err(VerifyError::Broken(chain_break)) => {
                        assert_eq!(paged, Err(chain_break.clone()));
                        return Err(chain_break);
                    }
                    Err(VerifyError::Unreadable(error)) => panic!("{error}"),
                }
            }
            let reached = verifier.finish();
            assert_eq!(paged, reached);
            reached
        };
        let checkpoint = verify(&records, Some(&key())).unwrap();
        assert_eq!(by_text(&texts, None), Ok(checkpoint.clone()));
        assert_eq!(by_text(&texts, Some(&checkpoint)), Ok(checkpoint.clone()));
        assert_eq!(
            by_text(&texts[..3], Some(&checkpoint)),
            Err(ChainBreak::CutShort {
                expected_length: 300,
                found_length: 3
            })
        );

        for position in [20, 204] {
            let mut altered = texts.clone();
            altered[position] = altered[position].replace("\"alice\"", "\"mallory\"");
            assert_eq!(
                by_text(&altered, None),
                Err(ChainBreak::Altered { position })
            );
        }
        // Text the writer did not write, for the same record, is read as a record.
        let mut spaced = texts.clone();
        spaced[2] = serde_json::to_string_pretty(&records[2]).unwrap();
        spaced[3] = texts[3].replacen("\"sequence\":3", "\"sequence\":03", 1);
        assert_eq!(
            by_text(&spaced[..3], None),
            Ok(Checkpoint::after(&records[2]))
        );
        let mut verifier = Verifier::new(Some(&key()));
        spaced[..3]
            .iter()
            .for_each(|text| verifier.push_text(text).unwrap());
        assert!(matches!(
            verifier.push_text(&spaced[3]),
            Err(VerifyError::Unreadable(_))
        ));
        let mut swapped = texts.clone();
        swapped.swap(201, 202);
        assert!(matches!(
            by_text(&swapped, None),
            Err(ChainBreak::Broken { position: 201, .. })
        ));

        // A version 2 record is its fields as a JSON reader reads them: other spellings of the
        // same fields verify, other fields do not.
        let arguments = format!(
            "\"arguments\":{}",
            serde_json::to_string(&records[200].arguments).unwrap()
        );
        assert!(texts[200].contains(&arguments));
        for (spelling, verifies) in [
            (
                r#""arguments":{"user":"\u0061","password":"[redacted]"}"#,
                true,
            ),
            (
                r#""arguments":{"user":"b","password":"[redacted]","user":"a"}"#,
                true,
            ),
            (
                r#""arguments" : { "password" : "[redacted]" , "user" : "a" }"#,
                true,
            ),
            (
                r#""arguments":{"user":"a","password":"[redacted]","user":"b"}"#,
                false,
            ),
            (
                r#""arguments":{"password":"[redacted]","user":"a","extra":null}"#,
                false,
            ),
            (
                r#""arguments":{"password":"[redacted]","user":"a "}"#,
                false,
            ),
        ] {
            let mut respelled = texts.clone();
            respelled[200] = respelled[200].replace(&arguments, spelling);
            let verdict = by_text(&respelled, None);
            match verifies {
                true => assert_eq!(verdict, Ok(checkpoint.clone()), "{spelling}"),
                false => assert_eq!(verdict, Err(ChainBreak::Altered { position: 200 })),
            }
        }
        // A record relabelled in the other format no longer matches its link.
        let mut relabelled = texts.clone();
        relabelled[20] = relabelled[20].replacen("{", "{\"version\":2,", 1);
        relabelled[200] = relabelled[200].replacen("\"version\":2,", "", 1);
        assert_eq!(
            by_text(&relabelled[..150], None),
            Err(ChainBreak::Altered { position: 20 })
        );
        let mut verifier = Verifier::new(Some(&key()));
        texts[..200]
            .iter()
            .for_each(|text| verifier.push_text(text).unwrap());
        assert!(matches!(
            verifier.push_text(&relabelled[200]),
            Err(VerifyError::Broken(ChainBreak::Altered { position: 200 }))
        ));
        // A snapshot of `null` is no snapshot, as the record reads it.
        let mut null_snapshot = texts.clone();
        null_snapshot[200] = null_snapshot[200].replace(
            r#""snapshot_after":null"#,
            r#""snapshot_after":null,"snapshot_missing":null"#,
        );
        assert_eq!(by_text(&null_snapshot, None), Ok(checkpoint.clone()));
    }
}
