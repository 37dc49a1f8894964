//! The store is not the authority: with a keyring, a decision runs a call only if a reviewer's
//! key the keyring allows signed it, over this ticket, this call and this decision. Each test
//! is an attack by someone who can write the database (or replay what it holds), on SQLite
//! and on PostgreSQL, and asserts the refusal and that nothing ran.

mod common;

use std::sync::Mutex;

use common::Backend;
use portcullis::prelude::*;
use portcullis::{
    ApprovalDecision, ApprovalStore, DecisionKey, Keyring, Reviewer, SignedDecision, Ticket,
    record_decision,
};
use portcullis_stores::Store;
use serde_json::json;

/// The suppliers paid, one entry per payout; each test pays suppliers of its own.
static PAID: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn payouts_to(supplier: &str) -> usize {
    PAID.lock()
        .unwrap()
        .iter()
        .filter(|paid| *paid == supplier)
        .count()
}

/// Pay a supplier.
#[tool(
    risk = "critical",
    irreversible = "payouts settle at once",
    approver = "finance"
)]
fn pay_supplier(supplier: String, amount_cents: u64) -> Result<String, ToolError> {
    PAID.lock().unwrap().push(supplier.clone());
    Ok(format!("paid {amount_cents} to {supplier}"))
}

/// Top up the caller's own prepaid card, once the caller confirms.
#[tool(
    risk = "high",
    caller_confirms,
    approver = "finance",
    irreversible = "a top-up is spent at once"
)]
fn top_up(card: String) -> Result<String, ToolError> {
    PAID.lock().unwrap().push(card.clone());
    Ok(format!("topped up {card}"))
}

/// The reviewers' keys: rita of finance, carl the clerk, the MCP server's confirmation key,
/// and mallory's, which the keyring does not hold.
struct Keys {
    rita: DecisionKey,
    carl: DecisionKey,
    server: DecisionKey,
    mallory: DecisionKey,
}

impl Keys {
    fn new() -> Self {
        Keys {
            rita: DecisionKey::generate(),
            carl: DecisionKey::generate(),
            server: DecisionKey::generate(),
            mallory: DecisionKey::generate(),
        }
    }

    fn keyring(&self) -> Keyring {
        Keyring::new()
            .reviewer(
                Reviewer::new("rita").with_roles(["finance"]),
                self.rita.public_key(),
            )
            .reviewer(
                Reviewer::new("carl").with_roles(["clerk"]),
                self.carl.public_key(),
            )
            .caller_confirmations(self.server.public_key())
    }
}

/// A worker that counts only signed decisions: its own connection to the shared database.
async fn worker(backend: &Backend, keys: &Keys) -> Registry {
    let store = backend.open().await;
    Registry::builder()
        .tool(PaySupplier)
        .tool(TopUp)
        .approval_store(store.clone())
        .keyring(keys.keyring())
        .repeat_store(store.clone())
        .audit(store)
        .build()
        .unwrap()
}

fn payout(id: &str, supplier: &str) -> ToolCall {
    ToolCall::new(
        id,
        "pay_supplier",
        json!({"supplier": supplier, "amount_cents": 900}),
    )
}

fn approve(reviewer: &str) -> ApprovalDecision {
    ApprovalDecision::Approve {
        reviewer: Reviewer::new(reviewer).with_roles(["finance"]),
    }
}

/// The ticket the worker opens for a payout to `supplier`.
async fn waiting(registry: &Registry, ctx: &CallContext, id: &str, supplier: &str) -> Ticket {
    let outcome = registry.dispatch(ctx, &payout(id, supplier)).await;
    outcome.ticket().expect("a payout waits").clone()
}

/// Writes `decision` on `ticket` as the database's own text, around every check.
async fn forge(backend: &Backend, ticket: &str, decision: &SignedDecision) {
    let text = serde_json::to_string(decision).unwrap().replace('\'', "''");
    backend
        .tamper(&format!(
            "UPDATE pending_calls SET decision = '{text}' WHERE ticket_id = '{ticket}'"
        ))
        .await;
}

/// The one outcome of a worker's run of the decided calls.
async fn ran_once(registry: &Registry) -> Outcome {
    let mut ran = registry.run_decided().await.unwrap();
    assert_eq!(ran.len(), 1, "{ran:?}");
    ran.remove(0).1
}

