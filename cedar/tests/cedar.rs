//! Cedar policies deciding calls through the registry: conditions on the caller's roles and
//! tenant, the environment and the arguments; `forbid` over `permit`; policies that do not fit
//! the tools refused at build; what the model and the audit are told; a swap while calls are
//! served.

use std::collections::BTreeSet;

use portcullis::audit::MemoryAuditSink;
use portcullis::prelude::*;
use portcullis::{BuildError, Outcome, RejectionCode};
use portcullis_cedar::{Cedar, CedarError, CedarPolicies};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
pub enum Currency {
    #[serde(rename = "EUR")]
    Euro,
    #[serde(rename = "USD")]
    Dollar,
}

/// Move money out of one of a tenant's accounts.
#[tool(risk = "medium", roles = ["finance", "clerk"])]
fn transfer(
    /// The tenant whose account pays.
    account_tenant: String,
    /// How much, in cents.
    amount_cents: u64,
    currency: Currency,
    /// A note for the statement.
    memo: Option<String>,
) -> Result<String, ToolError> {
    let _ = (currency, memo);
    Ok(format!("{amount_cents} from {account_tenant}"))
}

/// Look a balance up.
#[tool(read_only)]
fn balance(account_tenant: String) -> Result<u64, ToolError> {
    let _ = account_tenant;
    Ok(100)
}

const RULES: &str = r#"
@id("clerks_move_small_sums")
permit(principal in Portcullis::Role::"clerk", action == Portcullis::Action::"transfer", resource)
when { context.input.amount_cents < 50000 };

@id("finance_moves_money")
permit(principal in Portcullis::Role::"finance", action == Portcullis::Action::"transfer", resource);

@id("own_tenant_only")
forbid(principal, action == Portcullis::Action::"transfer", resource)
unless { principal has tenant && principal.tenant == context.input.account_tenant };

@id("no_dollars_in_production")
forbid(principal, action == Portcullis::Action::"transfer", resource)
when {
  context.environment == "production" &&
  context.input.currency == Portcullis::transfer::Input::Currency::"USD"
};
"#;

fn registry(cedar: &Cedar, audit: &MemoryAuditSink) -> Registry {
    Registry::builder()
        .tool(Transfer)
        .tool(Balance)
        .policy(cedar.clone())
        .audit(audit.clone())
        .build()
        .unwrap()
}

fn caller(role: &str, tenant: &str) -> CallContext {
    CallContext::new(format!("{role}-of-{tenant}"))
        .with_roles([role])
        .with_tenant(tenant)
        .with_environment("staging")
}

fn transfer_call(id: &str, tenant: &str, cents: u64, currency: &str) -> ToolCall {
    ToolCall::new(
        id,
        "transfer",
        json!({"account_tenant": tenant, "amount_cents": cents, "currency": currency}).to_string(),
    )
}

fn code(outcome: &Outcome) -> Option<(RejectionCode, Option<String>)> {
    outcome
        .rejection()
        .map(|refusal| (refusal.code(), refusal.reason().map(str::to_owned)))
}

fn forbidden() -> Option<(RejectionCode, Option<String>)> {
    Some((
        RejectionCode::PolicyDenied,
        Some("forbidden_by_policy".to_owned()),
    ))
}

fn not_permitted() -> Option<(RejectionCode, Option<String>)> {
    Some((
        RejectionCode::PolicyDenied,
        Some("no_policy_permits".to_owned()),
    ))
}

