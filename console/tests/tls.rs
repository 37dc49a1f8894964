//! The console over TLS: a real handshake against the operator's certificate, the session
//! cookie `Secure` and `__Host-` prefixed, and a client that opens a connection and says
//! nothing holds up no one else.

use std::sync::Arc;
use std::time::Duration;

use portcullis::encoding::unbase64url;
use portcullis::testing::passkey::{Claims, SoftwarePasskey};
use portcullis::{Keyring, Reviewer};
use portcullis_console::ConsoleConfig;
use portcullis_stores::Store;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_serves_tls_with_the_operators_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let signed = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let certificate = dir.path().join("console.pem");
    let key = dir.path().join("console.key");
    std::fs::write(&certificate, signed.cert.pem()).unwrap();
    std::fs::write(&key, signed.signing_key.serialize_pem()).unwrap();

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let origin = format!("https://localhost:{port}");
    let rita = SoftwarePasskey::new("localhost", &origin);
    let keyring = Keyring::new().passkey(
        Reviewer::new("rita").with_roles(["finance"]),
        rita.credential(),
    );
    let store = Store::open(&dir.path().join("state.db").display().to_string())
        .await
        .unwrap();
    let router = portcullis_console::router(ConsoleConfig {
        store,
        keyring,
        keyring_file: None,
        origin: origin.clone(),
        tools: Vec::new(),
        audit_key: None,
    })
    .unwrap();
    let (certificate_path, key_path) = (certificate.clone(), key.clone());
    tokio::spawn(async move {
        portcullis_console::serve(router, listener, Some((&certificate_path, &key_path)))
            .await
            .unwrap();
    });

    // A client that connects and never says hello.
    let _silent = TcpStream::connect(("127.0.0.1", port)).await.unwrap();

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(signed.cert.der().to_vec()))
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = TlsConnector::from(Arc::new(config));
    let request = |method: &str, path: &str, body: &str| {
        format!(
            "{method} {path} HTTP/1.1\r\nhost: localhost:{port}\r\norigin: {origin}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let exchange = |text: String| {
        let connector = connector.clone();
        async move {
            let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            let name = ServerName::try_from("localhost").unwrap();
            let mut tls =
                tokio::time::timeout(Duration::from_secs(5), connector.connect(name, tcp))
                    .await
                    .expect("the handshake is not held up by the silent client")
                    .unwrap();
            tls.write_all(text.as_bytes()).await.unwrap();
            let mut answer = String::new();
            tls.read_to_string(&mut answer).await.unwrap_or_default();
            answer
        }
    };
    let page = exchange(request("GET", "/signin", "")).await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(
        page.contains("content-security-policy: default-src 'none'"),
        "{page}"
    );

    // rita signs in over TLS: her session cookie is Secure, and bound to this host.
    let started = exchange(request(
        "POST",
        "/api/signin/start",
        r#"{"reviewer":"rita"}"#,
    ))
    .await;
    let started: Value = serde_json::from_str(started.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let challenge = unbase64url(started["challenge"].as_str().unwrap()).unwrap();
    let (signature, assertion) = rita.assert(&challenge, &Claims::default());
    let finish = json!({
        "signin": started["signin"],
        "credential_id": rita.credential_id(),
        "authenticator_data": assertion.authenticator_data,
        "client_data_json": assertion.client_data_json,
        "signature": signature,
    });
    let signed_in = exchange(request("POST", "/api/signin/finish", &finish.to_string())).await;
    assert!(signed_in.starts_with("HTTP/1.1 200"), "{signed_in}");
    let cookie = signed_in
        .lines()
        .find(|line| line.starts_with("set-cookie: "))
        .unwrap();
    assert!(
        cookie.starts_with("set-cookie: __Host-portcullis_session=session_"),
        "{cookie}"
    );
    assert!(
        cookie.ends_with("; Path=/; HttpOnly; SameSite=Strict; Max-Age=28800; Secure"),
        "{cookie}"
    );

    // An untrusted certificate does not get a handshake from a client that checks it.
    let strict = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let refused = TlsConnector::from(Arc::new(strict))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await;
    assert!(refused.is_err());
}
