//! The server driven by the official MCP TypeScript SDK's client (`@modelcontextprotocol/sdk`,
//! pinned in `mcp/tests/ts_client/package-lock.json`), on which many hosts are built, over
//! streamable HTTP at 2025-11-25: what each token's caller sees, a call, a refusal from each
//! gate, the caller's confirmation accepted and declined through elicitation, an operator's
//! approval through the store while the client waits, and a key named twice. The SDK compiles
//! the tools' schemas with ajv; any line it writes to the console (`unknown format "uint64"
//! ignored ...`, say) or to stderr fails the test, and a tool with a `u64`, an `i32` and an
//! `f32` in its arguments and its output is among the tools.
//!
//! `mcp/tests/ts_client/client.mjs` drives the client. `bash .ci/run` installs the SDK
//! (`npm ci --prefix mcp/tests/ts_client`) and sets `PORTCULLIS_TS_CLIENT`, which makes the
//! test fail when it cannot run. With neither the SDK installed nor the variable set, the test
//! says it skipped and passes.

mod shop_server;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use portcullis::prelude::*;
use portcullis_mcp::McpServer;
use portcullis_stores::Store;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use shop_server::{
    assert_one_refusal_per_gate, rita_approves, scratch, server_key, shop_registry, tokens,
};

/// A reading, in three of Rust's number types.
#[derive(Debug, Serialize, JsonSchema)]
struct Reading {
    count: u64,
    offset: i32,
    ratio: f32,
}

/// Record a reading: a count, an offset and a ratio.
#[tool(read_only)]
fn measure(count: u64, offset: i32, ratio: f32) -> Result<Reading, ToolError> {
    Ok(Reading {
        count,
        offset,
        ratio,
    })
}

fn registry(store: &Store) -> Registry {
    shop_registry(store).tool(Measure).build().unwrap()
}

/// Where the script and its `node_modules` are.
fn client_directory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ts_client")
}

fn main() {
    let directory = client_directory();
    let installed = directory
        .join("node_modules/@modelcontextprotocol/sdk/package.json")
        .exists();
    let required = std::env::var_os("PORTCULLIS_TS_CLIENT").is_some();
    if !installed && !required {
        println!(
            "skipped: the MCP TypeScript SDK is not installed and PORTCULLIS_TS_CLIENT is not \
             set, so the TypeScript client did not run (`npm ci --prefix mcp/tests/ts_client` \
             installs it; `bash .ci/run` does, and sets the variable)"
        );
        return;
    }
    assert!(
        installed,
        "PORTCULLIS_TS_CLIENT is set, but the MCP TypeScript SDK is not installed: run \
         `npm ci --prefix mcp/tests/ts_client`"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(over_http(&directory));
    println!("test ts_client::over_http ... ok");
}

/// Runs the TypeScript client with `settings`, approving the operator's payouts in `store`
/// while it waits; returns what the client saw. Fails on anything the client wrote to stderr.
async fn drive(directory: &Path, settings: Value, store: &Store) -> Value {
    let client = tokio::process::Command::new("node")
        .arg(directory.join("client.mjs"))
        .arg(settings.to_string())
        .current_dir(directory)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|error| {
            panic!("cannot run node, which the TypeScript client needs: {error}")
        });
    let approver = tokio::spawn(approve_payouts(store.clone()));
    let output = tokio::time::timeout(Duration::from_secs(120), client.wait_with_output())
        .await
        .expect("the client finished in time");
    approver.abort();
    let output = output.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the client failed: {stdout}\n{stderr}"
    );
    assert!(
        stderr.trim().is_empty(),
        "the client wrote to stderr:\n{stderr}"
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|error| panic!("the client printed no report ({error}): {stdout}"))
}

