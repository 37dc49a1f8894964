//! The example shop as the official clients' tests serve it: its tools, policy, approvers and
//! keys over one store, the two callers' tokens, and scratch files for the stores.

#[path = "../../../examples/shop/mod.rs"]
pub mod shop;

use std::path::{Path, PathBuf};

use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis::{DecisionKey, Keyring, RegistryBuilder, Reviewer};
use portcullis_mcp::BearerTokens;
use portcullis_stores::Store;
use serde_json::Value;

/// The shop's tools over `store` (approvals, claims, budgets, audit), served as MCP, with
/// finance approving and the server confirming its callers; add a tool of the test's, then
/// build.
pub fn shop_registry(store: &Store) -> RegistryBuilder {
    shop::shop_tools()
        .tool(shop::CancelOrder)
        .policy(shop::embargo)
        .profile(Profile::Mcp)
        .approvers(["finance"])
        .approval_store(store.clone())
        .keyring(
            Keyring::new()
                .reviewer(
                    Reviewer::new("rita").with_roles(["finance"]),
                    rita_key().public_key(),
                )
                .caller_confirmations(server_key().public_key()),
        )
        .repeat_store(store.clone())
        .budget_store(store.clone())
        .audit(store.clone())
}

/// The key the server signs its callers' confirmations with; fixed, as a stdio server is the
/// test binary started again.
pub fn server_key() -> DecisionKey {
    DecisionKey::from_text(&format!("ed25519:{}", "5e".repeat(32))).unwrap()
}

/// The operator's signing key.
pub fn rita_key() -> DecisionKey {
    DecisionKey::from_text(&format!("ed25519:{}", "0f".repeat(32))).unwrap()
}

/// Rita of finance approves `payout` with her key: whether her decision was recorded.
pub async fn rita_approves(store: &Store, payout: &portcullis::Ticket) -> bool {
    let rita = Reviewer::new("rita").with_roles(["finance"]);
    let decision = rita_key().sign(
        payout,
        portcullis::ApprovalDecision::Approve { reviewer: rita },
    );
    portcullis::record_decision(store, &payout.id, decision)
        .await
        .is_ok()
}

/// Sam, of support.
pub fn support() -> CallContext {
    CallContext::new("sam").with_roles(["support"])
}

/// Fiona, of finance and billing.
pub fn finance() -> CallContext {
    CallContext::new("fiona").with_roles(["finance", "billing_admin"])
}

/// Sam's and Fiona's tokens.
pub fn tokens() -> BearerTokens {
    BearerTokens::new()
        .token("support-token", support())
        .token("finance-token", finance())
}

/// A path under the test's target directory for a store named `name`, with no file of a store
/// before.
pub fn scratch(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path
}

/// The code of the refusal a client saw (`result`, as the clients' scripts report a result).
pub fn code(result: &Value) -> &str {
    result["text"]["error"]
        .as_str()
        .unwrap_or_else(|| panic!("not a refusal: {result}"))
}

/// What every official client must have seen of the shop (`seen`, as its script reports it):
/// one refusal per gate, each an `isError` result with the model message and its code; the
/// user's "no" to a confirmation; a hidden tool and an unknown one refused alike.
pub fn assert_one_refusal_per_gate(seen: &Value) {
    for (case, expected) in [
        ("decode", "unknown_argument"),
        ("validate", "constraint_violation"),
        ("authorize", "policy_denied"),
        ("approve", "approval_rejected"),
        ("budget", "budget_calls_exceeded"),
    ] {
        let result = &seen[case];
        assert_eq!(result["is_error"], true, "{case}: {result}");
        assert_eq!(code(result), expected, "{case}: {result}");
    }
    let declined = seen["approve"]["text"]["message"].as_str().unwrap();
    assert!(
        declined.contains("the user declined this call"),
        "{declined}"
    );
    // A tool the caller may not use is, to it, a tool that does not exist.
    assert_eq!(seen["hidden_tool"]["protocol_error"], -32602);
    assert_eq!(seen["unknown_tool"]["protocol_error"], -32602);
}
