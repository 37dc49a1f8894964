//! One truth about the call: every gate judges what the tool receives, every constraint the
//! schema shows is enforced, and a sensitive value reaches no record, ticket or refusal. One
//! test per hole an attacker found, each asserting the exact outcome.

#[path = "common/shapes.rs"]
mod shapes;

use std::sync::{Arc, Mutex};

use shapes::{Pack, RenameUser, Transform, Weigh};

use portcullis::audit::{AuditRecord, MemoryAuditSink, REDACTED};
use portcullis::prelude::*;
use portcullis::{BudgetLimits, Decision, PolicyRequest, ReadOnlyRequests};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use validator::Validate;

/// Delete one record.
#[tool(risk = "high", role = "admin", irreversible = "no backup")]
fn delete_record(
    #[validate(length(min = 3))] table_name: String,
    record_id: u64,
) -> Result<u64, ToolError> {
    let _ = table_name;
    Ok(record_id)
}

/// The registry `builder` makes, with a loop breaker that refuses the third identical call in
/// a row.
fn breaking_loops(builder: portcullis::RegistryBuilder) -> Registry {
    let limits = BudgetLimits {
        stalled_loop_after: Some(3),
        ..BudgetLimits::default()
    };
    builder.budget(limits).build().unwrap()
}

fn admin() -> CallContext {
    CallContext::new("alice")
        .with_roles(["admin"])
        .with_request("Delete the record the ticket names.")
}

fn code(outcome: &Outcome) -> Option<RejectionCode> {
    outcome.code()
}

/// A call with an id of its own: a repeated id in one task returns the first outcome.
fn call(tool: &str, arguments: impl Into<portcullis::Arguments>) -> ToolCall {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    ToolCall::new(format!("call-{id}"), tool, arguments)
}

/// A registry-wide policy written for the integer 1 sees the integer 1 however the model spells
/// it: `1.0` and `1e0` are the integer the tool receives.
#[tokio::test]
async fn a_registry_policy_sees_the_number_the_tool_receives() {
    let registry = Registry::builder()
        .tool(DeleteRecord)
        .policy(|request: &PolicyRequest<'_>| {
            Ok(if request.arguments["record_id"].as_u64() == Some(1) {
                Decision::deny("record_one_protected", "record 1 is never deleted")
            } else {
                Decision::Allow
            })
        })
        .build()
        .unwrap();
    for spelling in ["1", "1.0", "1e0", "0.1e1", "10e-1"] {
        let arguments = format!(r#"{{"table_name": "users", "record_id": {spelling}}}"#);
        let outcome = registry
            .dispatch(&admin(), &call("delete_record", arguments))
            .await;
        let rejection = outcome.rejection().expect(spelling);
        assert_eq!(
            (rejection.code(), rejection.reason()),
            (RejectionCode::PolicyDenied, Some("record_one_protected")),
            "{spelling}"
        );
    }
    let outcome = registry
        .dispatch(
            &admin(),
            &call(
                "delete_record",
                json!({"table_name": "users", "record_id": 2.0}),
            ),
        )
        .await;
    assert_eq!(outcome.output(), Some(&json!(2)));
}