on_both!(
    a_signed_decision_runs_once_and_says_who_signed,
    a_forged_decision_row_runs_nothing,
    a_signature_over_other_arguments_runs_nothing,
    a_signed_decision_replayed_on_another_ticket_runs_nothing,
    a_key_the_keyring_does_not_allow_for_the_reviewer_runs_nothing,
    roles_come_from_the_keyring_not_from_the_row,
    a_confirmation_key_decides_only_as_the_caller_of_a_tool_it_confirms,
    a_decided_row_put_back_after_its_call_ran_runs_nothing,
);

/// Whoever can write the table copies a signed, decided row before its call runs and puts it
/// back after: the signature still verifies, but the call's claim no longer waits under the
/// ticket, so nothing runs again.
async fn a_decided_row_put_back_after_its_call_ran_runs_nothing(backend: Backend) {
    let keys = Keys::new();
    let supplier = format!("replayed-row-{}", backend.tag());
    let registry = worker(&backend, &keys).await;
    let ctx = CallContext::new("agent").with_task_id("t8");
    let ticket = waiting(&registry, &ctx, "p1", &supplier).await;
    let store = backend.open().await;
    record_decision(&store, &ticket.id, keys.rita.sign(&ticket, approve("rita")))
        .await
        .unwrap();
    backend
        .tamper(&format!(
            "CREATE TABLE stash AS SELECT * FROM pending_calls WHERE ticket_id = '{}'",
            ticket.id
        ))
        .await;
    let outcome = ran_once(&registry).await;
    assert!(outcome.output().is_some(), "{outcome:?}");
    backend
        .tamper("INSERT INTO pending_calls SELECT * FROM stash")
        .await;
    let replayed = ran_once(&registry).await;
    assert_eq!(replayed.code(), Some(RejectionCode::TicketDecided));
    assert_eq!(payouts_to(&supplier), 1);
    assert!(
        registry.run_decided().await.unwrap().is_empty(),
        "the row is gone"
    );
}

/// The road that works: rita signs in another process (the command line), a worker runs the
/// call once, and the audit says it was signed, and by which key.
async fn a_signed_decision_runs_once_and_says_who_signed(backend: Backend) {
    let keys = Keys::new();
    let supplier = format!("signed-{}", backend.tag());
    let registry = worker(&backend, &keys).await;
    let ctx = CallContext::new("agent").with_task_id("t1");
    let ticket = waiting(&registry, &ctx, "p1", &supplier).await;

    let reviewer_side: Store = backend.open().await;
    let signed = keys.rita.sign(&ticket, approve("rita"));
    record_decision(&reviewer_side, &ticket.id, signed)
        .await
        .unwrap();
    let outcome = ran_once(&registry).await;
    assert_eq!(
        outcome.output(),
        Some(&json!(format!("paid 900 to {supplier}")))
    );
    assert_eq!(payouts_to(&supplier), 1);
    assert!(registry.run_decided().await.unwrap().is_empty());
    let records = backend.open().await.audit_records(0, None).await.unwrap();
    let resolution = records.last().unwrap().resolution.clone().unwrap();
    assert_eq!(
        resolution,
        format!("approved by rita, signed with {}", keys.rita.public_key())
    );
}

/// Whoever can write the table writes an approval with the right roles: without a
/// signature, or with one that is not rita's over this decision, nothing runs.
async fn a_forged_decision_row_runs_nothing(backend: Backend) {
    let keys = Keys::new();
    let supplier = format!("forged-{}", backend.tag());
    let registry = worker(&backend, &keys).await;
    let ctx = CallContext::new("agent").with_task_id("t2");

    let unsigned = waiting(&registry, &ctx, "p1", &supplier).await;
    forge(&backend, &unsigned.id, &approve("rita").into()).await;
    let outcome = ran_once(&registry).await;
    assert_eq!(outcome.code(), Some(RejectionCode::DecisionUnsigned));

    // rita's public key, a made-up signature.
    let made_up = waiting(&registry, &ctx, "p2", &supplier).await;
    let mut signed = keys.rita.sign(&made_up, approve("rita"));
    signed.signature.as_mut().unwrap().signature = "ab".repeat(64);
    forge(&backend, &made_up.id, &signed).await;
    let outcome = ran_once(&registry).await;
    assert_eq!(
        outcome.code(),
        Some(RejectionCode::DecisionSignatureInvalid)
    );

    // rita's real signature, its time moved.
    let moved = waiting(&registry, &ctx, "p3", &supplier).await;
    let mut signed = keys.rita.sign(&moved, approve("rita"));
    signed.signature.as_mut().unwrap().signed_ms += 1;
    forge(&backend, &moved.id, &signed).await;
    let outcome = ran_once(&registry).await;
    assert_eq!(
        outcome.code(),
        Some(RejectionCode::DecisionSignatureInvalid)
    );

    assert_eq!(payouts_to(&supplier), 0);
    // A repeat of the call reads how it ended; it does not run either.
    let resent = registry.dispatch(&ctx, &payout("p1", &supplier)).await;
    assert_eq!(resent.code(), Some(RejectionCode::DecisionUnsigned));
    assert_eq!(payouts_to(&supplier), 0);
}

