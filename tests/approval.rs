//! The approve gate: pending tickets, approve, edit (re-validated), reject, expiry, replay, and
//! the registry's defaults for risk.

use std::time::Duration;

use portcullis::audit::MemoryAuditSink;
use portcullis::prelude::*;
use portcullis::{ApprovalDecision, AutoReject, BudgetLimits, Gate, Outcome, Reviewer};
use serde_json::json;

/// Refund part of a payment to one of the caller's customers.
#[tool(
    risk = "critical",
    role = "billing_admin",
    irreversible = "refunds settle at once",
    cost = 1
)]
fn refund(
    #[tenant] tenant: String,
    #[validate(range(min = 1, max = 50_000))] amount_cents: u32,
    #[sensitive] card_last4: String,
) -> Result<String, ToolError> {
    let _ = card_last4;
    Ok(format!("refunded {amount_cents} for {tenant}"))
}

/// Only production deployments need a human.
fn in_production(ctx: &CallContext, _args: &DeployArgs) -> bool {
    ctx.environment() == Some("production")
}

/// Deploy a service version.
#[tool(risk = "medium", approval = in_production)]
fn deploy(service: String, version: String) -> Result<String, ToolError> {
    Ok(format!("{service}@{version}"))
}

/// Rotate a key.
#[tool(risk = "high", rollback = restore_key)]
fn rotate_key(key_id: String) -> Result<String, ToolError> {
    Ok(key_id)
}

async fn restore_key(_: &CallContext, _: &RotateKeyArgs, _: &String) -> Result<(), ToolError> {
    Ok(())
}

fn billing() -> CallContext {
    CallContext::new("bo")
        .with_roles(["billing_admin"])
        .with_tenant("t_001")
}

fn refund_call(amount: u32) -> ToolCall {
    ToolCall::new(
        "call_9",
        "refund",
        json!({"tenant": "t_001", "amount_cents": amount, "card_last4": "4242"}),
    )
}

fn registry(sink: MemoryAuditSink) -> Registry {
    Registry::builder()
        .tool(Refund)
        .tool(Deploy)
        .tool(RotateKey)
        .budget(BudgetLimits {
            max_calls_per_task: Some(5),
            ..BudgetLimits::default()
        })
        .audit(sink)
        .build()
        .unwrap()
}

fn approve() -> ApprovalDecision {
    ApprovalDecision::Approve {
        reviewer: "rita".into(),
    }
}

#[tokio::test]
async fn a_critical_call_waits_then_runs_when_approved() {
    let sink = MemoryAuditSink::default();
    let registry = registry(sink.clone());
    let outcome = registry.dispatch(&billing(), &refund_call(1200)).await;
    let ticket = outcome
        .ticket()
        .expect("a critical call waits for a human")
        .clone();
    assert_eq!(
        (
            ticket.tool.as_str(),
            ticket.call_id.as_str(),
            ticket.actor.as_str()
        ),
        ("refund", "call_9", "bo")
    );
    assert_eq!(
        ticket.arguments["card_last4"], "[redacted]",
        "the reviewer sees no secrets"
    );
    assert!(
        ticket.description.contains("cannot be undone"),
        "{}",
        ticket.description
    );
    assert_eq!(
        registry.pending_tickets().await.unwrap(),
        vec![ticket.clone()]
    );

    let outcome = registry.resume(&ticket.id, approve()).await;
    assert_eq!(outcome.output(), Some(&json!("refunded 1200 for t_001")));
    assert!(registry.pending_tickets().await.unwrap().is_empty());

    // Decided once: a replayed decision is refused.
    let replay = registry.resume(&ticket.id, approve()).await;
    let rejection = replay.rejection().unwrap();
    assert_eq!(
        (rejection.code(), rejection.gate()),
        (RejectionCode::TicketNotPending, Gate::Approve)
    );

    let records = sink.records();
    let decisions: Vec<(&str, Option<&str>)> = records
        .iter()
        .map(|record| (record.decision.as_str(), record.resolution.as_deref()))
        .collect();
    assert_eq!(
        decisions,
        [
            ("pending", None),
            ("about_to_run", None),
            ("completed", Some("approved by rita, unsigned"))
        ]
    );
    assert_eq!(
        records[0].budget_calls, 0,
        "a waiting call's record counts nothing"
    );
    assert_eq!(
        records[1].budget_calls, 0,
        "nor does the record written ahead of the run"
    );
    assert_eq!(
        records[2].budget_calls, 1,
        "the run's record counts it, once"
    );
    assert!(portcullis::audit::verify(&records, None).is_ok());
}

