//! Secrets sealed at rest: a store given seal keys keeps no plain text of a `#[sensitive]`
//! argument in any row (the pending call, its decision, the claim, a transaction's steps), a
//! store without the key refuses with `seal_key_missing` and loses nothing, keys rotate, and a
//! sealed value moved to another row does not open. On SQLite and on PostgreSQL, reading the
//! raw tables as whoever holds the database file or a backup would.

mod common;

use std::sync::Mutex;
use std::time::Duration;

use common::Backend;
use portcullis::prelude::*;
use portcullis::{ApprovalDecision, DecisionKey, Keyring, Reviewer, record_decision};
use portcullis_stores::{PostgresTls, SealKeys, Store, postgres_client};
use serde_json::json;

/// The IBANs paid to; each test uses its own.
static PAID: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn paid_to(iban: &str) -> usize {
    PAID.lock()
        .unwrap()
        .iter()
        .filter(|paid| *paid == iban)
        .count()
}

/// Pay a supplier.
#[tool(
    risk = "critical",
    irreversible = "payouts settle at once",
    approver = "finance"
)]
fn pay_supplier(
    supplier: String,
    amount_cents: u64,
    #[sensitive] iban: String,
) -> Result<String, ToolError> {
    PAID.lock().unwrap().push(iban.clone());
    Ok(format!("paid {amount_cents} to {supplier} at {iban}"))
}

/// Hold an amount on a card, undone by releasing it.
#[tool(risk = "high", rollback = release)]
fn hold(#[sensitive] card: String, amount_cents: u64) -> Result<String, ToolError> {
    Ok(format!("held {amount_cents} on {card}"))
}

async fn release(_: &CallContext, _: &HoldArgs, _: &String) -> Result<(), ToolError> {
    Ok(())
}

fn rita() -> DecisionKey {
    DecisionKey::from_text(&format!("ed25519:{}", "3a".repeat(32))).unwrap()
}

/// A worker on `store`.
fn worker(store: Store, lifetime: Duration) -> Registry {
    Registry::builder()
        .tool(PaySupplier)
        .tool(Hold)
        .approval_store(store.clone())
        .approval_lifetime(lifetime)
        .keyring(Keyring::new().reviewer(
            Reviewer::new("rita").with_roles(["finance"]),
            rita().public_key(),
        ))
        .repeat_store(store.clone())
        .transaction_store(store, Duration::from_secs(600))
        .build()
        .unwrap()
}

fn payout(id: &str, iban: &str) -> ToolCall {
    ToolCall::new(
        id,
        "pay_supplier",
        json!({"supplier": "acme", "amount_cents": 900, "iban": iban}),
    )
}

fn approve() -> ApprovalDecision {
    ApprovalDecision::Approve {
        reviewer: Reviewer::new("rita").with_roles(["finance"]),
    }
}

