//! Sessions opened without end with one valid token, as an attacker would: past the caller's
//! cap each one is refused, the server's memory grows by less than the bound the README
//! states, and another caller is still served.
//!
//! Before the caps, 13,000 such sessions took the example server from 26 to 780 MiB, and each
//! stayed for 5 minutes of idleness. `PORTCULLIS_MCP_FLOOD` sets how many sessions are
//! opened (default 20,000).

mod client;

use client::{Client, serve};
use hyper::StatusCode;
use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis_mcp::{BearerTokens, McpServer};
use serde_json::json;

/// Look a parcel up.
#[tool(read_only)]
fn track_parcel(parcel: u64) -> Result<String, ToolError> {
    Ok(format!("parcel {parcel} is on its way"))
}

/// How far the process's resident memory may grow under the flood: the README's bound.
const BOUND_MIB: u64 = 40;

/// Connections the flood comes over at once.
const CONNECTIONS: usize = 8;

/// The process's resident memory, in KiB.
fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .expect("a VmRSS line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_sessions_is_refused_past_the_cap_in_bounded_memory() {
    let flood: usize = std::env::var("PORTCULLIS_MCP_FLOOD")
        .ok()
        .and_then(|count| count.parse().ok())
        .unwrap_or(20_000);
    let registry = Registry::builder()
        .tool(TrackParcel)
        .profile(Profile::Mcp)
        .build()
        .unwrap();
    let server = McpServer::builder(registry).build().unwrap();
    let tokens = BearerTokens::new()
        .token("mallory-token", CallContext::new("mallory"))
        .token("bob-token", CallContext::new("bob"));
    let address = serve(server.router(tokens)).await;

    // Warm up: the server, and a client of each kind, have served once before measuring.
    let mut bob = Client::connect(&address, "bob-token").await;
    let warm = bob.initialize(0).await.session.unwrap();
    assert_eq!(bob.delete(&warm).await, StatusCode::NO_CONTENT);
    let before = resident_kib();

    let floods: Vec<_> = (0..CONNECTIONS)
        .map(|connection| {
            let address = address.clone();
            tokio::spawn(async move {
                let mut mallory = Client::connect(&address, "mallory-token").await;
                let (mut opened, mut refused) = (0, 0);
                for id in (connection..flood).step_by(CONNECTIONS) {
                    let reply = mallory.initialize(id as u64).await;
                    if reply.status == StatusCode::OK {
                        opened += 1;
                        continue;
                    }
                    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS, "{reply:?}");
                    assert_eq!(reply.error_code(), Some("too_many_sessions"));
                    assert_eq!(reply.message.unwrap()["id"], id);
                    refused += 1;
                }
                (opened, refused)
            })
        })
        .collect();
    let (mut opened, mut refused) = (0, 0);
    for flood in floods {
        let (more_opened, more_refused) = flood.await.unwrap();
        opened += more_opened;
        refused += more_refused;
    }
    let grown_kib = resident_kib().saturating_sub(before);
    assert_eq!(opened, 128, "the caller's cap");
    assert_eq!(refused, flood - 128);
    println!(
        "{flood} sessions asked for, {opened} opened: resident memory grew by {} KiB",
        grown_kib
    );
    assert!(
        grown_kib < BOUND_MIB * 1024,
        "resident memory grew by {grown_kib} KiB under the flood"
    );

    let session = bob.initialize(1).await.session.expect("bob is served");
    let answer = bob
        .request(
            &session,
            2,
            "tools/call",
            json!({"name": "track_parcel", "arguments": {"parcel": 7}}),
        )
        .await;
    assert_eq!(answer.message.unwrap()["result"]["isError"], false);
}
