//! The caps a caller meets over HTTP, as a client sees them: sessions per caller and in all,
//! requests in flight per caller, each refused with `429` and its code while other callers are
//! served; a session's place given back by `DELETE` (answered `204`) and by the idle timeout;
//! a session used or closed by its owner only (`403` for any other caller);
//! requests from a page of another origin refused with `403`; JSON that is no client message
//! answered with its JSON-RPC error, holding no place.

mod client;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use client::{Client, Reply, serve};
use hyper::{Method, StatusCode};
use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis_mcp::{BearerTokens, McpServer, McpServerBuilder};
use serde_json::json;
use tokio::sync::Semaphore;

/// Look a parcel up.
#[tool(read_only)]
fn track_parcel(parcel: u64) -> Result<String, ToolError> {
    Ok(format!("parcel {parcel} is on its way"))
}

/// Calls of `weigh_parcel` that started; each waits for a permit of [`SCALE`].
static WEIGHING: AtomicUsize = AtomicUsize::new(0);
static SCALE: Semaphore = Semaphore::const_new(0);

/// Weigh a parcel on the slow scale.
#[tool(read_only)]
async fn weigh_parcel(parcel: u64) -> Result<String, ToolError> {
    WEIGHING.fetch_add(1, Ordering::SeqCst);
    SCALE.acquire().await.unwrap().forget();
    Ok(format!("parcel {parcel} weighs 2 kg"))
}

const ANN: &str = "ann-token";
const BOB: &str = "bob-token";
const CARL: &str = "carl-token";

fn builder() -> McpServerBuilder {
    let registry = Registry::builder()
        .tool(TrackParcel)
        .tool(WeighParcel)
        .profile(Profile::Mcp)
        .build()
        .unwrap();
    McpServer::builder(registry)
}

async fn serve_with(builder: McpServerBuilder) -> String {
    let tokens = BearerTokens::new()
        .token(ANN, CallContext::new("ann"))
        .token(BOB, CallContext::new("bob"))
        .token(CARL, CallContext::new("carl"));
    serve(builder.build().unwrap().router(tokens)).await
}

fn assert_refused(reply: &Reply, code: &str, id: u64) {
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS, "{reply:?}");
    let message = reply.message.as_ref().expect("a JSON-RPC error");
    assert_eq!(message["id"], id);
    assert_eq!(message["error"]["code"], -32010);
    assert_eq!(reply.error_code(), Some(code));
    assert!(reply.session.is_none(), "no session was opened");
}

