//! A software passkey, for tests of what a reviewer's passkey signs: an authenticator held in
//! the test's memory that makes WebAuthn assertions as a browser returns them, each part of
//! what it says open to change, so that a test can make the assertion a relying party must
//! refuse (another origin, no user verification, a count that did not advance, another
//! decision) and check that nothing runs.
//!
//! ```
//! use portcullis_core::{Keyring, Reviewer};
//! use portcullis_testing::passkey::{Claims, SoftwarePasskey};
//!
//! let rita = SoftwarePasskey::new("localhost", "http://localhost:8080");
//! let keyring = Keyring::new().passkey(Reviewer::new("rita").with_roles(["finance"]), rita.credential());
//! # let _ = (keyring, Claims::default());
//! ```

use std::sync::atomic::{AtomicU32, Ordering};

use p256::ecdsa::{DerSignature, SigningKey, signature::Signer};
use portcullis_core::encoding::base64url;
use portcullis_core::{
    ApprovalDecision, PasskeyAssertion, PasskeyCredential, PasskeyPublicKey, SignedDecision, Ticket,
};
use serde_json::json;
use sha2::{Digest, Sha256};

/// A passkey in memory, bound to a relying party and an origin as a browser binds it.
pub struct SoftwarePasskey {
    key: SigningKey,
    credential_id: String,
    rp_id: String,
    origin: String,
    count: AtomicU32,
}

/// What one assertion says: by default, what an honest browser and authenticator say for the
/// passkey (an assertion, on its origin, for its relying party, the reviewer present and
/// verified, the count one past the last).
#[derive(Debug, Clone)]
pub struct Claims {
    /// The client data's type (`webauthn.get` for an assertion).
    pub kind: String,
    /// The origin the browser names; `None`: the passkey's.
    pub origin: Option<String>,
    /// Whether the browser says the page was in a frame of another origin.
    pub cross_origin: bool,
    /// The relying party whose id's SHA-256 the authenticator writes; `None`: the passkey's.
    pub rp_id: Option<String>,
    /// The authenticator data's flags (user present 0x01, user verified 0x04).
    pub flags: u8,
    /// The signature count; `None`: one past the passkey's last.
    pub count: Option<u32>,
}

impl Default for Claims {
    fn default() -> Self {
        Claims {
            kind: "webauthn.get".to_owned(),
            origin: None,
            cross_origin: false,
            rp_id: None,
            flags: 0x05,
            count: None,
        }
    }
}

impl SoftwarePasskey {
    /// A new passkey, its key from the operating system's random source, for the relying party
    /// `rp_id` (the console's host name) on `origin`.
    pub fn new(rp_id: &str, origin: &str) -> Self {
        let key = loop {
            let mut secret = [0u8; 32];
            getrandom::fill(&mut secret)
                .expect("the operating system's random source is available");
            if let Ok(key) = SigningKey::from_slice(&secret) {
                break key;
            }
        };
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).expect("the operating system's random source is available");
        SoftwarePasskey {
            key,
            credential_id: base64url(&id),
            rp_id: rp_id.to_owned(),
            origin: origin.to_owned(),
            count: AtomicU32::new(0),
        }
    }

    /// The credential's id, in base64url.
    pub fn credential_id(&self) -> &str {
        &self.credential_id
    }

    /// The credential as the keyring holds it once enrolled.
    pub fn credential(&self) -> PasskeyCredential {
        let point = self.key.verifying_key().to_sec1_point(false);
        PasskeyCredential {
            credential_id: self.credential_id.clone(),
            public_key: PasskeyPublicKey::from_sec1(point.as_bytes()).expect("a P-256 key's point"),
            rp_id: self.rp_id.clone(),
            origin: self.origin.clone(),
            sign_count: 0,
        }
    }

    /// An assertion over `challenge` saying what `claims` say: the signature (DER, in
    /// base64url) and the data it covers.
    pub fn assert(&self, challenge: &[u8], claims: &Claims) -> (String, PasskeyAssertion) {
        let client_data = json!({
            "type": claims.kind,
            "challenge": base64url(challenge),
            "origin": claims.origin.as_deref().unwrap_or(&self.origin),
            "crossOrigin": claims.cross_origin,
        })
        .to_string();
        let count = claims
            .count
            .unwrap_or_else(|| self.count.fetch_add(1, Ordering::SeqCst) + 1);
        let rp_id = claims.rp_id.as_deref().unwrap_or(&self.rp_id);
        let mut authenticator_data = Sha256::digest(rp_id.as_bytes()).to_vec();
        authenticator_data.push(claims.flags);
        authenticator_data.extend_from_slice(&count.to_be_bytes());
        let mut signed = authenticator_data.clone();
        signed.extend_from_slice(&Sha256::digest(client_data.as_bytes()));
        let signature: DerSignature = self.key.sign(&signed);
        (
            base64url(signature.as_bytes()),
            PasskeyAssertion {
                authenticator_data: base64url(&authenticator_data),
                client_data_json: base64url(client_data.as_bytes()),
            },
        )
    }

    /// `decision` on `ticket`, signed as the console records it after the browser's assertion
    /// over its challenge, the assertion saying what `claims` say.
    pub fn decide(
        &self,
        ticket: &Ticket,
        decision: ApprovalDecision,
        claims: &Claims,
    ) -> SignedDecision {
        let signed_ms = 1_800_000_000_000;
        let challenge = SignedDecision::passkey_challenge(ticket, &decision, signed_ms);
        let (signature, assertion) = self.assert(&challenge, claims);
        SignedDecision::by_passkey(
            decision,
            &self.credential_id,
            signed_ms,
            signature,
            assertion,
        )
    }
}