#[tokio::test]
async fn roles_tenants_environments_and_arguments_decide() {
    let cedar = Cedar::new(CedarPolicies::from_text(RULES).unwrap());
    let audit = MemoryAuditSink::default();
    let registry = registry(&cedar, &audit);
    let clerk = caller("clerk", "acme");
    let finance = caller("finance", "acme");

    // An argument condition: a clerk moves less than 500.00.
    let small = registry
        .dispatch(&clerk, &transfer_call("1", "acme", 49_999, "EUR"))
        .await;
    assert!(small.is_completed(), "{small:?}");
    let large = registry
        .dispatch(&clerk, &transfer_call("2", "acme", 50_000, "EUR"))
        .await;
    assert_eq!(code(&large), not_permitted());
    // A role condition: finance moves any sum.
    let large = registry
        .dispatch(&finance, &transfer_call("3", "acme", 50_000, "EUR"))
        .await;
    assert!(large.is_completed(), "{large:?}");
    // A tenant condition: another tenant's account, and a caller of no tenant.
    let other = registry
        .dispatch(&finance, &transfer_call("4", "globex", 10, "EUR"))
        .await;
    assert_eq!(code(&other), forbidden());
    let nobody = CallContext::new("nobody").with_roles(["finance"]);
    let untenanted = registry
        .dispatch(&nobody, &transfer_call("5", "acme", 10, "EUR"))
        .await;
    assert_eq!(code(&untenanted), forbidden());
    // An environment condition, over an enumerated argument.
    let dollars = transfer_call("6", "acme", 10, "USD");
    assert!(registry.dispatch(&finance, &dollars).await.is_completed());
    let production = finance.clone().with_environment("production");
    let refused = registry.dispatch(&production, &dollars).await;
    assert_eq!(code(&refused), forbidden());
    let euros = registry
        .dispatch(&production, &transfer_call("7", "acme", 10, "EUR"))
        .await;
    assert!(euros.is_completed(), "{euros:?}");
}

#[tokio::test]
async fn forbid_beats_permit_and_the_model_is_told_no_policy_text() {
    let rules = r#"
        @id("everyone_transfers")
        permit(principal, action, resource);
        @id("never_above_a_million")
        forbid(principal, action == Portcullis::Action::"transfer", resource)
        when { context.input.amount_cents > 100000000 };
    "#;
    let cedar = Cedar::new(CedarPolicies::from_text(rules).unwrap());
    let audit = MemoryAuditSink::default();
    let registry = registry(&cedar, &audit);
    let refused = registry
        .dispatch(
            &caller("finance", "acme"),
            &transfer_call("1", "acme", 100_000_001, "EUR"),
        )
        .await;
    assert_eq!(code(&refused), forbidden());
    let message = refused.rejection().unwrap().to_model_message();
    assert_eq!(
        message,
        r#"{"error":"policy_denied","gate":"authorize","message":"a policy forbids this call","reason":"forbidden_by_policy","retryable":false}"#
    );
    for hidden in [
        "never_above_a_million",
        "100000000",
        "amount_cents",
        "context",
    ] {
        assert!(!message.contains(hidden), "{message}");
    }
    let record = audit.records().pop().unwrap();
    assert_eq!(record.code.as_deref(), Some("policy_denied"));
    assert_eq!(record.rulings.len(), 1);
    let ruling = &record.rulings[0];
    assert_eq!(ruling.rule_set, "cedar");
    assert_eq!(ruling.version, cedar.version());
    assert!(!ruling.allowed);
    assert_eq!(ruling.rules, ["never_above_a_million"]);
}

