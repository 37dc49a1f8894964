//! Load over streamable HTTP on 127.0.0.1: N clients at once, each making M `tools/call`s of
//! `update_shipping_address` (policy, claim, write-ahead audit), against portcullis's server and
//! against plain rmcp serving the same tool without gates, in one run, under each protocol:
//! 2025-11-25 (each client a session of its own) and the stateless 2026-07-28 (each request
//! standing alone, the caller's task handle sealed into every answer).
//!
//! It asserts what must hold under load: every call answered, none refused (the calls are
//! valid, so a refusal would be an error the gates did not decide), and every call audited
//! once as about to run and once as completed. It prints calls per second for both servers and
//! their ratio; it asserts no speed. `PORTCULLIS_MCP_LOAD=CLIENTSxCALLS` sets the size
//! (default 8x25); for a meaningful ratio run it in release:
//! `PORTCULLIS_MCP_LOAD=32x200 cargo test --release -p portcullis-mcp --test load`.

#[path = "../../examples/shop/mod.rs"]
mod shop;

use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use portcullis::audit::MemoryAuditSink;
use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis_mcp::{BearerTokens, McpServer};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, ToolsCapability,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::net::TcpListener;

const TOKEN: &str = "load-token";

/// The protocol with sessions and the `initialize` handshake.
const SESSIONS: &str = "2025-11-25";

/// The stateless protocol.
const STATELESS: &str = "2026-07-28";

fn main() {
    let (clients, calls) = std::env::var("PORTCULLIS_MCP_LOAD")
        .ok()
        .and_then(|size| {
            let (clients, calls) = size.split_once('x')?;
            Some((clients.parse().ok()?, calls.parse().ok()?))
        })
        .unwrap_or((8usize, 25usize));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let audit = MemoryAuditSink::default();
        let registry = shop::shop_tools()
            .policy(shop::embargo)
            .profile(Profile::Mcp)
            .audit(audit.clone())
            .build()
            .unwrap();
        // Every client is the one caller `loader`: its caps must not bind at any size asked.
        let server = McpServer::builder(registry)
            .max_sessions_per_caller(clients)
            .max_requests_per_caller(clients)
            .build()
            .unwrap();
        let tokens =
            BearerTokens::new().token(TOKEN, CallContext::new("loader").with_roles(["support"]));
        let gated = serve(server.router(tokens)).await;
        let plain = serve(plain_rmcp()).await;

        for (round, protocol) in [SESSIONS, STATELESS].into_iter().enumerate() {
            let plain_rate = load(&plain, clients, calls, protocol, round).await;
            let gated_rate = load(&gated, clients, calls, protocol, round).await;
            println!(
                "mcp load at {protocol}, {clients} clients x {calls} calls: plain rmcp \
                 {plain_rate:.0} calls/s, portcullis {gated_rate:.0} calls/s, ratio {:.2}",
                gated_rate / plain_rate
            );
        }

        let records = audit.records();
        let count = |decision: &str| {
            records
                .iter()
                .filter(|record| record.decision == decision)
                .count()
        };
        assert_eq!(count("about_to_run"), 2 * clients * calls);
        assert_eq!(count("completed"), 2 * clients * calls);
        assert_eq!(records.len(), 4 * clients * calls, "only those records");
        println!("test load ... ok");
    });
}

/// Serves `router` on a free port of 127.0.0.1; returns its MCP endpoint's address.
async fn serve(router: axum::Router) -> String {
    use axum::serve::ListenerExt;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let listener = listener.tap_io(|stream| stream.set_nodelay(true).unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    address
}

/// Runs `clients` clients at once against `address` at `protocol`, each making `calls` calls
/// (of orders of their own in each `round`); every call must complete. Returns calls per second.
async fn load(address: &str, clients: usize, calls: usize, protocol: &str, round: usize) -> f64 {
    let started = Instant::now();
    let sessions: Vec<_> = (0..clients)
        .map(|client| {
            let address = address.to_owned();
            let protocol = protocol.to_owned();
            let first_order = (round * clients + client) * calls;
            tokio::spawn(async move { session(&address, &protocol, first_order, calls).await })
        })
        .collect();
    for finished in sessions {
        tokio::time::timeout(Duration::from_secs(300), finished)
            .await
            .expect("the load stops by itself")
            .unwrap();
    }
    (clients * calls) as f64 / started.elapsed().as_secs_f64()
}

/// One client: a keep-alive connection, at 2025-11-25 `initialize`, then `calls` calls, each
/// checked.
async fn session(address: &str, protocol: &str, first_order: usize, calls: usize) {
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut post = async |session: Option<&str>, message: Value| {
        let mut request = hyper::Request::post(format!("http://{address}/mcp"))
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {TOKEN}"));
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", SESSIONS);
        }
        if message["params"]["_meta"].is_object() {
            request = request
                .header("mcp-protocol-version", STATELESS)
                .header("mcp-method", "tools/call")
                .header("mcp-name", "update_shipping_address");
        }
        let request = request
            .body(Full::new(Bytes::from(message.to_string())))
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        let id = response
            .headers()
            .get("mcp-session-id")
            .map(|value| value.to_str().unwrap().to_owned());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (id, answer(&body))
    };
    let session = if protocol == SESSIONS {
        let (id, _) = post(
            None,
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": SESSIONS, "capabilities": {},
                "clientInfo": {"name": "load", "version": "1"}}}),
        )
        .await;
        let id = id.expect("a session id");
        post(
            Some(&id),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        Some(id)
    } else {
        None
    };
    for call in 1..=calls {
        let order = first_order + call;
        let mut message = json!({"jsonrpc": "2.0", "id": call, "method": "tools/call", "params": {
            "name": "update_shipping_address",
            "arguments": {"order_id": order, "address":
                {"street": "1 Main St", "city": "Berlin", "country": "DE"}}}});
        if session.is_none() {
            message["params"]["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": STATELESS,
                "io.modelcontextprotocol/clientInfo": {"name": "load", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            });
        }
        let (_, answer) = post(session.as_deref(), message).await;
        let answer = answer.unwrap_or_else(|| panic!("call {call} of order {order}: no answer"));
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        assert_eq!(answer["result"]["structuredContent"]["order_id"], order);
    }
}

/// The JSON-RPC message of a response body: JSON, or the data of an SSE event.
fn answer(body: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(body).ok()?;
    serde_json::from_str(text).ok().or_else(|| {
        text.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .find_map(|data| serde_json::from_str(data.trim()).ok())
    })
}

/// The same tool served by rmcp alone: serde reads the arguments and the function runs.
#[derive(Clone)]
struct Plain {
    tools: Arc<Value>,
}

impl ServerHandler for Plain {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::default();
        capabilities.tools = Some(ToolsCapability::default());
        ServerConfig::new(capabilities)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(serde_json::from_value(json!({"tools": *self.tools})).unwrap())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let args: shop::UpdateShippingAddressArgs = serde_json::from_value(arguments)
            .map_err(|error| ErrorData::invalid_params(error.to_string(), None))?;
        let change = shop::update_shipping_address(args.order_id, args.address)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        let output = serde_json::to_value(change).unwrap();
        Ok(CallToolResult::structured(output).into())
    }
}

fn plain_rmcp() -> axum::Router {
    let registry = shop::shop_tools().profile(Profile::Mcp).build().unwrap();
    let ctx = CallContext::new("loader").with_roles(["support"]);
    let plain = Plain {
        tools: Arc::new(registry.export(&ctx, Profile::Mcp).unwrap()),
    };
    let service = StreamableHttpService::new(
        move || Ok(plain.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    axum::Router::new().route_service("/mcp", service)
}
