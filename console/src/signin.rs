//! Signing in with a passkey: the console's own challenge, answered by a passkey the keyring
//! holds for the reviewer, checked as the workers check a decision's assertion. Attempts are
//! limited per address and failures per reviewer.

use std::net::IpAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use portcullis_core::PasskeyAssertion;
use portcullis_core::encoding::base64url;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::sessions::{Busy, FAILURES_PER_REVIEWER};
use crate::state::Console;
use crate::web::ClientAddress;
use crate::web::{Refusal, cleared_cookie, now_ms, session_cookie, signed_in_with_token};

#[derive(Deserialize)]
pub(crate) struct Start {
    reviewer: String,
}

/// What a browser returns from `navigator.credentials.get`, as the page sends it.
#[derive(Deserialize)]
pub(crate) struct Assertion {
    pub(crate) credential_id: String,
    pub(crate) authenticator_data: String,
    pub(crate) client_data_json: String,
    pub(crate) signature: String,
}

impl Assertion {
    pub(crate) fn signed_data(&self) -> PasskeyAssertion {
        PasskeyAssertion {
            authenticator_data: self.authenticator_data.clone(),
            client_data_json: self.client_data_json.clone(),
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct Finish {
    signin: String,
    #[serde(flatten)]
    assertion: Assertion,
}

pub(crate) fn rate_limited() -> Refusal {
    Refusal::new(
        StatusCode::TOO_MANY_REQUESTS,
        "sign_in_rate_limited",
        "too many attempts: wait a few minutes and try again",
    )
}

pub(crate) fn busy(_: Busy) -> Refusal {
    Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "console_busy",
        "the console holds as many sessions as it may: try again in a few minutes",
    )
}

/// The key failures are counted under: the reviewer from one address, so that failures from
/// elsewhere do not lock a reviewer out.
fn failures(reviewer: &str, address: IpAddr) -> String {
    format!("reviewer:{reviewer}@{address}")
}

/// The longest reviewer id a sign-in names.
const REVIEWER_ID_LIMIT: usize = 200;

/// A challenge for `reviewer`'s passkeys, with the ids of the passkeys the keyring holds for
/// them (the browser asks for one of those; so the answer tells whether the keyring holds the
/// reviewer).
pub(crate) async fn start(
    State(console): State<Arc<Console>>,
    ConnectInfo(ClientAddress(address)): ConnectInfo<ClientAddress>,
    Json(start): Json<Start>,
) -> Result<Json<Value>, Refusal> {
    let now = now_ms();
    if start.reviewer.len() > REVIEWER_ID_LIMIT {
        return Err(Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "reviewer_id_too_long",
            format!("a reviewer's id has at most {REVIEWER_ID_LIMIT} bytes"),
        ));
    }
    if !console.sessions.start_from(address.ip(), now)
        || console
            .sessions
            .attempts(&failures(&start.reviewer, address.ip()))
            >= FAILURES_PER_REVIEWER
    {
        tracing::warn!(target: "portcullis_console", action = "sign_in_rate_limited", reviewer = ?start.reviewer, %address);
        return Err(rate_limited());
    }
    let credentials: Vec<String> = console
        .keyring
        .current()
        .passkeys_of(&start.reviewer)
        .map(|(_, credential)| credential.credential_id.clone())
        .collect();
    let (signin, challenge) = console
        .sessions
        .start_sign_in(&start.reviewer, now)
        .map_err(busy)?;
    Ok(Json(json!({
        "signin": signin,
        "challenge": base64url(&challenge),
        "credentials": credentials,
        "rp_id": console.rp_id,
    })))
}

/// Signs the reviewer in if one of their passkeys answered the challenge.
pub(crate) async fn finish(
    State(console): State<Arc<Console>>,
    ConnectInfo(ClientAddress(address)): ConnectInfo<ClientAddress>,
    Json(finish): Json<Finish>,
) -> Result<Response, Refusal> {
    let now = now_ms();
    let Some(sign_in) = console.sessions.take_sign_in(&finish.signin, now) else {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "sign_in_expired",
            "the sign-in took too long or was answered already: start again",
        ));
    };
    let key = failures(&sign_in.reviewer, address.ip());
    if console.sessions.attempts(&key) >= FAILURES_PER_REVIEWER {
        return Err(rate_limited());
    }
    let assertion = &finish.assertion;
    let verified = match console
        .keyring
        .current()
        .passkeys_of(&sign_in.reviewer)
        .find(|(_, credential)| credential.credential_id == assertion.credential_id)
    {
        Some((_, credential)) => credential.verify(
            &sign_in.challenge,
            &assertion.signed_data(),
            &assertion.signature,
        ),
        None => Err("the keyring holds no such passkey for this reviewer".to_owned()),
    };
    if let Err(why) = verified {
        console.sessions.attempt(&key, FAILURES_PER_REVIEWER, now);
        tracing::warn!(target: "portcullis_console", action = "sign_in_failed", reviewer = ?sign_in.reviewer, %address, why = ?why);
        return Err(Refusal::new(
            StatusCode::UNAUTHORIZED,
            "sign_in_failed",
            "the passkey did not sign you in",
        ));
    }
    let (cookie, _) = console
        .sessions
        .open(&sign_in.reviewer, now)
        .map_err(busy)?;
    tracing::info!(target: "portcullis_console", action = "signed_in", reviewer = %sign_in.reviewer, %address);
    Ok((
        [session_cookie(&console, &cookie)],
        Json(json!({"reviewer": sign_in.reviewer})),
    )
        .into_response())
}

/// Ends the session.
pub(crate) async fn signout(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
) -> Result<Response, Refusal> {
    let signed_in = signed_in_with_token(&console, &headers)?;
    console.sessions.close(&signed_in.cookie);
    tracing::info!(target: "portcullis_console", action = "signed_out", reviewer = %signed_in.reviewer.id());
    Ok(([cleared_cookie(&console)], Json(json!({}))).into_response())
}