#[tokio::test]
async fn an_edit_passes_every_gate_again() {
    let sink = MemoryAuditSink::default();
    let registry = registry(sink.clone());
    let edit = |arguments: serde_json::Value| ApprovalDecision::Edit {
        reviewer: "rita".into(),
        arguments,
    };

    let ticket = registry
        .dispatch(&billing(), &refund_call(1200))
        .await
        .ticket()
        .unwrap()
        .clone();
    let outcome = registry
        .resume(
            &ticket.id,
            edit(json!({"tenant": "t_001", "amount_cents": 99_999_999, "card_last4": "4242"})),
        )
        .await;
    assert_eq!(
        outcome.code(),
        Some(RejectionCode::ConstraintViolation),
        "no smuggling past validate"
    );

    let ticket = registry
        .dispatch(&billing(), &refund_call(1200))
        .await
        .ticket()
        .unwrap()
        .clone();
    let outcome = registry
        .resume(
            &ticket.id,
            edit(json!({"tenant": "t_999", "amount_cents": 100, "card_last4": "4242"})),
        )
        .await;
    assert_eq!(
        outcome.code(),
        Some(RejectionCode::TenantMismatch),
        "no smuggling past authorize"
    );

    let ticket = registry
        .dispatch(&billing(), &refund_call(1200))
        .await
        .ticket()
        .unwrap()
        .clone();
    let outcome = registry
        .resume(
            &ticket.id,
            edit(json!({"tenant": "t_001", "amount_cents": 600, "card_last4": "4242"})),
        )
        .await;
    assert_eq!(outcome.output(), Some(&json!("refunded 600 for t_001")));
    let last = sink.records().pop().unwrap();
    assert_eq!(last.resolution.as_deref(), Some("edited by rita, unsigned"));
    assert_eq!(
        last.original_arguments.as_ref().unwrap()["amount_cents"],
        1200
    );
    assert_eq!(last.arguments["amount_cents"], 600);
    assert_eq!(
        last.original_arguments.as_ref().unwrap()["card_last4"],
        "[redacted]"
    );
}

#[tokio::test]
async fn a_rejection_goes_back_to_the_model() {
    let registry = registry(MemoryAuditSink::default());
    let ticket = registry
        .dispatch(&billing(), &refund_call(1200))
        .await
        .ticket()
        .unwrap()
        .clone();
    let decision = ApprovalDecision::Reject {
        reviewer: "rita".into(),
        message: "refund the order, not the card".into(),
    };
    let outcome = registry.resume(&ticket.id, decision).await;
    let rejection = outcome.rejection().unwrap();
    assert_eq!(rejection.code(), RejectionCode::ApprovalRejected);
    assert!(
        rejection
            .message()
            .contains("refund the order, not the card")
    );
    assert!(!rejection.retryable());
}

#[tokio::test]
async fn tickets_expire() {
    let registry = Registry::builder()
        .tool(Refund)
        .approval_lifetime(Duration::ZERO)
        .build()
        .unwrap();
    let ticket = registry
        .dispatch(&billing(), &refund_call(1200))
        .await
        .ticket()
        .unwrap()
        .clone();
    let outcome = registry.resume(&ticket.id, approve()).await;
    assert_eq!(outcome.code(), Some(RejectionCode::ApprovalExpired));
}

#[tokio::test]
async fn a_predicate_and_the_registry_default_decide_for_lower_risks() {
    let registry = registry(MemoryAuditSink::default());
    let deploy = ToolCall::new("d", "deploy", json!({"service": "api", "version": "1.2.3"}));
    let staging = CallContext::new("dev").with_environment("staging");
    let production = CallContext::new("dev").with_environment("production");
    assert!(registry.dispatch(&staging, &deploy).await.is_completed());
    assert!(matches!(
        registry.dispatch(&production, &deploy).await,
        Outcome::Pending(_)
    ));

    let rotate = ToolCall::new("r", "rotate_key", json!({"key_id": "k1"}));
    assert!(
        registry.dispatch(&staging, &rotate).await.is_completed(),
        "high risk: off by default"
    );
    let strict = Registry::builder()
        .tool(RotateKey)
        .approval_for_high_risk(true)
        .build()
        .unwrap();
    assert!(matches!(
        strict.dispatch(&staging, &rotate).await,
        Outcome::Pending(_)
    ));
}

