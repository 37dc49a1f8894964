//! The server as an OAuth 2.1 resource server, over HTTP on 127.0.0.1: an issuer in the test
//! (Ed25519 keys made at test time, its JWK Set served by axum, fetches counted) signs access
//! tokens; the real MCP server, with the [`OAuth`] authenticator, lists and calls tools for a
//! good token, and refuses every bad one with `401` and a challenge that names its protected
//! resource metadata.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis_mcp::McpServer;
use portcullis_mcp::oauth::{OAuth, OAuthBuilder};
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// Look a ticket up.
#[tool(roles = ["support"], read_only)]
fn read_ticket(ticket: u64) -> Result<String, ToolError> {
    Ok(format!("ticket {ticket} is open"))
}

/// Read an invoice's total.
#[tool(roles = ["finance"], read_only)]
fn invoice_total(invoice: u64) -> Result<String, ToolError> {
    Ok(format!("invoice {invoice} comes to 12.00"))
}

const ISSUER: &str = "https://auth.example.test";

/// A signing key made for this run, and its public half as a JWK.
struct Key {
    kid: String,
    encoding: EncodingKey,
    jwk: Jwk,
    public: [u8; 32],
}

impl Key {
    fn generate(kid: &str) -> Key {
        let signing = SigningKey::generate(&mut rand::rngs::OsRng);
        let der = signing.to_pkcs8_der().unwrap();
        let encoding = EncodingKey::from_ed_der(der.as_bytes());
        let public = signing.verifying_key().to_bytes();
        let jwk = serde_json::from_value(json!({
            "kty": "OKP", "crv": "Ed25519", "x": URL_SAFE_NO_PAD.encode(public),
            "kid": kid, "alg": "EdDSA", "use": "sig",
        }))
        .unwrap();
        Key {
            kid: kid.to_owned(),
            encoding,
            jwk,
            public,
        }
    }

    /// A token with `claims`, signed by this key and naming it.
    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

/// The issuer's JWK Set endpoint: the keys it publishes now, and how often it was fetched.
#[derive(Clone, Default)]
struct Jwks {
    published: Arc<Mutex<Vec<Jwk>>>,
    fetches: Arc<AtomicUsize>,
}

impl Jwks {
    fn publish(&self, keys: &[&Key]) {
        *self.published.lock().unwrap() = keys.iter().map(|key| key.jwk.clone()).collect();
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }

    /// Serves the set; returns its URL.
    async fn serve(&self) -> String {
        let jwks = self.clone();
        let router = axum::Router::new().route(
            "/jwks.json",
            axum::routing::get(move || {
                let jwks = jwks.clone();
                async move {
                    jwks.fetches.fetch_add(1, Ordering::SeqCst);
                    let keys = jwks.published.lock().unwrap().clone();
                    let document = json!({ "keys": keys }).to_string();
                    ([("content-type", "application/json")], document)
                }
            }),
        );
        format!("http://{}/jwks.json", serve(router).await)
    }
}

async fn serve(router: axum::Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router).await });
    address
}

/// An MCP server on 127.0.0.1 whose tokens come from the issuer at `jwks_url`, with the
/// authenticator `configure` makes of the builder. Returns the server's address.
async fn mcp_server(
    jwks_url: &str,
    configure: impl FnOnce(OAuthBuilder) -> OAuthBuilder,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let oauth = OAuth::builder(format!("http://{address}/mcp"), ISSUER)
        .jwks_url(jwks_url)
        .scope("tickets", ["support"])
        .scope("billing", ["finance"])
        .scope("profile", Vec::<String>::new());
    let oauth = configure(oauth).build().unwrap();
    let registry = Registry::builder()
        .tool(ReadTicket)
        .tool(InvoiceTotal)
        .profile(Profile::Mcp)
        .build()
        .unwrap();
    let router = McpServer::builder(registry).build().unwrap().router(oauth);
    tokio::spawn(async move { axum::serve(listener, router).await });
    address
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The claims of a good token for the server at `address`, with `scope`.
fn claims(address: &str, scope: &str) -> Value {
    json!({
        "iss": ISSUER,
        "sub": "ann",
        "aud": format!("http://{address}/mcp"),
        "exp": now() + 300,
        "iat": now(),
        "scope": scope,
    })
}

/// An HTTP response: status, `WWW-Authenticate`, `Mcp-Session-Id`, body.
struct Answer {
    status: u16,
    challenge: Option<String>,
    session: Option<String>,
    body: Vec<u8>,
}

impl Answer {
    /// The JSON-RPC message or JSON document of the body (JSON, or an SSE event's data).
    fn json(&self) -> Value {
        let text = std::str::from_utf8(&self.body).unwrap();
        serde_json::from_str(text).unwrap_or_else(|_| {
            text.lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .find_map(|data| serde_json::from_str(data.trim()).ok())
                .unwrap_or_else(|| panic!("no JSON in {text:?}"))
        })
    }
}

/// Sends `message` to the MCP endpoint at `address`, with `token` and `session` if given.
async fn post(address: &str, token: Option<&str>, session: Option<&str>, message: Value) -> Answer {
    let mut request = hyper::Request::post(format!("http://{address}/mcp"))
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
    }
    send(
        address,
        request
            .body(Full::new(Bytes::from(message.to_string())))
            .unwrap(),
    )
    .await
}

