//! Digests, as portcullis writes them: SHA-256 in lowercase hex.

use sha2::{Digest, Sha256};

use crate::encoding::hex;

/// The SHA-256 of `bytes`, in lowercase hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}
