//! Secrets sealed at rest: what a stored call holds of its arguments (sensitive values
//! included), its decision, the outcome a claim keeps, a transaction's steps and the text of a
//! task's sources (the user's messages, the tools' outputs) are encrypted with the operator's
//! key before they reach the database, so that whoever reads the file, a backup or the table
//! reads no secret.
//!
//! XChaCha20-Poly1305 (RustCrypto's `chacha20poly1305`), a random 192-bit nonce per value, and
//! the value's place in the database (table, column, row) as associated data: a sealed value
//! moved to another row, or changed, does not open. Keys rotate: values are sealed with the
//! first key, and opened with whichever key of the set sealed them, named in the value.
//!
//! ```
//! use portcullis_stores::SealKeys;
//!
//! let keys = SealKeys::generate("2026-11");
//! let text = keys.to_text(); // for a file only the workers may read
//! assert_eq!(SealKeys::from_text(&text).unwrap().current_id(), "2026-11");
//! // Rotation: seal with a new key, still open what the old one sealed.
//! let rotated = SealKeys::generate("2027-01").and_previous(keys);
//! assert_eq!(rotated.current_id(), "2027-01");
//! ```

use std::borrow::Cow;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use portcullis_core::encoding::{hex, unhex};
use sha2::Sha256;

/// How a sealed value starts; the key's id and the hex of nonce and ciphertext follow.
const SEALED: &str = "sealed:v1:";
/// How a key starts in its text form; its id and 32 bytes in hex follow.
const KEY: &str = "seal:";

/// The operator's keys that seal what a store keeps: the first seals, every one opens what it
/// sealed. Cheap to clone.
#[derive(Clone)]
pub struct SealKeys {
    keys: Arc<Vec<SealKey>>,
}

struct SealKey {
    id: String,
    secret: [u8; 32],
    cipher: XChaCha20Poly1305,
}

impl SealKeys {
    /// A new key named `id` (letters, digits, `-`, `_` and `.`), from the operating system's
    /// random source.
    pub fn generate(id: &str) -> Self {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).expect("the operating system's random source is available");
        SealKeys::one(id, secret).expect("a generated key is valid")
    }

    /// The key named `id` with the 32-byte `secret`.
    pub fn new(id: &str, secret: [u8; 32]) -> Result<Self, SealError> {
        SealKeys::one(id, secret)
    }

    fn one(id: &str, secret: [u8; 32]) -> Result<Self, SealError> {
        let plain = !id.is_empty()
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !plain {
            return Err(SealError::Invalid(format!(
                "a key's id is letters, digits, `-`, `_` and `.`, not `{id}`"
            )));
        }
        Ok(SealKeys {
            keys: Arc::new(vec![SealKey {
                id: id.to_owned(),
                secret,
                cipher: XChaCha20Poly1305::new(&secret.into()),
            }]),
        })
    }

    /// These keys, then `older` ones, which still open what they sealed: for a rotation, new
    /// values are sealed with the first key.
    pub fn and_previous(self, older: SealKeys) -> Self {
        let mut keys: Vec<SealKey> = self.keys.iter().map(SealKey::copy).collect();
        keys.extend(
            older
                .keys
                .iter()
                .filter(|key| !keys.iter().any(|known| known.id == key.id))
                .map(SealKey::copy)
                .collect::<Vec<_>>(),
        );
        SealKeys {
            keys: Arc::new(keys),
        }
    }

    /// The id of the key that seals.
    pub fn current_id(&self) -> &str {
        &self.keys[0].id
    }

    /// Reads keys written by [`to_text`](Self::to_text): one `seal:<id>:<64 hex digits>` a
    /// line, the sealing key first; blank lines and lines starting with `#` are skipped.
    pub fn from_text(text: &str) -> Result<Self, SealError> {
        let mut keys: Option<SealKeys> = None;
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (id, digits) = line
                .strip_prefix(KEY)
                .and_then(|rest| rest.rsplit_once(':'))
                .ok_or_else(|| SealError::Invalid(format!("a key line reads `{KEY}<id>:<hex>`")))?;
            let secret = unhex(digits)
                .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
                .ok_or_else(|| SealError::Invalid("a key is 32 bytes in hex".to_owned()))?;
            let key = SealKeys::one(id, secret)?;
            keys = Some(match keys {
                None => key,
                Some(earlier) => earlier.and_previous(key),
            });
        }
        keys.ok_or_else(|| SealError::Invalid("no key in the text".to_owned()))
    }

    /// Reads a key file (see [`from_text`](Self::from_text)).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, SealError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|error| SealError::Unreadable(format!("{}: {error}", path.display())))?;
        Self::from_text(&text)
    }

    /// The keys as text, the sealing key first, for a file only the workers may read.
    pub fn to_text(&self) -> String {
        self.keys
            .iter()
            .map(|key| format!("{KEY}{}:{}\n", key.id, hex(&key.secret)))
            .collect()
    }

    /// `plain` sealed for `place` (the table, column and row it is stored in).
    pub(crate) fn seal(&self, place: &str, plain: &str) -> String {
        let key = &self.keys[0];
        let mut nonce = [0u8; 24];
        getrandom::fill(&mut nonce).expect("the operating system's random source is available");
        let payload = Payload {
            msg: plain.as_bytes(),
            aad: place.as_bytes(),
        };
        let sealed = key
            .cipher
            .encrypt(&XNonce::from(nonce), payload)
            .expect("a value within memory seals");
        format!("{SEALED}{}:{}{}", key.id, hex(&nonce), hex(&sealed))
    }

    /// The key-dependent digest of `text`: equal texts have equal digests under one key, and
    /// the digest tells nothing of the text without the key (a short secret cannot be found
    /// by trying every value). With the key named `id`, or the sealing key.
    fn digest_with(&self, key: &SealKey, text: &str) -> String {
        let mut mac = <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(&key.secret)
            .expect("HMAC takes a key of any length");
        mac.update(b"portcullis digest v1\0");
        mac.update(text.as_bytes());
        format!("keyed:{}:{}", key.id, hex(&mac.finalize().into_bytes()))
    }
}