/// Defaults are filled in before the policies judge: an absent argument is its default.
#[tokio::test]
async fn policies_see_defaults_filled_in() {
    /// Archive a table.
    #[tool(risk = "medium", irreversible = "archives are final")]
    fn archive(
        table_name: String,
        #[serde(default)] include_audit_tables: bool,
    ) -> Result<(), ToolError> {
        let _ = (table_name, include_audit_tables);
        Ok(())
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let registry = Registry::builder()
        .tool(Archive)
        .policy(move |request: &PolicyRequest<'_>| {
            kept.lock().unwrap().push(request.arguments.clone());
            Ok(Decision::Allow)
        })
        .build()
        .unwrap();
    let outcome = registry
        .dispatch(&admin(), &call("archive", r#"{"table_name": "logs"}"#))
        .await;
    assert!(outcome.is_completed(), "{outcome:?}");
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        [json!({"table_name": "logs", "include_audit_tables": false})]
    );
}

/// The stalled-loop breaker counts one call however its numbers and keys are spelt.
#[tokio::test]
async fn respelt_repeats_are_one_stalled_loop() {
    let registry = breaking_loops(Registry::builder().tool(DeleteRecord));
    let spellings = [
        r#"{"table_name": "users", "record_id": 7}"#,
        r#"{"record_id": 7.0, "table_name": "users"}"#,
        r#"{"table_name": "users", "record_id": 7e0}"#,
    ];
    let ctx = admin();
    let mut codes = Vec::new();
    for arguments in spellings {
        codes.push(code(
            &registry
                .dispatch(&ctx, &call("delete_record", arguments))
                .await,
        ));
    }
    assert_eq!(codes, [None, None, Some(RejectionCode::StalledLoop)]);
}

fn good_pack() -> Value {
    let dims = json!({"width": 5, "label": "ok"});
    json!({
        "by_name": {"a": dims},
        "sorted": {"b": dims},
        "boxed": dims,
        "maybe": [dims, null],
        "shape": {"Boxed": dims},
        "holder": {"dims": dims, "spare": dims},
        "tags": ["x", "y"],
        "codes": [1, 2],
    })
}

/// Every container holding a validated type is checked, whatever validator was told.
#[tokio::test]
async fn constraints_inside_every_container_are_enforced() {
    let registry = Registry::builder().tool(Pack).build().unwrap();
    let ctx = CallContext::new("a");
    let outcome = registry.dispatch(&ctx, &call("pack", good_pack())).await;
    assert!(outcome.is_completed(), "{outcome:?}");
    let cases = [
        ("/by_name/a", "/by_name/a/width"),
        ("/sorted/b", "/sorted/b/width"),
        ("/boxed", "/boxed/width"),
        ("/maybe/0", "/maybe/0/width"),
        ("/shape/Boxed", "/shape/Boxed/width"),
        ("/holder/dims", "/holder/dims/width"),
        ("/holder/spare", "/holder/spare/width"),
    ];
    for (at, expected) in cases {
        let mut arguments = good_pack();
        *arguments.pointer_mut(at).unwrap() = json!({"width": 0, "label": "ok"});
        let outcome = registry.dispatch(&ctx, &call("pack", arguments)).await;
        let rejection = outcome
            .rejection()
            .unwrap_or_else(|| panic!("{at}: {outcome:?}"));
        assert_eq!(rejection.code(), RejectionCode::ConstraintViolation, "{at}");
        let paths: Vec<&str> = rejection
            .violations()
            .iter()
            .map(|v| v.path.as_str())
            .collect();
        assert_eq!(paths, [expected], "{at}");
        assert_eq!(rejection.violations()[0].rule, "range");
    }
    let mut framed = good_pack();
    framed["shape"] = json!({"Framed": {"inner": {"width": 5, "label": "far too long"}}});
    let outcome = registry.dispatch(&ctx, &call("pack", framed)).await;
    let rejection = outcome.rejection().unwrap();
    assert_eq!(rejection.path(), Some("/shape/Framed/inner/label"));
    assert_eq!(rejection.violations()[0].rule, "length");
}

/// A set refuses a repeated element at its second occurrence, rather than merging it.
#[tokio::test]
async fn sets_refuse_duplicates() {
    let registry = Registry::builder().tool(Pack).build().unwrap();
    let ctx = CallContext::new("a");
    for (field, elements, at) in [
        ("tags", json!(["x", "y", "x"]), "/tags/2"),
        ("codes", json!([1, 2, 1.0]), "/codes/2"),
    ] {
        let mut arguments = good_pack();
        arguments[field] = elements;
        let outcome = registry.dispatch(&ctx, &call("pack", arguments)).await;
        let rejection = outcome
            .rejection()
            .unwrap_or_else(|| panic!("{field}: {outcome:?}"));
        assert_eq!(
            (rejection.code(), rejection.path()),
            (RejectionCode::InvalidValue, Some(at))
        );
    }
}

/// Inside tagged and untagged enums, `5.0` is the integer 5 as everywhere, and a tag is only
/// its string, never its variant's index.
#[tokio::test]
async fn enums_follow_the_number_rules() {
    let registry = Registry::builder().tool(Transform).build().unwrap();
    let ctx = CallContext::new("a");
    let call = |arguments: Value| call("transform", arguments);
    let outcome = registry
        .dispatch(
            &ctx,
            &call(json!({
                "internal": {"kind": "resize", "width": 5.0},
                "adjacent": {"kind": "resize", "data": 6.0},
                "untagged": 7.0,
            })),
        )
        .await;
    assert_eq!(
        outcome.output(),
        Some(&json!("Resize { width: 5 } Resize(6) Count(7)")),
        "{outcome:?}"
    );
    for (arguments, path) in [
        (
            json!({"internal": {"kind": 0, "width": 5}, "adjacent": {"kind": "stop"}, "untagged": 1}),
            "/internal",
        ),
        (
            json!({"internal": {"kind": "resize", "width": 5}, "adjacent": {"kind": 1}, "untagged": 1}),
            "/adjacent",
        ),
        (
            json!({"internal": {"kind": "resize", "width": 5.5}, "adjacent": {"kind": "stop"}, "untagged": 1}),
            "/internal",
        ),
    ] {
        let outcome = registry.dispatch(&ctx, &call(arguments.clone())).await;
        let rejection = outcome
            .rejection()
            .unwrap_or_else(|| panic!("{arguments}: {outcome:?}"));
        assert!(
            matches!(
                rejection.code(),
                RejectionCode::InvalidType | RejectionCode::InvalidValue
            ),
            "{arguments}: {rejection}"
        );
        assert!(
            rejection.path().unwrap_or_default().starts_with(path),
            "{arguments}: {rejection}"
        );
    }
}

/// Float bounds hold exactly as exported, for `f32` and `f64`.
#[tokio::test]
async fn float_bounds_are_exact() {
    let registry = Registry::builder().tool(Weigh).build().unwrap();
    let ctx = CallContext::new("a");
    let weigh = |light: &str, below: &str, precise: &str| {
        let arguments = format!(r#"{{"light": {light}, "below": {below}, "precise": {precise}}}"#);
        let registry = registry.clone();
        let ctx = ctx.clone();
        async move { registry.dispatch(&ctx, &call("weigh", arguments)).await }
    };
    // At the inclusive bound, and just inside the exclusive ones.
    assert!(weigh("100", "99", "99.99999999999999").await.is_completed());
    // Beyond the inclusive bound by less than an f32 can tell.
    let outcome = weigh("100.000001", "1", "1").await;
    assert_eq!(outcome.rejection().and_then(|r| r.path()), Some("/light"));
    // Inside the exclusive bound, but an f32 would round it onto the bound: the schema says so.
    let outcome = weigh("1", "99.999999", "1").await;
    assert_eq!(outcome.rejection().and_then(|r| r.path()), Some("/below"));
    let schema = Weigh.contract().input_schema().clone();
    assert_eq!(
        schema["properties"]["below"]["exclusiveMaximum"],
        json!(100.0)
    );
    assert_eq!(
        schema["properties"]["below"]["maximum"],
        json!(f64::from(99.99999_f32))
    );
    // At the exclusive bound.
    assert_eq!(
        code(&weigh("1", "1", "100").await),
        Some(RejectionCode::ConstraintViolation)
    );
}

/// `does_not_contain` is in the schema as well as enforced.
#[tokio::test]
async fn does_not_contain_is_exported() {
    let schema = RenameUser.contract().input_schema().clone();
    assert_eq!(
        schema["properties"]["new_name"]["not"],
        json!({"type": "string", "pattern": "admin"})
    );
    let registry = Registry::builder().tool(RenameUser).build().unwrap();
    let outcome = registry
        .dispatch(
            &CallContext::new("a"),
            &call("rename_user", json!({"new_name": "superadmin"})),
        )
        .await;
    let rejection = outcome.rejection().unwrap();
    assert_eq!(rejection.code(), RejectionCode::ConstraintViolation);
    assert_eq!(
        rejection.violations().len(),
        1,
        "reported once: {rejection}"
    );
}

#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate, Sensitive)]
#[serde(deny_unknown_fields)]
struct Card {
    #[sensitive]
    number: String,
    #[validate(range(min = 1, max = 12))]
    expiry_month: u8,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate, Sensitive)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Payment {
    payer_name: String,
    #[sensitive]
    pin_code: u32,
    cards: Vec<Card>,
}

/// Pay with a card.
#[tool(
    risk = "high",
    irreversible = "payments settle at once",
    approval = "required"
)]
fn pay(#[args] payment: Payment) -> Result<String, ToolError> {
    Ok(payment.payer_name)
}

