//! Signed decisions: a decision counts only if a reviewer's key signed it, and only as the
//! keyring says that key may decide.
//!
//! A decision row in a durable store is data anyone with write access to the database can
//! write. So the row is not the authority: the worker that runs a decided call checks its
//! signature against the [`Keyring`] the operator configured, takes the reviewer's roles and
//! tenant from the keyring (never from the row), and reads who may decide the ticket from the
//! tool's contract and its own settings (never from the row). The signature covers the ticket,
//! the digest of the whole call as it waits ([`Ticket::call_digest`]: the caller's context,
//! the arguments as sent and as the tool would receive them, every field of the ticket), the
//! contract's hash, the decision with the edited arguments or the rejection's message, the
//! reviewer and the time: a row changed after it was signed, a signature moved to another
//! ticket, or a key the keyring does not hold for that reviewer decides nothing.
//!
//! ```
//! use portcullis_core::{ApprovalDecision, DecisionKey, Keyring, Reviewer};
//!
//! let rita = DecisionKey::generate();
//! let keyring = Keyring::new().reviewer(
//!     Reviewer::new("rita").with_roles(["finance"]),
//!     rita.public_key(),
//! );
//! // The keyring as a file for the workers (`Keyring::from_json` reads it back).
//! let text = keyring.to_json();
//! assert_eq!(Keyring::from_json(&text).unwrap(), keyring);
//! # let _ = ApprovalDecision::Approve { reviewer: Reviewer::new("rita") };
//! ```

use std::fmt;
use std::path::Path;

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::decision::ApprovalDecision;
use super::key_error::KeyError;
use super::passkey::PasskeyCredential;
use super::reviewer::Reviewer;
use super::signed::{
    DecisionSignature, HashWriter, PASSKEY, SignedDecision, message, shown_message,
};
use super::store::PendingCall;
use crate::encoding::{hex, unhex};
use crate::outcome::Ticket;
use crate::rejection::{Rejection, RejectionCode};
use crate::time::now_ms;

/// The prefix of a key written as text.
const ED25519: &str = "ed25519:";
/// A key that signs decisions: a reviewer's, or a service's that confirms calls for their
/// callers (the MCP server's). Keep it secret; give its [`public_key`](Self::public_key) to the
/// operator who writes the [`Keyring`].
#[derive(Clone)]
pub struct DecisionKey {
    key: SigningKey,
}

impl DecisionKey {
    /// A new key from the operating system's random source.
    pub fn generate() -> Self {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).expect("the operating system's random source is available");
        DecisionKey {
            key: SigningKey::from_bytes(&secret),
        }
    }

    /// Reads a key written by [`to_text`](Self::to_text): `ed25519:` and the 32-byte secret
    /// in hex.
    pub fn from_text(text: &str) -> Result<Self, KeyError> {
        let secret = key_bytes(text.trim())?;
        Ok(DecisionKey {
            key: SigningKey::from_bytes(&secret),
        })
    }

    /// Reads a key file (see [`from_text`](Self::from_text)).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, KeyError> {
        Self::from_text(&read(path.as_ref())?)
    }

    /// The secret key as text, for a file only its owner may read.
    pub fn to_text(&self) -> String {
        format!("{ED25519}{}", hex(self.key.as_bytes()))
    }

    /// The public key the keyring holds for this key.
    pub fn public_key(&self) -> DecisionPublicKey {
        DecisionPublicKey(self.key.verifying_key())
    }

    /// Signs `decision` on `ticket`, now. The ticket is the one the reviewer was shown; its
    /// [`call_digest`](Ticket::call_digest) binds the signature to the call as it waits.
    pub fn sign(&self, ticket: &Ticket, decision: ApprovalDecision) -> SignedDecision {
        let signed_ms = now_ms();
        let signature = self.key.sign(&shown_message(ticket, &decision, signed_ms));
        SignedDecision {
            decision,
            signature: Some(DecisionSignature {
                key: self.public_key().to_string(),
                signed_ms,
                signature: hex(&signature.to_bytes()),
                webauthn: None,
            }),
        }
    }
}

