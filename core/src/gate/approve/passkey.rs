//! Passkeys: a decision signed in a browser. The reviewer's passkey makes a WebAuthn assertion
//! whose challenge is the SHA-256 of exactly the bytes an Ed25519 decision signature covers
//! (the ticket, the call as it waits, the contract's hash, the decision, the reviewer, the
//! time), so that the click binds the passkey to one decision on one call.
//!
//! The worker verifies the assertion itself, as a relying party does (WebAuthn, "verifying an
//! authentication assertion"), against the credential the [`Keyring`](super::signature::Keyring)
//! holds, never against anything the console's server wrote: the credential's P-256 key signed
//! the authenticator data and the SHA-256 of the client data; the client data is an assertion
//! (`webauthn.get`), made on the origin the passkey was enrolled on, not in a frame of another
//! origin, over the decision's digest; the authenticator data names the relying party (the
//! SHA-256 of its id), says that the reviewer was present and verified (a PIN or a biometric),
//! and counts past the count the keyring holds. A console whose server is taken over can write
//! rows, but no row it writes runs without the reviewer's passkey over that very decision.
//!
//! ```
//! use portcullis_core::{Keyring, PasskeyCredential, Reviewer};
//!
//! let credential: PasskeyCredential = serde_json::from_value(serde_json::json!({
//!     "credential_id": "AAECAwQFBgcICQoLDA0ODw",
//!     "public_key": "es256:046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5",
//!     "rp_id": "localhost",
//!     "origin": "https://localhost:8443",
//! }))
//! .unwrap();
//! let keyring = Keyring::new().passkey(Reviewer::new("rita").with_roles(["finance"]), credential);
//! assert_eq!(Keyring::from_json(&keyring.to_json()).unwrap(), keyring);
//! ```

use std::fmt;

use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{DerSignature, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::key_error::KeyError;
use crate::encoding::{base64url, hex, unbase64url, unhex};

/// The prefix of a passkey's public key written as text.
const ES256: &str = "es256:";

/// The authenticator data's flag: the user was present (touched the authenticator).
const USER_PRESENT: u8 = 0x01;
/// The authenticator data's flag: the authenticator verified the user (a PIN, a biometric).
const USER_VERIFIED: u8 = 0x04;

/// A reviewer's passkey as the keyring holds it: enrolled once through the console, then
/// confirmed by the operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasskeyCredential {
    /// The credential's id, in base64url without padding, as WebAuthn writes it.
    pub credential_id: String,
    /// The credential's public key.
    pub public_key: PasskeyPublicKey,
    /// The relying party the passkey was made for: the console's host name.
    pub rp_id: String,
    /// The origin the passkey signs on: the console's `https://host:port`.
    pub origin: String,
    /// The authenticator's signature count when the passkey was enrolled; an assertion must
    /// count past it (an authenticator that counts nothing reports 0 throughout).
    #[serde(default)]
    pub sign_count: u32,
}

/// A passkey's ES256 public key (ECDSA over P-256), written `es256:` and the uncompressed SEC1
/// point (65 bytes) in hex.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PasskeyPublicKey(VerifyingKey);

impl PasskeyPublicKey {
    /// Reads `es256:` and the SEC1 point in hex.
    pub fn from_text(text: &str) -> Result<Self, KeyError> {
        let digits = text.trim().strip_prefix(ES256).ok_or_else(|| {
            KeyError::Invalid(format!("a passkey's public key starts with `{ES256}`"))
        })?;
        let point = unhex(digits)
            .ok_or_else(|| KeyError::Invalid("a key is written in hex digits".to_owned()))?;
        Self::from_sec1(&point)
    }

    /// The key from its SEC1 point (as a passkey's COSE key gives it: `04`, x, y).
    pub fn from_sec1(point: &[u8]) -> Result<Self, KeyError> {
        VerifyingKey::from_sec1_bytes(point)
            .map(PasskeyPublicKey)
            .map_err(|_| KeyError::Invalid("not a P-256 public key".to_owned()))
    }
}

impl fmt::Display for PasskeyPublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let point = self.0.to_sec1_point(false);
        write!(f, "{ES256}{}", hex(point.as_bytes()))
    }
}

impl fmt::Debug for PasskeyPublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for PasskeyPublicKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PasskeyPublicKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        PasskeyPublicKey::from_text(&text).map_err(serde::de::Error::custom)
    }
}

/// What a browser returns from `navigator.credentials.get` beside the signature: the two
/// pieces of data the passkey signed, each in base64url as WebAuthn's JSON writes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasskeyAssertion {
    /// The authenticator data.
    pub authenticator_data: String,
    /// The client data, the JSON text the browser wrote.
    pub client_data_json: String,
}

/// The members of the client data a relying party reads.
#[derive(Deserialize)]
struct ClientData {
    #[serde(rename = "type")]
    kind: String,
    challenge: String,
    origin: String,
    #[serde(rename = "crossOrigin", default)]
    cross_origin: Option<bool>,
    #[serde(rename = "topOrigin", default)]
    top_origin: Option<String>,
}

