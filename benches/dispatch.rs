//! What the gates cost: one call of a sync delete tool, three ways, in one run.
//!
//! * (a) the floor: `serde_json::from_str` into the typed arguments, then `Validate::validate`:
//!   what a hand-written tool would do at the very least;
//! * (b) `Registry::dispatch` of the same text: resolve, strict decode (duplicate keys, depth,
//!   typed errors), validate, execute (the sync tool body, its panic guard, and its output, a
//!   record id, as JSON);
//! * (c) `serde_json::from_str` into a `Value`, then the exported schema checked by the
//!   `jsonschema` crate (the validator is built once, outside the loop).
//!
//! The tool is `delete_record`, defined in `workload` with the arguments of the reference tool
//! `delete_database_record` and a scalar output, so that (b) measures the gates rather than the
//! serialization of an output. (b2) is the reference tool itself, whose output is an object;
//! it shows what serializing such an output adds. Dispatch borrows the `ToolCall`, built once,
//! as (a) borrows its text.
//!
//! (d) is the whole pipeline on `delete_guarded`, the same arguments with every gate configured:
//! the caller's role, the tool's environments and an `#[environment]` argument, the tool's own
//! policy, a registry-wide policy that reads the arguments as JSON, an intent check, budgets
//! (calls and cost per task, per-tool calls, rate limit, circuit breaker) and a hash-chained
//! audit record per call, kept in memory.
//!
//! (e) is the worst case of dynamic values found: 61,000 elements of a `#[one_of]` list
//! checked against 1,000 allowed values, beside (e0), the same text parsed into the typed
//! arguments. Each element is one hash lookup, so (e) stays within a small factor of (e0);
//! comparing each element with each value, it was about 200 ms a call.
//!
//! The dispatch future is polled by hand with a no-op waker: a sync tool finishes on the first
//! poll, so no async runtime is measured. After the run, each benchmark's mean is read back
//! from criterion's `new/estimates.json` and the ratios to the floor are printed, with the
//! targets: b/a <= 1.5 and d/a <= 3.0.
//!
//! (b), (b2) and (d) dispatch calls as a model sends them: each with a fresh call id, which the
//! repeat gate claims and remembers (the registry's default memory of 10,000 decided calls).
//! Building each call is left out of the time.
//!
//! Run with `cargo bench --bench dispatch`.

#[path = "workload/estimates.rs"]
mod estimates;
mod workload;

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use criterion::{BatchSize, Criterion};
use estimates::mean_ns;
use portcullis::prelude::*;
use serde_json::Value;
use validator::Validate;
use workload::{
    ARGUMENTS, DeleteRecordArgs, GUARDED_TOOL, TOOL, common, guarded_caller, guarded_registry,
    poll_to_end,
};

const REFERENCE_TOOL: &str = "delete_database_record";
const GROUP: &str = "dispatch";
const FLOOR: &str = "a_serde_validator";
const DISPATCH: &str = "b_registry_dispatch";
const DISPATCH_REFERENCE: &str = "b2_registry_dispatch_object_output";
const SCHEMA: &str = "c_jsonschema";
const PIPELINE: &str = "d_whole_pipeline";
const MANY_VALUES: &str = "e_one_of_61000_against_1000";
const MANY_VALUES_PARSE: &str = "e0_parse_61000";

fn many_products(_: &CallContext) -> Vec<String> {
    (0..1000).map(|n| format!("p-{n}")).collect()
}

/// Order products from today's catalogue.
#[tool]
fn order_products(#[one_of(many_products)] products: Vec<String>) -> Result<usize, ToolError> {
    Ok(products.len())
}

