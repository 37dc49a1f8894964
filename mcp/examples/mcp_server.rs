//! The example shop served over MCP: every `tools/call` passes the gates.
//!
//! ```sh
//! cargo run -p portcullis-mcp --example mcp_server                            # stdio, as sam (support)
//! cargo run -p portcullis-mcp --example mcp_server -- --caller finance        # stdio, as fiona (finance)
//! cargo run -p portcullis-mcp --example mcp_server -- --http 127.0.0.1:8765   # streamable HTTP at /mcp
//! ```
//!
//! Over HTTP the caller comes from the bearer token: `PORTCULLIS_MCP_SUPPORT_TOKEN` names sam,
//! `PORTCULLIS_MCP_FINANCE_TOKEN` fiona (demo tokens when unset, printed at start). Pending
//! approvals, claims, budgets and the audit log live in the `PORTCULLIS_STORE` database
//! (default `target/mcp-example.db`), where the `portcullis` command line decides them, signed
//! with a reviewer's key that the keyring `PORTCULLIS_KEYRING` (default `target/keyring.json`)
//! holds:
//!
//! ```sh
//! cargo run -p portcullis-cli -- keys generate --out target/rita.key --reviewer rita \
//!     --role finance > target/keyring.json
//! cargo run -p portcullis-cli -- approvals list --store target/mcp-example.db
//! cargo run -p portcullis-cli -- approvals show <TICKET> --reviewer rita --role finance \
//!     --store target/mcp-example.db
//! cargo run -p portcullis-cli -- approvals approve <TICKET> --reviewer rita --role finance \
//!     --key-file target/rita.key --call-digest <DIGEST SHOW PRINTED> --store target/mcp-example.db
//! ```
//!
//! The server signs its callers' confirmations with a key it makes when it starts; a server
//! that runs for long keeps one in a file (`DecisionKey::load`), so that a confirmation
//! recorded before a restart still counts after it.

#[path = "../../examples/shop/mod.rs"]
mod shop;

use std::process::ExitCode;
use std::time::Duration;

use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis::{DecisionKey, Keyring};
use portcullis_mcp::{BearerTokens, McpServer};
use portcullis_stores::Store;

fn support() -> CallContext {
    CallContext::new("sam").with_roles(["support"])
}

fn finance() -> CallContext {
    CallContext::new("fiona").with_roles(["finance", "billing_admin"])
}

fn token(variable: &str, demo: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| {
        eprintln!("{variable} is not set: using the demo token `{demo}`");
        demo.to_owned()
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let option = |name: &str| {
        arguments
            .iter()
            .position(|argument| argument == name)
            .and_then(|at| arguments.get(at + 1).cloned())
    };
    let location =
        std::env::var("PORTCULLIS_STORE").unwrap_or_else(|_| "target/mcp-example.db".to_owned());
    let store = match Store::open(&location).await {
        Ok(store) => store,
        Err(error) => {
            eprintln!("cannot open the store {location}: {error}");
            return ExitCode::FAILURE;
        }
    };
    let keyring_file =
        std::env::var("PORTCULLIS_KEYRING").unwrap_or_else(|_| "target/keyring.json".to_owned());
    let keyring = match Keyring::load(&keyring_file) {
        Ok(keyring) => keyring,
        Err(error) => {
            eprintln!(
                "no keyring at {keyring_file} ({error}); make a reviewer's key and the keyring \
                 with:\n  cargo run -p portcullis-cli -- keys generate --out target/rita.key \
                 --reviewer rita --role finance > {keyring_file}"
            );
            return ExitCode::from(2);
        }
    };
    let confirmations = DecisionKey::generate();
    let registry = shop::shop_tools()
        .tool(shop::CancelOrder)
        .policy(shop::embargo)
        .profile(Profile::Mcp)
        .approvers(["finance"])
        .approval_lifetime(Duration::from_secs(15 * 60))
        .approval_store(store.clone())
        .keyring(keyring.caller_confirmations(confirmations.public_key()))
        .repeat_store(store.clone())
        .budget_store(store.clone())
        .audit(store)
        .build()
        .expect("the shop's tools fit MCP");
    let server = McpServer::builder(registry)
        .name("portcullis-shop")
        .confirmation_key(confirmations)
        .build()
        .expect("the registry serves MCP");

    let served = match option("--http") {
        Some(address) => {
            let tokens = BearerTokens::new()
                .token(
                    token("PORTCULLIS_MCP_SUPPORT_TOKEN", "support-demo-token"),
                    support(),
                )
                .token(
                    token("PORTCULLIS_MCP_FINANCE_TOKEN", "finance-demo-token"),
                    finance(),
                );
            let listener = match tokio::net::TcpListener::bind(&address).await {
                Ok(listener) => listener,
                Err(error) => {
                    eprintln!("cannot listen on {address}: {error}");
                    return ExitCode::FAILURE;
                }
            };
            eprintln!("serving the shop over MCP at http://{address}/mcp (store: {location})");
            server.serve_http(listener, tokens).await
        }
        None => {
            let caller = match option("--caller").as_deref() {
                Some("finance") => finance(),
                _ => support(),
            };
            eprintln!(
                "serving the shop over MCP on stdio as {} (store: {location})",
                caller.actor()
            );
            server.serve_stdio(caller).await
        }
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}
