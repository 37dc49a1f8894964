//! Enrolling a passkey with an invitation's one-time token, by webauthn-rs' registration
//! ceremony. The passkey is stored with the invitation for the operator to confirm into the
//! keyring; until then it decides nothing, and the console never writes the keyring.

use std::sync::Arc;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use portcullis_core::encoding::base64url;
use portcullis_core::{PasskeyCredential, PasskeyPublicKey};
use portcullis_stores::{Enrolled, fingerprint};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use webauthn_rs::prelude::{COSEKeyType, ECDSACurve, Passkey, RegisterPublicKeyCredential, Uuid};

use crate::signin::{busy, rate_limited};
use crate::state::Console;
use crate::web::ClientAddress;
use crate::web::{Refusal, now_ms};

#[derive(Deserialize)]
pub(crate) struct Start {
    token: String,
}

#[derive(Deserialize)]
pub(crate) struct Finish {
    enrolment: String,
    credential: RegisterPublicKeyCredential,
}

fn unavailable(error: std::io::Error) -> Refusal {
    Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        format!("the store could not be read: {error}"),
    )
}

fn refused(enrolled: Enrolled) -> Refusal {
    match enrolled {
        Enrolled::Enrolled => unreachable!("an enrolment is not a refusal"),
        Enrolled::Unknown => Refusal::new(
            StatusCode::NOT_FOUND,
            "invite_unknown",
            "this invitation is unknown, withdrawn or confirmed already: ask your operator for a new one",
        ),
        Enrolled::Expired => Refusal::new(
            StatusCode::GONE,
            "invite_expired",
            "this invitation expired: ask your operator for a new one",
        ),
        Enrolled::Used => Refusal::new(
            StatusCode::CONFLICT,
            "invite_used",
            "a passkey was enrolled with this invitation already",
        ),
    }
}

/// The registration options for the invitation of `token`.
pub(crate) async fn start(
    State(console): State<Arc<Console>>,
    ConnectInfo(ClientAddress(address)): ConnectInfo<ClientAddress>,
    Json(start): Json<Start>,
) -> Result<Json<Value>, Refusal> {
    let now = now_ms();
    if !console.sessions.start_from(address.ip(), now) {
        return Err(rate_limited());
    }
    let invite = console
        .store
        .invite(&start.token)
        .await
        .map_err(unavailable)?
        .ok_or_else(|| refused(Enrolled::Unknown))?;
    if invite.enrolment.is_some() {
        return Err(refused(Enrolled::Used));
    }
    if invite.expires_ms <= now {
        return Err(refused(Enrolled::Expired));
    }
    let reviewer = invite.reviewer;
    let digest = Sha256::digest(reviewer.id().as_bytes());
    let user = Uuid::from_slice(&digest[..16]).expect("16 bytes");
    let (options, registration) = console
        .webauthn
        .start_passkey_registration(user, reviewer.id(), reviewer.id(), None)
        .map_err(|error| {
            Refusal::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "enrolment_failed",
                format!("the enrolment could not start: {error}"),
            )
        })?;
    let enrolment = console
        .sessions
        .start_enrolment(&start.token, registration, now)
        .map_err(busy)?;
    Ok(Json(json!({
        "enrolment": enrolment,
        "reviewer": reviewer.id(),
        "roles": reviewer.roles(),
        "options": options,
    })))
}

/// Stores the new passkey with the invitation, once.
pub(crate) async fn finish(
    State(console): State<Arc<Console>>,
    ConnectInfo(ClientAddress(address)): ConnectInfo<ClientAddress>,
    Json(finish): Json<Finish>,
) -> Result<Json<Value>, Refusal> {
    let now = now_ms();
    let Some(enrolling) = console.sessions.take_enrolment(&finish.enrolment, now) else {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "enrolment_expired",
            "the enrolment took too long or was finished already: open the invitation again",
        ));
    };
    let passkey = console
        .webauthn
        .finish_passkey_registration(&finish.credential, &enrolling.registration)
        .map_err(|error| {
            tracing::warn!(target: "portcullis_console", action = "enrolment_failed", %address, %error);
            Refusal::new(
                StatusCode::BAD_REQUEST,
                "enrolment_failed",
                format!("the passkey was not enrolled: {error}"),
            )
        })?;
    let credential = PasskeyCredential {
        credential_id: base64url(passkey.cred_id()),
        public_key: es256_key(&passkey)?,
        rp_id: console.rp_id.clone(),
        origin: console.origin.clone(),
        sign_count: 0,
    };
    match console
        .store
        .enrol(&enrolling.token, &credential, now)
        .await
        .map_err(unavailable)?
    {
        Enrolled::Enrolled => {}
        other => return Err(refused(other)),
    }
    let fingerprint = fingerprint(&credential);
    tracing::info!(target: "portcullis_console", action = "enrolled", credential = %credential.credential_id, %fingerprint, %address);
    Ok(Json(json!({"fingerprint": fingerprint})))
}

/// The passkey's ES256 key: the one kind of key the workers verify.
fn es256_key(passkey: &Passkey) -> Result<PasskeyPublicKey, Refusal> {
    let unsupported = || {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            "passkey_algorithm_unsupported",
            "this passkey does not sign with ES256 (ECDSA on P-256), the one algorithm portcullis verifies: use another authenticator",
        )
    };
    let COSEKeyType::EC_EC2(key) = &passkey.get_public_key().key else {
        return Err(unsupported());
    };
    if key.curve != ECDSACurve::SECP256R1 {
        return Err(unsupported());
    }
    let mut point = vec![0x04];
    point.extend_from_slice(&key.x);
    point.extend_from_slice(&key.y);
    PasskeyPublicKey::from_sec1(&point).map_err(|_| unsupported())
}
