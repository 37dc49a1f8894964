//! A bare streamable HTTP client on hyper, for tests that need what the SDKs hide: status
//! codes, headers, and many sessions at once.

// Each test binary that includes this module uses a part of it.
#![allow(dead_code)]

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// Serves `router` on a free port of 127.0.0.1; returns its address.
pub async fn serve(router: axum::Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router).await });
    address
}

/// One keep-alive connection, as the bearer of one token.
pub struct Client {
    sender: SendRequest<Full<Bytes>>,
    address: String,
    token: String,
}

/// What the server answered.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub session: Option<String>,
    pub retry_after: Option<String>,
    /// The JSON-RPC message of the body: JSON, or the data of an SSE event.
    pub message: Option<Value>,
}

impl Reply {
    /// The `data.code` of the JSON-RPC error answered.
    pub fn error_code(&self) -> Option<&str> {
        self.message.as_ref()?["error"]["data"]["code"].as_str()
    }
}

impl Client {
    pub async fn connect(address: &str, token: &str) -> Client {
        let stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        Client {
            sender,
            address: address.to_owned(),
            token: token.to_owned(),
        }
    }

    /// Sends `method` with `message` as its body, in `session`, with `headers` added.
    pub async fn send(
        &mut self,
        method: Method,
        session: Option<&str>,
        headers: &[(&str, &str)],
        message: Option<Value>,
    ) -> Reply {
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(format!("http://{}/mcp", self.address))
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {}", self.token));
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let body = message.map_or_else(Bytes::new, |message| Bytes::from(message.to_string()));
        self.sender.ready().await.unwrap();
        let response = self
            .sender
            .send_request(request.body(Full::new(body)).unwrap())
            .await
            .unwrap();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|value| value.to_str().unwrap().to_owned())
        };
        let (status, session, retry_after) = (
            response.status(),
            header("mcp-session-id"),
            header("retry-after"),
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            session,
            retry_after,
            message: message_of(&body),
        }
    }

    /// Opens a session with `initialize` (request id `id`) and, if it opened, says it is
    /// initialized.
    pub async fn initialize(&mut self, id: u64) -> Reply {
        let reply = self
            .send(
                Method::POST,
                None,
                &[],
                Some(
                    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "limits", "version": "1"}}}),
                ),
            )
            .await;
        if let Some(session) = &reply.session {
            let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            let done = self
                .send(Method::POST, Some(session), &[], Some(initialized))
                .await;
            assert_eq!(done.status, StatusCode::ACCEPTED);
        }
        reply
    }

    /// Sends request `method` with `params` in `session`.
    pub async fn request(&mut self, session: &str, id: u64, method: &str, params: Value) -> Reply {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(Method::POST, Some(session), &[], Some(message))
            .await
    }

    /// Closes `session`.
    pub async fn delete(&mut self, session: &str) -> StatusCode {
        self.send(Method::DELETE, Some(session), &[], None)
            .await
            .status
    }
}

fn message_of(body: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(body).ok()?;
    serde_json::from_str(text).ok().or_else(|| {
        text.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .find_map(|data| serde_json::from_str(data.trim()).ok())
    })
}
