//! `portcullis console`: the approval console on the store the workers share. Reviewers sign
//! in with their passkeys and decide the calls waiting for them; each decision is signed by
//! the reviewer's passkey, and the workers verify it against their own keyring.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use portcullis_console::ConsoleConfig;
use portcullis_core::Keyring;
use portcullis_core::export::Profile;
use tokio::net::TcpListener;

use crate::error::CliError;
use crate::{audit, store, tools};

/// The console's settings.
#[derive(Debug, Args)]
pub struct Console {
    /// The keyring file the workers load: who reviews, with which roles, by which passkey.
    /// Read again whenever it changes; it need not exist yet.
    #[arg(long, value_name = "FILE", env = "PORTCULLIS_KEYRING")]
    keyring: PathBuf,
    /// The console's address as reviewers open it; passkeys are bound to its host name.
    /// https, or http on localhost.
    #[arg(
        long,
        value_name = "URL",
        env = "PORTCULLIS_CONSOLE_URL",
        default_value = "http://localhost:8080"
    )]
    origin: String,
    /// The address to listen on: loopback unless told otherwise.
    #[arg(long, value_name = "ADDRESS", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The application's exports (`portcullis tools export --help`): the tools' descriptions
    /// and the schemas of the edit forms. Without them, calls can be approved or rejected,
    /// not edited.
    #[arg(long, value_name = "FILE")]
    exports: Option<PathBuf>,
    /// The certificate chain to serve TLS with (PEM); the origin is then https.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_certificate: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_certificate")]
    tls_key: Option<PathBuf>,
    /// The audit key file, if the application keys its log: the audit page verifies the
    /// chain with it.
    #[arg(long, env = "PORTCULLIS_AUDIT_KEY_FILE", value_name = "PATH")]
    audit_key_file: Option<PathBuf>,
}

/// Serves the console until the process stops.
pub async fn run(
    console: Console,
    target: &store::StoreArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    // An https origin without a certificate is a console behind a proxy that ends TLS.
    if console.tls_certificate.is_some() && !console.origin.starts_with("https://") {
        return Err(CliError::Usage(
            "a console served over TLS is opened at an https origin: pass --origin https://…"
                .to_owned(),
        ));
    }
    let store = store::open(target).await?;
    // No keyring yet: nobody signs in until the operator confirms a reviewer into it.
    let keyring = if console.keyring.exists() {
        Keyring::load(&console.keyring)
            .map_err(|error| CliError::BadFile(console.keyring.clone(), error.to_string()))?
    } else {
        Keyring::new()
    };
    let tools = match &console.exports {
        Some(exports) => {
            let listed = tools::exported(exports, Profile::Mcp.name())?;
            serde_json::from_value(listed).map_err(|_| {
                CliError::BadFile(
                    exports.clone(),
                    "its `mcp` export is not a list of tools".to_owned(),
                )
            })?
        }
        None => Vec::new(),
    };
    let audit_key = console
        .audit_key_file
        .as_deref()
        .map(audit::read_key)
        .transpose()?;
    let keyring_is_empty = keyring.reviewers().is_empty();
    let config = ConsoleConfig {
        store,
        keyring,
        keyring_file: Some(console.keyring.clone()),
        origin: console.origin.clone(),
        tools,
        audit_key,
    };
    let router =
        portcullis_console::router(config).map_err(|error| CliError::Usage(error.to_string()))?;
    let listener = TcpListener::bind(console.listen).await.map_err(|error| {
        CliError::Usage(format!("cannot listen on {}: {error}", console.listen))
    })?;
    writeln!(
        out,
        "portcullis console on {} (listening on {})",
        console.origin, console.listen
    )?;
    if keyring_is_empty {
        writeln!(
            out,
            "no reviewer in {} yet: invite one with `portcullis reviewers invite <id> --role <role> --console {}`",
            console.keyring.display(),
            console.origin
        )?;
    }
    out.flush()?;
    let tls = console
        .tls_certificate
        .as_deref()
        .zip(console.tls_key.as_deref());
    portcullis_console::serve(router, listener, tls)
        .await
        .map_err(CliError::Output)
}