impl fmt::Debug for DecisionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecisionKey")
            .field("public_key", &self.public_key().to_string())
            .finish_non_exhaustive()
    }
}

/// The public half of a [`DecisionKey`], written `ed25519:` and 64 hex digits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DecisionPublicKey(VerifyingKey);

impl DecisionPublicKey {
    /// Reads `ed25519:` and 64 hex digits.
    pub fn from_text(text: &str) -> Result<Self, KeyError> {
        VerifyingKey::from_bytes(&key_bytes(text.trim())?)
            .map(DecisionPublicKey)
            .map_err(|_| KeyError::Invalid("not a valid Ed25519 public key".to_owned()))
    }
}

impl fmt::Display for DecisionPublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{ED25519}{}", hex(self.0.as_bytes()))
    }
}

impl fmt::Debug for DecisionPublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for DecisionPublicKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DecisionPublicKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        DecisionPublicKey::from_text(&text).map_err(serde::de::Error::custom)
    }
}

fn read(path: &Path) -> Result<String, KeyError> {
    std::fs::read_to_string(path)
        .map_err(|error| KeyError::Unreadable(format!("{}: {error}", path.display())))
}

/// The 32 bytes of `ed25519:` and 64 hex digits.
fn key_bytes(text: &str) -> Result<[u8; 32], KeyError> {
    let digits = text
        .strip_prefix(ED25519)
        .ok_or_else(|| KeyError::Invalid(format!("a key starts with `{ED25519}`")))?;
    let bytes = unhex(digits)
        .ok_or_else(|| KeyError::Invalid("a key is written in hex digits".to_owned()))?;
    bytes
        .try_into()
        .map_err(|_| KeyError::Invalid("an Ed25519 key has 32 bytes".to_owned()))
}

/// The reviewers whose signed decisions count, with the roles and tenant each decides with,
/// and the keys that confirm calls for their own callers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Keyring {
    #[serde(default)]
    reviewers: Vec<KeyringReviewer>,
    /// Keys of services that sign a caller's confirmation of its own call (the MCP server's):
    /// they decide only as the call's actor, only on tickets of tools the caller confirms.
    #[serde(default)]
    confirmations: Vec<DecisionPublicKey>,
    /// Reviewers' passkeys, enrolled through the console.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    passkeys: Vec<KeyringPasskey>,
}

/// A reviewer's passkey as the keyring holds it: who, with which roles and tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct KeyringPasskey {
    #[serde(flatten)]
    reviewer: Reviewer,
    passkey: PasskeyCredential,
}

/// A reviewer as the keyring holds it: who, with which roles and tenant, by which key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct KeyringReviewer {
    #[serde(flatten)]
    reviewer: Reviewer,
    public_key: DecisionPublicKey,
}

impl Keyring {
    /// A keyring that allows nobody.
    pub fn new() -> Self {
        Keyring::default()
    }

    /// Allows `key` to sign as `reviewer`, who then decides with the roles and tenant given
    /// here. A reviewer may have several keys (one per device, or an old and a new one while
    /// keys are rotated).
    pub fn reviewer(mut self, reviewer: Reviewer, key: DecisionPublicKey) -> Self {
        self.reviewers.push(KeyringReviewer {
            reviewer,
            public_key: key,
        });
        self
    }

    /// Allows the passkey `credential` to sign as `reviewer`, who then decides with the roles
    /// and tenant given here.
    pub fn passkey(mut self, reviewer: Reviewer, credential: PasskeyCredential) -> Self {
        self.passkeys.push(KeyringPasskey {
            reviewer,
            passkey: credential,
        });
        self
    }

    /// The reviewers the keyring knows, each with its roles and tenant, once each (by the
    /// first entry that names it).
    pub fn reviewers(&self) -> Vec<&Reviewer> {
        let mut reviewers: Vec<&Reviewer> = Vec::new();
        let named = self
            .reviewers
            .iter()
            .map(|entry| &entry.reviewer)
            .chain(self.passkeys.iter().map(|entry| &entry.reviewer));
        for reviewer in named {
            if !reviewers.iter().any(|known| known.id() == reviewer.id()) {
                reviewers.push(reviewer);
            }
        }
        reviewers
    }

