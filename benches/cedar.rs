//! What Cedar costs: the whole pipeline with a `Cedar` policy of 10 and of 1,000 policies,
//! against the same pipeline without it, in one run.
//!
//! * (a) the shop's `refund_payment` through every gate (decode, validate, the intent check,
//!   budgets, the write-ahead and outcome audit records chained under a key, the tool), no
//!   registry policy;
//! * (b) the same with `Cedar` deciding by 10 policies: a `permit` of every call and 9
//!   `forbid`s, 3 of them about `refund_payment`'s arguments (none matches);
//! * (c) the same with 1,000 policies: a `permit` and 999 `forbid`s, a quarter of them about
//!   `refund_payment`.
//!
//! Every call has a fresh id; Cedar reads the task's spending from the in-memory budget store,
//! builds the request (the caller, its roles, the arguments through the Cedar schema
//! generator's request generator) and evaluates the set. After the run, the means are read back
//! from criterion's `new/estimates.json`, and what Cedar adds is printed as a ratio to (a).
//!
//! Run with `cargo bench --bench cedar`.

#[path = "workload/estimates.rs"]
mod estimates;
#[path = "../examples/shop/mod.rs"]
mod shop;
#[allow(dead_code)]
mod workload;

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use criterion::{BatchSize, Criterion};
use estimates::mean_ns;
use portcullis::prelude::*;
use portcullis_cedar::{Cedar, CedarPolicies};
use serde_json::json;
use workload::poll_to_end;

const GROUP: &str = "cedar";
const WITHOUT: &str = "a_pipeline_without_cedar";
const TEN: &str = "b_pipeline_with_10_cedar_policies";
const THOUSAND: &str = "c_pipeline_with_1000_cedar_policies";

/// A `permit` of every call and `forbids - 1` forbids over the shop's tools, one in four about
/// `refund_payment`; none refuses the benchmark's call.
fn policies(forbids: usize) -> CedarPolicies {
    let mut text = String::from("@id(\"all\") permit(principal, action, resource);\n");
    for n in 0..forbids - 1 {
        let rule = match n % 4 {
            0 => format!(
                "action == Portcullis::Action::\"refund_payment\", resource) \
                 when {{ context.input.amount_cents == {} && context.environment == \"production\" }}",
                1_000_000 + n
            ),
            1 => format!(
                "action == Portcullis::Action::\"schedule_payout\", resource) \
                 when {{ context.input.amount.cents > {} }}",
                10_000_000 + n
            ),
            2 => format!(
                "action == Portcullis::Action::\"update_shipping_address\", resource) \
                 when {{ context.input.address.country == \"X{n}\" }}"
            ),
            _ => format!(
                "action, resource) when {{ principal has tenant && principal.tenant == \"closed-{n}\" }}"
            ),
        };
        text.push_str(&format!("@id(\"rule{n}\") forbid(principal, {rule};\n"));
    }
    CedarPolicies::from_text(&text).expect("the generated policies parse")
}

fn registry(cedar: Option<Cedar>) -> Registry {
    let builder = workload::every_gate(shop::shop_tools());
    match cedar {
        Some(cedar) => builder.policy(cedar),
        None => builder,
    }
    .build()
    .expect("the shop forms a registry")
}

fn main() {
    let ctx = CallContext::new("billing")
        .with_roles(["billing_admin"])
        .with_tenant("shop")
        .with_environment("staging")
        .with_request("Refund the duplicate charge pay_3MtwBw, 12.00 EUR");
    let registries = [
        (WITHOUT, registry(None)),
        (TEN, registry(Some(Cedar::new(policies(10))))),
        (THOUSAND, registry(Some(Cedar::new(policies(1000))))),
    ];
    let arguments = json!({
        "payment_id": "pay_3MtwBw",
        "amount_cents": 1200,
        "reason": "duplicate",
    })
    .to_string();
    let fresh = std::cell::Cell::new(0u64);
    let fresh_call = || {
        fresh.set(fresh.get() + 1);
        ToolCall::new(
            format!("call-{}", fresh.get()),
            "refund_payment",
            arguments.as_str(),
        )
    };
    for (name, registry) in &registries {
        let outcome = poll_to_end(registry.dispatch(&ctx, &fresh_call()));
        assert!(outcome.is_completed(), "{name}: {outcome:?}");
    }

    let output: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("criterion");
    let started = SystemTime::now();
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args()
        .output_directory(&output);
    {
        let mut group = criterion.benchmark_group(GROUP);
        for (function, registry) in &registries {
            group.bench_function(*function, |b| {
                b.iter_batched(
                    fresh_call,
                    |call| poll_to_end(registry.dispatch(&ctx, black_box(&call))),
                    BatchSize::SmallInput,
                )
            });
        }
        group.finish();
    }
    criterion.final_summary();

    let means: Option<Vec<f64>> = [WITHOUT, TEN, THOUSAND]
        .into_iter()
        .map(|function| mean_ns(&output, GROUP, function, started))
        .collect();
    let Some([plain, ten, thousand]) = means.as_deref().map(|means| [means[0], means[1], means[2]])
    else {
        println!(
            "no fresh estimates under {} (not run with `cargo bench`?); no ratio to print",
            output.display()
        );
        return;
    };
    println!();
    println!("the whole pipeline, mean time per call of refund_payment:");
    println!("  (a) without Cedar            {plain:>9.0} ns  1.00");
    for (label, mean) in [
        ("(b) with 10 policies   ", ten),
        ("(c) with 1,000 policies", thousand),
    ] {
        println!(
            "  {label}      {mean:>9.0} ns  {:.2}x  (Cedar adds {:.0} ns, {:.2} of (a))",
            mean / plain,
            mean - plain,
            (mean - plain) / plain
        );
    }
}
