//! The example shop's rules written twice, as Rust policies and as Cedar (`policies/shop.cedar`
//! beside the shop): the two registries decide every call of a generated set alike.

#[path = "../../examples/shop/mod.rs"]
mod shop;

#[path = "../../tests/common/generated.rs"]
#[allow(dead_code)]
mod generated;

use generated::Rng;
use portcullis::prelude::*;
use portcullis::{Outcome, RejectionCode};
use portcullis_cedar::{Cedar, CedarPolicies};
use serde_json::{Value, json};

const CALLS: usize = 12_000;

fn in_rust() -> Registry {
    shop::shop_tools()
        .policy(shop::embargo)
        .policy(shop::large_refunds)
        .policy(shop::euro_payouts_in_production)
        .policy(shop::outlet_sales_are_final)
        .policy(shop::old_orders_in_production)
        .build()
        .unwrap()
}

fn in_cedar() -> Registry {
    let policies = CedarPolicies::from_text(shop::SHOP_CEDAR).unwrap();
    shop::shop_tools()
        .policy(Cedar::new(policies).default_deny())
        .build()
        .unwrap()
}

/// A caller of some of the shop's roles, maybe a tenant, maybe an environment.
fn caller(rng: &mut Rng, task: usize) -> CallContext {
    let roles: Vec<&str> = ["billing_admin", "support", "finance"]
        .into_iter()
        .filter(|_| rng.percent(60))
        .collect();
    let mut ctx = CallContext::new(format!("caller-{}", rng.below(5)))
        .with_roles(roles)
        .with_task_id(format!("task-{task}"));
    if let Some(tenant) = rng.pick(&[None, Some("outlet"), Some("outdoor"), Some("acme")]) {
        ctx = ctx.with_tenant(*tenant);
    }
    if let Some(environment) = rng.pick(&[None, Some("staging"), Some("production")]) {
        ctx = ctx.with_environment(*environment);
    }
    ctx
}

/// A call of one of the shop's tools, its values mostly within the contracts and near the
/// rules' edges, now and then outside.
fn call(rng: &mut Rng, id: usize) -> ToolCall {
    let text = |rng: &mut Rng, length: usize| "x".repeat(1 + rng.below(length));
    let (tool, arguments) = match rng.below(4) {
        0 => {
            let cents = *rng.pick(&[1, 99_999, 100_000, 100_001, 250_000, 500_000, 500_001]);
            let mut arguments = json!({
                "payment_id": format!("pay_{}", text(rng, 40)),
                "amount_cents": if rng.percent(50) { cents } else { 1 + rng.below(500_000) as u64 },
                "reason": rng.pick(&["duplicate", "fraudulent", "requested_by_customer", "whim"]),
            });
            if rng.percent(30) {
                arguments["note"] = json!(text(rng, 20));
            }
            ("refund_payment", arguments)
        }
        1 => {
            let timing = rng
                .pick(&[
                    json!({"when": "now"}),
                    json!({"when": "next_business_day"}),
                    json!({"when": "on", "date": "2026-12-01"}),
                ])
                .clone();
            let arguments = json!({
                "seller_id": text(rng, 40),
                "amount": {
                    "cents": rng.below(2_000_000),
                    "currency": rng.pick(&["EUR", "USD", "GBP"]),
                },
                "timing": timing,
            });
            ("schedule_payout", arguments)
        }
        2 => {
            let mut address = json!({
                "street": "1 Main Street",
                "city": "Springfield",
                "country": rng.pick(&["DE", "FR", "KP", "kp", "Kp", "kP", "K"]),
            });
            if rng.percent(30) {
                address["postcode"] = json!("12345");
            }
            let order = *rng.pick(&[0, 999, 1000, 1001]);
            let arguments = json!({
                "order_id": if rng.percent(50) { order } else { rng.below(5000) as u64 },
                "address": address,
            });
            ("update_shipping_address", arguments)
        }
        _ => {
            let mut arguments = json!({"query": text(rng, 30)});
            if rng.percent(50) {
                arguments["sort"] = json!(rng.pick(&["relevance", "newest", "oldest"]));
            }
            if rng.percent(30) {
                arguments["category"] = json!(rng.pick(&["lamps", "tents", "cars"]));
            }
            ("search_products", arguments)
        }
    };
    ToolCall::new(format!("call-{id}"), tool, arguments.to_string())
}

/// How a registry decided: ran (with its output), waits, or refused with a code.
fn decided(outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Completed(output) => json!({"ran": output}),
        Outcome::Pending(_) => json!("waits"),
        Outcome::Rejected(refusal) => json!(refusal.code()),
        other => json!(format!("{other:?}")),
    }
}

#[tokio::test]
async fn the_shops_rules_in_rust_and_in_cedar_decide_every_generated_call_alike() {
    let (rust, cedar) = (in_rust(), in_cedar());
    let mut rng = Rng::new(generated::seed_of("shop rules in Cedar"));
    let mut refused_by_policy = 0;
    let mut ran = 0;
    for id in 0..CALLS {
        let ctx = caller(&mut rng, id);
        let call = call(&mut rng, id);
        let by_rust = rust.dispatch(&ctx, &call).await;
        let by_cedar = cedar.dispatch(&ctx, &call).await;
        assert_eq!(
            decided(&by_rust),
            decided(&by_cedar),
            "{ctx:?}\n{call:?}\nRust: {by_rust:?}\nCedar: {by_cedar:?}"
        );
        refused_by_policy += usize::from(by_rust.code() == Some(RejectionCode::PolicyDenied));
        ran += usize::from(by_rust.is_completed());
    }
    // The set tests the rules: many calls reach them, and they refuse some.
    println!("{CALLS} calls: {ran} ran, {refused_by_policy} refused by a rule");
    assert!(refused_by_policy > CALLS / 20, "{refused_by_policy}");
    assert!(ran > CALLS / 10, "{ran}");
}