/// Log in.
#[tool]
fn log_in(user: String, #[sensitive] password: String) -> Result<bool, ToolError> {
    Ok(!user.is_empty() && !password.is_empty())
}

fn audited() -> (Registry, MemoryAuditSink) {
    let sink = MemoryAuditSink::default();
    let registry = Registry::builder()
        .tool(Pay)
        .tool(LogIn)
        .audit(sink.clone())
        .build()
        .unwrap();
    (registry, sink)
}

fn everything_said(records: &[AuditRecord], outcome: &Outcome) -> String {
    // What the record says, without the fields that are random or clocked: a hash or an id
    // may hold the digits of a secret by chance.
    let said: Vec<AuditRecord> = records
        .iter()
        .cloned()
        .map(|mut record| {
            record.hash.clear();
            record.previous_hash.clear();
            record.trace_id.clear();
            record.task_id.clear();
            record.time_ms = 0;
            record.duration_us = 0;
            record
        })
        .collect();
    format!(
        "{} {outcome:?} {}",
        serde_json::to_string(&said).unwrap(),
        outcome
            .rejection()
            .map(|rejection| rejection.to_model_message())
            .unwrap_or_default()
    )
}

/// `#[sensitive]` works on the fields of an `#[args]` struct and of the types inside it.
#[tokio::test]
async fn sensitive_fields_of_args_structs_are_redacted() {
    assert_eq!(Pay.contract().sensitive(), ["/pinCode", "/cards/*/number"]);
    let (registry, sink) = audited();
    let call = call(
        "pay",
        json!({"payerName": "ann", "pinCode": 4931, "cards": [{"number": "4111-1111", "expiry_month": 3}]}),
    );
    let outcome = registry.dispatch(&CallContext::new("ann"), &call).await;
    let ticket = outcome.ticket().expect("payments wait for approval");
    assert_eq!(
        ticket.arguments,
        json!({"payerName": "ann", "pinCode": REDACTED, "cards": [{"number": REDACTED, "expiry_month": 3}]})
    );
    let records = sink.records();
    assert_eq!(records[0].arguments, ticket.arguments);
    let said = everything_said(&records, &outcome);
    assert!(!said.contains("4931") && !said.contains("4111"), "{said}");
}

