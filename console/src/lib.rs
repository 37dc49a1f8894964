//! The approval console: reviewers decide waiting calls in the browser, each decision signed by
//! their passkey.
//!
//! `portcullis console` serves it on the store the application's workers share. A reviewer
//! enrols a passkey through a one-time invitation the operator made
//! (`portcullis reviewers invite rita --role finance`), the operator confirms the enrolment
//! into the keyring (`portcullis reviewers confirm`), and from then on the reviewer signs in
//! with the passkey, sees the tickets the keyring's roles let them decide, and approves, edits
//! or rejects each with a WebAuthn assertion whose challenge is the digest of that decision on
//! that call ([`SignedDecision::passkey_challenge`](portcullis_core::SignedDecision::passkey_challenge)).
//! The console records the decision; a worker verifies the assertion itself against its own
//! keyring before it runs anything. The console's server is not trusted with approvals: a
//! server taken over can write rows, and none of them runs without a reviewer's passkey over
//! that very decision. What it can do while it is taken over is have a signed-in reviewer's
//! next passkey touch (a sign-in or a click) sign a decision the reviewer did not see, on a
//! ticket that reviewer may decide: see the guide's threat model.
//!
//! Web security as the field does it: the session cookie is `HttpOnly`, `SameSite=Strict`
//! and, under TLS, `Secure`; every request that changes something carries the session's CSRF
//! token and comes from the console's own origin (`Origin`, `Sec-Fetch-Site`); the pages load
//! no inline script and nothing from elsewhere (a strict Content-Security-Policy); sign-ins are
//! rate-limited by address and by reviewer; every action is logged (`portcullis_console`
//! target).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod assets;
mod decide;
mod enrol;
mod keyring;
mod pages;
mod sessions;
mod signin;
mod state;
mod tls;
mod web;

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use tokio::net::TcpListener;

pub use state::{ConsoleConfig, ConsoleError};
pub use web::ClientAddress;

/// The console's routes on `config`, for [`serve`] or to nest in an application's server.
pub fn router(config: ConsoleConfig) -> Result<Router, ConsoleError> {
    let console = Arc::new(state::console(config)?);
    Ok(Router::new()
        .route("/", get(pages::home))
        .route("/signin", get(pages::signin))
        .route("/enrol", get(pages::enrol))
        .route("/queue", get(pages::queue))
        .route("/tickets/{id}", get(pages::ticket))
        .route("/audit", get(pages::audit))
        .route("/runs", get(pages::runs))
        .route("/assets/{name}", get(assets::asset))
        .route("/api/enrol/start", post(enrol::start))
        .route("/api/enrol/finish", post(enrol::finish))
        .route("/api/signin/start", post(signin::start))
        .route("/api/signin/finish", post(signin::finish))
        .route("/api/signout", post(signin::signout))
        .route("/api/tickets/{id}/challenge", post(decide::challenge))
        .route("/api/tickets/{id}/decide", post(decide::decide))
        // A decision's arguments, a passkey's answer: small. Nothing larger is read.
        .layer(axum::extract::DefaultBodyLimit::max(64 * 1024))
        .layer(axum::middleware::from_fn_with_state(
            console.clone(),
            web::guard,
        ))
        .with_state(console))
}

/// Serves the console's `router` on `listener` until the process stops, each request knowing
/// the address it came from (sign-ins are limited per address); over TLS when `tls` names a
/// certificate chain and its private key (PEM files).
pub async fn serve(
    router: Router,
    listener: TcpListener,
    tls: Option<(&Path, &Path)>,
) -> std::io::Result<()> {
    let service = router.into_make_service_with_connect_info::<ClientAddress>();
    match tls {
        Some((certificate, key)) => {
            let config = tls::server_config(certificate, key)?;
            axum::serve(tls::TlsListener::new(listener, config)?, service).await
        }
        None => axum::serve(listener, service).await,
    }
}