    /// The passkeys the keyring holds for the reviewer `id`, each with the reviewer as that
    /// entry gives it.
    pub fn passkeys_of<'a>(
        &'a self,
        id: &'a str,
    ) -> impl Iterator<Item = (&'a Reviewer, &'a PasskeyCredential)> + 'a {
        self.passkeys
            .iter()
            .filter(move |entry| entry.reviewer.id() == id)
            .map(|entry| (&entry.reviewer, &entry.passkey))
    }

    /// Allows `key` to sign a caller's confirmation of its own call: as the call's actor, on
    /// tickets of tools whose contract lets the caller confirm, and nothing else.
    pub fn caller_confirmations(mut self, key: DecisionPublicKey) -> Self {
        self.confirmations.push(key);
        self
    }

    /// Reads a keyring written by [`to_json`](Self::to_json):
    /// `{"reviewers": [{"id", "roles", "tenant", "public_key"}], "confirmations": [key]}`.
    pub fn from_json(text: &str) -> Result<Self, KeyError> {
        serde_json::from_str(text).map_err(|error| KeyError::Invalid(error.to_string()))
    }

    /// Reads a keyring file (see [`from_json`](Self::from_json)).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, KeyError> {
        Self::from_json(&read(path.as_ref())?)
    }

    /// The keyring as pretty JSON, for a file.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a keyring serializes")
    }

    /// The reviewer `decision` on `pending` counts as by this keyring, with the roles and
    /// tenant the keyring gives them: the check a worker makes of a decision before it runs
    /// the call, against the ticket as stored. A process that records decisions (the console)
    /// makes it to refuse at once what no worker would run; the worker makes it again.
    pub fn check(
        &self,
        pending: &PendingCall,
        decision: &SignedDecision,
    ) -> Result<Reviewer, Rejection> {
        let (reviewer, _) = self.verify(pending, &pending.ticket, decision)?;
        reviewer.may_decide(&pending.ticket)?;
        Ok(reviewer)
    }

    /// The reviewer `decision` counts as, if its signature verifies against a key this keyring
    /// allows for its reviewer on `pending` (`ticket`: who may decide, as the registry reads it
    /// now), and a description of the key for the audit.
    pub(crate) fn verify(
        &self,
        pending: &PendingCall,
        ticket: &Ticket,
        decision: &SignedDecision,
    ) -> Result<(Reviewer, String), Rejection> {
        let Some(signature) = &decision.signature else {
            return Err(Rejection::new(
                RejectionCode::DecisionUnsigned,
                "the decision carries no reviewer's signature, and this registry counts only signed decisions",
            )
            .with_hint("decide with a reviewer's key (portcullis approvals ... --key-file)")
            .with_retryable(false));
        };
        let invalid = |why: &str| {
            Err(Rejection::new(
                RejectionCode::DecisionSignatureInvalid,
                format!("the decision's signature does not count: {why}"),
            )
            .with_retryable(false))
        };
        let named = decision.reviewer();
        let message = message(
            &pending.ticket.id,
            &pending.digest(),
            &ticket.contract_hash,
            &decision.decision,
            signature.signed_ms,
        );
        if let Some(credential_id) = signature.key.strip_prefix(PASSKEY) {
            let Some(entry) = self.passkeys.iter().find(|entry| {
                entry.passkey.credential_id == credential_id && entry.reviewer.id() == named.id()
            }) else {
                return invalid(&format!(
                    "the keyring holds no passkey {credential_id} for `{}`",
                    named.id()
                ));
            };
            let Some(assertion) = &signature.webauthn else {
                return invalid("a passkey's signature comes with the data the passkey signed");
            };
            if let Err(why) =
                entry
                    .passkey
                    .verify(&Sha256::digest(&message), assertion, &signature.signature)
            {
                return invalid(&why);
            }
            return Ok((
                entry.reviewer.clone(),
                format!("signed with passkey {credential_id}"),
            ));
        }
        let Ok(key) = DecisionPublicKey::from_text(&signature.key) else {
            return invalid("its key is not an Ed25519 public key or a passkey");
        };
        let reviewer = if let Some(entry) = self
            .reviewers
            .iter()
            .find(|entry| entry.public_key == key && entry.reviewer.id() == named.id())
        {
            entry.reviewer.clone()
        } else if self.confirmations.contains(&key) {
            if !ticket.caller_confirms || named.id() != pending.ctx.actor() {
                return invalid(
                    "a confirmation key decides only as the caller, on a tool the caller confirms",
                );
            }
            let caller = Reviewer::new(pending.ctx.actor());
            match pending.ctx.tenant() {
                Some(tenant) => caller.with_tenant(tenant),
                None => caller,
            }
        } else {
            return invalid(&format!(
                "the keyring holds no key {} for `{}`",
                signature.key,
                named.id()
            ));
        };
        let Ok(bytes) = unhex(&signature.signature).unwrap_or_default().try_into() else {
            return invalid("it is not 64 bytes in hex");
        };
        if key
            .0
            .verify(&message, &Signature::from_bytes(&bytes))
            .is_err()
        {
            return invalid(
                "it was made over another ticket, another call or another decision, or the call changed since",
            );
        }
        Ok((reviewer, format!("signed with {}", signature.key)))
    }
}