/// A refusal about a sensitive value does not repeat it, in the refusal or in the audit.
#[tokio::test]
async fn refusals_do_not_echo_sensitive_values() {
    let (registry, sink) = audited();
    let cases = [
        json!({"payerName": "ann", "pinCode": 99999999999u64, "cards": []}),
        json!({"payerName": "ann", "pinCode": -4931, "cards": []}),
        json!({"payerName": "ann", "pinCode": 4931, "cards": [{"number": 41111111, "expiry_month": 3}]}),
    ];
    for arguments in cases {
        let call = call("pay", arguments.clone());
        let outcome = registry.dispatch(&CallContext::new("ann"), &call).await;
        assert!(outcome.rejection().is_some(), "{arguments}");
        let said = everything_said(&sink.records(), &outcome);
        for secret in ["99999999999", "4931", "41111111"] {
            assert!(!said.contains(secret), "{secret} in {said}");
        }
    }
}

/// Text that is not JSON is recorded by its size and SHA-256, never verbatim: the secret in it
/// cannot be redacted by name.
#[tokio::test]
async fn malformed_text_is_recorded_by_size_and_hash() {
    let (registry, sink) = audited();
    let text = r#"{"user": "ann", "password": "hunter2-correct-horse""#;
    let outcome = registry
        .dispatch(&CallContext::new("ann"), &call("log_in", text))
        .await;
    assert_eq!(code(&outcome), Some(RejectionCode::MalformedJson));
    let records = sink.records();
    assert_eq!(
        records[0].arguments["unrecorded"]["bytes"],
        json!(text.len())
    );
    assert_eq!(
        records[0].arguments["unrecorded"]["sha256"]
            .as_str()
            .map(str::len),
        Some(64)
    );
    let said = everything_said(&records, &outcome);
    assert!(!said.contains("hunter2"), "{said}");
}