#[tokio::test]
async fn an_allowed_call_names_the_permits_that_allowed_it() {
    let cedar = Cedar::new(CedarPolicies::from_text(RULES).unwrap());
    let audit = MemoryAuditSink::default();
    let registry = registry(&cedar, &audit);
    let outcome = registry
        .dispatch(
            &caller("finance", "acme"),
            &transfer_call("1", "acme", 10, "EUR"),
        )
        .await;
    assert!(outcome.is_completed(), "{outcome:?}");
    let record = audit.records().pop().unwrap();
    assert_eq!(record.decision, "completed");
    assert_eq!(record.rulings[0].rules, ["finance_moves_money"]);
    assert!(record.rulings[0].allowed);
    let text = serde_json::to_string(&record).unwrap();
    assert!(
        text.contains(r#""rulings":[{"rule_set":"cedar","version":""#),
        "{text}"
    );
}

#[tokio::test]
async fn a_tool_no_permit_names_is_the_contracts_to_judge_unless_the_registry_denies_by_default() {
    let policies = CedarPolicies::from_text(RULES).unwrap();
    let audit = MemoryAuditSink::default();
    let lookup = ToolCall::new(
        "1",
        "balance",
        json!({"account_tenant": "acme"}).to_string(),
    );
    let clerk = caller("clerk", "acme");

    let open = registry(&Cedar::new(policies.clone()), &audit);
    assert!(open.dispatch(&clerk, &lookup).await.is_completed());
    let record = audit.records().pop().unwrap();
    assert!(record.rulings[0].allowed && record.rulings[0].rules.is_empty());

    let closed = registry(&Cedar::new(policies).default_deny(), &audit);
    assert_eq!(
        code(&closed.dispatch(&clerk, &lookup).await),
        not_permitted()
    );
    // A tool a permit names is Cedar's either way: no permit matched, no call.
    let large = open
        .dispatch(&clerk, &transfer_call("2", "acme", 60_000, "EUR"))
        .await;
    assert_eq!(code(&large), not_permitted());
}

#[test]
fn a_policy_that_does_not_fit_the_tools_fails_the_build_with_cedars_diagnostics() {
    let build = |rules: &str| {
        Registry::builder()
            .tool(Transfer)
            .policy(Cedar::new(CedarPolicies::from_text(rules).unwrap()))
            .build()
            .map(drop)
    };
    let missing = build(
        r#"permit(principal, action == Portcullis::Action::"transfer", resource)
           when { context.input.amount < 50000 };"#,
    );
    let Err(BuildError::Policy(reason)) = missing else {
        panic!("{missing:?}");
    };
    assert!(reason.contains("amount"), "{reason}");
    assert!(reason.contains("policy0"), "{reason}");
    let mistyped = build(
        r#"permit(principal, action == Portcullis::Action::"transfer", resource)
           when { context.input.amount_cents < "50000" };"#,
    );
    assert!(
        matches!(mistyped, Err(BuildError::Policy(_))),
        "{mistyped:?}"
    );
    let unknown_tool =
        build(r#"permit(principal, action == Portcullis::Action::"delete_everything", resource);"#);
    assert!(
        matches!(unknown_tool, Err(BuildError::Policy(_))),
        "{unknown_tool:?}"
    );
    let unchecked_tenant =
        build(r#"permit(principal, action, resource) when { principal.tenant == "acme" };"#);
    assert!(
        matches!(unchecked_tenant, Err(BuildError::Policy(_))),
        "{unchecked_tenant:?}"
    );
    build(RULES).unwrap();
}

#[tokio::test]
async fn a_set_that_does_not_fit_is_not_swapped_in() {
    let cedar = Cedar::new(CedarPolicies::from_text(RULES).unwrap());
    let audit = MemoryAuditSink::default();
    let registry = registry(&cedar, &audit);
    let before = cedar.version();
    let wrong = CedarPolicies::from_text(
        r#"permit(principal, action, resource) when { context.input.amount_cents > 0 };"#,
    )
    .unwrap();
    assert!(matches!(cedar.swap(wrong), Err(CedarError::Invalid(_))));
    assert_eq!(cedar.version(), before);
    let finance = caller("finance", "acme");
    assert!(
        registry
            .dispatch(&finance, &transfer_call("1", "acme", 10, "EUR"))
            .await
            .is_completed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swap_under_eight_tasks_decides_each_call_by_exactly_one_recorded_version() {
    let permissive =
        CedarPolicies::from_text(r#"@id("all_transfers") permit(principal, action, resource);"#)
            .unwrap();
    let strict = CedarPolicies::from_text(
        r#"@id("no_transfers") forbid(principal, action == Portcullis::Action::"transfer", resource);
           @id("all_else") permit(principal, action, resource);"#,
    )
    .unwrap();
    let (old, new) = (permissive.version().to_owned(), strict.version().to_owned());
    let cedar = Cedar::new(permissive);
    let audit = MemoryAuditSink::default();
    let registry = registry(&cedar, &audit);
    let finance = caller("finance", "acme");
    let mut tasks = Vec::new();
    for task in 0..8 {
        let registry = registry.clone();
        let finance = finance.clone();
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for call in 0..200 {
                // A task of its own for each call, ended once its call is: refused calls would
                // stop a long task, and tasks left open would fill the caller's share.
                let ctx = finance.clone().with_task_id(format!("task-{task}-{call}"));
                let call = transfer_call(&format!("{task}-{call}"), "acme", 10, "EUR");
                outcomes.push(registry.dispatch(&ctx, &call).await.is_completed());
                registry.end_task(ctx.task_id()).await;
                tokio::task::yield_now().await;
            }
            outcomes
        }));
    }
    // Swapped while the tasks are under way: some calls were decided before it.
    while audit.records().len() < 400 {
        tokio::task::yield_now().await;
    }
    assert_eq!(cedar.swap(strict).unwrap(), new);
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.extend(task.await.unwrap());
    }
    let records: Vec<_> = audit
        .records()
        .into_iter()
        .filter(|record| record.decision != "about_to_run")
        .collect();
    assert_eq!(records.len(), 8 * 200);
    let mut versions = BTreeSet::new();
    for record in &records {
        assert_eq!(record.rulings.len(), 1, "{record:?}");
        let ruling = &record.rulings[0];
        versions.insert(ruling.version.clone());
        // Each record's outcome is its version's: the old set allows every transfer, the new
        // one none.
        if ruling.version == old {
            assert_eq!(record.decision, "completed");
            assert_eq!(ruling.rules, ["all_transfers"]);
        } else {
            assert_eq!(ruling.version, new);
            assert_eq!(record.decision, "rejected");
            assert_eq!(ruling.rules, ["no_transfers"]);
        }
    }
    let completed = records
        .iter()
        .filter(|record| record.decision == "completed")
        .count();
    assert_eq!(completed, outcomes.iter().filter(|done| **done).count());
    assert_eq!(
        versions,
        BTreeSet::from([old, new]),
        "both sets decided calls"
    );
}

#[tokio::test]
async fn a_forbid_that_errors_refuses_instead_of_being_skipped() {
    // Cedar skips a policy whose evaluation fails: here the forbid overflows, and Cedar alone
    // would let the permit allow the call.
    let rules = r#"
        @id("everyone") permit(principal, action, resource);
        @id("overflowing_limit")
        forbid(principal, action == Portcullis::Action::"transfer", resource)
        when { context.input.amount_cents * 1000000000000 > 5 };
    "#;
    let cedar = Cedar::new(CedarPolicies::from_text(rules).unwrap());
    let audit = MemoryAuditSink::default();
    let registry = registry(&cedar, &audit);
    let call = transfer_call("1", "acme", 10_000_000, "EUR");
    let refused = registry.dispatch(&caller("finance", "acme"), &call).await;
    assert_eq!(
        code(&refused),
        Some((RejectionCode::PolicyDenied, Some("policy_error".to_owned())))
    );
}

#[tokio::test]
async fn an_integer_cedar_cannot_hold_is_refused() {
    let cedar = Cedar::new(CedarPolicies::from_text(RULES).unwrap());
    let audit = MemoryAuditSink::default();
    let registry = registry(&cedar, &audit);
    // u64 holds it; a Cedar Long does not. The clerk's limit cannot be read past, so the call
    // is refused rather than judged on a number Cedar does not have.
    let call = transfer_call("1", "acme", u64::MAX, "EUR");
    let refused = registry.dispatch(&caller("finance", "acme"), &call).await;
    assert_eq!(
        code(&refused),
        Some((RejectionCode::PolicyDenied, Some("policy_error".to_owned())))
    );
}

#[tokio::test]
async fn names_are_data_not_cedar() {
    let cedar = Cedar::new(CedarPolicies::from_text(RULES).unwrap());
    let audit = MemoryAuditSink::default();
    let registry = registry(&cedar, &audit);
    // A role or a tenant spelt as Cedar syntax is only a string: no role, no tenant, matches.
    let forged = CallContext::new(r#"x" in [Portcullis::Role::"finance"]"#)
        .with_roles([
            "clerk",
            r#"clerk", Portcullis::Role::"finance"#,
            "Finance",
            "finance ",
        ])
        .with_tenant(r#"acme" || true || ""#);
    let refused = registry
        .dispatch(&forged, &transfer_call("1", "acme", 60_000, "EUR"))
        .await;
    assert_eq!(code(&refused), forbidden());
    let forged = forged.with_tenant("acme");
    let refused = registry
        .dispatch(&forged, &transfer_call("2", "acme", 60_000, "EUR"))
        .await;
    assert_eq!(code(&refused), not_permitted(), "no role is finance");
}

/// Look an order up.
#[tool(read_only, name = "orders-lookup")]
fn lookup_order(order_id: u64) -> Result<u64, ToolError> {
    Ok(order_id)
}

#[test]
fn a_tool_cedar_cannot_name_fails_the_build() {
    let built = Registry::builder()
        .tool(LookupOrder)
        .policy(Cedar::new(CedarPolicies::from_text(RULES).unwrap()))
        .build();
    let Err(BuildError::Policy(reason)) = built else {
        panic!("{:?}", built.map(drop));
    };
    assert!(reason.contains("cannot be described in Cedar"), "{reason}");
}

/// Where a payout goes.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Destination {
    /// A bank account.
    Iban { account: String },
    /// A wallet.
    Wallet { account: String },
}

/// How fast a payout goes.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Speed {
    /// Today.
    Instant,
    /// The next business day.
    Standard,
}

/// Pay a seller out.
#[tool(risk = "medium")]
fn pay_out(
    destination: Destination,
    speed: Speed,
    amount_cents: u64,
    /// Why, for the statement.
    memo: Option<String>,
) -> Result<String, ToolError> {
    let _ = (destination, speed, memo);
    Ok(format!("{amount_cents} paid"))
}

#[tokio::test]
async fn documented_variants_and_tags_are_read_as_the_tool_reads_them() {
    // schemars writes a documented variant, and a tag, as a `const`; Cedar's schema generator
    // ignores `const` and would read every such variant as the first.
    let rules = r#"
        @id("all") permit(principal, action, resource);
        @id("no_wallets")
        forbid(principal, action == Portcullis::Action::"pay_out", resource)
        when { context.input.destination has typeChoice1 };
        @id("nothing_instant_in_production")
        forbid(principal, action == Portcullis::Action::"pay_out", resource)
        when {
          context.environment == "production" &&
          context.input.speed == Portcullis::pay_out::Input::Speed::"instant"
        };
        @id("a_memo_above_a_thousand")
        forbid(principal, action == Portcullis::Action::"pay_out", resource)
        when { context.input.amount_cents > 100000 && !(context.input has memo) };
    "#;
    let registry = Registry::builder()
        .tool(PayOut)
        .policy(Cedar::new(CedarPolicies::from_text(rules).unwrap()))
        .build()
        .unwrap();
    let pay = |id: &str, kind: &str, speed: &str, cents: u64, memo: Option<&str>| {
        let mut arguments = json!({
            "destination": {"kind": kind, "account": "DE02"},
            "speed": speed,
            "amount_cents": cents,
        });
        if let Some(memo) = memo {
            arguments["memo"] = json!(memo);
        }
        ToolCall::new(id, "pay_out", arguments.to_string())
    };
    let staging = CallContext::new("ops").with_environment("staging");
    let production = CallContext::new("ops").with_environment("production");
    let outcome = |outcome: Outcome| code(&outcome);
    let iban = registry
        .dispatch(&staging, &pay("1", "iban", "instant", 10, None))
        .await;
    assert!(iban.is_completed(), "{iban:?}");
    let wallet = registry
        .dispatch(&staging, &pay("2", "wallet", "instant", 10, None))
        .await;
    assert_eq!(outcome(wallet), forbidden());
    let standard = registry
        .dispatch(&production, &pay("3", "iban", "standard", 10, None))
        .await;
    assert!(standard.is_completed(), "{standard:?}");
    let instant = registry
        .dispatch(&production, &pay("4", "iban", "instant", 10, None))
        .await;
    assert_eq!(outcome(instant), forbidden());
    // `has` means given: an optional argument left out is not in the context.
    let bare = registry
        .dispatch(&staging, &pay("5", "iban", "standard", 200_000, None))
        .await;
    assert_eq!(outcome(bare), forbidden());
    let noted = pay("6", "iban", "standard", 200_000, Some("March"));
    assert!(registry.dispatch(&staging, &noted).await.is_completed());
    let explicit_null = ToolCall::new(
        "7",
        "pay_out",
        json!({"destination": {"kind": "iban", "account": "DE02"}, "speed": "standard",
               "amount_cents": 200_000, "memo": null})
        .to_string(),
    );
    assert_eq!(
        outcome(registry.dispatch(&staging, &explicit_null).await),
        forbidden()
    );
}