/// Approves, as the operator rita, every payout that waits in `store`.
async fn approve_payouts(store: Store) {
    use portcullis::ApprovalStore;
    let mut approved = HashSet::new();
    loop {
        for payout in store.pending().await.unwrap() {
            if payout.tool != "schedule_payout" || approved.contains(&payout.id) {
                continue;
            }
            if rita_approves(&store, &payout).await {
                approved.insert(payout.id);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn over_http(directory: &Path) {
    let path = scratch("mcp-ts-client.db");
    let store = Store::open(path.to_str().unwrap()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let server = McpServer::builder(registry(&store))
        .name("shop")
        .approval_wait(Duration::from_secs(30))
        .poll_interval(Duration::from_millis(50))
        .confirmation_key(server_key())
        .build()
        .unwrap();
    let served = tokio::spawn(async move { server.serve_http(listener, tokens()).await });
    let settings = json!({
        "url": url,
        "tokens": {"support": "support-token", "finance": "finance-token"},
    });
    let seen = drive(directory, settings, &store).await;
    served.abort();

    // Nothing written to the console while the client listed the tools and called them; and
    // the control shows a schema with a Rust integer's format would have been caught.
    assert_eq!(seen["warnings"], json!([]), "the SDK warned");
    let control = seen["control"].to_string();
    assert!(
        control.contains(r#"unknown format \"uint64\" ignored"#),
        "the control's warning was not caught: {control}"
    );

    assert_eq!(seen["initialize"]["server"], "shop");
    assert_eq!(seen["initialize"]["protocol"], "2025-11-25");
    assert_eq!(seen["initialize"]["list_changed"], true);
    // Each token's caller sees its own tools.
    assert_eq!(
        seen["tools_support"],
        json!([
            "cancel_order",
            "measure",
            "search_products",
            "update_shipping_address"
        ])
    );
    assert_eq!(
        seen["tools_finance"],
        json!([
            "measure",
            "refund_payment",
            "schedule_payout",
            "search_products",
            "update_shipping_address"
        ])
    );
    // The Rust number types: no format of their own, their ranges stated.
    for side in ["input", "output"] {
        let properties = &seen["measure_schemas"][side]["properties"];
        for (name, min, max) in [
            ("count", 0.0, u64::MAX as f64),
            ("offset", f64::from(i32::MIN), f64::from(i32::MAX)),
            ("ratio", f64::from(f32::MIN), f64::from(f32::MAX)),
        ] {
            let property = &properties[name];
            assert_eq!(property.get("format"), None, "{side} {name}: {property}");
            assert_eq!(property["minimum"].as_f64(), Some(min), "{side} {name}");
            assert_eq!(property["maximum"].as_f64(), Some(max), "{side} {name}");
        }
    }
    assert_eq!(seen["search"]["is_error"], false, "{}", seen["search"]);
    assert_eq!(seen["search"]["text"], json!(["10 results for lamp"]));
    // The output the SDK checked against the output schema.
    assert_eq!(seen["measure"]["is_error"], false, "{}", seen["measure"]);
    assert_eq!(
        seen["measure"]["structured"],
        json!({"count": 4_294_967_296u64, "offset": -7, "ratio": 0.5})
    );
    assert_one_refusal_per_gate(&seen);
    // Confirmed by the user through elicitation: it ran. Declined: refused. Asked both times.
    assert_eq!(
        seen["confirmed"]["is_error"], false,
        "{}",
        seen["confirmed"]
    );
    assert_eq!(seen["confirmed"]["text"], "order 7 cancelled");
    let asked = seen["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].as_str().unwrap().contains("cancel_order"));
    // The operator approved while the client waited: the payout ran, with its arguments.
    assert_eq!(seen["payout"]["is_error"], false, "{}", seen["payout"]);
    assert_eq!(seen["payout"]["text"], "payout scheduled for sel_42");
    // A key named twice in the arguments: refused, not read as its last value.
    assert_eq!(
        seen["duplicate"]["error"]["code"], -32602,
        "{}",
        seen["duplicate"]
    );
    assert_eq!(seen["duplicate"]["error"]["data"]["code"], "duplicate_key");
}