async fn get(address: &str, path: &str) -> Answer {
    let request = hyper::Request::get(format!("http://{address}{path}"))
        .header("host", "127.0.0.1")
        .body(Full::new(Bytes::new()))
        .unwrap();
    send(address, request).await
}

async fn send(address: &str, request: hyper::Request<Full<Bytes>>) -> Answer {
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let response = sender.send_request(request).await.unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|value| value.to_str().unwrap().to_owned())
    };
    let (status, challenge, session) = (
        response.status().as_u16(),
        header("www-authenticate"),
        header("mcp-session-id"),
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        challenge,
        session,
        body: body.to_vec(),
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "oauth-test", "version": "1"}}})
}

/// Opens a session with `token`: its id.
async fn open_session(address: &str, token: &str) -> String {
    let answer = post(address, Some(token), None, initialize()).await;
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let session = answer.session.expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(address, Some(token), Some(&session), initialized).await;
    session
}

/// Whether `token` opens a session at `address`; if not, its refusal's code.
async fn accepted(address: &str, token: &str) -> Result<(), String> {
    let answer = post(address, Some(token), None, initialize()).await;
    match answer.status {
        200 => Ok(()),
        _ => Err(answer.json()["error"].as_str().unwrap().to_owned()),
    }
}

fn metadata_url(address: &str) -> String {
    format!("http://{address}/.well-known/oauth-protected-resource/mcp")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_token_lists_the_tools_of_its_scopes_roles_and_calls_one() {
    let key = Key::generate("k1");
    let jwks = Jwks::default();
    jwks.publish(&[&key]);
    let address = mcp_server(&jwks.serve().await, |oauth| oauth).await;

    let token = key.sign(&claims(&address, "openid tickets"));
    let session = open_session(&address, &token).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let listed = post(&address, Some(&token), Some(&session), list)
        .await
        .json();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read_ticket"], "{listed}");

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "read_ticket", "arguments": {"ticket": 7}}});
    let called = post(&address, Some(&token), Some(&session), call)
        .await
        .json();
    assert_eq!(called["result"]["isError"], false, "{called}");
    assert_eq!(
        called["result"]["content"][0]["text"], "ticket 7 is open",
        "{called}"
    );

    let both = key.sign(&claims(&address, "tickets billing"));
    let session = open_session(&address, &both).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let listed = post(&address, Some(&both), Some(&session), list)
        .await
        .json();
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_with_the_relay_scope_may_send_the_users_message_and_no_other_may() {
    let key = Key::generate("k1");
    let jwks = Jwks::default();
    jwks.publish(&[&key]);
    let address = mcp_server(&jwks.serve().await, |oauth| oauth.relay_scope("relay")).await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "read_ticket", "arguments": {"ticket": 7},
        "_meta": {"dev.portcullis/user_message": "What about ticket 7?"}}});
    for (scope, expected) in [
        ("tickets relay", "ticket 7 is open"),
        ("tickets", "user_message_not_allowed"),
    ] {
        let token = key.sign(&claims(&address, scope));
        let session = open_session(&address, &token).await;
        let answer = post(&address, Some(&token), Some(&session), call.clone())
            .await
            .json();
        let seen = answer["result"]["content"][0]["text"]
            .as_str()
            .or(answer["error"]["data"]["code"].as_str());
        assert_eq!(seen, Some(expected), "{scope}: {answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_get_401_with_invalid_token_and_the_metadata_url() {
    let key = Key::generate("k1");
    let stranger = Key::generate("stranger");
    let jwks = Jwks::default();
    jwks.publish(&[&key]);
    let address = mcp_server(&jwks.serve().await, |oauth| oauth).await;
    let good = claims(&address, "tickets");
    let with = |change: Value| {
        let mut claims = good.clone();
        claims
            .as_object_mut()
            .unwrap()
            .extend(change.as_object().unwrap().clone());
        claims
    };

    // alg "none": a header that names no signature, and an empty one.
    let encode = |value: &Value| URL_SAFE_NO_PAD.encode(value.to_string());
    let unsigned = format!(
        "{}.{}.",
        encode(&json!({"alg": "none", "typ": "JWT", "kid": "k1"})),
        encode(&good)
    );
    // HS256 with the issuer's public key as the secret: anyone can make it.
    let mut hmac = Header::new(Algorithm::HS256);
    hmac.kid = Some("k1".to_owned());
    let forged =
        jsonwebtoken::encode(&hmac, &good, &EncodingKey::from_secret(&key.public)).unwrap();
    // Signed by a key the issuer does not publish, but naming one it does.
    let mut impostor = Header::new(Algorithm::EdDSA);
    impostor.kid = Some("k1".to_owned());
    let misattributed = jsonwebtoken::encode(&impostor, &good, &stranger.encoding).unwrap();
    let mut no_kid = key.sign(&good);
    no_kid.replace_range(
        ..no_kid.find('.').unwrap(),
        &encode(&json!({"alg": "EdDSA", "typ": "JWT"})),
    );

    let cases = [
        (
            "another audience",
            key.sign(&with(json!({"aud": "https://other.example.test/mcp"}))),
            "token_wrong_audience",
        ),
        (
            "an audience list without this server",
            key.sign(&with(
                json!({"aud": ["https://a.example.test", "https://b.example.test"]}),
            )),
            "token_wrong_audience",
        ),
        (
            "expired",
            key.sign(&with(json!({"exp": now() - 3600}))),
            "token_expired",
        ),
        (
            "not valid yet",
            key.sign(&with(json!({"nbf": now() + 3600}))),
            "token_not_yet_valid",
        ),
        ("an unknown key", stranger.sign(&good), "token_unknown_key"),
        (
            "another issuer",
            key.sign(&with(json!({"iss": "https://evil.example.test"}))),
            "token_wrong_issuer",
        ),
        (
            "an issuer list",
            key.sign(&with(json!({"iss": [ISSUER, "https://evil.example.test"]}))),
            "token_wrong_issuer",
        ),
        ("alg none", unsigned, "token_malformed"),
        (
            "HS256 with the public key",
            forged,
            "token_algorithm_refused",
        ),
        (
            "a known key id, another key",
            misattributed,
            "token_bad_signature",
        ),
        ("no key id", no_kid, "token_without_key_id"),
        (
            "no audience",
            key.sign(&with(json!({"aud": null}))),
            "token_missing_claim",
        ),
        ("not a JWT", "s3cret".to_owned(), "token_malformed"),
    ];
    for (case, token, code) in cases {
        let answer = post(&address, Some(&token), None, initialize()).await;
        assert_eq!(answer.status, 401, "{case}");
        let challenge = answer.challenge.clone().expect("a challenge");
        assert!(challenge.starts_with("Bearer "), "{case}: {challenge}");
        assert!(
            challenge.contains(&format!("resource_metadata=\"{}\"", metadata_url(&address))),
            "{case}: {challenge}"
        );
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{case}: {challenge}"
        );
        assert!(
            challenge.contains("error_description=\""),
            "{case}: {challenge}"
        );
        assert_eq!(answer.json()["error"], code, "{case}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_gets_401_naming_the_metadata_and_no_error() {
    let jwks = Jwks::default();
    let address = mcp_server(&jwks.serve().await, |oauth| oauth).await;
    for answer in [
        post(&address, None, None, initialize()).await,
        get(&address, "/mcp").await,
    ] {
        assert_eq!(answer.status, 401);
        assert_eq!(
            answer.challenge.clone().unwrap(),
            format!("Bearer resource_metadata=\"{}\"", metadata_url(&address))
        );
        assert_eq!(answer.json()["error"], "unauthenticated");
    }
    assert_eq!(jwks.fetches(), 0, "no token, no fetch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_with_no_known_scope_gets_403_insufficient_scope() {
    let key = Key::generate("k1");
    let jwks = Jwks::default();
    jwks.publish(&[&key]);
    let address = mcp_server(&jwks.serve().await, |oauth| oauth).await;
    let token = key.sign(&claims(&address, "openid email"));
    let answer = post(&address, Some(&token), None, initialize()).await;
    assert_eq!(answer.status, 403);
    let challenge = answer.challenge.clone().unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(
        challenge.contains("scope=\"billing profile tickets\""),
        "{challenge}"
    );
    assert!(challenge.contains("resource_metadata="), "{challenge}");
    assert_eq!(answer.json()["error"], "insufficient_scope");

    // A scope that grants no role opens a session that sees no tool needing one.
    let token = key.sign(&claims(&address, "profile"));
    let session = open_session(&address, &token).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let listed = post(&address, Some(&token), Some(&session), list)
        .await
        .json();
    assert_eq!(listed["result"]["tools"], json!([]), "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protected_resource_metadata_is_public() {
    let jwks = Jwks::default();
    let address = mcp_server(&jwks.serve().await, |oauth| oauth).await;
    let expected = json!({
        "resource": format!("http://{address}/mcp"),
        "authorization_servers": [ISSUER],
        "scopes_supported": ["billing", "profile", "tickets"],
        "bearer_methods_supported": ["header"],
    });
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let answer = get(&address, path).await;
        assert_eq!(answer.status, 200, "{path}");
        assert_eq!(answer.json(), expected, "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_key_is_picked_up_and_a_removed_one_refused_after_a_refetch() {
    let (old, new) = (Key::generate("old"), Key::generate("new"));
    let jwks = Jwks::default();
    jwks.publish(&[&old]);
    let address = mcp_server(&jwks.serve().await, |oauth| {
        oauth
            .refresh_every(Duration::from_secs(3600))
            .refetch_at_most_every(Duration::ZERO)
    })
    .await;
    let claims = claims(&address, "tickets");
    assert_eq!(accepted(&address, &old.sign(&claims)).await, Ok(()));
    assert_eq!(jwks.fetches(), 1);

    jwks.publish(&[&new]);
    // Until the keys are fetched again, the old key is what the server knows.
    assert_eq!(accepted(&address, &old.sign(&claims)).await, Ok(()));
    assert_eq!(jwks.fetches(), 1);
    // A token naming a key the server lacks makes it fetch the keys again.
    assert_eq!(accepted(&address, &new.sign(&claims)).await, Ok(()));
    assert_eq!(jwks.fetches(), 2);
    assert_eq!(
        accepted(&address, &old.sign(&claims)).await,
        Err("token_unknown_key".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_older_than_the_refresh_period_are_fetched_again() {
    let (old, new) = (Key::generate("old"), Key::generate("new"));
    let jwks = Jwks::default();
    jwks.publish(&[&old, &new]);
    let address = mcp_server(&jwks.serve().await, |oauth| {
        oauth
            .refresh_every(Duration::ZERO)
            .refetch_at_most_every(Duration::ZERO)
    })
    .await;
    let claims = claims(&address, "tickets");
    assert_eq!(accepted(&address, &old.sign(&claims)).await, Ok(()));
    jwks.publish(&[&new]);
    assert_eq!(
        accepted(&address, &old.sign(&claims)).await,
        Err("token_unknown_key".to_owned())
    );
    assert_eq!(accepted(&address, &new.sign(&claims)).await, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_made_up_key_ids_fetches_the_keys_once_per_interval() {
    let key = Key::generate("k1");
    let jwks = Jwks::default();
    jwks.publish(&[&key]);
    let address = mcp_server(&jwks.serve().await, |oauth| {
        oauth.refetch_at_most_every(Duration::from_secs(3600))
    })
    .await;
    let claims = claims(&address, "tickets");
    let flood: Vec<_> = (0..64)
        .map(|n| {
            let address = address.clone();
            let token = Key::generate(&format!("made-up-{n}")).sign(&claims);
            tokio::spawn(async move { accepted(&address, &token).await })
        })
        .collect();
    for refused in flood {
        assert_eq!(refused.await.unwrap(), Err("token_unknown_key".to_owned()));
    }
    assert_eq!(jwks.fetches(), 1, "one fetch for 64 unknown key ids");
    assert_eq!(accepted(&address, &key.sign(&claims)).await, Ok(()));
    assert_eq!(jwks.fetches(), 1);
}
