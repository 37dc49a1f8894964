//! A session's task ends with the session: once a client's session closes, a bounded budget
//! store no longer holds its task, so a server that serves session after session does not fill
//! its budget store with the tasks of sessions long gone.

use std::time::Duration;

use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis::{BudgetLimits, InMemoryBudgetStore};
use portcullis_mcp::McpServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, duplex};

/// Look a parcel up.
#[tool(read_only)]
fn track_parcel(parcel: u64) -> Result<String, ToolError> {
    Ok(format!("parcel {parcel} is on its way"))
}

/// One stdio session: `initialize`, one call, then the client hangs up. Returns the call's
/// result.
async fn one_session(server: &McpServer, parcel: u64) -> Value {
    let (mut client_input, server_input) = duplex(64 * 1024);
    let (server_output, client_output) = duplex(64 * 1024);
    let serving = {
        let server = server.clone();
        tokio::spawn(async move {
            server
                .serve_lines(CallContext::new("courier"), server_input, server_output)
                .await
        })
    };
    let mut answers = BufReader::new(client_output).lines();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "track_parcel", "arguments": {"parcel": parcel}}}),
    ];
    for message in messages {
        client_input
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    let result = loop {
        let line = answers.next_line().await.unwrap().expect("an answer");
        let answer: Value = serde_json::from_str(&line).unwrap();
        if answer["id"] == json!(1) {
            break answer["result"].clone();
        }
    };
    drop(client_input);
    tokio::time::timeout(Duration::from_secs(10), serving)
        .await
        .expect("the session ends when its client hangs up")
        .unwrap()
        .unwrap();
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_sessions_task_leaves_the_budget_store() {
    let budget = InMemoryBudgetStore::default();
    let registry = Registry::builder()
        .tool(TrackParcel)
        .budget(BudgetLimits {
            max_calls_per_task: Some(10),
            ..BudgetLimits::default()
        })
        .budget_store(budget.clone())
        .profile(Profile::Mcp)
        .build()
        .unwrap();
    let server = McpServer::builder(registry).build().unwrap();
    for parcel in 0..20 {
        let result = one_session(&server, parcel).await;
        assert_ne!(result["isError"], json!(true), "{result}");
    }
    let mut held = budget.held().0;
    for _ in 0..100 {
        if held == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        held = budget.held().0;
    }
    assert_eq!(held, 0, "the tasks of 20 closed sessions are forgotten");
}