fn many_products(_: &CallContext) -> Vec<String> {
    (0..1000).map(|n| format!("p-{n}")).collect()
}

/// Order products.
#[tool]
fn order_products(#[one_of(many_products)] products: Vec<String>) -> Result<usize, ToolError> {
    Ok(products.len())
}

/// 61,000 elements against 1,000 allowed values: each is one lookup (the cost is measured in
/// `benches/dispatch.rs`); the last one, not allowed, is named.
#[tokio::test]
async fn a_long_list_against_many_allowed_values_is_checked_element_by_element() {
    let registry = Registry::builder().tool(OrderProducts).build().unwrap();
    let mut products: Vec<String> = (0..61_000).map(|n| format!("p-{}", n % 1000)).collect();
    products.push("p-1000".to_owned());
    let outcome = registry
        .dispatch(
            &CallContext::new("a"),
            &call("order_products", json!({ "products": products })),
        )
        .await;
    let rejection = outcome.rejection().unwrap();
    assert_eq!(
        (rejection.code(), rejection.path()),
        (RejectionCode::InvalidValue, Some("/products/61000"))
    );
}

/// A request that only reads, whatever destructive words it negates, does not delete.
#[tokio::test]
async fn the_intent_check_fails_closed() {
    let registry = Registry::builder()
        .tool(DeleteRecord)
        .intent_check(ReadOnlyRequests::default())
        .build()
        .unwrap();
    let delete = || {
        call(
            "delete_record",
            json!({"table_name": "orders", "record_id": 4}),
        )
    };
    let asking = |request: &str| {
        CallContext::new("alice")
            .with_roles(["admin"])
            .with_request(request)
    };
    let reason = |outcome: Outcome| {
        outcome
            .rejection()
            .and_then(|r| r.reason().map(str::to_owned))
    };
    let outcome = registry
        .dispatch(
            &asking("Find my old orders. Do not delete anything!"),
            &delete(),
        )
        .await;
    assert_eq!(code(&outcome), Some(RejectionCode::IntentMismatch));
    assert_eq!(reason(outcome).as_deref(), Some("read_only_request"));
    let outcome = registry
        .dispatch(&CallContext::new("alice").with_roles(["admin"]), &delete())
        .await;
    assert_eq!(reason(outcome).as_deref(), Some("request_unknown"));
    let outcome = registry
        .dispatch(&asking("清理一下生产环境的日志"), &delete())
        .await;
    assert!(outcome.is_completed(), "{outcome:?}");
}

static REFUNDED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Refunded {
    amount_cents: u64,
}

/// Refund a customer.
#[tool(risk = "high", rollback = take_back, approval = "required")]
fn refund(amount_cents: u64) -> Result<Refunded, ToolError> {
    Ok(Refunded { amount_cents })
}

async fn take_back(
    _ctx: &CallContext,
    args: &RefundArgs,
    _refunded: &Refunded,
) -> Result<(), ToolError> {
    REFUNDED.lock().unwrap().push(args.amount_cents);
    Ok(())
}

/// A reviewer who lowers every refund to one dollar.
struct LowerToOneDollar;

impl portcullis::Approver for LowerToOneDollar {
    fn decide<'a>(
        &'a self,
        _ticket: &'a portcullis::Ticket,
    ) -> portcullis::BoxFuture<'a, portcullis::SignedDecision> {
        Box::pin(std::future::ready(
            portcullis::ApprovalDecision::Edit {
                reviewer: "rita".into(),
                arguments: json!({"amount_cents": 100}),
            }
            .into(),
        ))
    }
}

