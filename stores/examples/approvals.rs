//! An agent's payout waits for a human in a SQLite file, the agent's process exits, a reviewer
//! approves it with the `portcullis` command line, signing with her key, and a restarted
//! worker checks the signature against its keyring and runs the payout, once:
//!
//! ```sh
//! cargo run -p portcullis-cli -- keys generate --out target/rita.key --reviewer rita \
//!     --role finance > target/keyring.json   # rita's key; the workers' keyring
//! cargo run -p portcullis-stores --example approvals -- request    # the call waits; prints its ticket
//! cargo run -p portcullis-cli -- approvals show <TICKET> --reviewer rita --role finance
//! cargo run -p portcullis-cli -- approvals approve <TICKET> --reviewer rita --role finance \
//!     --key-file target/rita.key --call-digest <DIGEST SHOW PRINTED>
//! cargo run -p portcullis-stores --example approvals -- work       # runs the approved payout; again: nothing left
//! ```
//!
//! Or decide in the browser, with a passkey (the guide's `console` page):
//!
//! ```sh
//! cargo run -p portcullis-stores --example approvals -- request
//! cargo run -p portcullis-cli -- --store target/approvals-example.db console \
//!     --keyring target/keyring.json --exports target/approvals-tools.json
//! ```
//!
//! The store is `target/approvals-example.db`, or the `PORTCULLIS_STORE` the command line
//! reads too (a SQLite path or a `postgres://` URL); the keyring is `target/keyring.json`, or
//! `PORTCULLIS_KEYRING`.

use std::process::ExitCode;

use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis::{BuildError, Keyring};
use portcullis_stores::Store;
use serde_json::json;

/// Pay a supplier's invoice.
#[tool(
    risk = "critical",
    irreversible = "a payout settles at once",
    approver = "finance"
)]
fn pay_invoice(
    /// The supplier's id.
    supplier: String,
    /// The amount, in cents.
    #[validate(range(min = 1, max = 1_000_000))]
    amount_cents: u64,
) -> Result<String, ToolError> {
    // Move the money here.
    Ok(format!("paid {amount_cents} cents to {supplier}"))
}

/// The worker's registry: every piece of state in the shared store, and only decisions signed
/// by a key of `keyring` count.
fn worker(store: Store, keyring: Keyring) -> Result<Registry, BuildError> {
    Registry::builder()
        .tool(PayInvoice)
        .profile(Profile::Mcp)
        .approval_store(store.clone())
        .keyring(keyring)
        .repeat_store(store.clone())
        .budget_store(store.clone())
        .audit(store)
        .build()
}

#[tokio::main]
async fn main() -> ExitCode {
    let location = std::env::var("PORTCULLIS_STORE").unwrap_or_else(|_| {
        std::fs::create_dir_all("target").ok();
        "target/approvals-example.db".to_owned()
    });
    let store = match Store::open(&location).await {
        Ok(store) => store,
        Err(error) => {
            eprintln!("cannot open the store at {location}: {error}");
            return ExitCode::from(3);
        }
    };
    let keyring_file =
        std::env::var("PORTCULLIS_KEYRING").unwrap_or_else(|_| "target/keyring.json".to_owned());
    let command = std::env::args().nth(1);
    let keyring = match Keyring::load(&keyring_file) {
        Ok(keyring) => keyring,
        // A call waits without one; only the worker that runs decisions needs it.
        Err(_) if command.as_deref() == Some("request") => Keyring::new(),
        Err(error) => {
            eprintln!(
                "no keyring at {keyring_file} ({error}); make rita's key and the keyring with:\n  \
                 cargo run -p portcullis-cli -- keys generate --out target/rita.key \
                 --reviewer rita --role finance > {keyring_file}"
            );
            return ExitCode::from(2);
        }
    };
    let registry = match worker(store, keyring) {
        Ok(registry) => registry,
        Err(error) => {
            eprintln!("cannot build the registry: {error}");
            return ExitCode::FAILURE;
        }
    };
    match command.as_deref() {
        Some("request") => {
            // What the model asked for, in the agent's task.
            let ctx = CallContext::new("billing-agent").with_task_id("invoice-2291");
            let call = ToolCall::new(
                "call_7",
                "pay_invoice",
                json!({"supplier": "acme-gmbh", "amount_cents": 125_000}),
            );
            // The tools as MCP lists them, for the console's ticket page and edit form.
            let exports = registry
                .export(
                    &CallContext::new("console").with_roles(["finance"]),
                    Profile::Mcp,
                )
                .map(|tools| json!({ "mcp": tools }).to_string());
            if let Ok(exports) = exports {
                std::fs::write("target/approvals-tools.json", exports).ok();
            }
            match registry.dispatch(&ctx, &call).await {
                Outcome::Pending(ticket) => {
                    println!("waiting for approval: {}", ticket.description);
                    println!("ticket: {}", ticket.id);
                    println!(
                        "review it (the real arguments and the call digest):\n  cargo run -p \
                         portcullis-cli -- --store {location} approvals show {id} --reviewer rita \
                         --role finance\napprove it, signing the call you reviewed:\n  cargo run \
                         -p portcullis-cli -- --store {location} approvals approve {id} \
                         --reviewer rita --role finance --key-file target/rita.key \
                         --call-digest {digest}",
                        id = ticket.id,
                        digest = ticket.call_digest,
                    );
                    println!(
                        "or decide it in the browser, with a passkey:\n  cargo run -p \
                         portcullis-cli -- --store {location} console --keyring {keyring_file} \
                         --exports target/approvals-tools.json"
                    );
                    println!(
                        "then run the worker: cargo run -p portcullis-stores --example approvals -- work"
                    );
                }
                other => println!("the call did not wait: {other:?}"),
            }
        }
        Some("work") => {
            let ran = match registry.run_decided().await {
                Ok(ran) => ran,
                Err(refusal) => {
                    eprintln!("the store could not be read: {refusal}");
                    return ExitCode::from(3);
                }
            };
            if ran.is_empty() {
                println!("no decided call waits: nothing ran");
            }
            for (ticket, outcome) in ran {
                match (outcome.output(), outcome.rejection()) {
                    (Some(output), _) => println!("{ticket}: {output}"),
                    (_, Some(refusal)) => println!("{ticket}: refused, {refusal}"),
                    _ => println!("{ticket}: waits again"),
                }
            }
        }
        _ => {
            eprintln!(
                "usage: cargo run -p portcullis-stores --example approvals -- request | work"
            );
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
