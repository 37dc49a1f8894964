//! Decisions signed by a reviewer's passkey: a WebAuthn assertion whose challenge is the digest
//! of the decision. The worker verifies the assertion itself against the keyring's credential,
//! so that whoever writes the database (a console's server taken over, say) writes rows that
//! run nothing. The passkey here is the red-team kit's software authenticator, which lets each
//! test change one thing the assertion says; the console's browser tests use Chromium's.

mod common;

use std::sync::Mutex;

use common::Backend;
use portcullis::prelude::*;
use portcullis::testing::passkey::{Claims, SoftwarePasskey};
use portcullis::{ApprovalDecision, Keyring, Reviewer, SignedDecision, Ticket, record_decision};
use serde_json::json;

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

const ORIGIN: &str = "https://console.example:8443";
const RP_ID: &str = "console.example";

/// rita of finance and carl the clerk, each with a passkey; mallory's passkey is in no keyring.
struct Passkeys {
    rita: SoftwarePasskey,
    carl: SoftwarePasskey,
    mallory: SoftwarePasskey,
}

impl Passkeys {
    fn new() -> Self {
        Passkeys {
            rita: SoftwarePasskey::new(RP_ID, ORIGIN),
            carl: SoftwarePasskey::new(RP_ID, ORIGIN),
            mallory: SoftwarePasskey::new(RP_ID, ORIGIN),
        }
    }

    fn keyring(&self) -> Keyring {
        Keyring::new()
            .passkey(
                Reviewer::new("rita").with_roles(["finance"]),
                self.rita.credential(),
            )
            .passkey(
                Reviewer::new("carl").with_roles(["clerk"]),
                self.carl.credential(),
            )
    }
}

async fn worker(backend: &Backend, keyring: Keyring) -> Registry {
    let store = backend.open().await;
    Registry::builder()
        .tool(PaySupplier)
        .approval_store(store.clone())
        .keyring(keyring)
        .repeat_store(store.clone())
        .audit(store)
        .build()
        .unwrap()
}

/// `reviewer`'s approval, naming the role the console reads from the keyring for rita.
fn approve(reviewer: &str) -> ApprovalDecision {
    ApprovalDecision::Approve {
        reviewer: finance(reviewer),
    }
}

fn finance(reviewer: &str) -> Reviewer {
    Reviewer::new(reviewer).with_roles(["finance"])
}