#[tokio::test]
async fn an_inline_approver_decides_while_the_dispatch_waits() {
    let registry = Registry::builder()
        .tool(Refund)
        .approver(AutoReject)
        .build()
        .unwrap();
    let outcome = registry.dispatch(&billing(), &refund_call(1200)).await;
    assert_eq!(outcome.code(), Some(RejectionCode::ApprovalRejected));
    assert!(registry.pending_tickets().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_ticket_runs_only_its_own_call() {
    let registry = registry(MemoryAuditSink::default());
    let small = registry
        .dispatch(&billing(), &refund_call(100))
        .await
        .ticket()
        .unwrap()
        .clone();
    let large = registry
        .dispatch(&billing(), &refund_call(40_000))
        .await
        .ticket()
        .unwrap()
        .clone();
    let outcome = registry.resume(&small.id, approve()).await;
    assert_eq!(outcome.output(), Some(&json!("refunded 100 for t_001")));
    assert_eq!(registry.pending_tickets().await.unwrap(), vec![large]);
}

/// Cancel an order; the person at the client confirms it.
#[tool(risk = "medium", caller_confirms)]
fn cancel(order_id: u64) -> Result<String, ToolError> {
    Ok(format!("cancelled {order_id}"))
}

#[tokio::test]
async fn the_caller_confirms_its_own_call_only_where_the_contract_allows() {
    let registry = Registry::builder()
        .tool(Cancel)
        .tool(Refund)
        .approvers(["finance"])
        .build()
        .unwrap();
    assert!(registry.contract("cancel").unwrap().caller_confirms());
    let caller = || CallContext::new("cal").with_tenant("t_001");
    // A low-risk tool that the caller confirms still waits for that confirmation.
    let outcome = registry
        .dispatch(
            &caller(),
            &ToolCall::new("c1", "cancel", json!({"order_id": 1})),
        )
        .await;
    let ticket = outcome.ticket().expect("the call waits").clone();
    assert!(ticket.caller_confirms);
    // Only the caller itself, in its own tenant: not the same name under another tenant, nor
    // an operator without the approver role.
    let elsewhere = Reviewer::new("cal").with_tenant("t_002");
    let refused = registry
        .resume(
            &ticket.id,
            ApprovalDecision::Approve {
                reviewer: elsewhere,
            },
        )
        .await;
    assert_eq!(refused.code(), Some(RejectionCode::ReviewerNotAllowed));
    let stranger = Reviewer::new("oscar");
    let refused = registry
        .resume(&ticket.id, ApprovalDecision::Approve { reviewer: stranger })
        .await;
    assert_eq!(refused.code(), Some(RejectionCode::ReviewerNotAllowed));
    let itself = Reviewer::new("cal").with_tenant("t_001");
    let confirmed = registry
        .resume(&ticket.id, ApprovalDecision::Approve { reviewer: itself })
        .await;
    assert_eq!(confirmed.output(), Some(&json!("cancelled 1")));

    // Where the contract does not allow it, a caller's answer is never an approval.
    let outcome = registry.dispatch(&billing(), &refund_call(100)).await;
    let ticket = outcome.ticket().expect("the refund waits").clone();
    assert!(!ticket.caller_confirms);
    let itself = Reviewer::new("bo")
        .with_roles(["finance"])
        .with_tenant("t_001");
    let refused = registry
        .resume(&ticket.id, ApprovalDecision::Approve { reviewer: itself })
        .await;
    assert_eq!(refused.code(), Some(RejectionCode::SelfApproval));
}

#[tokio::test]
async fn follow_runs_a_recorded_decision_once_and_then_reports_it_left() {
    use portcullis::{InMemoryApprovalStore, Progress, record_decision};
    let store = InMemoryApprovalStore::default();
    let registry = Registry::builder()
        .tool(Refund)
        .approval_store(store.clone())
        .accept_unsigned_decisions()
        .build()
        .unwrap();
    let ctx = billing();
    let outcome = registry.dispatch(&ctx, &refund_call(100)).await;
    let ticket = outcome.ticket().unwrap().clone();
    assert_eq!(registry.follow(&ticket.id).await, Ok(Progress::Waiting));
    let rita = Reviewer::new("rita").with_roles(["billing_admin"]);
    record_decision(
        &store,
        &ticket.id,
        ApprovalDecision::Approve { reviewer: rita },
    )
    .await
    .unwrap();
    let Ok(Progress::Ended(ran)) = registry.follow(&ticket.id).await else {
        panic!("the decision was not carried out");
    };
    assert_eq!(ran.output(), Some(&json!("refunded 100 for t_001")));
    assert_eq!(registry.follow(&ticket.id).await, Ok(Progress::Left));
    // The same call again reads how it ended; it does not run again.
    let again = registry.dispatch(&ctx, &refund_call(100)).await;
    assert_eq!(again, ran);
}

/// Approves every ticket as rita, signing with her key.
struct RitaSigns(portcullis::DecisionKey);

impl portcullis::Approver for RitaSigns {
    fn decide<'a>(
        &'a self,
        ticket: &'a portcullis::Ticket,
    ) -> portcullis::BoxFuture<'a, portcullis::SignedDecision> {
        let rita = Reviewer::new("rita").with_roles(["finance"]);
        let decision = ApprovalDecision::Approve { reviewer: rita };
        Box::pin(std::future::ready(self.0.sign(ticket, decision)))
    }
}