async fn track(client: &mut Client, session: &str, id: u64) -> Reply {
    client
        .request(
            session,
            id,
            "tools/call",
            json!({"name": "track_parcel", "arguments": {"parcel": id}}),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_past_its_session_cap_is_refused_and_others_are_served() {
    let address = serve_with(builder().max_sessions_per_caller(3)).await;
    let mut ann = Client::connect(&address, ANN).await;
    let mut sessions = Vec::new();
    for id in 0..3 {
        let opened = ann.initialize(id).await;
        assert_eq!(opened.status, StatusCode::OK, "{opened:?}");
        sessions.push(opened.session.expect("a session id"));
    }
    let refused = ann.initialize(3).await;
    assert_refused(&refused, "too_many_sessions", 3);
    assert_eq!(refused.message.unwrap()["error"]["data"]["scope"], "caller");
    assert_eq!(
        refused.retry_after, None,
        "only closing one of its sessions helps"
    );

    // ann's open sessions still serve her, and bob opens his own.
    let answer = track(&mut ann, &sessions[0], 10).await;
    assert_eq!(answer.message.unwrap()["result"]["isError"], false);
    let mut bob = Client::connect(&address, BOB).await;
    let bobs = bob.initialize(0).await.session.expect("bob is served");
    let answer = track(&mut bob, &bobs, 1).await;
    assert_eq!(answer.message.unwrap()["result"]["isError"], false);

    // A session closed is given back at once.
    assert_eq!(ann.delete(&sessions[0]).await, StatusCode::NO_CONTENT);
    let reopened = ann.initialize(4).await;
    assert_eq!(reopened.status, StatusCode::OK, "{reopened:?}");
    assert_refused(&ann.initialize(5).await, "too_many_sessions", 5);
    let closed = track(&mut ann, &sessions[0], 11).await;
    assert_eq!(
        closed.status,
        StatusCode::NOT_FOUND,
        "the closed session is gone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_caller_that_opened_a_session_may_use_or_close_it() {
    let address = serve_with(builder()).await;
    let mut ann = Client::connect(&address, ANN).await;
    let session = ann.initialize(0).await.session.expect("a session id");
    let mut bob = Client::connect(&address, BOB).await;

    // bob knows ann's session id: closing it, listening on it, calling in it, answering or
    // notifying in it are all refused, before the MCP layer sees them.
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1}});
    let answer = json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept"}});
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "track_parcel", "arguments": {"parcel": 1}}});
    for (method, message) in [
        (Method::DELETE, None),
        (Method::GET, None),
        (Method::POST, Some(call)),
        (Method::POST, Some(cancel)),
        (Method::POST, Some(answer)),
    ] {
        let refused = bob.send(method.clone(), Some(&session), &[], message).await;
        assert_eq!(
            refused.status,
            StatusCode::FORBIDDEN,
            "{method}: {refused:?}"
        );
        assert_eq!(refused.error_code(), Some("session_of_another_caller"));
        assert_eq!(refused.message.unwrap()["error"]["code"], -32600);
    }

    // The session lives on for ann, and she alone closes it.
    let served = track(&mut ann, &session, 2).await;
    assert_eq!(served.message.unwrap()["result"]["isError"], false);
    assert_eq!(ann.delete(&session).await, StatusCode::NO_CONTENT);
    assert_eq!(
        track(&mut ann, &session, 3).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_wide_cap_asks_every_caller_to_retry_later() {
    let address = serve_with(builder().max_sessions(2)).await;
    let mut ann = Client::connect(&address, ANN).await;
    let mut bob = Client::connect(&address, BOB).await;
    let mut carl = Client::connect(&address, CARL).await;
    let anns = ann.initialize(0).await.session.unwrap();
    bob.initialize(0).await.session.unwrap();
    let refused = carl.initialize(7).await;
    assert_refused(&refused, "too_many_sessions", 7);
    assert_eq!(refused.retry_after.as_deref(), Some("30"));
    assert_eq!(refused.message.unwrap()["error"]["data"]["scope"], "server");

    assert_eq!(ann.delete(&anns).await, StatusCode::NO_CONTENT);
    let opened = carl.initialize(8).await;
    assert_eq!(opened.status, StatusCode::OK, "{opened:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_past_the_cap_are_refused_until_one_ends() {
    let address = serve_with(builder().max_requests_per_caller(2)).await;
    let mut ann = Client::connect(&address, ANN).await;
    let session = ann.initialize(0).await.session.unwrap();
    let weighing: Vec<_> = (1..=2)
        .map(|id| {
            let (address, session) = (address.clone(), session.clone());
            tokio::spawn(async move {
                let mut ann = Client::connect(&address, ANN).await;
                ann.request(
                    &session,
                    id,
                    "tools/call",
                    json!({"name": "weigh_parcel", "arguments": {"parcel": id}}),
                )
                .await
            })
        })
        .collect();
    for _ in 0..1000 {
        if WEIGHING.load(Ordering::SeqCst) == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        WEIGHING.load(Ordering::SeqCst),
        2,
        "both calls wait on the scale"
    );

    assert_refused(&track(&mut ann, &session, 3).await, "too_many_requests", 3);
    let ping = ann.request(&session, 4, "ping", json!({})).await;
    assert_refused(&ping, "too_many_requests", 4);
    // A notification is no request in flight.
    let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 99}});
    let notified = ann
        .send(Method::POST, Some(&session), &[], Some(cancelled))
        .await;
    assert_eq!(notified.status, StatusCode::ACCEPTED);
    let mut bob = Client::connect(&address, BOB).await;
    let bobs = bob.initialize(0).await.session.unwrap();
    let answer = track(&mut bob, &bobs, 1).await;
    assert_eq!(
        answer.message.unwrap()["result"]["isError"],
        false,
        "bob is served"
    );

    SCALE.add_permits(2);
    for weighed in weighing {
        let weighed = weighed.await.unwrap();
        assert_eq!(weighed.message.unwrap()["result"]["isError"], false);
    }
    let answer = track(&mut ann, &session, 5).await;
    assert_eq!(
        answer.message.unwrap()["result"]["isError"],
        false,
        "ann again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_left_idle_gives_its_place_back_when_it_times_out() {
    let builder = builder()
        .max_sessions_per_caller(1)
        .session_idle_timeout(Duration::from_millis(200));
    let address = serve_with(builder).await;
    let mut ann = Client::connect(&address, ANN).await;
    let idle = ann.initialize(0).await.session.unwrap();
    assert_refused(&ann.initialize(1).await, "too_many_sessions", 1);
    let mut reopened = None;
    for id in 2..1000 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let reply = ann.initialize(id).await;
        if reply.status == StatusCode::OK {
            reopened = reply.session;
            break;
        }
        assert_refused(&reply, "too_many_sessions", id);
    }
    let reopened = reopened.expect("the idle session's place was given back");
    let gone = track(&mut ann, &idle, 1).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND, "the idle session ended");
    let answer = track(&mut ann, &reopened, 2).await;
    assert_eq!(answer.message.unwrap()["result"]["isError"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_from_another_origin_is_forbidden() {
    let address = serve_with(builder()).await;
    let mut ann = Client::connect(&address, ANN).await;
    let session = ann.initialize(0).await.session.unwrap();
    for (origin, status) in [
        ("http://evil.example", StatusCode::FORBIDDEN),
        ("http://localhost.evil.example", StatusCode::FORBIDDEN),
        ("null", StatusCode::FORBIDDEN),
        ("http://localhost:6274", StatusCode::OK),
        ("http://127.0.0.1", StatusCode::OK),
    ] {
        assert_eq!(
            ping_from(&mut ann, &session, origin).await,
            status,
            "Origin: {origin}"
        );
    }
    let opened = ann
        .send(
            Method::POST,
            None,
            &[("origin", "http://evil.example")],
            Some(
                json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "page", "version": "1"}}}),
            ),
        )
        .await;
    assert_eq!(opened.status, StatusCode::FORBIDDEN);
    assert!(opened.session.is_none());

    // A server behind a public name lists its own origins, and only those pass.
    let address = serve_with(builder().allowed_origins(["https://agents.example"])).await;
    let mut ann = Client::connect(&address, ANN).await;
    let session = ann.initialize(0).await.session.unwrap();
    for (origin, status) in [
        ("https://agents.example", StatusCode::OK),
        ("http://localhost:6274", StatusCode::FORBIDDEN),
    ] {
        assert_eq!(
            ping_from(&mut ann, &session, origin).await,
            status,
            "Origin: {origin}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_that_is_no_client_message_is_answered_as_json_rpc_and_holds_no_place() {
    let address = serve_with(builder().max_sessions_per_caller(1)).await;
    let mut ann = Client::connect(&address, ANN).await;
    // Each with an id and a method for the caps to read; rmcp reads none as a client message.
    for (id, message) in [
        (
            9,
            json!({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": 7}),
        ),
        (10, json!({"jsonrpc": "2.0", "id": 10, "method": 7})),
        (
            11,
            json!({"jsonrpc": "1.0", "id": 11, "method": "tools/call", "params": {}}),
        ),
    ] {
        for _ in 0..3 {
            let reply = ann
                .send(Method::POST, None, &[], Some(message.clone()))
                .await;
            assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{reply:?}");
            let error = reply.message.as_ref().expect("a JSON-RPC error");
            assert_eq!(error["id"], id);
            assert_eq!(error["error"]["code"], -32600, "{error}");
            assert!(reply.session.is_none());
        }
    }
    // Neither took the caller's one session nor kept a request in flight.
    let session = ann.initialize(1).await.session.expect("a session");
    let tracked = track(&mut ann, &session, 2).await;
    assert_eq!(tracked.status, StatusCode::OK, "{tracked:?}");
}

/// The status of a ping in `session` from a page of `origin`.
async fn ping_from(client: &mut Client, session: &str, origin: &str) -> StatusCode {
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let reply = client
        .send(
            Method::POST,
            Some(session),
            &[("origin", origin)],
            Some(ping),
        )
        .await;
    reply.status
}
