//! A decision as a store records it: the decision and, where a reviewer's key signed it, the
//! signature, with the bytes that signature covers.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::decision::ApprovalDecision;
use super::passkey::PasskeyAssertion;
use super::reviewer::Reviewer;
use crate::digest::sha256_hex;
use crate::encoding::hex;
use crate::outcome::Ticket;

/// The prefix of a passkey's credential id in a signature's `key`.
pub(super) const PASSKEY: &str = "passkey:";

/// A decision and, where a reviewer's key signed it, the signature. What an approval store
/// records, and what [`Registry::resume`](crate::Registry::resume) takes; an
/// [`ApprovalDecision`] turns into an unsigned one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignedDecision {
    /// The decision.
    #[serde(flatten)]
    pub decision: ApprovalDecision,
    /// The signature over the decision, the ticket and the call; `None`: unsigned, accepted
    /// only by a registry that accepts unsigned decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<DecisionSignature>,
}

impl SignedDecision {
    /// The reviewer the decision names (whom the keyring must allow its key to speak for).
    pub fn reviewer(&self) -> &Reviewer {
        self.decision.reviewer()
    }

    /// The challenge a reviewer's passkey signs to take `decision` on `ticket` at `signed_ms`
    /// (milliseconds since the Unix epoch): the SHA-256 of the bytes a [`DecisionKey`](super::signature::DecisionKey)'s
    /// signature covers. The console asks the browser for an assertion over it.
    pub fn passkey_challenge(
        ticket: &Ticket,
        decision: &ApprovalDecision,
        signed_ms: u64,
    ) -> [u8; 32] {
        Sha256::digest(shown_message(ticket, decision, signed_ms)).into()
    }

    /// `decision`, signed by the passkey `credential_id` (base64url): `signature` (DER, in
    /// base64url) and `assertion` are what the browser returned for the
    /// [`passkey_challenge`](Self::passkey_challenge) of the same decision and `signed_ms`.
    pub fn by_passkey(
        decision: ApprovalDecision,
        credential_id: &str,
        signed_ms: u64,
        signature: String,
        assertion: PasskeyAssertion,
    ) -> Self {
        SignedDecision {
            decision,
            signature: Some(DecisionSignature {
                key: format!("{PASSKEY}{credential_id}"),
                signed_ms,
                signature,
                webauthn: Some(assertion),
            }),
        }
    }
}

impl From<ApprovalDecision> for SignedDecision {
    fn from(decision: ApprovalDecision) -> Self {
        SignedDecision {
            decision,
            signature: None,
        }
    }
}

/// A signature over one decision on one ticket: a [`DecisionKey`](super::signature::DecisionKey)'s (Ed25519), or a reviewer's
/// passkey's (a WebAuthn assertion).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionSignature {
    /// The key that signed: `ed25519:` and 64 hex digits, or `passkey:` and the credential's id
    /// in base64url.
    pub key: String,
    /// When the reviewer signed, in milliseconds since the Unix epoch.
    pub signed_ms: u64,
    /// The signature: 128 hex digits for Ed25519, DER in base64url for a passkey.
    pub signature: String,
    /// What a passkey signed beside the challenge: its authenticator data and client data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webauthn: Option<PasskeyAssertion>,
}

/// The bytes a reviewer signs for `decision` on `ticket` as it was shown to them (its call
/// digest the one the ticket carries; the worker recomputes it from the stored call).
pub(super) fn shown_message(
    ticket: &Ticket,
    decision: &ApprovalDecision,
    signed_ms: u64,
) -> Vec<u8> {
    message(
        &ticket.id,
        &ticket.call_digest,
        &ticket.contract_hash,
        decision,
        signed_ms,
    )
}

/// The bytes a decision's signature covers: each field length-prefixed, so that no two
/// decisions write the same bytes.
pub(super) fn message(
    ticket_id: &str,
    call_digest: &str,
    contract_hash: &str,
    decision: &ApprovalDecision,
    signed_ms: u64,
) -> Vec<u8> {
    let (kind, detail) = match decision {
        ApprovalDecision::Approve { .. } => ("approve", String::new()),
        ApprovalDecision::Edit { arguments, .. } => ("edit", value_digest(arguments)),
        ApprovalDecision::Reject { message, .. } => ("reject", sha256_hex(message.as_bytes())),
    };
    let mut bytes = b"portcullis decision v1".to_vec();
    let signed_ms = signed_ms.to_string();
    for field in [
        ticket_id,
        call_digest,
        contract_hash,
        kind,
        &detail,
        decision.reviewer().id(),
        &signed_ms,
    ] {
        bytes.extend_from_slice(&(field.len() as u64).to_be_bytes());
        bytes.extend_from_slice(field.as_bytes());
    }
    bytes
}

fn value_digest(value: &Value) -> String {
    let mut hasher = Sha256::new();
    serde_json::to_writer(HashWriter(&mut hasher), value).expect("a JSON value serializes");
    hex(&hasher.finalize())
}

/// Feeds what serde writes to a hash, without a copy of the text.
pub(super) struct HashWriter<'a>(pub(super) &'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
