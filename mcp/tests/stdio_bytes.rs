//! Over stdio, lines a client should not send: one that is not UTF-8 gets `-32700`, one over
//! 4 MiB gets `-32600` (`message_too_large`) with its request's id, and after each the next
//! request is answered; the session ends only when the client hangs up.

use std::time::Duration;

use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis_mcp::McpServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, duplex};

/// Look a parcel up.
#[tool(read_only)]
fn track_parcel(parcel: u64) -> Result<String, ToolError> {
    Ok(format!("parcel {parcel} is on its way"))
}

async fn next_answer(answers: &mut Lines<BufReader<DuplexStream>>) -> Value {
    let line = answers.next_line().await.unwrap().expect("an answer");
    serde_json::from_str(&line).unwrap()
}

async fn send(input: &mut DuplexStream, message: Value) {
    input
        .write_all(format!("{message}\n").as_bytes())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_lines_get_their_errors_and_the_session_goes_on() {
    let registry = Registry::builder()
        .tool(TrackParcel)
        .profile(Profile::Mcp)
        .build()
        .unwrap();
    let server = McpServer::builder(registry).build().unwrap();
    let (mut input, server_input) = duplex(64 * 1024);
    let (server_output, client_output) = duplex(64 * 1024);
    let serving = tokio::spawn(async move {
        server
            .serve_lines(CallContext::new("courier"), server_input, server_output)
            .await
    });
    let mut answers = BufReader::new(client_output).lines();
    send(
        &mut input,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
    )
    .await;
    assert_eq!(next_answer(&mut answers).await["id"], 0);
    send(
        &mut input,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;

    input
        .write_all(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"p\xffng\"}\n")
        .await
        .unwrap();
    let error = next_answer(&mut answers).await;
    assert_eq!(error["id"], Value::Null);
    assert_eq!(error["error"]["code"], -32700);
    send(
        &mut input,
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    )
    .await;
    assert_eq!(next_answer(&mut answers).await["id"], 2);

    // 5 MiB of arguments, written while the server reads.
    let padding = "x".repeat(5 * 1024 * 1024);
    let oversized = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "track_parcel", "arguments": {"parcel": 1, "note": padding}}});
    let writing = tokio::spawn(async move {
        send(&mut input, oversized).await;
        input
    });
    let error = next_answer(&mut answers).await;
    assert_eq!(error["id"], 3, "{error}");
    assert_eq!(error["error"]["code"], -32600);
    assert_eq!(error["error"]["data"]["code"], "message_too_large");
    let mut input = writing.await.unwrap();
    send(
        &mut input,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "track_parcel", "arguments": {"parcel": 4}}}),
    )
    .await;
    let answer = next_answer(&mut answers).await;
    assert_eq!(answer["id"], 4);
    assert_eq!(answer["result"]["isError"], false, "{answer}");

    assert!(!serving.is_finished(), "the session goes on");
    drop(input);
    tokio::time::timeout(Duration::from_secs(10), serving)
        .await
        .expect("the session ends when its client hangs up")
        .unwrap()
        .unwrap();
}
