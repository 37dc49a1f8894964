//! Invitations to review: the operator invites a reviewer with the roles the keyring will give
//! them (`portcullis reviewers invite rita --role finance`); the reviewer enrols a passkey
//! through the console with the invitation's one-time token; the operator confirms the
//! enrolment into the keyring (`portcullis reviewers confirm`). The store keeps the token's
//! SHA-256 only, and an enrolment is data for the operator to confirm, never a grant: the
//! workers read reviewers from the keyring file, which neither the console nor the store writes.

use std::io;

use portcullis_core::encoding::{hex, random_id};
use portcullis_core::{PasskeyCredential, Reviewer};
use sha2::{Digest, Sha256};

use crate::values::{as_sql, from_sql};

/// An invitation, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invite {
    /// How the operator names it: the first 16 hex digits of its token's SHA-256.
    pub id: String,
    /// The reviewer invited, with the roles and tenant the keyring will give them.
    pub reviewer: Reviewer,
    /// When it was made, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When its token stops enrolling anyone.
    pub expires_ms: u64,
    /// The passkey enrolled with it, and when; `None` while it waits.
    pub enrolment: Option<Enrolment>,
}

/// A passkey enrolled with an invitation, for the operator to confirm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enrolment {
    /// The passkey, as the keyring will hold it.
    pub credential: PasskeyCredential,
    /// When it was enrolled.
    pub enrolled_ms: u64,
}

impl Enrolment {
    /// The passkey's fingerprint, which the console shows the reviewer and the command line
    /// shows the operator, to compare before the operator confirms: the first 128 bits of the
    /// SHA-256 of its public key, in hex, in groups of four digits.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.credential)
    }
}

/// The fingerprint of `credential` (see [`Enrolment::fingerprint`]).
pub fn fingerprint(credential: &PasskeyCredential) -> String {
    let digest = hex(&Sha256::digest(
        credential.public_key.to_string().as_bytes(),
    ));
    (0..8)
        .map(|group| &digest[group * 4..group * 4 + 4])
        .collect::<Vec<_>>()
        .join("-")
}

/// What became of a passkey offered with an invitation's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enrolled {
    /// The passkey is enrolled, for the operator to confirm.
    Enrolled,
    /// No invitation has this token (or it was confirmed or withdrawn).
    Unknown,
    /// The invitation expired.
    Expired,
    /// A passkey was enrolled with it already: a token enrols once.
    Used,
}

/// A new token, and the SHA-256 (hex) the store keeps of it.
pub(crate) fn new_token() -> (String, String) {
    let token = random_id("invite");
    let hash = token_hash(&token);
    (token, hash)
}

/// The SHA-256 of `token`, as the store keys invitations by it.
pub(crate) fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// An invitation's row: token hash, reviewer (JSON), created, expires, credential (JSON),
/// enrolled.
pub(crate) type InviteRow = (String, String, i64, i64, Option<String>, Option<i64>);

pub(crate) const INVITE_COLUMNS: &str =
    "token_hash, reviewer, created_ms, expires_ms, credential, enrolled_ms";

/// The columns of a new invitation of `reviewer`.
pub(crate) fn new_row(
    hash: String,
    reviewer: &Reviewer,
    created_ms: u64,
    expires_ms: u64,
) -> InviteRow {
    let reviewer = serde_json::to_string(reviewer).expect("a reviewer serializes");
    (
        hash,
        reviewer,
        as_sql(created_ms),
        as_sql(expires_ms),
        None,
        None,
    )
}

pub(crate) fn credential_text(credential: &PasskeyCredential) -> String {
    serde_json::to_string(credential).expect("a credential serializes")
}

pub(crate) fn read_invite(row: InviteRow) -> io::Result<Invite> {
    let (hash, reviewer, created_ms, expires_ms, credential, enrolled_ms) = row;
    let enrolment = match (credential, enrolled_ms) {
        (Some(credential), Some(enrolled_ms)) => Some(Enrolment {
            credential: serde_json::from_str(&credential).map_err(io::Error::other)?,
            enrolled_ms: from_sql(enrolled_ms),
        }),
        _ => None,
    };
    Ok(Invite {
        id: hash[..16.min(hash.len())].to_owned(),
        reviewer: serde_json::from_str(&reviewer).map_err(io::Error::other)?,
        created_ms: from_sql(created_ms),
        expires_ms: from_sql(expires_ms),
        enrolment,
    })
}

/// Why an offered passkey was not enrolled, read from the invitation's row after the
/// conditional update changed nothing.
pub(crate) fn why_not_enrolled(row: Option<InviteRow>, now_ms: u64) -> Enrolled {
    match row {
        None => Enrolled::Unknown,
        Some((.., Some(_), Some(_))) => Enrolled::Used,
        Some((_, _, _, expires_ms, ..)) if from_sql(expires_ms) <= now_ms => Enrolled::Expired,
        Some(_) => Enrolled::Used,
    }
}

/// Reports a database failure.
pub(crate) fn failed(operation: &str, error: impl std::fmt::Display) -> io::Error {
    tracing::error!(%error, "the store could not {operation}");
    io::Error::other(format!("the store could not {operation}: {error}"))
}