impl SealKey {
    fn copy(&self) -> SealKey {
        SealKey {
            id: self.id.clone(),
            secret: self.secret,
            cipher: XChaCha20Poly1305::new(&self.secret.into()),
        }
    }
}

impl fmt::Debug for SealKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|key| key.id.as_str()).collect();
        f.debug_struct("SealKeys")
            .field("ids", &ids)
            .finish_non_exhaustive()
    }
}

/// Why seal keys could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SealError {
    /// The key file could not be read.
    Unreadable(String),
    /// The text is not a set of seal keys.
    Invalid(String),
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SealError::Unreadable(reason) => write!(f, "the seal keys could not be read: {reason}"),
            SealError::Invalid(reason) => write!(f, "not seal keys: {reason}"),
        }
    }
}

impl std::error::Error for SealError {}

/// A sealed value that this store cannot open: it has no key, or not the one that sealed it.
/// The value stays as it is in the database.
#[derive(Debug)]
pub(crate) struct KeyMissing {
    pub(crate) key_id: String,
}

impl fmt::Display for KeyMissing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the value is sealed with the key `{}`, which this store was not given",
            self.key_id
        )
    }
}

impl std::error::Error for KeyMissing {}

/// A sealed value that does not open under its key: changed, or moved from another row.
#[derive(Debug)]
pub(crate) struct Tampered;

impl fmt::Display for Tampered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sealed value does not open: it was changed, or moved from another row")
    }
}

impl std::error::Error for Tampered {}

/// How a store writes and reads the values it seals: with its keys, or in clear without them.
#[derive(Clone, Default)]
pub(crate) struct Sealing(Option<SealKeys>);

impl Sealing {
    pub(crate) fn with(keys: SealKeys) -> Self {
        Sealing(Some(keys))
    }

    /// `plain` as stored at `place`: sealed when the store has keys.
    pub(crate) fn write(&self, place: &str, plain: String) -> String {
        match &self.0 {
            Some(keys) => keys.seal(place, &plain),
            None => plain,
        }
    }