/// A transaction compensates the call that ran, the one the reviewer edited, not the one the
/// model asked for.
#[tokio::test]
async fn a_transaction_undoes_the_edited_call() {
    let registry = Registry::builder()
        .tool(Refund)
        .approver(LowerToOneDollar)
        .build()
        .unwrap();
    let mut transaction = registry.transaction(&CallContext::new("a"));
    let outcome = transaction
        .dispatch(&call("refund", json!({"amount_cents": 100_000})))
        .await;
    assert_eq!(outcome.output(), Some(&json!({"amount_cents": 100})));
    let report = transaction.abort().await;
    assert_eq!(report.len(), 1);
    assert_eq!(REFUNDED.lock().unwrap().as_slice(), [100]);
}

/// A discount in percent or in cents, told apart by nothing but serde's order.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
enum Discount {
    Percent(#[schemars(range(max = 100))] u8),
    Cents(u32),
}

/// Apply a discount.
#[tool]
fn apply_discount(discount: Discount) -> Result<String, ToolError> {
    Ok(format!("{discount:?}"))
}

/// `250` fails `Percent`'s bound and fits `Cents`, so `anyOf` holds, yet serde decodes it as
/// `Percent(250)`. The registry refuses such a union when it is built.
#[test]
fn an_untagged_union_that_would_let_a_bound_through_is_refused_at_build() {
    let error = Registry::builder().tool(ApplyDiscount).build().unwrap_err();
    let portcullis::BuildError::InvalidContract(error) = error else {
        panic!("expected an invalid contract, got {error}");
    };
    assert!(error.reason.contains("tag the enum"), "{error}");
}

/// Types of the user's that bear standard names: `#[tool]` reads a bare `String`, primitive
/// or `Option` as the standard type (a shadowing type is a compile error:
/// `ui/tests/ui/fail/shadowed_standard_type.rs`); written by their path, they are the user's
/// own, their constraints checked and their sensitive fields redacted as any other type's.
mod shadowing {
    use super::*;

    /// A name, named like the standard `String`.
    #[derive(Debug, Deserialize, Serialize, JsonSchema, Validate, Sensitive)]
    #[serde(deny_unknown_fields)]
    pub struct String {
        #[validate(length(min = 2))]
        pub text: std::string::String,
        #[sensitive]
        pub passphrase: std::string::String,
    }

    /// A value that may be withheld, named like the standard `Option`.
    #[derive(Debug, Deserialize, Serialize, JsonSchema, Validate)]
    #[serde(deny_unknown_fields)]
    pub struct Option<T> {
        pub value: T,
    }
}

/// Greet someone by name.
#[tool]
fn greet_by_name(
    name: shadowing::String,
    visits: shadowing::Option<u32>,
) -> Result<std::string::String, ToolError> {
    Ok(format!("hello {} ({} visits)", name.text, visits.value))
}

#[tokio::test]
async fn types_named_like_standard_ones_are_checked_as_the_users_own() {
    let registry = Registry::builder().tool(GreetByName).build().unwrap();
    let contract = registry.contract("greet_by_name").unwrap();
    assert_eq!(contract.sensitive(), ["/name/passphrase"]);
    let arguments = |text: &str| {
        json!({"name": {"text": text, "passphrase": "open sesame"}, "visits": {"value": 3}})
            .to_string()
    };
    let outcome = registry
        .dispatch(&admin(), &call("greet_by_name", arguments("a")))
        .await;
    let rejection = outcome.rejection().expect("a one-letter name is refused");
    assert_eq!(rejection.code(), RejectionCode::ConstraintViolation);
    assert_eq!(rejection.path(), Some("/name/text"));
    let outcome = registry
        .dispatch(&admin(), &call("greet_by_name", arguments("ada")))
        .await;
    assert_eq!(outcome.output(), Some(&json!("hello ada (3 visits)")));
}

/// A login target whose rule the schema cannot show: only a function knows it.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct Target {
    #[validate(custom(function = "not_root"))]
    pub user: String,
}

