//! Bytes as text, as portcullis writes digests, keys, signatures and ids: lowercase hex.
//!
//! ```
//! use portcullis_core::encoding::{hex, unhex};
//!
//! assert_eq!(hex(&[0x00, 0xab]), "00ab");
//! assert_eq!(unhex("00ab"), Some(vec![0x00, 0xab]));
//! assert_eq!(unhex("0g"), None);
//! ```
//!
//! WebAuthn's data (a passkey's assertion) is base64url, as browsers write it.

/// `bytes` in lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digits = bytes
        .iter()
        .flat_map(|byte| {
            [
                DIGITS[usize::from(byte >> 4)],
                DIGITS[usize::from(byte & 0xf)],
            ]
        })
        .collect();
    String::from_utf8(digits).expect("hex digits are ASCII")
}

/// The bytes that `digits` (hex, either case) write; `None` for anything else.
pub fn unhex(digits: &str) -> Option<Vec<u8>> {
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    (0..digits.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(digits.get(at..at + 2)?, 16).ok())
        .collect()
}

/// The 32 bytes a hash in lowercase hex (64 digits), as portcullis writes hashes, writes.
pub(crate) fn hash_bytes(hash: &str) -> Option<[u8; 32]> {
    /// Each byte's value as a lowercase hex digit; 16 for any other byte.
    const DIGITS: [u8; 256] = {
        let mut digits = [16u8; 256];
        let mut byte = 0;
        while byte < 256 {
            digits[byte] = match byte as u8 {
                digit @ b'0'..=b'9' => digit - b'0',
                digit @ b'a'..=b'f' => digit - b'a' + 10,
                _ => 16,
            };
            byte += 1;
        }
        digits
    };
    let digits: &[u8; 64] = hash.as_bytes().try_into().ok()?;
    let mut bytes = [0u8; 32];
    let mut invalid = 0;
    for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
        let (high, low) = (DIGITS[usize::from(pair[0])], DIGITS[usize::from(pair[1])]);
        invalid |= high | low;
        *byte = high << 4 | (low & 0xf);
    }
    (invalid < 16).then_some(bytes)
}

/// `bytes` in base64url without padding, as WebAuthn writes binary data.
pub fn base64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The bytes that `text` (base64url, without padding) writes; `None` for anything else.
pub fn unbase64url(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()
}

/// A fresh id, `{prefix}_` and 128 bits from the operating system's random source.
pub fn random_id(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source is available");
    format!("{prefix}_{}", hex(&bytes))
}
