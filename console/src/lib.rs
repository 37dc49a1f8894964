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
mod tls;
mod web;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::extract::connect_info::Connected;
use axum::routing::{get, post};
use axum::serve::IncomingStream;
use portcullis_core::audit::AuditKey;
use portcullis_core::{ArgumentsCheck, Keyring};
use portcullis_stores::Store;
use serde_json::Value;
use tokio::net::TcpListener;
use webauthn_rs::prelude::Url;
use webauthn_rs::{Webauthn, WebauthnBuilder};

use keyring::KeyringSource;
use sessions::Sessions;

/// What a console serves: the store, the keyring that says who reviews, the origin reviewers
/// open, the tools' schemas.
pub struct ConsoleConfig {
    /// The store the application's workers share.
    pub store: Store,
    /// The keyring the workers load: reviewers, their roles, their passkeys.
    pub keyring: Keyring,
    /// The file `keyring` was read from, if any: read again whenever it changes, so that a
    /// reviewer the operator confirms signs in without a restart.
    pub keyring_file: Option<PathBuf>,
    /// The console's origin as reviewers open it (`https://review.example.com`, or
    /// `http://localhost:8080` on one's own machine): passkeys are bound to its host.
    pub origin: String,
    /// The tools as the application's MCP export lists them (`name`, `description`,
    /// `inputSchema`): the ticket page shows their description and an edit form from their
    /// schema, and an edit is checked against it before it is signed.
    pub tools: Vec<Value>,
    /// The audit log's key, if the application keys its log: the audit page verifies the chain
    /// with it.
    pub audit_key: Option<AuditKey>,
}

/// Why a console could not be made.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConsoleError {
    /// The origin is not a URL with a host name (passkeys are bound to a domain, not an
    /// address).
    Origin(String),
    /// A tool of the export is not a tool with a name and an arguments schema the gates can
    /// check.
    Tool(String),
}

impl std::fmt::Display for ConsoleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConsoleError::Origin(why) => write!(f, "the console's origin {why}"),
            ConsoleError::Tool(why) => write!(f, "the tools' export: {why}"),
        }
    }
}

impl std::error::Error for ConsoleError {}

/// A tool as the console shows it.
pub(crate) struct Tool {
    pub(crate) description: String,
    pub(crate) schema: Value,
    pub(crate) check: ArgumentsCheck,
}

/// What every request reads.
pub(crate) struct Console {
    pub(crate) store: Store,
    pub(crate) keyring: KeyringSource,
    pub(crate) origin: String,
    pub(crate) rp_id: String,
    /// Cookies are `Secure` when reviewers open the console over https (served over TLS, or
    /// behind a proxy that ends it).
    pub(crate) secure: bool,
    pub(crate) webauthn: Webauthn,
    pub(crate) tools: HashMap<String, Tool>,
    pub(crate) audit_key: Option<AuditKey>,
    pub(crate) sessions: Sessions,
}

/// The console's routes on `config`, for [`serve`] or to nest in an application's server.
pub fn router(config: ConsoleConfig) -> Result<Router, ConsoleError> {
    let console = Arc::new(console(config)?);
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

/// The address a request came from, as the console's handlers read it
/// ([`ConnectInfo`](axum::extract::ConnectInfo)); a test that calls the router without a
/// socket gives one with [`MockConnectInfo`](axum::extract::connect_info::MockConnectInfo).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub SocketAddr);

impl Connected<IncomingStream<'_, TcpListener>> for ClientAddress {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        ClientAddress(*stream.remote_addr())
    }
}

impl Connected<IncomingStream<'_, tls::TlsListener>> for ClientAddress {
    fn connect_info(stream: IncomingStream<'_, tls::TlsListener>) -> Self {
        ClientAddress(*stream.remote_addr())
    }
}

fn console(config: ConsoleConfig) -> Result<Console, ConsoleError> {
    let origin = Url::parse(&config.origin)
        .map_err(|error| ConsoleError::Origin(format!("is not a URL: {error}")))?;
    let Some(host) = origin.domain().map(str::to_owned) else {
        return Err(ConsoleError::Origin(
            "has no host name: passkeys are bound to a domain (use localhost, not 127.0.0.1)"
                .to_owned(),
        ));
    };
    let secure = match origin.scheme() {
        "https" => true,
        "http" if host == "localhost" => false,
        _ => {
            return Err(ConsoleError::Origin(
                "must be https (browsers allow passkeys over http on localhost only)".to_owned(),
            ));
        }
    };
    let webauthn = WebauthnBuilder::new(&host, &origin)
        .and_then(|builder| builder.rp_name("portcullis console").build())
        .map_err(|error| ConsoleError::Origin(format!("does not suit WebAuthn: {error}")))?;
    let mut tools = HashMap::new();
    for tool in config.tools {
        let name = tool["name"]
            .as_str()
            .ok_or_else(|| ConsoleError::Tool("a tool has no name".to_owned()))?
            .to_owned();
        let schema = tool["inputSchema"].clone();
        let check = ArgumentsCheck::compile(schema.clone())
            .map_err(|why| ConsoleError::Tool(format!("`{name}`: {why}")))?;
        let description = tool["description"].as_str().unwrap_or_default().to_owned();
        tools.insert(
            name,
            Tool {
                description,
                schema,
                check,
            },
        );
    }
    Ok(Console {
        store: config.store,
        keyring: KeyringSource::new(config.keyring, config.keyring_file),
        origin: origin.origin().ascii_serialization(),
        rp_id: host,
        secure,
        webauthn,
        tools,
        audit_key: config.audit_key,
        sessions: Sessions::default(),
    })
}