impl PendingCall {
    /// The SHA-256 of the call as it waits: its ticket (but the digest itself), the caller's
    /// context, the arguments as sent and as the tool would receive them. A reviewer's
    /// signature covers it; a change to any of them in the store changes it.
    pub fn digest(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(b"portcullis call v1");
        let ticket = Ticket {
            call_digest: String::new(),
            ..self.ticket.clone()
        };
        let call = (&ticket, &self.ctx, &self.arguments, &self.canonical);
        serde_json::to_writer(HashWriter(&mut hasher), &call).expect("a pending call serializes");
        hex(&hasher.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn keys_read_back_and_refuse_other_text() {
        let key = DecisionKey::generate();
        let again = DecisionKey::from_text(&key.to_text()).unwrap();
        assert_eq!(again.public_key(), key.public_key());
        let public = DecisionPublicKey::from_text(&key.public_key().to_string()).unwrap();
        assert_eq!(public, key.public_key());
        for text in ["", "ed25519:", "ed25519:zz", "rsa:00", "ed25519:0011"] {
            assert!(DecisionKey::from_text(text).is_err(), "{text}");
            assert!(DecisionPublicKey::from_text(text).is_err(), "{text}");
        }
        assert!(!format!("{key:?}").contains(&key.to_text()));
    }

    #[test]
    fn every_field_of_a_decision_changes_what_is_signed() {
        let rita = Reviewer::new("rita");
        let approve = ApprovalDecision::Approve {
            reviewer: rita.clone(),
        };
        let base = message("t", "d", "c", &approve, 1);
        let others = [
            message("t2", "d", "c", &approve, 1),
            message("t", "d2", "c", &approve, 1),
            message("t", "d", "c2", &approve, 1),
            message("t", "d", "c", &approve, 2),
            message(
                "t",
                "d",
                "c",
                &ApprovalDecision::Approve {
                    reviewer: Reviewer::new("ritb"),
                },
                1,
            ),
            message(
                "t",
                "d",
                "c",
                &ApprovalDecision::Reject {
                    reviewer: rita.clone(),
                    message: String::new(),
                },
                1,
            ),
            message(
                "t",
                "d",
                "c",
                &ApprovalDecision::Edit {
                    reviewer: rita,
                    arguments: Value::Null,
                },
                1,
            ),
            // Fields run into each other only without their lengths.
            message("td", "", "c", &approve, 1),
        ];
        for other in others {
            assert_ne!(base, other);
        }
    }
}
