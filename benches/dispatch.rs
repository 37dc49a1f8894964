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
//! The tool is `delete_record`, defined below with the arguments of the reference tool
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

// `transfer_funds` in the shared tools takes ten arguments on purpose (one per tool argument).
#[allow(clippy::too_many_arguments)]
#[path = "../tests/common/mod.rs"]
mod common;

use std::future::Future;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime};

use common::{Environment, TABLE_NAME};
use criterion::{BatchSize, Criterion};
use portcullis::audit::{AuditRecord, AuditSink, Checkpoint, Unchained};
use portcullis::prelude::*;
use portcullis::{
    BoxFuture, BudgetLimits, CircuitBreaker, Decision, PolicyError, PolicyRequest, RateLimit,
    ReadOnlyRequests,
};
use serde_json::Value;
use validator::Validate;

const TOOL: &str = "delete_record";
const REFERENCE_TOOL: &str = "delete_database_record";
const ARGUMENTS: &str = r#"{"table_name":"user_records","record_id":4242,"environment":"staging","confirm_force":true,"admin_note":"duplicate created by a retried import"}"#;
const GROUP: &str = "dispatch";
const FLOOR: &str = "a_serde_validator";
const DISPATCH: &str = "b_registry_dispatch";
const DISPATCH_REFERENCE: &str = "b2_registry_dispatch_object_output";
const SCHEMA: &str = "c_jsonschema";
const PIPELINE: &str = "d_whole_pipeline";
const MANY_VALUES: &str = "e_one_of_61000_against_1000";
const MANY_VALUES_PARSE: &str = "e0_parse_61000";
const GUARDED_TOOL: &str = "delete_guarded";

/// Delete one record from a database table (the reference tool's arguments, a scalar output).
#[tool(
    risk = "high",
    role = "admin",
    irreversible = "a benchmark deletes nothing"
)]
fn delete_record(
    #[validate(length(min = 3, max = 50), regex(path = *TABLE_NAME))] table_name: String,
    #[validate(range(min = 1))] record_id: u64,
    environment: Environment,
    #[serde(default)] confirm_force: bool,
    #[validate(length(max = 200))]
    #[sensitive]
    admin_note: Option<String>,
) -> Result<u64, ToolError> {
    let _ = (table_name, environment, confirm_force, admin_note);
    Ok(record_id)
}

/// User 1 of the `users` table is never deleted.
async fn protect_user_one(
    _ctx: &CallContext,
    args: &DeleteGuardedArgs,
) -> Result<Decision, PolicyError> {
    Ok(if args.table_name == "users" && args.record_id == 1 {
        Decision::deny("super_admin_protected", "user 1 is never deleted")
    } else {
        Decision::Allow
    })
}

/// Delete one record from a database table, with every gate configured.
#[tool(
    risk = "high",
    role = "admin",
    environments = ["staging", "production"],
    policy = protect_user_one,
    cost = 2,
    max_calls_per_task = 1_000_000_000,
    irreversible = "a benchmark deletes nothing"
)]
fn delete_guarded(
    #[validate(length(min = 3, max = 50), regex(path = *TABLE_NAME))] table_name: String,
    #[validate(range(min = 1))] record_id: u64,
    #[environment] environment: Environment,
    #[serde(default)] confirm_force: bool,
    #[validate(length(max = 200))]
    #[sensitive]
    admin_note: Option<String>,
) -> Result<u64, ToolError> {
    let _ = (table_name, environment, confirm_force, admin_note);
    Ok(record_id)
}

fn many_products(_: &CallContext) -> Vec<String> {
    (0..1000).map(|n| format!("p-{n}")).collect()
}

/// Order products from today's catalogue.
#[tool]
fn order_products(#[one_of(many_products)] products: Vec<String>) -> Result<usize, ToolError> {
    Ok(products.len())
}

/// Keeps only the latest record: the chain and its hashes are computed for every call, and
/// the benchmark's memory stays flat.
#[derive(Default)]
struct LatestRecord(std::sync::Mutex<Option<AuditRecord>>);

impl AuditSink for LatestRecord {
    fn append(&self, entry: Unchained) -> BoxFuture<'_, std::io::Result<()>> {
        let mut latest = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let head = latest
            .as_ref()
            .map_or_else(Checkpoint::genesis, Checkpoint::after);
        *latest = Some(entry.chain_after(&head));
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The registry of (d): every gate has something to check.
fn guarded_registry() -> Registry {
    let huge = Some(u64::MAX);
    Registry::builder()
        .tool(DeleteGuarded)
        .policy(|request: &PolicyRequest<'_>| {
            Ok(if request.arguments["record_id"].as_u64() == Some(0) {
                Decision::deny("no_record_zero", "record 0 does not exist")
            } else {
                Decision::Allow
            })
        })
        .intent_check(ReadOnlyRequests::default())
        .budget(BudgetLimits {
            max_calls_per_task: huge,
            max_cost_per_task: huge,
            stalled_loop_after: None,
            rate_limit: Some(RateLimit {
                calls: u32::MAX,
                per: Duration::from_secs(1),
            }),
            circuit_breaker: Some(CircuitBreaker {
                failures: 5,
                cool_down: Duration::from_secs(30),
            }),
        })
        .audit(LatestRecord::default())
        .build()
        .expect("the guarded tool forms a registry")
}

/// Polls `future` to completion with a no-op waker; for futures that finish without waiting
/// on anything (the dispatch of a sync tool finishes on the first poll).
fn poll_to_end<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
    }
}

/// The mean point estimate, in nanoseconds, of a benchmark that ran since `since`.
fn mean_ns(output: &Path, function: &str, since: SystemTime) -> Option<f64> {
    let path = output
        .join(GROUP)
        .join(function)
        .join("new")
        .join("estimates.json");
    let fresh = std::fs::metadata(&path)
        .and_then(|metadata| metadata.modified())
        .is_ok_and(|modified| modified >= since);
    if !fresh {
        return None;
    }
    let estimates: Value = serde_json::from_str(&std::fs::read_to_string(&path).ok()?).ok()?;
    estimates["mean"]["point_estimate"].as_f64()
}

fn main() {
    // As a model's calls come: each with an id of its own, remembered by the repeat gate.
    let registry = Registry::builder()
        .tool(DeleteRecord)
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
    let guarded_ctx = common::admin()
        .with_environment("staging")
        .with_request("Delete record 4242 of user_records, it is a duplicate.");
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
    .map(|function| mean_ns(&output, function, started))
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