async fn waiting(registry: &Registry, id: &str, supplier: &str) -> Ticket {
    let ctx = CallContext::new("agent").with_task_id("passkeys");
    let call = ToolCall::new(
        id,
        "pay_supplier",
        json!({"supplier": supplier, "amount_cents": 900}),
    );
    let outcome = registry.dispatch(&ctx, &call).await;
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

/// The refusal of the one call a worker's run of the decided calls ended.
async fn refused(registry: &Registry) -> Rejection {
    let mut ran = registry.run_decided().await.unwrap();
    assert_eq!(ran.len(), 1, "{ran:?}");
    let outcome = ran.remove(0).1;
    outcome.rejection().expect("refused").clone()
}

on_both!(
    a_passkey_decision_runs_once_and_says_which_passkey_signed,
    an_assertion_over_another_ticket_or_other_arguments_runs_nothing,
    a_passkey_the_keyring_does_not_hold_for_the_reviewer_runs_nothing,
    the_worker_checks_what_the_assertion_says,
);

/// The road that works: rita's passkey signs her approval in the console, which records it; a
/// worker runs the payout once and the audit names the passkey.
async fn a_passkey_decision_runs_once_and_says_which_passkey_signed(backend: Backend) {
    let passkeys = Passkeys::new();
    let supplier = format!("passkey-{}", backend.tag());
    let registry = worker(&backend, passkeys.keyring()).await;
    let ticket = waiting(&registry, "p1", &supplier).await;
    let signed = passkeys
        .rita
        .decide(&ticket, approve("rita"), &Claims::default());
    record_decision(&backend.open().await, &ticket.id, signed)
        .await
        .unwrap();
    let ran = registry.run_decided().await.unwrap();
    assert_eq!(ran.len(), 1);
    assert_eq!(
        ran[0].1.output(),
        Some(&json!(format!("paid 900 to {supplier}")))
    );
    assert!(registry.run_decided().await.unwrap().is_empty());
    assert_eq!(payouts_to(&supplier), 1);
    let records = backend.open().await.audit_records(0, None).await.unwrap();
    let resolution = records.last().unwrap().resolution.clone().unwrap();
    assert_eq!(
        resolution,
        format!(
            "approved by rita, signed with passkey {}",
            passkeys.rita.credential_id()
        )
    );

    // An edit and a rejection, each signed by the passkey, count as well.
    let edited = waiting(&registry, "p2", &supplier).await;
    let edit = ApprovalDecision::Edit {
        reviewer: finance("rita"),
        arguments: json!({"supplier": supplier, "amount_cents": 100}),
    };
    let outcome = registry
        .resume(
            &edited.id,
            passkeys.rita.decide(&edited, edit, &Claims::default()),
        )
        .await;
    assert_eq!(
        outcome.output(),
        Some(&json!(format!("paid 100 to {supplier}")))
    );
    let rejected = waiting(&registry, "p3", &supplier).await;
    let reject = ApprovalDecision::Reject {
        reviewer: finance("rita"),
        message: "this supplier was paid this month".to_owned(),
    };
    let outcome = registry
        .resume(
            &rejected.id,
            passkeys.rita.decide(&rejected, reject, &Claims::default()),
        )
        .await;
    assert_eq!(outcome.code(), Some(RejectionCode::ApprovalRejected));
    assert!(
        outcome
            .rejection()
            .unwrap()
            .message()
            .contains("this supplier was paid this month"),
        "{outcome:?}"
    );
    assert_eq!(payouts_to(&supplier), 2);
}

/// Whoever writes the database puts rita's real assertion where it does not belong: her
/// approval of one payout onto another ticket, her edit with other arguments, her approval
/// after the waiting call was changed to pay a thief. None runs.
async fn an_assertion_over_another_ticket_or_other_arguments_runs_nothing(backend: Backend) {
    let passkeys = Passkeys::new();
    let supplier = format!("honest-{}", backend.tag());
    let thief = format!("thief-{}", backend.tag());
    let registry = worker(&backend, passkeys.keyring()).await;
    let other_call = "it was made over another ticket, another call or another decision";

    let first = waiting(&registry, "p1", &supplier).await;
    let second = waiting(&registry, "p2", &supplier).await;
    let signed = passkeys
        .rita
        .decide(&first, approve("rita"), &Claims::default());
    forge(&backend, &second.id, &signed).await;
    let rejection = refused(&registry).await;
    assert_eq!(rejection.code(), RejectionCode::DecisionSignatureInvalid);
    assert!(rejection.message().contains(other_call), "{rejection:?}");

    let edited = waiting(&registry, "p3", &supplier).await;
    let edit = ApprovalDecision::Edit {
        reviewer: finance("rita"),
        arguments: json!({"supplier": supplier, "amount_cents": 100}),
    };
    let mut signed = passkeys.rita.decide(&edited, edit, &Claims::default());
    if let ApprovalDecision::Edit { arguments, .. } = &mut signed.decision {
        *arguments = json!({"supplier": thief, "amount_cents": 100});
    }
    forge(&backend, &edited.id, &signed).await;
    let rejection = refused(&registry).await;
    assert_eq!(rejection.code(), RejectionCode::DecisionSignatureInvalid);
    assert!(rejection.message().contains(other_call), "{rejection:?}");

    let changed = waiting(&registry, "p4", &supplier).await;
    let signed = passkeys
        .rita
        .decide(&changed, approve("rita"), &Claims::default());
    forge(&backend, &changed.id, &signed).await;
    backend
        .tamper(&format!(
            "UPDATE pending_calls SET call = replace(call, '{supplier}', '{thief}') WHERE ticket_id = '{}'",
            changed.id
        ))
        .await;
    let rejection = refused(&registry).await;
    assert_eq!(rejection.code(), RejectionCode::DecisionSignatureInvalid);
    assert!(rejection.message().contains(other_call), "{rejection:?}");

    // A rejection turned into an approval, its signature kept.
    let turned = waiting(&registry, "p5", &supplier).await;
    let reject = ApprovalDecision::Reject {
        reviewer: finance("rita"),
        message: "no".to_owned(),
    };
    let mut signed = passkeys.rita.decide(&turned, reject, &Claims::default());
    signed.decision = approve("rita");
    forge(&backend, &turned.id, &signed).await;
    let rejection = refused(&registry).await;
    assert_eq!(rejection.code(), RejectionCode::DecisionSignatureInvalid);

    assert_eq!(payouts_to(&supplier) + payouts_to(&thief), 0);
}

/// mallory's passkey under rita's credential id, rita's passkey naming carl, carl's own
/// passkey (a clerk) approving a payout: none counts.
async fn a_passkey_the_keyring_does_not_hold_for_the_reviewer_runs_nothing(backend: Backend) {
    let passkeys = Passkeys::new();
    let supplier = format!("impostor-{}", backend.tag());
    let registry = worker(&backend, passkeys.keyring()).await;

    let ticket = waiting(&registry, "p1", &supplier).await;
    let mut signed = passkeys
        .mallory
        .decide(&ticket, approve("rita"), &Claims::default());
    signed.signature.as_mut().unwrap().key = format!("passkey:{}", passkeys.rita.credential_id());
    let outcome = registry.resume(&ticket.id, signed.clone()).await;
    assert_eq!(
        outcome.code(),
        Some(RejectionCode::DecisionSignatureInvalid)
    );
    assert!(
        outcome
            .rejection()
            .unwrap()
            .message()
            .contains("the passkey the keyring holds did not make it"),
        "{outcome:?}"
    );

    let ticket = waiting(&registry, "p2", &supplier).await;
    let as_carl = passkeys
        .rita
        .decide(&ticket, approve("carl"), &Claims::default());
    forge(&backend, &ticket.id, &as_carl).await;
    let rejection = refused(&registry).await;
    assert_eq!(rejection.code(), RejectionCode::DecisionSignatureInvalid);
    assert!(
        rejection.message().contains(&format!(
            "holds no passkey {} for `carl`",
            passkeys.rita.credential_id()
        )),
        "{rejection:?}"
    );

    let ticket = waiting(&registry, "p3", &supplier).await;
    let by_clerk = passkeys
        .carl
        .decide(&ticket, approve("carl"), &Claims::default());
    forge(&backend, &ticket.id, &by_clerk).await;
    assert_eq!(
        refused(&registry).await.code(),
        RejectionCode::ReviewerNotAllowed
    );

    // A passkey's signature without the data the passkey signed.
    let ticket = waiting(&registry, "p4", &supplier).await;
    let mut bare = passkeys
        .rita
        .decide(&ticket, approve("rita"), &Claims::default());
    bare.signature.as_mut().unwrap().webauthn = None;
    forge(&backend, &ticket.id, &bare).await;
    assert_eq!(
        refused(&registry).await.code(),
        RejectionCode::DecisionSignatureInvalid
    );
    assert_eq!(payouts_to(&supplier), 0);
}

/// rita's own passkey, each time with one thing in the assertion that a relying party must
/// refuse: the refusal says which.
async fn the_worker_checks_what_the_assertion_says(backend: Backend) {
    let passkeys = Passkeys::new();
    let supplier = format!("checked-{}", backend.tag());
    let cases: Vec<(Claims, &str)> = vec![
        (
            Claims {
                origin: Some("https://evil.example".to_owned()),
                ..Claims::default()
            },
            "it was made on https://evil.example, and the passkey signs decisions on https://console.example:8443 only",
        ),
        (
            Claims {
                cross_origin: true,
                ..Claims::default()
            },
            "it was made in a frame of another origin",
        ),
        (
            Claims {
                kind: "webauthn.create".to_owned(),
                ..Claims::default()
            },
            "its client data is a `webauthn.create`, not an assertion (`webauthn.get`)",
        ),
        (
            Claims {
                rp_id: Some("evil.example".to_owned()),
                ..Claims::default()
            },
            "it was made for another relying party than console.example",
        ),
        (
            Claims {
                flags: 0x01,
                ..Claims::default()
            },
            "the authenticator did not verify the reviewer (a PIN or a biometric)",
        ),
        (
            Claims {
                flags: 0x04,
                ..Claims::default()
            },
            "the authenticator did not see the reviewer present",
        ),
        (
            Claims {
                count: Some(5),
                ..Claims::default()
            },
            "its signature count 5 is not past the keyring's 5: the passkey may have been copied",
        ),
    ];
    let mut enrolled = passkeys.rita.credential();
    enrolled.sign_count = 5;
    let keyring = Keyring::new().passkey(Reviewer::new("rita").with_roles(["finance"]), enrolled);
    let registry = worker(&backend, keyring).await;
    for (at, (says, why)) in cases.into_iter().enumerate() {
        let ticket = waiting(&registry, &format!("p{at}"), &supplier).await;
        let signed = passkeys.rita.decide(&ticket, approve("rita"), &says);
        forge(&backend, &ticket.id, &signed).await;
        let rejection = refused(&registry).await;
        assert_eq!(rejection.code(), RejectionCode::DecisionSignatureInvalid);
        assert_eq!(
            rejection.message(),
            format!("the decision's signature does not count: {why}")
        );
    }
    assert_eq!(payouts_to(&supplier), 0);

    // The same passkey, counting past the keyring's count, on the right origin: it runs.
    let ticket = waiting(&registry, "ok", &supplier).await;
    let signed = passkeys.rita.decide(
        &ticket,
        approve("rita"),
        &Claims {
            count: Some(6),
            ..Claims::default()
        },
    );
    let outcome = registry.resume(&ticket.id, signed).await;
    assert!(outcome.output().is_some(), "{outcome:?}");
    assert_eq!(payouts_to(&supplier), 1);
}
