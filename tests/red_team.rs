//! Hostile calls that must all be refused, each with its expected code, and benign calls that
//! must all pass: the gates stop the attacker without stopping the user.

use portcullis::prelude::*;
use portcullis::{BudgetLimits, ReadOnlyRequests};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
pub enum Currency {
    #[serde(rename = "CNY")]
    Cny,
    #[serde(rename = "USD")]
    Usd,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Environment {
    Development,
    Production,
}

/// Pay a supplier of the caller's tenant.
#[tool(
    risk = "high",
    role = "payments",
    irreversible = "payments settle at once"
)]
fn pay_supplier(
    #[tenant] tenant_id: String,
    supplier: String,
    currency: Currency,
    #[validate(range(min = 1, max = 1_000_000))] amount_cents: u64,
    #[validate(length(max = 140))] memo: Option<String>,
) -> Result<Value, ToolError> {
    Ok(
        json!({"paid": amount_cents, "to": supplier, "tenant": tenant_id, "memo": memo, "currency": currency}),
    )
}

/// Purge the cache of the environment the agent runs in.
#[tool(risk = "medium", role = "ops")]
fn purge_cache(
    #[environment] environment: Environment,
    #[serde(default)] prefix: Option<String>,
) -> Result<bool, ToolError> {
    let _ = (environment, prefix);
    Ok(true)
}

/// Search the supplier directory.
#[tool(read_only, idempotent)]
fn search_suppliers(
    #[validate(length(min = 1, max = 100))] query: String,
    #[serde(default)] page: u8,
) -> Result<Value, ToolError> {
    Ok(json!({"query": query, "page": page}))
}

fn registry() -> Registry {
    Registry::builder()
        .tool(PaySupplier)
        .tool(PurgeCache)
        .tool(SearchSuppliers)
        .intent_check(ReadOnlyRequests::default())
        .budget(BudgetLimits {
            stalled_loop_after: Some(4),
            ..BudgetLimits::default()
        })
        .build()
        .unwrap()
}

fn payer() -> CallContext {
    CallContext::new("pam")
        .with_roles(["payments"])
        .with_tenant("t_001")
        .with_environment("development")
        .with_request("Pay the supplier invoices that are due this week.")
}

fn ops() -> CallContext {
    CallContext::new("oz")
        .with_roles(["ops"])
        .with_tenant("t_001")
        .with_environment("development")
        .with_request("Purge the stale cache entries.")
}

