//! What the gates cost: one call of a sync delete tool, measured several ways in one run, each
//! as a ratio to the floor.
//!
//! * (a) the floor: `serde_json::from_str` into the typed arguments, then `Validate::validate`:
//!   what a hand-written tool would do at the very least;
//! * (b) `Registry::dispatch` of the same text, nothing configured: resolve, strict decode
//!   (duplicate keys, depth, typed errors), the schema check, validate, the claim of the call
//!   id in the repeat memory (the registry's default of 10,000 decided calls), execute (the
//!   sync tool body, its panic guard, and its output, a record id, as JSON);
//! * (b0) the same with the repeat memory off (`remembered_calls(0)`): no claim;
//! * (b2) the reference tool itself, whose output is an object: what serializing such an
//!   output adds;
//! * (c) `serde_json::from_str` into a `Value`, then the exported schema checked by the
//!   `jsonschema` crate (the validator is built once, outside the loop);
//! * (d) the whole pipeline on `delete_guarded`, the same arguments with every gate
//!   configured: the caller's role, the tool's environments and an `#[environment]` argument,
//!   the tool's own policy, a registry-wide policy that reads the arguments as JSON, an intent
//!   check, budgets (calls and cost per task, per-tool calls, rate limit, circuit breaker) and
//!   two audit records per call (`about_to_run`, then the outcome) chained under a key, kept
//!   in memory;
//! * (d0) the same without the audit: (d) - (d0) is what the two records cost;
//! * (e) the worst case of dynamic values found: 61,000 elements of a `#[one_of]` list checked
//!   against 1,000 allowed values, beside (e0), the same text parsed into the typed arguments.
//!
//! When `python3` (or `PORTCULLIS_SEED_PYTHON`) can import pydantic, the Python pipeline of
//! `../shared/baselines/seed_pipeline.py` (or `PORTCULLIS_SEED_PIPELINE`) runs right after, on
//! the same machine, and its time per call is set beside (d).
//!
//! The dispatch future is polled by hand with a no-op waker: a sync tool finishes on the first
//! poll, so no async runtime is measured. Every dispatched call has a fresh call id, as a
//! model sends them; building each call is left out of the time. After the run, each
//! benchmark's mean is read back from criterion's `new/estimates.json` and the ratios are
//! printed with their targets.
//!
//! Run with `cargo bench --bench dispatch`; `cargo bench --bench allocations` counts the heap
//! requests of the same calls.

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
    ARGUMENTS, DeleteRecordArgs, GUARDED_TOOL, TOOL, common, every_gate_but_audit, guarded_builder,
    guarded_caller, guarded_registry, poll_to_end,
};

