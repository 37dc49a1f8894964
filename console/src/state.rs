//! What the console is made of: its configuration, and what every request reads.

use std::collections::HashMap;
use std::path::PathBuf;

use portcullis_core::audit::AuditKey;
use portcullis_core::{ArgumentsCheck, Keyring};
use portcullis_stores::Store;
use serde_json::Value;
use webauthn_rs::prelude::Url;
use webauthn_rs::{Webauthn, WebauthnBuilder};

use crate::keyring::KeyringSource;
use crate::sessions::Sessions;

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

/// The console `config` describes, or why it cannot be made.
pub(crate) fn console(config: ConsoleConfig) -> Result<Console, ConsoleError> {
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