impl PasskeyCredential {
    /// Verifies that this passkey made `assertion`, with `signature` (DER, in base64url), over
    /// `challenge`, as a relying party does (see the module's page); otherwise says why not.
    /// The console signs reviewers in with it, over a challenge of its own.
    pub fn verify(
        &self,
        challenge: &[u8],
        assertion: &PasskeyAssertion,
        signature: &str,
    ) -> Result<(), String> {
        let (Some(authenticator_data), Some(client_data_json), Some(signature)) = (
            unbase64url(&assertion.authenticator_data),
            unbase64url(&assertion.client_data_json),
            unbase64url(signature),
        ) else {
            return Err("its assertion is not written in base64url".to_owned());
        };
        let Ok(signature) = DerSignature::from_bytes(&signature) else {
            return Err("its signature is not an ECDSA signature in DER".to_owned());
        };
        let mut signed = authenticator_data.clone();
        signed.extend_from_slice(&Sha256::digest(&client_data_json));
        if self.public_key.0.verify(&signed, &signature).is_err() {
            return Err("the passkey the keyring holds did not make it".to_owned());
        }
        let Ok(client) = serde_json::from_slice::<ClientData>(&client_data_json) else {
            return Err("its client data is not WebAuthn's".to_owned());
        };
        if client.kind != "webauthn.get" {
            return Err(format!(
                "its client data is a `{}`, not an assertion (`webauthn.get`)",
                client.kind
            ));
        }
        if client.challenge != base64url(challenge) {
            return Err(
                "it was made over another ticket, another call or another decision, or the call changed since"
                    .to_owned(),
            );
        }
        if client.origin != self.origin {
            return Err(format!(
                "it was made on {}, and the passkey signs decisions on {} only",
                client.origin, self.origin
            ));
        }
        if client.cross_origin == Some(true) || client.top_origin.is_some() {
            return Err("it was made in a frame of another origin".to_owned());
        }
        self.check_authenticator_data(&authenticator_data)
    }

    fn check_authenticator_data(&self, data: &[u8]) -> Result<(), String> {
        let (Some(rp_id_hash), Some(&flags), Some(count)) =
            (data.get(..32), data.get(32), data.get(33..37))
        else {
            return Err("its authenticator data is too short".to_owned());
        };
        if rp_id_hash != Sha256::digest(self.rp_id.as_bytes()).as_slice() {
            return Err(format!(
                "it was made for another relying party than {}",
                self.rp_id
            ));
        }
        if flags & USER_PRESENT == 0 {
            return Err("the authenticator did not see the reviewer present".to_owned());
        }
        if flags & USER_VERIFIED == 0 {
            return Err(
                "the authenticator did not verify the reviewer (a PIN or a biometric)".to_owned(),
            );
        }
        let count = u32::from_be_bytes(count.try_into().expect("four bytes"));
        if (count != 0 || self.sign_count != 0) && count <= self.sign_count {
            return Err(format!(
                "its signature count {count} is not past the keyring's {}: the passkey may have been copied",
                self.sign_count
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generator of P-256, a point on the curve.
    const POINT: &str = "046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5";

    #[test]
    fn public_keys_read_back_and_refuse_other_text() {
        let text = format!("{ES256}{POINT}");
        let key = PasskeyPublicKey::from_text(&text).unwrap();
        assert_eq!(key.to_string(), text);
        let off_curve = format!("{ES256}{}00", &POINT[..POINT.len() - 2]);
        for other in [
            POINT.to_owned(),
            format!("ed25519:{POINT}"),
            format!("{ES256}zz"),
            format!("{ES256}04"),
            off_curve,
        ] {
            assert!(PasskeyPublicKey::from_text(&other).is_err(), "{other}");
        }
    }

    #[test]
    fn short_or_unreadable_assertions_are_refused_with_a_reason() {
        let credential = PasskeyCredential {
            credential_id: "AA".to_owned(),
            public_key: PasskeyPublicKey::from_text(&format!("{ES256}{POINT}")).unwrap(),
            rp_id: "localhost".to_owned(),
            origin: "https://localhost".to_owned(),
            sign_count: 0,
        };
        let assertion = PasskeyAssertion {
            authenticator_data: "not base64url!".to_owned(),
            client_data_json: String::new(),
        };
        assert_eq!(
            credential.verify(&[0; 32], &assertion, "").unwrap_err(),
            "its assertion is not written in base64url"
        );
        let assertion = PasskeyAssertion {
            authenticator_data: String::new(),
            client_data_json: String::new(),
        };
        assert_eq!(
            credential.verify(&[0; 32], &assertion, "AA").unwrap_err(),
            "its signature is not an ECDSA signature in DER"
        );
        assert_eq!(
            credential.check_authenticator_data(&[0; 36]).unwrap_err(),
            "its authenticator data is too short"
        );
    }
}
