//! The operator's key of the audit chain.

use std::fmt;
use std::sync::Arc;

use hmac::{Hmac, KeyInit};
use sha2::Sha256;

/// The operator's secret that keys the audit chain (HMAC-SHA-256). Keep it out of the log's
/// reach: whoever holds it can rewrite the log undetected.
///
/// ```
/// use portcullis_core::audit::AuditKey;
///
/// assert!(AuditKey::new(b"too short".to_vec()).is_err());
/// let key = AuditKey::new([7u8; 32].to_vec()).unwrap();
/// assert_eq!(format!("{key:?}"), "AuditKey(..)");
/// ```
#[derive(Clone)]
pub struct AuditKey(Arc<KeyState>);

/// A key and the HMAC state it sets up, made once: setting a key up costs as much as hashing
/// a 64-byte block twice, and every link starts from it.
struct KeyState {
    bytes: Box<[u8]>,
    keyed: Hmac<Sha256>,
}

impl AuditKey {
    /// The shortest key accepted, in bytes.
    pub const MIN_BYTES: usize = 32;

    /// A key of at least [`AuditKey::MIN_BYTES`] bytes, or why not.
    pub fn new(bytes: Vec<u8>) -> Result<Self, String> {
        if bytes.len() < Self::MIN_BYTES {
            return Err(format!(
                "an audit key needs at least {} bytes, not {}",
                Self::MIN_BYTES,
                bytes.len()
            ));
        }
        let keyed = Hmac::<Sha256>::new_from_slice(&bytes).expect("HMAC takes a key of any length");
        Ok(AuditKey(Arc::new(KeyState {
            bytes: bytes.into(),
            keyed,
        })))
    }

    /// A MAC under the key, ready for its message.
    pub(super) fn keyed(&self) -> Hmac<Sha256> {
        self.0.keyed.clone()
    }
}

impl PartialEq for AuditKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.bytes == other.0.bytes
    }
}

impl Eq for AuditKey {}

impl fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuditKey(..)")
    }
}
