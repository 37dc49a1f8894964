//! How the gates scale: with the number of tools, and with threads. Each line is a ratio
//! against a baseline measured in the same run:
//!
//! * (f) `Registry::dispatch` of `delete_record` (fresh call ids, repeat memory on) in a
//!   registry of 10,000 tools, to the same in a registry of 10; target <= 1.05. The rounds of
//!   `CALLS_PER_ROUND` calls alternate the two registries, and the best round of each counts;
//! * (g) building a registry, and exporting one caller's tool list (OpenAI, strict), per tool:
//!   10,000 tools to 1,000; linear is 1.00, and the target is <= 1.25;
//! * (h) the whole pipeline (`delete_guarded`, every gate configured, audit chained under a key
//!   in memory) on 2 threads, each its own task, in calls per second, to the same on 1 thread;
//!   target >= 1.8. Each thread dispatches `CALLS_PER_THREAD` calls; the rounds alternate one
//!   thread and two, and the best round of each counts.
//!
//! The tools besides `delete_record` have its arguments and contract under other names. Run
//! with `cargo bench --bench scaling`.

mod workload;

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use portcullis::Invocation;
use portcullis::export::Profile;
use portcullis::prelude::*;
use validator::Validate;
use workload::{
    ARGUMENTS, DeleteRecord, DeleteRecordArgs, GUARDED_TOOL, TOOL, common, guarded_caller,
    guarded_registry, poll_to_end,
};

const CALLS_PER_THREAD: usize = 50_000;
const CALLS_PER_ROUND: usize = 100_000;
const ROUNDS: usize = 5;
const PROFILE: Profile = Profile::OpenAiChat { strict: true };

/// A tool with `delete_record`'s arguments and contract, under another name.
struct Filler(ToolContract);

impl Filler {
    fn numbered(number: usize) -> Self {
        let schema = DeleteRecord.contract().input_schema().clone();
        Filler(
            ToolContract::builder(
                format!("delete_record_{number}"),
                "Delete one record from a database table.",
                schema,
            )
            .risk(Risk::High)
            .roles(["admin"])
            .irreversible("a benchmark deletes nothing")
            .build(),
        )
    }
}

impl Tool for Filler {
    type Args = DeleteRecordArgs;
    type Output = u64;

    fn contract(&self) -> &ToolContract {
        &self.0
    }

    fn call<'a>(&'a self, _: &'a CallContext, args: DeleteRecordArgs) -> Invocation<'a, u64> {
        Invocation::Ready(Ok(args.record_id))
    }
}

/// `delete_record` and `tools - 1` fillers, for the OpenAI strict profile.
fn registry_of(tools: usize) -> Registry {
    (1..tools)
        .fold(
            Registry::builder().profile(PROFILE).tool(DeleteRecord),
            |builder, number| builder.tool(Filler::numbered(number)),
        )
        .build()
        .expect("the tools form a registry")
}

/// The best of `rounds` timings of `work`, per unit of `units`.
fn best_per_unit(rounds: usize, units: usize, mut work: impl FnMut()) -> Duration {
    (0..rounds)
        .map(|_| {
            let started = Instant::now();
            work();
            started.elapsed() / u32::try_from(units).expect("few units")
        })
        .min()
        .expect("at least one round")
}

/// Calls per second of `threads` threads, each making `CALLS_PER_THREAD` calls of what
/// `prepare` gives it (from the thread's number) once every thread is ready.
fn calls_per_second<F: FnMut(usize) + Send>(
    threads: usize,
    prepare: impl Fn(usize) -> F + Sync,
) -> f64 {
    let ready = Barrier::new(threads + 1);
    let done = Barrier::new(threads + 1);
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let (ready, done, prepare) = (&ready, &done, &prepare);
            scope.spawn(move || {
                let mut call = prepare(thread);
                ready.wait();
                for index in 0..CALLS_PER_THREAD {
                    call(index);
                }
                done.wait();
            });
        }
        ready.wait();
        let started = Instant::now();
        done.wait();
        (threads * CALLS_PER_THREAD) as f64 / started.elapsed().as_secs_f64()
    })
}

/// The floor for one thread: the arguments parsed and validated.
fn floor_calls(_: usize) -> impl FnMut(usize) + Send {
    |_| {
        let args: DeleteRecordArgs =
            serde_json::from_str(black_box(ARGUMENTS)).expect("the arguments decode");
        args.validate().expect("the arguments are valid");
        black_box(args);
    }
}