/// rita signs the payout she was shown; the stored call is then changed to pay another
/// supplier, or her edit to other arguments. Neither runs.
async fn a_signature_over_other_arguments_runs_nothing(backend: Backend) {
    let keys = Keys::new();
    let supplier = format!("honest-{}", backend.tag());
    let thief = format!("thief-{}", backend.tag());
    let registry = worker(&backend, &keys).await;
    let ctx = CallContext::new("agent").with_task_id("t3");

    let ticket = waiting(&registry, &ctx, "p1", &supplier).await;
    let store = backend.open().await;
    record_decision(&store, &ticket.id, keys.rita.sign(&ticket, approve("rita")))
        .await
        .unwrap();
    backend
        .tamper(&format!(
            "UPDATE pending_calls SET call = replace(call, '{supplier}', '{thief}')"
        ))
        .await;
    let outcome = ran_once(&registry).await;
    assert_eq!(
        outcome.code(),
        Some(RejectionCode::DecisionSignatureInvalid)
    );

    // The ticket's approver roles and the caller, rewritten in the row, are the row's
    // business only: who may decide is read from the contract.
    let edited = waiting(&registry, &ctx, "p2", &supplier).await;
    let edit = ApprovalDecision::Edit {
        reviewer: Reviewer::new("rita"),
        arguments: json!({"supplier": supplier, "amount_cents": 100}),
    };
    let mut signed = keys.rita.sign(&edited, edit);
    if let ApprovalDecision::Edit { arguments, .. } = &mut signed.decision {
        *arguments = json!({"supplier": thief, "amount_cents": 100});
    }
    forge(&backend, &edited.id, &signed).await;
    let outcome = ran_once(&registry).await;
    assert_eq!(
        outcome.code(),
        Some(RejectionCode::DecisionSignatureInvalid)
    );

    assert_eq!(payouts_to(&supplier) + payouts_to(&thief), 0);
}

/// rita's signed approval of one payout, copied onto a second ticket: refused when offered
/// to `resume` (the second ticket still waits) and when written into the row.
async fn a_signed_decision_replayed_on_another_ticket_runs_nothing(backend: Backend) {
    let keys = Keys::new();
    let supplier = format!("replayed-{}", backend.tag());
    let registry = worker(&backend, &keys).await;
    let ctx = CallContext::new("agent").with_task_id("t4");
    let first = waiting(&registry, &ctx, "p1", &supplier).await;
    let second = waiting(&registry, &ctx, "p2", &supplier).await;
    let signed = keys.rita.sign(&first, approve("rita"));

    let refused = registry.resume(&second.id, signed.clone()).await;
    assert_eq!(
        refused.code(),
        Some(RejectionCode::DecisionSignatureInvalid)
    );
    let waiting_ids: Vec<String> = registry
        .pending_tickets()
        .await
        .unwrap()
        .into_iter()
        .map(|ticket| ticket.id)
        .collect();
    assert!(waiting_ids.contains(&second.id), "the second ticket waits");

    let store = backend.open().await;
    let recorded = ApprovalStore::decide(&store, &second.id, &signed, 0).await;
    assert_eq!(recorded, portcullis::Recorded::Recorded);
    let outcome = ran_once(&registry).await;
    assert_eq!(
        outcome.code(),
        Some(RejectionCode::DecisionSignatureInvalid)
    );
    assert_eq!(payouts_to(&supplier), 0);

    // The first ticket's own decision still counts, once.
    let outcome = registry.resume(&first.id, signed).await;
    assert!(outcome.output().is_some(), "{outcome:?}");
    assert_eq!(payouts_to(&supplier), 1);
}

