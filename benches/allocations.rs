//! How many times the heap is asked for memory per call (allocations and reallocations), for
//! the calls of the dispatch bench: (a) the floor, (b) and (b0) the bare dispatch with the
//! repeat memory on and off, (d) and (d0) the whole pipeline with and without its keyed audit.
//!
//! A bench of its own, so that counting (two atomic additions per allocation) taxes none of
//! the timings of `cargo bench --bench dispatch`. Each case runs its calls once to warm up
//! (the repeat memory, the budgets and the audit chain take their steady size), then 10,000
//! calls are counted, each built before the count starts, as a model's calls come.
//!
//! Run with `cargo bench --bench allocations`.

mod workload;

use std::alloc::System;

use portcullis::prelude::*;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use validator::Validate;
use workload::{
    ARGUMENTS, DeleteRecordArgs, GUARDED_TOOL, TOOL, common, every_gate_but_audit, guarded_builder,
    guarded_caller, guarded_registry, poll_to_end,
};

#[global_allocator]
static COUNTED: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Calls counted per case.
const CALLS: usize = 10_000;

/// The most allocations per call of (d) the performance target allows.
const TARGET_WHOLE_PIPELINE: f64 = 20.0;

/// Heap requests (allocations and reallocations) per run of `run`, over `CALLS` runs, after
/// as many to warm up.
fn per_call(mut run: impl FnMut(usize)) -> f64 {
    (0..CALLS).for_each(&mut run);
    let region = Region::new(COUNTED);
    (CALLS..2 * CALLS).for_each(&mut run);
    let change = region.change();
    (change.allocations + change.reallocations) as f64 / CALLS as f64
}

/// Heap requests per dispatch of `tool` by `registry` for `ctx`, each call with a fresh id.
fn per_dispatch(registry: &Registry, ctx: &CallContext, tool: &str) -> f64 {
    let calls: Vec<ToolCall> = (0..2 * CALLS)
        .map(|n| ToolCall::new(format!("call-{n}"), tool, ARGUMENTS))
        .collect();
    per_call(|n| {
        let outcome = poll_to_end(registry.dispatch(ctx, &calls[n]));
        assert!(outcome.is_completed(), "{outcome:?}");
    })
}

fn main() {
    let bare = Registry::builder()
        .tool(workload::DeleteRecord)
        .build()
        .expect("the benchmark tool forms a registry");
    let forgetting = Registry::builder()
        .tool(workload::DeleteRecord)
        .remembered_calls(0)
        .build()
        .expect("the benchmark tool forms a registry");
    let guarded = guarded_registry();
    let unaudited = every_gate_but_audit(guarded_builder())
        .build()
        .expect("the guarded tool forms a registry");
    let (ctx, guarded_ctx) = (common::admin(), guarded_caller());

    let floor = per_call(|_| {
        let args: DeleteRecordArgs = serde_json::from_str(ARGUMENTS).expect("the arguments decode");
        args.validate().expect("the arguments are valid");
    });
    println!("`{TOOL}`, heap requests (allocations and reallocations) per call:");
    let row = |label: &str, count: f64, target: Option<f64>| {
        let verdict = match target {
            Some(target) if count <= target => format!("target <= {target:.0}: met"),
            Some(target) => format!("target <= {target:.0}: NOT met"),
            None => String::new(),
        };
        println!("  {label:<46} {count:>8.1}  {verdict}");
    };
    row("(a) serde_json + Validate::validate", floor, None);
    row(
        "(b) dispatch, repeat memory on",
        per_dispatch(&bare, &ctx, TOOL),
        None,
    );
    row(
        "(b0) dispatch, repeat memory off",
        per_dispatch(&forgetting, &ctx, TOOL),
        None,
    );
    row(
        "(d) the whole pipeline, keyed audit",
        per_dispatch(&guarded, &guarded_ctx, GUARDED_TOOL),
        Some(TARGET_WHOLE_PIPELINE),
    );
    row(
        "(d0) the whole pipeline without audit",
        per_dispatch(&unaudited, &guarded_ctx, GUARDED_TOOL),
        None,
    );
}