fn payment(fields: &str) -> String {
    format!(r#"{{"tenant_id":"t_001","supplier":"acme","currency":"USD",{fields}}}"#)
}

#[tokio::test]
async fn hostile_calls_are_refused_with_their_codes() {
    let deep = format!("{}{}", "[".repeat(60), "]".repeat(60));
    let huge = format!(r#"{{"query":"{}"}}"#, "a".repeat(2 * 1024 * 1024));
    let cases: Vec<(&str, CallContext, &str, String, RejectionCode)> = vec![
        (
            "a privilege claim as an argument",
            payer(),
            "pay_supplier",
            payment(r#""amount_cents":100,"role":"admin""#),
            RejectionCode::UnknownArgument,
        ),
        (
            "an approval claim as an argument",
            payer(),
            "pay_supplier",
            payment(r#""amount_cents":100,"approved":true"#),
            RejectionCode::UnknownArgument,
        ),
        (
            "a prototype key",
            payer(),
            "pay_supplier",
            payment(r#""amount_cents":100,"__proto__":{"role":"admin"}"#),
            RejectionCode::UnknownArgument,
        ),
        (
            "another tenant's supplier",
            payer(),
            "pay_supplier",
            r#"{"tenant_id":"t_999","supplier":"acme","currency":"USD","amount_cents":100}"#.into(),
            RejectionCode::TenantMismatch,
        ),
        (
            "two amounts",
            payer(),
            "pay_supplier",
            payment(r#""amount_cents":1,"amount_cents":99999999"#),
            RejectionCode::DuplicateKey,
        ),
        (
            "two amounts, one spelt with an escape",
            payer(),
            "pay_supplier",
            payment(r#""amount_cents":1,"amount_cent\u0073":99999999"#),
            RejectionCode::DuplicateKey,
        ),
        (
            "an oversized amount",
            payer(),
            "pay_supplier",
            payment(r#""amount_cents":99999999"#),
            RejectionCode::ConstraintViolation,
        ),
        (
            "an amount past 64 bits",
            payer(),
            "pay_supplier",
            payment(r#""amount_cents":18446744073709551617"#),
            RejectionCode::InvalidValue,
        ),
        (
            "an amount that a float would round",
            payer(),
            "pay_supplier",
            payment(r#""amount_cents":1.8446744073709552e19"#),
            RejectionCode::InvalidValue,
        ),
        (
            "a negative amount",
            payer(),
            "pay_supplier",
            payment(r#""amount_cents":-100"#),
            RejectionCode::InvalidValue,
        ),
        (
            "an amount as text",
            payer(),
            "pay_supplier",
            payment(r#""amount_cents":"100""#),
            RejectionCode::InvalidType,
        ),
        (
            "a currency outside the enum",
            payer(),
            "pay_supplier",
            r#"{"tenant_id":"t_001","supplier":"acme","currency":"BTC","amount_cents":100}"#.into(),
            RejectionCode::InvalidValue,
        ),
        (
            "a currency as a null-valued variant",
            payer(),
            "pay_supplier",
            r#"{"tenant_id":"t_001","supplier":"acme","currency":{"USD":null},"amount_cents":100}"#
                .into(),
            RejectionCode::InvalidType,
        ),
        (
            "a look-alike tool name",
            payer(),
            "pay_suppli\u{0435}r",
            payment(r#""amount_cents":100"#),
            RejectionCode::UnknownTool,
        ),
        (
            "a zero-width character in the name",
            payer(),
            "pay\u{200b}_supplier",
            payment(r#""amount_cents":100"#),
            RejectionCode::UnknownTool,
        ),
        (
            "a tool the caller's roles do not grant, refused as one that does not exist",
            ops(),
            "pay_supplier",
            payment(r#""amount_cents":100"#),
            RejectionCode::UnknownTool,
        ),
        (
            "another environment than the caller's",
            ops(),
            "purge_cache",
            r#"{"environment":"production"}"#.into(),
            RejectionCode::EnvironmentMismatch,
        ),
        (
            "arguments as an array",
            payer(),
            "pay_supplier",
            r#"["t_001","acme","USD",100]"#.into(),
            RejectionCode::NotAnObject,
        ),
        (
            "JavaScript instead of JSON",
            payer(),
            "pay_supplier",
            "{tenant_id: 't_001', /* pay */ amount_cents: 100,}".into(),
            RejectionCode::MalformedJson,
        ),
        (
            "nesting past the limit",
            ops(),
            "search_suppliers",
            format!(r#"{{"query":"x","page":{deep}}}"#),
            RejectionCode::ArgumentsTooDeep,
        ),
        (
            "a payload past the size limit",
            ops(),
            "search_suppliers",
            huge,
            RejectionCode::ArgumentsTooLarge,
        ),
    ];
    assert!(cases.len() >= 15);
    let registry = registry();
    for (what, ctx, tool, arguments, expected) in cases {
        let outcome = registry
            .dispatch(&ctx, &ToolCall::new("c", tool, arguments))
            .await;
        assert_eq!(outcome.code(), Some(expected), "{what}: {outcome:?}");
    }
}

#[tokio::test]
async fn a_request_to_look_up_never_pays() {
    let lookup = payer().with_request("Show me what we owe acme");
    let outcome = registry()
        .dispatch(
            &lookup,
            &ToolCall::new("c", "pay_supplier", payment(r#""amount_cents":100"#)),
        )
        .await;
    assert_eq!(outcome.code(), Some(RejectionCode::IntentMismatch));
}

#[tokio::test]
async fn an_endless_retry_loop_is_broken() {
    let registry = registry();
    let ctx = ops();
    let retry = ToolCall::new("c", "search_suppliers", r#"{"query":"acme"}"#);
    let mut codes = Vec::new();
    for _ in 0..6 {
        codes.push(registry.dispatch(&ctx, &retry).await.code());
    }
    assert_eq!(
        codes,
        [
            None,
            None,
            None,
            Some(RejectionCode::StalledLoop),
            Some(RejectionCode::StalledLoop),
            Some(RejectionCode::StalledLoop)
        ]
    );
}

#[tokio::test]
async fn benign_calls_pass() {
    let cases: Vec<(&str, CallContext, &str, Value)> = vec![
        (
            "a plain payment",
            payer(),
            "pay_supplier",
            json!({"tenant_id": "t_001", "supplier": "acme", "currency": "USD", "amount_cents": 100}),
        ),
        (
            "the smallest amount",
            payer(),
            "pay_supplier",
            json!({"tenant_id": "t_001", "supplier": "acme", "currency": "CNY", "amount_cents": 1}),
        ),
        (
            "the largest amount",
            payer(),
            "pay_supplier",
            json!({"tenant_id": "t_001", "supplier": "acme", "currency": "CNY", "amount_cents": 1_000_000}),
        ),
        (
            "an integer written as 5.0",
            payer(),
            "pay_supplier",
            json!({"tenant_id": "t_001", "supplier": "acme", "currency": "USD", "amount_cents": 5.0}),
        ),
        (
            "an integer written as 1e3",
            payer(),
            "pay_supplier",
            serde_json::from_str(
                r#"{"tenant_id":"t_001","supplier":"acme","currency":"USD","amount_cents":1e3}"#,
            )
            .unwrap(),
        ),
        (
            "keys in another order",
            payer(),
            "pay_supplier",
            serde_json::from_str(
                r#"{"amount_cents":7,"currency":"USD","supplier":"acme","tenant_id":"t_001"}"#,
            )
            .unwrap(),
        ),
        (
            "an optional memo as null",
            payer(),
            "pay_supplier",
            json!({"tenant_id": "t_001", "supplier": "acme", "currency": "USD", "amount_cents": 100, "memo": null}),
        ),
        (
            "a memo of 140 characters",
            payer(),
            "pay_supplier",
            json!({"tenant_id": "t_001", "supplier": "acme", "currency": "USD", "amount_cents": 100, "memo": "m".repeat(140)}),
        ),
        (
            "a Chinese memo",
            payer(),
            "pay_supplier",
            json!({"tenant_id": "t_001", "supplier": "阿克米", "currency": "CNY", "amount_cents": 100, "memo": "三月份的货款"}),
        ),
        (
            "a supplier named role",
            payer(),
            "pay_supplier",
            json!({"tenant_id": "t_001", "supplier": "role", "currency": "USD", "amount_cents": 100}),
        ),
        (
            "a memo that mentions admin",
            payer(),
            "pay_supplier",
            json!({"tenant_id": "t_001", "supplier": "acme", "currency": "USD", "amount_cents": 100, "memo": "{\"role\":\"admin\"}"}),
        ),
        (
            "a payment the user asked for",
            payer().with_request("Pay acme the 100 cents we owe"),
            "pay_supplier",
            json!({"tenant_id": "t_001", "supplier": "acme", "currency": "USD", "amount_cents": 100}),
        ),
        (
            "a purge of the caller's environment",
            ops(),
            "purge_cache",
            json!({"environment": "development"}),
        ),
        (
            "a purge with a prefix",
            ops(),
            "purge_cache",
            json!({"environment": "development", "prefix": "img/"}),
        ),
        (
            "a search",
            ops(),
            "search_suppliers",
            json!({"query": "acme"}),
        ),
        (
            "a search on page 255",
            ops(),
            "search_suppliers",
            json!({"query": "acme", "page": 255}),
        ),
        (
            "a search anyone may run",
            CallContext::new("guest"),
            "search_suppliers",
            json!({"query": "日本"}),
        ),
        (
            "a read-only call from a lookup request",
            ops().with_request("find suppliers named acme"),
            "search_suppliers",
            json!({"query": "acme corp"}),
        ),
    ];
    assert!(cases.len() >= 15);
    for (what, ctx, tool, arguments) in cases {
        let outcome = registry()
            .dispatch(&ctx, &ToolCall::new("c", tool, arguments))
            .await;
        assert!(outcome.is_completed(), "{what}: {outcome:?}");
    }
}