const REFERENCE_TOOL: &str = "delete_database_record";
const GROUP: &str = "dispatch";
const FLOOR: &str = "a_serde_validator";
const DISPATCH: &str = "b_registry_dispatch";
const DISPATCH_FORGETTING: &str = "b0_registry_dispatch_no_repeat_memory";
const DISPATCH_REFERENCE: &str = "b2_registry_dispatch_object_output";
const SCHEMA: &str = "c_jsonschema";
const PIPELINE: &str = "d_whole_pipeline";
const PIPELINE_UNAUDITED: &str = "d0_whole_pipeline_without_audit";
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
    let forgetting = Registry::builder()
        .tool(workload::DeleteRecord)
        .remembered_calls(0)
        .build()
        .expect("the benchmark tool forms a registry");
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
    let guarded = guarded_registry();
    let unaudited = every_gate_but_audit(guarded_builder())
        .build()
        .expect("the guarded tool forms a registry");
    let guarded_ctx = guarded_caller();
    // What is dispatched, each call with a fresh id: by which registry, for whom, to which tool.
    let dispatched = [
        (DISPATCH, &registry, &ctx, TOOL),
        (DISPATCH_REFERENCE, &registry, &ctx, REFERENCE_TOOL),
        (DISPATCH_FORGETTING, &forgetting, &ctx, TOOL),
        (PIPELINE, &guarded, &guarded_ctx, GUARDED_TOOL),
        (PIPELINE_UNAUDITED, &unaudited, &guarded_ctx, GUARDED_TOOL),
    ];
    for (function, registry, ctx, tool) in dispatched {
        let outcome =
            poll_to_end(registry.dispatch(ctx, &ToolCall::new("call-0", tool, ARGUMENTS)));
        assert!(outcome.is_completed(), "{function} completes: {outcome:?}");
    }
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
        for (function, registry, ctx, tool) in dispatched {
            group.bench_function(function, |b| {
                b.iter_batched(
                    || fresh_call(tool),
                    |call| poll_to_end(registry.dispatch(ctx, black_box(&call))),
                    BatchSize::SmallInput,
                )
            });
        }
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

    let read = |function| mean_ns(&output, GROUP, function, started);
    let (
        Some(floor),
        Some(dispatch),
        Some(forgetting),
        Some(reference),
        Some(schema),
        Some(pipeline),
        Some(unaudited),
        Some(many),
        Some(many_parse),
    ) = (
        read(FLOOR),
        read(DISPATCH),
        read(DISPATCH_FORGETTING),
        read(DISPATCH_REFERENCE),
        read(SCHEMA),
        read(PIPELINE),
        read(PIPELINE_UNAUDITED),
        read(MANY_VALUES),
        read(MANY_VALUES_PARSE),
    )
    else {
        println!(
            "no fresh estimates under {} (not run with `cargo bench`?); no ratios to print",
            output.display()
        );
        return;
    };
    println!();
    println!(
        "`{TOOL}`, {} bytes of arguments; mean time per call, and its ratio to (a):",
        ARGUMENTS.len()
    );
    let row = |label: &str, ns: f64, target: Option<f64>| {
        let ratio = ns / floor;
        let verdict = match target {
            Some(target) if ratio <= target => format!("target <= {target:.2}: met"),
            Some(target) => format!("target <= {target:.2}: NOT met"),
            None => String::new(),
        };
        println!("  {label:<46} {ns:>8.0} ns  {ratio:>7.2}x  {verdict}");
    };
    row("(a) serde_json + Validate::validate", floor, None);
    row("(b) dispatch, repeat memory on", dispatch, Some(5.0));
    row("(b0) dispatch, repeat memory off", forgetting, None);
    row("(b2) dispatch, object output", reference, None);
    row("(c) serde_json::Value + jsonschema", schema, None);
    row("(d) the whole pipeline, keyed audit", pipeline, Some(12.0));
    row("(d0) the whole pipeline without audit", unaudited, None);
    row(
        "(d - d0) the audit alone (two records)",
        pipeline - unaudited,
        Some(3.0),
    );
    println!(
        "  {:<46} {:>8.0} µs  {:>7.2}x  (e/e0: 61,000 elements against 1,000 values, to parsing them)",
        "(e) #[one_of] list",
        many / 1000.0,
        many / many_parse
    );
    match seed_pipeline_ns() {
        Ok(python) => println!(
            "  {:<46} {:>8.0} ns  py/d = {:.2}: how many times faster (d) is (target >= 3.00: {})",
            "(py) seed_pipeline.py, pydantic",
            python,
            python / pipeline,
            if python / pipeline >= 3.0 {
                "met"
            } else {
                "NOT met"
            }
        ),
        Err(why) => println!("  (py) the Python pipeline did not run: {why}"),
    }
    println!("  (estimates from {})", output.join(GROUP).display());
}

/// The time per call of the Python pipeline the seed describes, as its script prints it.
fn seed_pipeline_ns() -> Result<f64, String> {
    let python = std::env::var("PORTCULLIS_SEED_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let script = std::env::var_os("PORTCULLIS_SEED_PIPELINE").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/baselines/seed_pipeline.py"),
        PathBuf::from,
    );
    if !script.exists() {
        return Err(format!("{} is not there", script.display()));
    }
    let ran = std::process::Command::new(&python)
        .arg(&script)
        .output()
        .map_err(|error| format!("`{python}` cannot be started: {error}"))?;
    let printed = String::from_utf8_lossy(&ran.stdout);
    if !ran.status.success() {
        let why = String::from_utf8_lossy(&ran.stderr);
        let last = why.lines().last().unwrap_or("no message");
        return Err(format!("`{python}` {} failed ({last})", script.display()));
    }
    printed
        .lines()
        .find_map(|line| line.strip_prefix("py-pipeline"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|ns| ns.parse().ok())
        .ok_or_else(|| format!("no `py-pipeline` line in what it printed: {printed}"))
}