fn not_root(user: &str) -> Result<(), validator::ValidationError> {
    if user == "root" {
        return Err(validator::ValidationError::new("root_forbidden"));
    }
    Ok(())
}

/// The standard `Option` as a module path names it.
mod spelt {
    pub use std::option;
}

/// A parameter type that a macro of the user's writes.
macro_rules! login_tool {
    ($name:ident, $ty:ty) => {
        /// Log in to a target.
        #[tool]
        fn $name(target: $ty) -> Result<bool, ToolError> {
            let _ = target;
            Ok(true)
        }
    };
}

login_tool!(login_through_macro, Option<Target>);

/// Log in to a target.
#[tool]
fn login(target: Target) -> Result<bool, ToolError> {
    let _ = target;
    Ok(true)
}

/// Log in to a target, if any.
#[tool]
fn login_optional(target: spelt::option::Option<Target>) -> Result<bool, ToolError> {
    let _ = target;
    Ok(true)
}

/// Log in to a target, if any.
#[tool]
fn login_prelude(target: std::prelude::rust_2024::Option<Target>) -> Result<bool, ToolError> {
    let _ = target;
    Ok(true)
}

/// Log in to a boxed target.
#[tool]
fn login_boxed(target: Box<Target>) -> Result<bool, ToolError> {
    drop(target);
    Ok(true)
}

/// A parameter's own rules are checked by its type, whatever wraps it (`Option`, `Box`) and
/// however the wrapper is spelt: a path to the standard `Option`, or a type a macro passes.
#[tokio::test]
async fn a_parameters_own_rules_hold_however_its_type_is_spelt() {
    let registry = Registry::builder()
        .tool(Login)
        .tool(LoginOptional)
        .tool(LoginPrelude)
        .tool(LoginBoxed)
        .tool(LoginThroughMacro)
        .build()
        .unwrap();
    for tool in [
        "login",
        "login_optional",
        "login_prelude",
        "login_boxed",
        "login_through_macro",
    ] {
        let root = json!({"target": {"user": "root"}});
        let outcome = registry.dispatch(&admin(), &call(tool, root)).await;
        let rejection = outcome.rejection().unwrap_or_else(|| panic!("{tool} ran"));
        assert_eq!(
            rejection.code(),
            RejectionCode::ConstraintViolation,
            "{tool}"
        );
        assert_eq!(rejection.path(), Some("/target/user"), "{tool}");
        let ada = json!({"target": {"user": "ada"}});
        let outcome = registry.dispatch(&admin(), &call(tool, ada)).await;
        assert_eq!(outcome.output(), Some(&json!(true)), "{tool}");
    }
}

/// Shelves by number, each with its tags: sets inside a map whose keys are integers.
#[tool]
fn tag_shelves(
    shelves: std::collections::HashMap<u32, std::collections::HashSet<String>>,
) -> Result<usize, ToolError> {
    Ok(shelves.len())
}

/// The stalled-loop breaker counts one call however its sets order their elements, wherever
/// the sets stand.
#[tokio::test]
async fn repeats_of_sets_are_one_stalled_loop() {
    let registry = breaking_loops(Registry::builder().tool(TagShelves));
    let tags: Vec<String> = (0..16).map(|index| format!("tag-{index}")).collect();
    let ctx = admin();
    let mut codes = Vec::new();
    for _ in 0..3 {
        let arguments = json!({"shelves": {"1": tags, "2": tags}}).to_string();
        codes.push(code(
            &registry
                .dispatch(&ctx, &call("tag_shelves", arguments))
                .await,
        ));
    }
    assert_eq!(codes, [None, None, Some(RejectionCode::StalledLoop)]);
}