    /// The value stored at `place` as `stored`, opened if it was sealed. A store with keys
    /// reads only sealed values: a value in clear there was written around it (`Tampered`).
    pub(crate) fn read<'a>(
        &self,
        place: &str,
        stored: &'a str,
    ) -> Result<Cow<'a, str>, Box<dyn std::error::Error + Send + Sync>> {
        let Some(sealed) = stored.strip_prefix(SEALED) else {
            return match self.0 {
                Some(_) => Err(Box::new(Tampered)),
                None => Ok(Cow::Borrowed(stored)),
            };
        };
        let (key_id, digits) = sealed.split_once(':').ok_or(Tampered)?;
        let key = self
            .0
            .as_ref()
            .and_then(|keys| keys.keys.iter().find(|key| key.id == key_id))
            .ok_or_else(|| KeyMissing {
                key_id: key_id.to_owned(),
            })?;
        let bytes = unhex(digits)
            .filter(|bytes| bytes.len() > 24)
            .ok_or(Tampered)?;
        let (nonce, ciphertext) = bytes.split_at(24);
        let nonce = XNonce::try_from(nonce).map_err(|_| Tampered)?;
        let payload = Payload {
            msg: ciphertext,
            aad: place.as_bytes(),
        };
        let plain = key.cipher.decrypt(&nonce, payload).map_err(|_| Tampered)?;
        Ok(Cow::Owned(String::from_utf8(plain).map_err(|_| Tampered)?))
    }

    /// `text` as a store keeps it to compare it later: a keyed digest with keys (see
    /// [`SealKeys::digest_with`]), the text itself without. `stored` is what the store holds
    /// now: a digest of `text` under an older key is kept as it is, so that a rotation
    /// changes no comparison.
    pub(crate) fn comparable<'a>(&self, text: &'a str, stored: Option<&str>) -> Cow<'a, str> {
        let Some(keys) = &self.0 else {
            return Cow::Borrowed(text);
        };
        if let Some(stored) = stored
            && let Some(key) = keys.keys.iter().find(|key| {
                stored
                    .strip_prefix("keyed:")
                    .and_then(|rest| rest.split_once(':'))
                    .is_some_and(|(id, _)| id == key.id)
            })
            && keys.digest_with(key, text) == stored
        {
            return Cow::Owned(stored.to_owned());
        }
        Cow::Owned(keys.digest_with(&keys.keys[0], text))
    }
}

/// Whether `error`, or what caused it, is a sealed value this store has no key for.
pub(crate) fn is_key_missing(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error.is::<KeyMissing>() {
            return true;
        }
        cause = error.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_in_its_place_with_its_key() {
        let keys = SealKeys::generate("k1");
        let sealing = Sealing::with(keys.clone());
        let sealed = sealing.write("claims.state:a", "the pin is 1234".to_owned());
        assert!(!sealed.contains("1234"));
        assert_eq!(
            sealing.read("claims.state:a", &sealed).unwrap(),
            "the pin is 1234"
        );
        // Moved to another row, or changed: it does not open.
        let moved = sealing.read("claims.state:b", &sealed).unwrap_err();
        assert!(moved.is::<Tampered>());
        let mut changed = sealed.clone();
        let last = changed.pop().unwrap();
        changed.push(if last == '0' { '1' } else { '0' });
        assert!(
            sealing
                .read("claims.state:a", &changed)
                .unwrap_err()
                .is::<Tampered>()
        );
        // Without the key, or with another one: it stays sealed, and says which key it needs.
        for other in [Sealing::default(), Sealing::with(SealKeys::generate("k2"))] {
            let missing = other.read("claims.state:a", &sealed).unwrap_err();
            assert!(is_key_missing(missing.as_ref()), "{missing}");
        }
        // What was written in clear reads as it is without keys, and is refused with them.
        assert_eq!(Sealing::default().read("x", "plain").unwrap(), "plain");
        assert!(sealing.read("x", "plain").unwrap_err().is::<Tampered>());
    }

    #[test]
    fn rotated_keys_seal_with_the_new_key_and_open_with_the_old() {
        let old = SealKeys::generate("old");
        let sealed_before = Sealing::with(old.clone()).write("p", "secret".to_owned());
        let rotated = SealKeys::generate("new").and_previous(old);
        let sealing = Sealing::with(SealKeys::from_text(&rotated.to_text()).unwrap());
        assert_eq!(sealing.read("p", &sealed_before).unwrap(), "secret");
        assert!(
            sealing
                .write("p", "secret".to_owned())
                .starts_with("sealed:v1:new:")
        );
    }

    #[test]
    fn digests_hide_short_secrets_and_survive_a_rotation() {
        let old = SealKeys::generate("old");
        let digest = Sealing::with(old.clone())
            .comparable("1234", None)
            .into_owned();
        assert!(!digest.contains("1234"));
        let rotated = Sealing::with(SealKeys::generate("new").and_previous(old));
        assert_eq!(rotated.comparable("1234", Some(&digest)), digest);
        assert_ne!(rotated.comparable("1235", Some(&digest)), digest);
        assert_eq!(Sealing::default().comparable("1234", None), "1234");
    }

    #[test]
    fn key_text_is_checked() {
        for text in [
            "",
            "seal:k",
            "seal:k:00",
            "seal::00",
            "seal:k k:00",
            "key:k:00",
        ] {
            assert!(SealKeys::from_text(text).is_err(), "{text}");
        }
        let keys = SealKeys::generate("a.1");
        assert!(!format!("{keys:?}").contains(&keys.to_text()[10..]));
    }
}