fn main() {
    // As a model's calls come: each with an id of its own, remembered by the repeat gate.
    let registry = Registry::builder()
        .tool(workload::DeleteRecord)
        .tool(common::DeleteDatabaseRecord)
        .build()
        .expect("the benchmark tools form a registry");
    // (e) repeats one call id; remembered, every repeat after the first would return the
    // first outcome instead of passing the gates.
    let listing = Registry::builder()
        .tool(OrderProducts)
        .remembered_calls(0)
        .build()
        .expect("the listing tool forms a registry");
    let fresh = {
        let mut next = 0u64;
        move |tool: &'static str| {
            next += 1;
            ToolCall::new(format!("call-{next}"), tool, ARGUMENTS)
        }
    };
    let fresh = std::cell::RefCell::new(fresh);
    let fresh_call = |tool: &'static str| (fresh.borrow_mut())(tool);
    let ctx = common::admin();

    // Every way gives the same answer before any is timed.
    let typed: DeleteRecordArgs = serde_json::from_str(ARGUMENTS).expect("the arguments decode");
    typed.validate().expect("the arguments are valid");
    for tool in [TOOL, REFERENCE_TOOL] {
        let outcome =
            poll_to_end(registry.dispatch(&ctx, &ToolCall::new("call-0", tool, ARGUMENTS)));
        assert!(outcome.is_completed(), "dispatch completes: {outcome:?}");
    }
    let guarded = guarded_registry();
    let guarded_ctx = guarded_caller();
    let outcome = poll_to_end(guarded.dispatch(
        &guarded_ctx,
        &ToolCall::new("call-0", GUARDED_TOOL, ARGUMENTS),
    ));
    assert!(
        outcome.is_completed(),
        "the whole pipeline completes: {outcome:?}"
    );
    let schema = registry
        .contract(TOOL)
        .expect("the tool is registered")
        .input_schema()
        .clone();
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("the exported schema compiles");
    assert!(validator.is_valid(&serde_json::from_str(ARGUMENTS).expect("JSON")));

    let output: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("criterion");
    let started = SystemTime::now();
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args()
        .output_directory(&output);

    {
        let mut group = criterion.benchmark_group(GROUP);
        group.bench_function(FLOOR, |b| {
            b.iter(|| {
                let args: DeleteRecordArgs =
                    serde_json::from_str(black_box(ARGUMENTS)).expect("the arguments decode");
                args.validate().expect("the arguments are valid");
                args
            })
        });
        // Building each call (its id and its text) is the caller's work, left out of the time.
        for (function, tool) in [(DISPATCH, TOOL), (DISPATCH_REFERENCE, REFERENCE_TOOL)] {
            group.bench_function(function, |b| {
                b.iter_batched(
                    || fresh_call(tool),
                    |call| poll_to_end(registry.dispatch(&ctx, black_box(&call))),
                    BatchSize::SmallInput,
                )
            });
        }
        group.bench_function(PIPELINE, |b| {
            b.iter_batched(
                || fresh_call(GUARDED_TOOL),
                |call| poll_to_end(guarded.dispatch(&guarded_ctx, black_box(&call))),
                BatchSize::SmallInput,
            )
        });
        let products: Vec<String> = (0..61_000).map(|n| format!("p-{}", n % 1000)).collect();
        let many = serde_json::json!({ "products": products }).to_string();
        let call = ToolCall::new("call-1", "order_products", many.as_str());
        assert_eq!(
            poll_to_end(listing.dispatch(&ctx, &call)).output(),
            Some(&serde_json::json!(61_000))
        );
        group.bench_function(MANY_VALUES, |b| {
            b.iter(|| poll_to_end(listing.dispatch(&ctx, black_box(&call))))
        });
        group.bench_function(MANY_VALUES_PARSE, |b| {
            b.iter(|| {
                serde_json::from_str::<OrderProductsArgs>(black_box(&many))
                    .expect("the arguments decode")
            })
        });
        group.bench_function(SCHEMA, |b| {
            b.iter(|| {
                let value: Value =
                    serde_json::from_str(black_box(ARGUMENTS)).expect("the arguments are JSON");
                validator.is_valid(&value)
            })
        });
        group.finish();
    }
    criterion.final_summary();

    let means: Vec<Option<f64>> = [
        FLOOR,
        DISPATCH,
        DISPATCH_REFERENCE,
        SCHEMA,
        PIPELINE,
        MANY_VALUES,
        MANY_VALUES_PARSE,
    ]
    .iter()
    .map(|function| mean_ns(&output, GROUP, function, started))
    .collect();
    let [
        Some(floor),
        Some(dispatch),
        Some(reference),
        Some(schema),
        Some(pipeline),
        Some(many),
        Some(many_parse),
    ] = means[..]
    else {
        println!(
            "no fresh estimates under {} (not run with `cargo bench`?); no ratios to print",
            output.display()
        );
        return;
    };
    let b_over_a = dispatch / floor;
    println!();
    println!(
        "`{TOOL}`, {} bytes of arguments; mean time per call:",
        ARGUMENTS.len()
    );
    println!("  {:<44} {:>10}  {:>8}", "", "mean", "ratio");
    println!(
        "  {:<44} {:>7.0} ns  {:>8}",
        "(a) serde_json + Validate::validate", floor, "1.00"
    );
    println!(
        "  {:<44} {:>7.0} ns  {:>7.2}x  (b/a; fresh call ids, repeat memory on; target <= 1.50: {})",
        "(b) Registry::dispatch",
        dispatch,
        b_over_a,
        if b_over_a <= 1.5 { "met" } else { "NOT met" }
    );
    println!(
        "  {:<44} {:>7.0} ns  {:>7.2}x  (b2/a: `{REFERENCE_TOOL}`, object output)",
        "(b2) Registry::dispatch",
        reference,
        reference / floor
    );
    println!(
        "  {:<44} {:>7.0} ns  {:>7.2}x  (c/a)",
        "(c) serde_json::Value + jsonschema",
        schema,
        schema / floor
    );
    println!(
        "  {:<44} {:>7.0} ns  {:>7.2}x  (d/a: every gate configured, audit in memory; target <= 3.00: {})",
        "(d) the whole pipeline",
        pipeline,
        pipeline / floor,
        if pipeline / floor <= 3.0 {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "  {:<44} {:>7.0} µs  {:>7.2}x  (e/e0: 61,000 elements against 1,000 values, to parsing them)",
        "(e) #[one_of] list",
        many / 1000.0,
        many / many_parse
    );
    println!("  (estimates from {})", output.join(GROUP).display());
}
