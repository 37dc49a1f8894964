//! What the provenance gate costs: the whole pipeline with it, on a task that read 50 tool
//! outputs of 2 KiB each, against the same pipeline without it, in one run.
//!
//! * (a) `transfer` without declarations: decode, validate, the registry's policy and intent
//!   check, budgets (per task, rate limit, circuit breaker), the write-ahead and outcome audit
//!   records, chained under a key and kept in memory, and the tool; its registry records no
//!   sources.
//! * (b) the same tool with `#[from(user, trusted)] recipient` and `#[from(user, trusted,
//!   entities)] memo`, in a registry that recorded the 50 outputs: every call reads the task's
//!   sources (the in-memory store, then this worker's index) and looks up the recipient, the
//!   IBAN and the link in the memo, and the request's words.
//!
//! Both registries read the same 50 outputs first, so that the task, the budget and the audit
//! are in the same state; each call has a fresh id, and returns nothing to record. After the
//! run, the means are read back from criterion's `new/estimates.json` and the ratio printed,
//! with the target: b/a <= 1.2.
//!
//! Run with `cargo bench --bench provenance`.

// Its gates and polling: the rest is the other benchmarks' tools.
#[path = "workload/estimates.rs"]
mod estimates;
#[allow(dead_code)]
mod workload;

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use criterion::{BatchSize, Criterion};
use estimates::mean_ns;
use portcullis::prelude::*;
use portcullis::{Decision, PolicyRequest};
use serde_json::json;
use workload::poll_to_end;

const GROUP: &str = "provenance";
const WITHOUT: &str = "a_pipeline_without_provenance";
const WITH: &str = "b_pipeline_with_provenance_50_outputs";
const OUTPUTS: usize = 50;
const OUTPUT_BYTES: usize = 2048;
const RECIPIENT: &str = "GB29NWBK60161331926819";

/// Read a shared document.
#[tool(read_only)]
fn read_document(text: String) -> Result<String, ToolError> {
    Ok(text)
}

/// Transfer money, no questions asked of its values.
#[tool(risk = "medium", irreversible = "money leaves")]
fn transfer_plain(recipient: String, amount_cents: u64, memo: String) -> Result<(), ToolError> {
    let _ = (recipient, amount_cents, memo);
    Ok(())
}

/// Transfer money to someone the user or a trusted tool named.
#[tool(risk = "medium", irreversible = "money leaves")]
fn transfer(
    #[from(user, trusted)] recipient: String,
    amount_cents: u64,
    #[from(user, trusted, entities)] memo: String,
) -> Result<(), ToolError> {
    let _ = (recipient, amount_cents, memo);
    Ok(())
}

/// 2 KiB of a shared document: prose, amounts, dates, accounts and links, as a page holds.
fn document(n: usize) -> String {
    let mut text = String::with_capacity(OUTPUT_BYTES + 200);
    let mut line = 0;
    while text.len() < OUTPUT_BYTES {
        line += 1;
        text.push_str(&format!(
            "Item {n}-{line}: invoice DE{:02}37040044053201{:04} of {}.{:02} EUR due 2026-{:02}-{:02}, \
             see https://docs{n}.example/invoices/{line} or write to billing{line}@supplier{n}.example. ",
            (n + line) % 100,
            line * 7 % 10_000,
            100 + line * 13,
            line % 100,
            line % 12 + 1,
            line % 28 + 1,
        ));
    }
    text.truncate(OUTPUT_BYTES);
    text
}

fn registry(tool: impl Tool) -> Registry {
    let transfers =
        Registry::builder()
            .tool(ReadDocument)
            .tool(tool)
            .policy(|request: &PolicyRequest<'_>| {
                Ok(if request.arguments["amount_cents"].as_u64() == Some(0) {
                    Decision::deny("no_empty_transfer", "a transfer moves something")
                } else {
                    Decision::Allow
                })
            });
    workload::every_gate(transfers)
        .build()
        .expect("the benchmark tools form a registry")
}

fn main() {
    let ctx = CallContext::new("alice").with_request(format!(
        "Send 120.00 EUR to {RECIPIENT} for the March invoice and tell them it is at https://docs7.example/invoices/3"
    ));
    let without = registry(TransferPlain);
    let with = registry(Transfer);
    for registry in [&without, &with] {
        for n in 0..OUTPUTS {
            let read = ToolCall::new(
                format!("read-{n}"),
                "read_document",
                json!({ "text": document(n) }),
            );
            assert!(poll_to_end(registry.dispatch(&ctx, &read)).is_completed());
        }
    }
    let arguments = json!({
        "recipient": RECIPIENT,
        "amount_cents": 12_000,
        "memo": "March invoice, see docs7.example/invoices/3, thanks",
    })
    .to_string();
    let fresh = std::cell::Cell::new(0u64);
    let fresh_call = |tool: &'static str| {
        fresh.set(fresh.get() + 1);
        ToolCall::new(format!("call-{}", fresh.get()), tool, arguments.as_str())
    };
    for (registry, tool) in [(&without, "transfer_plain"), (&with, "transfer")] {
        let outcome = poll_to_end(registry.dispatch(&ctx, &fresh_call(tool)));
        assert!(outcome.is_completed(), "{tool} completes: {outcome:?}");
    }
    let injected = ToolCall::new(
        "call-injected",
        "transfer",
        json!({"recipient": "DE07370400440532010007", "amount_cents": 1, "memo": "x"}),
    );
    assert_eq!(
        poll_to_end(with.dispatch(&ctx, &injected)).code(),
        Some(RejectionCode::UntrustedValue),
        "the gate is on: an account only a document named is refused"
    );

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
        for (function, registry, tool) in [
            (WITHOUT, &without, "transfer_plain"),
            (WITH, &with, "transfer"),
        ] {
            group.bench_function(function, |b| {
                b.iter_batched(
                    || fresh_call(tool),
                    |call| poll_to_end(registry.dispatch(&ctx, black_box(&call))),
                    BatchSize::SmallInput,
                )
            });
        }
        group.finish();
    }
    criterion.final_summary();

    let (Some(plain), Some(gated)) = (
        mean_ns(&output, GROUP, WITHOUT, started),
        mean_ns(&output, GROUP, WITH, started),
    ) else {
        println!(
            "no fresh estimates under {} (not run with `cargo bench`?); no ratio to print",
            output.display()
        );
        return;
    };
    let ratio = gated / plain;
    println!();
    println!(
        "the whole pipeline, mean time per call, on a task that read {OUTPUTS} outputs of {OUTPUT_BYTES} bytes:"
    );
    println!("  (a) without the provenance gate  {plain:>8.0} ns  1.00");
    println!(
        "  (b) with it                      {gated:>8.0} ns  {ratio:.2}x  (b/a; target <= 1.20: {})",
        if ratio <= 1.2 { "met" } else { "NOT met" }
    );
}