/// mallory's key (not in the keyring) signing as rita, and rita's key signing as someone
/// else: neither counts.
async fn a_key_the_keyring_does_not_allow_for_the_reviewer_runs_nothing(backend: Backend) {
    let keys = Keys::new();
    let supplier = format!("unknown-key-{}", backend.tag());
    let registry = worker(&backend, &keys).await;
    let ctx = CallContext::new("agent").with_task_id("t5");

    let ticket = waiting(&registry, &ctx, "p1", &supplier).await;
    let as_rita = keys.mallory.sign(&ticket, approve("rita"));
    let refused = registry.resume(&ticket.id, as_rita.clone()).await;
    assert_eq!(
        refused.code(),
        Some(RejectionCode::DecisionSignatureInvalid)
    );
    forge(&backend, &ticket.id, &as_rita).await;
    let outcome = ran_once(&registry).await;
    assert_eq!(
        outcome.code(),
        Some(RejectionCode::DecisionSignatureInvalid)
    );

    let ticket = waiting(&registry, &ctx, "p2", &supplier).await;
    let as_boss = keys.rita.sign(&ticket, approve("boss"));
    forge(&backend, &ticket.id, &as_boss).await;
    let outcome = ran_once(&registry).await;
    assert_eq!(
        outcome.code(),
        Some(RejectionCode::DecisionSignatureInvalid)
    );
    assert_eq!(payouts_to(&supplier), 0);
}

/// carl the clerk signs with his own key, naming himself with the finance role: the keyring
/// says he is a clerk, and a clerk may not approve a payout.
async fn roles_come_from_the_keyring_not_from_the_row(backend: Backend) {
    let keys = Keys::new();
    let supplier = format!("clerk-{}", backend.tag());
    let registry = worker(&backend, &keys).await;
    let ctx = CallContext::new("agent").with_task_id("t6");
    let ticket = waiting(&registry, &ctx, "p1", &supplier).await;
    let signed = keys.carl.sign(&ticket, approve("carl"));
    let refused = registry.resume(&ticket.id, signed.clone()).await;
    assert_eq!(refused.code(), Some(RejectionCode::ReviewerNotAllowed));
    forge(&backend, &ticket.id, &signed).await;
    let outcome = ran_once(&registry).await;
    assert_eq!(outcome.code(), Some(RejectionCode::ReviewerNotAllowed));
    assert_eq!(payouts_to(&supplier), 0);
}

/// The server's confirmation key confirms a caller's own call of a tool the caller confirms,
/// and nothing else: not as another reviewer, not a payout.
async fn a_confirmation_key_decides_only_as_the_caller_of_a_tool_it_confirms(backend: Backend) {
    let keys = Keys::new();
    let card = format!("card-{}", backend.tag());
    let supplier = format!("confirmed-{}", backend.tag());
    let registry = worker(&backend, &keys).await;
    let ctx = CallContext::new("alice").with_task_id("t7");

    let payout = waiting(&registry, &ctx, "p1", &supplier).await;
    let as_alice = keys.server.sign(
        &payout,
        ApprovalDecision::Approve {
            reviewer: Reviewer::new("alice"),
        },
    );
    let refused = registry.resume(&payout.id, as_alice).await;
    assert_eq!(
        refused.code(),
        Some(RejectionCode::DecisionSignatureInvalid)
    );

    let top_up = ToolCall::new("c1", "top_up", json!({ "card": card }));
    let ticket = registry
        .dispatch(&ctx, &top_up)
        .await
        .ticket()
        .unwrap()
        .clone();
    let as_rita = keys.server.sign(&ticket, approve("rita"));
    let refused = registry.resume(&ticket.id, as_rita).await;
    assert_eq!(
        refused.code(),
        Some(RejectionCode::DecisionSignatureInvalid)
    );
    let confirmed = keys.server.sign(
        &ticket,
        ApprovalDecision::Approve {
            reviewer: Reviewer::new("alice"),
        },
    );
    let outcome = registry.resume(&ticket.id, confirmed).await;
    assert_eq!(outcome.output(), Some(&json!(format!("topped up {card}"))));
    assert_eq!(payouts_to(&card), 1);
    assert_eq!(payouts_to(&supplier), 0);
}