/// A set's elements come back in no particular order; the same call repeated under its id is
/// still the same call.
#[tokio::test]
async fn a_set_repeated_under_its_id_is_the_same_call() {
    let registry = Registry::builder().tool(Pack).build().unwrap();
    let ctx = CallContext::new("a").with_fresh_task_id();
    let mut arguments = good_pack();
    let tags: Vec<String> = (0..32).map(|index| format!("tag-{index}")).collect();
    arguments["tags"] = json!(tags);
    let call = ToolCall::new("set-1", "pack", arguments);
    let first = registry.dispatch(&ctx, &call).await;
    assert_eq!(first.output(), Some(&json!(1)));
    for _ in 0..8 {
        let again = registry.dispatch(&ctx, &call).await;
        assert_eq!(again.output(), Some(&json!(1)), "{again:?}");
    }
}

/// Pay from one account to another.
#[tool(risk = "medium", irreversible = "payments settle at once")]
fn pay_between(accounts: (String, String), cents: u64) -> Result<String, ToolError> {
    Ok(format!(
        "paid {cents} from {} to {}",
        accounts.0, accounts.1
    ))
}

/// The order of a list that is no set is part of the call: the same id with the accounts
/// swapped is another call, refused, and the loop breaker does not count a back-and-forth as
/// one call repeated.
#[tokio::test]
async fn the_order_of_a_list_that_is_no_set_is_part_of_the_call() {
    let registry = breaking_loops(Registry::builder().tool(PayBetween));
    let ctx = admin().with_fresh_task_id();
    let pay = |id: &str, from: &str, to: &str| {
        ToolCall::new(
            id,
            "pay_between",
            json!({"accounts": [from, to], "cents": 500}),
        )
    };
    let first = registry.dispatch(&ctx, &pay("p1", "alice", "bob")).await;
    assert_eq!(first.output(), Some(&json!("paid 500 from alice to bob")));
    let swapped = registry.dispatch(&ctx, &pay("p1", "bob", "alice")).await;
    assert_eq!(swapped.code(), Some(RejectionCode::CallIdReused));

    let ctx = admin().with_fresh_task_id();
    let mut codes = Vec::new();
    for (id, from, to) in [("q1", "a", "b"), ("q2", "b", "a"), ("q3", "a", "b")] {
        codes.push(code(&registry.dispatch(&ctx, &pay(id, from, to)).await));
    }
    assert_eq!(codes, [None, None, None]);
}

/// Where a shipment goes: a set of zones, or a route whose order matters. Both forms put their
/// content under one key.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "kind", content = "stops", deny_unknown_fields)]
pub enum Destination {
    Zones(std::collections::HashSet<String>),
    Route(Vec<String>),
}

/// Ship a parcel.
#[tool(risk = "medium", irreversible = "parcels leave at once")]
fn ship(destination: Destination) -> Result<usize, ToolError> {
    Ok(match destination {
        Destination::Zones(zones) => zones.len(),
        Destination::Route(stops) => stops.len(),
    })
}

/// In a union, a list is a set only in the form the value takes: the same key holds a set in
/// one variant and an ordered route in the other.
#[tokio::test]
async fn a_list_is_a_set_only_in_the_form_that_makes_it_one() {
    let registry = Registry::builder().tool(Ship).build().unwrap();
    let ctx = admin().with_fresh_task_id();
    let ship = |id: &str, kind: &str, stops: [&str; 2]| {
        ToolCall::new(
            id,
            "ship",
            json!({"destination": {"kind": kind, "stops": stops}}),
        )
    };
    let first = registry
        .dispatch(&ctx, &ship("s1", "Route", ["a", "b"]))
        .await;
    assert_eq!(first.output(), Some(&json!(2)));
    let reversed = registry
        .dispatch(&ctx, &ship("s1", "Route", ["b", "a"]))
        .await;
    assert_eq!(reversed.code(), Some(RejectionCode::CallIdReused));

    let first = registry
        .dispatch(&ctx, &ship("z1", "Zones", ["a", "b"]))
        .await;
    assert_eq!(first.output(), Some(&json!(2)));
    let respelt = registry
        .dispatch(&ctx, &ship("z1", "Zones", ["b", "a"]))
        .await;
    assert_eq!(respelt.output(), Some(&json!(2)));
    assert!(respelt.code().is_none());
}