/// With a keyring, an in-line approver's decision counts only signed by a key the keyring
/// holds: `AutoApprove` leaves the call waiting, refused as unsigned; a signing approver runs
/// it, and the audit says by which key.
#[tokio::test]
async fn an_in_line_approver_counts_only_signed_where_a_keyring_is_set() {
    let rita = portcullis::DecisionKey::generate();
    let keyring = portcullis::Keyring::new().reviewer(
        Reviewer::new("rita").with_roles(["finance"]),
        rita.public_key(),
    );
    let unsigned = Registry::builder()
        .tool(Refund)
        .keyring(keyring.clone())
        .approver(portcullis::AutoApprove)
        .build()
        .unwrap();
    let waiting = unsigned.dispatch(&billing(), &refund_call(100)).await;
    assert!(waiting.ticket().is_some(), "{waiting:?}");
    let refused = unsigned
        .resume(
            &waiting.ticket().unwrap().id,
            ApprovalDecision::Approve {
                reviewer: Reviewer::new("rita").with_roles(["finance"]),
            },
        )
        .await;
    assert_eq!(refused.code(), Some(RejectionCode::DecisionUnsigned));

    let sink = MemoryAuditSink::default();
    let signed = Registry::builder()
        .tool(Refund)
        .keyring(keyring)
        .approver(RitaSigns(rita.clone()))
        .audit(sink.clone())
        .build()
        .unwrap();
    let outcome = signed.dispatch(&billing(), &refund_call(100)).await;
    assert_eq!(outcome.output(), Some(&json!("refunded 100 for t_001")));
    let resolution = sink.records().last().unwrap().resolution.clone();
    assert_eq!(
        resolution.as_deref(),
        Some(format!("approved by rita, signed with {}", rita.public_key()).as_str())
    );
}

/// Claims kept in memory, that can be made unreachable, as a database that is down.
#[derive(Clone, Default)]
struct FlakyClaims {
    claims: portcullis::InMemoryRepeatStore,
    down: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl portcullis::RepeatStore for FlakyClaims {
    fn claim<'a>(
        &'a self,
        key: &'a portcullis::CallKey,
        fingerprint: &'a str,
        lease_start_ms: u64,
    ) -> portcullis::BoxFuture<'a, portcullis::Claim> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Box::pin(std::future::ready(portcullis::Claim::Unavailable));
        }
        self.claims.claim(key, fingerprint, lease_start_ms)
    }

    fn update<'a>(
        &'a self,
        key: &'a portcullis::CallKey,
        state: portcullis::ClaimState,
    ) -> portcullis::BoxFuture<'a, ()> {
        self.claims.update(key, state)
    }

    fn release<'a>(&'a self, key: &'a portcullis::CallKey) -> portcullis::BoxFuture<'a, ()> {
        self.claims.release(key)
    }
}

/// A decided call whose claim cannot be read when a worker takes it does not run and is not
/// lost: it stays under the worker's lease, and runs once the claims are back and the lease
/// ran out.
#[tokio::test]
async fn a_decided_call_waits_while_its_claims_cannot_be_read() {
    let store = portcullis::InMemoryApprovalStore::default();
    let claims = FlakyClaims::default();
    let registry = Registry::builder()
        .tool(Refund)
        .approval_store(store.clone())
        .accept_unsigned_decisions()
        .approval_lease(Duration::from_millis(50))
        .repeat_store(claims.clone())
        .build()
        .unwrap();
    let ticket = registry
        .dispatch(&billing(), &refund_call(300))
        .await
        .ticket()
        .unwrap()
        .id
        .clone();
    let rita = Reviewer::new("rita").with_roles(["finance"]);
    portcullis::record_decision(
        &store,
        &ticket,
        ApprovalDecision::Approve { reviewer: rita },
    )
    .await
    .unwrap();

    claims.down.store(true, std::sync::atomic::Ordering::SeqCst);
    let ran = registry.run_decided().await.unwrap();
    assert_eq!(ran.len(), 1);
    assert_eq!(ran[0].1.code(), Some(RejectionCode::ClaimsUnavailable));

    claims
        .down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let ran = registry.run_decided().await.unwrap();
    assert_eq!(ran.len(), 1, "the call was kept");
    assert_eq!(ran[0].1.output(), Some(&json!("refunded 300 for t_001")));
    assert!(
        registry.run_decided().await.unwrap().is_empty(),
        "it ran once"
    );
}