/// Every row of `table` as text, as whoever reads the database file or the table sees it.
async fn dump(backend: &Backend, table: &str) -> String {
    if backend.tag() == "postgres" {
        let client = postgres_client(&backend.location, &PostgresTls::default())
            .await
            .unwrap();
        let rows = client
            .query(
                &format!("SELECT row_to_json(t)::text FROM portcullis.{table} t"),
                &[],
            )
            .await
            .unwrap();
        rows.iter()
            .map(|row| row.get::<_, String>(0))
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        let connection = rusqlite::Connection::open(&backend.location).unwrap();
        let mut statement = connection
            .prepare(&format!("SELECT * FROM {table}"))
            .unwrap();
        let columns = statement.column_count();
        let rows = statement
            .query_map([], |row| {
                (0..columns)
                    .map(|at| {
                        let value: rusqlite::types::Value = row.get(at)?;
                        Ok(format!("{value:?}"))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .unwrap();
        rows.map(|row| row.unwrap().join(" | "))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Everything the tables that may hold a call's secrets hold, as raw text.
async fn raw(backend: &Backend) -> String {
    let mut text = String::new();
    for table in [
        "pending_calls",
        "claims",
        "transactions",
        "transaction_steps",
    ] {
        text.push_str(&dump(backend, table).await);
        text.push('\n');
    }
    text
}

on_both!(
    no_row_holds_a_sensitive_value_in_clear,
    a_store_without_the_key_refuses_and_loses_nothing,
    rotated_keys_open_what_the_old_key_sealed,
    a_sealed_call_moved_to_another_row_does_not_open,
    a_call_written_in_clear_into_a_sealed_store_does_not_read,
);

/// Whoever writes the table puts a call in clear under a sealed ticket (one a store without
/// keys wrote, paying someone else): a store with keys reads only sealed values, and runs
/// nothing.
async fn a_call_written_in_clear_into_a_sealed_store_does_not_read(backend: Backend) {
    let keys = SealKeys::generate("k1");
    let sealed = worker(
        backend.open().await.sealed_with(keys),
        Duration::from_secs(600),
    );
    let keyless = worker(backend.open().await, Duration::from_secs(600));
    let ctx = CallContext::new("agent").with_task_id("t5");
    let honest = format!("BE68539007547034{}", backend.tag().len());
    let thief = format!("LU280019400644750000{}", backend.tag().len());
    let ticket = sealed.dispatch(&ctx, &payout("p1", &honest)).await;
    let ticket = ticket.ticket().unwrap().clone();
    let plain = keyless.dispatch(&ctx, &payout("p2", &thief)).await;
    let plain = plain.ticket().unwrap().clone();
    backend
        .tamper(&format!(
            "UPDATE pending_calls SET call = (SELECT call FROM pending_calls WHERE ticket_id = '{}')
             WHERE ticket_id = '{}'",
            plain.id, ticket.id
        ))
        .await;
    let outcome = sealed
        .resume(&ticket.id, rita().sign(&ticket, approve()))
        .await;
    assert_eq!(outcome.code(), Some(RejectionCode::ApprovalsUnavailable));
    assert_eq!(paid_to(&honest) + paid_to(&thief), 0);
}

/// The IBAN of a payout waiting for approval, of an edit that changes it, of the claim's
/// outcome once it ran, and the card of a transaction's step: none in any row, in clear.
async fn no_row_holds_a_sensitive_value_in_clear(backend: Backend) {
    let keys = SealKeys::generate("k1");
    let store = backend.open().await.sealed_with(keys);
    let registry = worker(store.clone(), Duration::from_secs(600));
    let ctx = CallContext::new("agent").with_task_id("t1");
    let iban = format!("DE89370400440532013{}", backend.tag().len());
    let edited_iban = format!("FR7630006000011234567890{}", backend.tag().len());
    let card = "4111111111111111";

    let ticket = registry
        .dispatch(&ctx, &payout("p1", &iban))
        .await
        .ticket()
        .unwrap()
        .clone();
    let waiting = raw(&backend).await;
    assert!(waiting.contains(&ticket.id), "the dump reads the rows");
    assert!(!waiting.contains(&iban), "{waiting}");

    let edit = ApprovalDecision::Edit {
        reviewer: Reviewer::new("rita").with_roles(["finance"]),
        arguments: json!({"supplier": "acme", "amount_cents": 900, "iban": edited_iban}),
    };
    record_decision(&store, &ticket.id, rita().sign(&ticket, edit))
        .await
        .unwrap();
    let decided = raw(&backend).await;
    assert!(!decided.contains(&edited_iban), "{decided}");
    let ran = registry.run_decided().await.unwrap();
    assert!(ran[0].1.output().is_some(), "{:?}", ran[0].1);
    assert_eq!(paid_to(&edited_iban), 1);

    let mut transaction = registry.transaction(&ctx);
    let step = ToolCall::new("h1", "hold", json!({"card": card, "amount_cents": 5}));
    assert!(transaction.dispatch(&step).await.is_completed());
    let after = raw(&backend).await;
    for secret in [iban.as_str(), edited_iban.as_str(), card] {
        assert!(!after.contains(secret), "{secret} in {after}");
    }
    assert!(after.contains("sealed:v1:k1:"), "{after}");
    transaction.commit().await;
}

/// A worker opened without the key cannot read a sealed call: it refuses with its own code,
/// runs nothing, and the call is still there for a worker that has the key, expired or not.
async fn a_store_without_the_key_refuses_and_loses_nothing(backend: Backend) {
    let keys = SealKeys::generate("k1");
    let sealed = worker(
        backend.open().await.sealed_with(keys.clone()),
        Duration::from_millis(400),
    );
    let ctx = CallContext::new("agent").with_task_id("t2");
    let iban = format!("GB29NWBK60161331926819{}", backend.tag().len());
    let ticket = sealed
        .dispatch(&ctx, &payout("p1", &iban))
        .await
        .ticket()
        .unwrap()
        .clone();

    let keyless_store = backend.open().await;
    let keyless = worker(keyless_store.clone(), Duration::from_millis(400));
    let decision = rita().sign(&ticket, approve());
    let refused = keyless.resume(&ticket.id, decision.clone()).await;
    assert_eq!(refused.code(), Some(RejectionCode::SealKeyMissing));
    let refused = record_decision(&keyless_store, &ticket.id, decision.clone())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), RejectionCode::SealKeyMissing);
    // The queue still lists it: its ticket is kept in clear, redacted.
    let queue = keyless.pending_tickets().await.unwrap();
    assert_eq!(
        queue.iter().map(|t| &t.id).collect::<Vec<_>>(),
        [&ticket.id]
    );
    // A repeat of the call cannot read its claim: refused, nothing runs.
    let repeated = keyless.dispatch(&ctx, &payout("p1", &iban)).await;
    assert_eq!(repeated.code(), Some(RejectionCode::ClaimsUnavailable));

    // Past its expiry, a sweep without the key ends nothing; one with the key ends it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(keyless.expire_tickets().await.is_empty());
    let expired = sealed.expire_tickets().await;
    assert_eq!(
        expired.iter().map(|t| &t.id).collect::<Vec<_>>(),
        [&ticket.id]
    );
    assert_eq!(paid_to(&iban), 0);
}

/// New values are sealed with the new key; what the old key sealed still opens, and its
/// decision runs.
async fn rotated_keys_open_what_the_old_key_sealed(backend: Backend) {
    let old = SealKeys::generate("2026-11");
    let before = worker(
        backend.open().await.sealed_with(old.clone()),
        Duration::from_secs(600),
    );
    let ctx = CallContext::new("agent").with_task_id("t3");
    let iban = format!("NL91ABNA041716430{}", backend.tag().len());
    let ticket = before
        .dispatch(&ctx, &payout("p1", &iban))
        .await
        .ticket()
        .unwrap()
        .clone();

    let rotated = SealKeys::generate("2027-01").and_previous(old);
    let after = worker(
        backend.open().await.sealed_with(rotated),
        Duration::from_secs(600),
    );
    let outcome = after
        .resume(&ticket.id, rita().sign(&ticket, approve()))
        .await;
    assert!(outcome.output().is_some(), "{outcome:?}");
    assert_eq!(paid_to(&iban), 1);
    let newer = after
        .dispatch(&ctx, &payout("p2", &iban))
        .await
        .ticket()
        .unwrap()
        .clone();
    let rows = dump(&backend, "pending_calls").await;
    assert!(
        rows.contains(&newer.id) && rows.contains("sealed:v1:2027-01:"),
        "{rows}"
    );
    // A repeat of the first call reads its outcome through the old key's claim.
    let repeated = after.dispatch(&ctx, &payout("p1", &iban)).await;
    assert_eq!(repeated, outcome);
    assert_eq!(paid_to(&iban), 1);
}

/// Whoever writes the table copies the sealed call of one ticket into another's row: it does
/// not open there, and nothing runs.
async fn a_sealed_call_moved_to_another_row_does_not_open(backend: Backend) {
    let keys = SealKeys::generate("k1");
    let registry = worker(
        backend.open().await.sealed_with(keys),
        Duration::from_secs(600),
    );
    let ctx = CallContext::new("agent").with_task_id("t4");
    let big = format!("CH9300762011623852957{}", backend.tag().len());
    let small = format!("AT611904300234573201{}", backend.tag().len());
    let first = registry.dispatch(&ctx, &payout("p1", &big)).await;
    let second = registry.dispatch(&ctx, &payout("p2", &small)).await;
    let (first, second) = (first.ticket().unwrap(), second.ticket().unwrap().clone());
    backend
        .tamper(&format!(
            "UPDATE pending_calls SET call = (SELECT call FROM pending_calls WHERE ticket_id = '{}')
             WHERE ticket_id = '{}'",
            first.id, second.id
        ))
        .await;
    let outcome = registry
        .resume(&second.id, rita().sign(&second, approve()))
        .await;
    assert_eq!(outcome.code(), Some(RejectionCode::ApprovalsUnavailable));
    assert_eq!(paid_to(&big) + paid_to(&small), 0);
}