fn main() {
    let ctx = common::admin();
    let small = registry_of(10);
    let large = registry_of(10_000);
    let mut next = 0;
    let mut dispatch_each = |registry: &Registry| {
        let calls: Vec<ToolCall> = (0..CALLS_PER_ROUND)
            .map(|_| {
                next += 1;
                ToolCall::new(format!("call-{next}"), TOOL, ARGUMENTS)
            })
            .collect();
        let started = Instant::now();
        for call in &calls {
            black_box(poll_to_end(registry.dispatch(&ctx, black_box(call))));
        }
        started.elapsed() / u32::try_from(CALLS_PER_ROUND).expect("few calls")
    };
    let (mut dispatch_small, mut dispatch_large) = (Duration::MAX, Duration::MAX);
    for _ in 0..ROUNDS {
        dispatch_small = dispatch_small.min(dispatch_each(&small));
        dispatch_large = dispatch_large.min(dispatch_each(&large));
    }

    let build_1k = best_per_unit(ROUNDS, 1_000, || drop(black_box(registry_of(1_000))));
    let build_10k = best_per_unit(ROUNDS, 10_000, || drop(black_box(registry_of(10_000))));
    let thousand = registry_of(1_000);
    let export = |registry: &Registry| {
        let list = registry.export(&ctx, PROFILE).expect("the tools export");
        black_box(list);
    };
    let export_1k = best_per_unit(ROUNDS, 1_000, || export(&thousand));
    let export_10k = best_per_unit(ROUNDS, 10_000, || export(&large));

    let guarded = guarded_registry();
    // The whole pipeline for each thread of round `round`: its own task, its own calls.
    let pipeline = |round: usize| {
        let guarded = &guarded;
        move |thread: usize| {
            let ctx = guarded_caller().with_task_id(format!("round-{round}-thread-{thread}"));
            let calls: Vec<ToolCall> = (0..CALLS_PER_THREAD)
                .map(|index| ToolCall::new(format!("call-{index}"), GUARDED_TOOL, ARGUMENTS))
                .collect();
            move |index: usize| {
                let outcome = poll_to_end(guarded.dispatch(&ctx, &calls[index]));
                assert!(outcome.is_completed(), "{outcome:?}");
            }
        }
    };
    let (mut one, mut two, mut floor_one, mut floor_two) = (0f64, 0f64, 0f64, 0f64);
    for round in 0..ROUNDS {
        one = one.max(calls_per_second(1, pipeline(2 * round)));
        two = two.max(calls_per_second(2, pipeline(2 * round + 1)));
        floor_one = floor_one.max(calls_per_second(1, floor_calls));
        floor_two = floor_two.max(calls_per_second(2, floor_calls));
    }

    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    let tools = dispatch_large.as_secs_f64() / dispatch_small.as_secs_f64();
    let build = build_10k.as_secs_f64() / build_1k.as_secs_f64();
    let listed = export_10k.as_secs_f64() / export_1k.as_secs_f64();
    let threads = two / one;
    println!();
    println!(
        "(f) dispatch, 10,000 tools to 10: {:.0} ns / {:.0} ns = {tools:.2}x (target <= 1.05: {})",
        dispatch_large.as_secs_f64() * 1e9,
        dispatch_small.as_secs_f64() * 1e9,
        verdict(tools <= 1.05)
    );
    println!(
        "(g) per tool, 10,000 tools to 1,000: build {:.1} µs / {:.1} µs = {build:.2}x, \
         export {:.1} µs / {:.1} µs = {listed:.2}x (target <= 1.25: {})",
        build_10k.as_secs_f64() * 1e6,
        build_1k.as_secs_f64() * 1e6,
        export_10k.as_secs_f64() * 1e6,
        export_1k.as_secs_f64() * 1e6,
        verdict(build <= 1.25 && listed <= 1.25)
    );
    println!(
        "(h) the whole pipeline, 2 threads to 1: {two:.0}/s / {one:.0}/s = {threads:.2}x \
         (target >= 1.80: {}); the floor (serde_json + validate) on this machine: {:.2}x",
        verdict(threads >= 1.8),
        floor_two / floor_one
    );
}
