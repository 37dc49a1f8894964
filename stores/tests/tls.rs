//! TLS to PostgreSQL: a store's connections are encrypted and verified, and a server that cannot
//! prove who it is gets no connection. The server tests need the TLS server `.ci/postgres`
//! starts (PORTCULLIS_POSTGRES_URL with its sslrootcert, PORTCULLIS_POSTGRES_UNTRUSTED_CA) and
//! skip without it; the tests of what a client sends a server run against a listener of their
//! own.

use portcullis_stores::{OpenError, PostgresStore, PostgresTls, postgres_client};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The URL `.ci/postgres` exports, and the CA that did not sign its server's certificate.
fn server() -> Option<(String, String)> {
    let url = std::env::var("PORTCULLIS_POSTGRES_URL").ok();
    let untrusted = std::env::var("PORTCULLIS_POSTGRES_UNTRUSTED_CA").ok();
    match (url, untrusted) {
        (Some(url), Some(untrusted)) => Some((url, untrusted)),
        _ => {
            eprintln!(
                "skipped: set PORTCULLIS_POSTGRES_URL and PORTCULLIS_POSTGRES_UNTRUSTED_CA \
                 (.ci/postgres does) to run the TLS tests"
            );
            None
        }
    }
}

/// `url` with `parameter` (`name=value`) instead of any parameter of that name.
fn with_parameter(url: &str, parameter: &str) -> String {
    let name = parameter
        .split_once('=')
        .map_or(parameter, |(name, _)| name);
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut kept: Vec<&str> = query
        .split('&')
        .filter(|kept| !kept.is_empty() && !kept.starts_with(&format!("{name}=")))
        .collect();
    kept.push(parameter);
    format!("{base}?{}", kept.join("&"))
}

/// `url` without its `sslrootcert`, to give the roots to the store instead.
fn without_roots(url: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kept| !kept.is_empty() && !kept.starts_with("sslrootcert="))
        .collect();
    format!("{base}?{}", kept.join("&"))
}

fn refused_by_tls(result: Result<PostgresStore, OpenError>) -> String {
    match result {
        Err(error @ OpenError::Tls(_)) => error.to_string(),
        Err(other) => panic!("refused, but not by TLS: {other}"),
        Ok(_) => panic!("connected to a server whose certificate does not verify"),
    }
}

#[tokio::test]
async fn a_store_connects_over_verified_tls() {
    let Some((url, _)) = server() else { return };
    // A name for the store's connections, to find them among the server's.
    let url = with_parameter(&url, "application_name=portcullis_tls_probe");
    let store = PostgresStore::connect(&url).await.unwrap();
    let client = postgres_client(&url, &PostgresTls::default())
        .await
        .unwrap();
    let own: bool = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(own, "the client's connection is not encrypted");
    let row = client
        .query_one(
            "SELECT count(*), bool_and(s.ssl) FROM pg_stat_ssl s
             JOIN pg_stat_activity a USING (pid)
             WHERE a.application_name = 'portcullis_tls_probe' AND a.pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    let (connections, all_encrypted): (i64, Option<bool>) = (row.get(0), row.get(1));
    assert!(connections >= 1, "the store keeps no connection open");
    assert_eq!(
        all_encrypted,
        Some(true),
        "a store connection is not encrypted"
    );
    drop(store);

    // The same roots given to the store rather than in the URL.
    let ca = std::env::var("PORTCULLIS_POSTGRES_CA").unwrap();
    let tls = PostgresTls::ca_file(&ca).unwrap();
    PostgresStore::connect_with_tls(&without_roots(&url), &tls)
        .await
        .unwrap();
    // Named in both places, the same file is no conflict; two different files are.
    PostgresStore::connect_with_tls(&url, &tls).await.unwrap();
    let untrusted = std::env::var("PORTCULLIS_POSTGRES_UNTRUSTED_CA").unwrap();
    let twice = refused_by_tls(
        PostgresStore::connect_with_tls(&url, &PostgresTls::ca_file(untrusted).unwrap()).await,
    );
    assert!(twice.contains("given twice"), "{twice}");
}

#[tokio::test]
async fn a_ca_that_did_not_sign_the_servers_certificate_is_refused() {
    let Some((url, untrusted)) = server() else {
        return;
    };
    let tls = PostgresTls::ca_file(&untrusted).unwrap();
    for mode in ["require", "verify-full", "prefer"] {
        let url = with_parameter(&without_roots(&url), &format!("sslmode={mode}"));
        // `prefer` too: a certificate that does not verify is no reason to talk in clear.
        let refusal = refused_by_tls(PostgresStore::connect_with_tls(&url, &tls).await);
        assert!(refusal.contains("UnknownIssuer"), "{mode}: {refusal}");
        let client = postgres_client(&url, &tls).await.err().unwrap();
        assert!(matches!(client, OpenError::Tls(_)), "{mode}: {client}");
    }
    // Without a CA, the platform's roots are the roots, and none signed a throwaway CA.
    let refusal = refused_by_tls(PostgresStore::connect(&without_roots(&url)).await);
    assert!(refusal.contains("UnknownIssuer"), "{refusal}");
    let refusal =
        refused_by_tls(PostgresStore::connect(&with_parameter(&url, "sslrootcert=system")).await);
    assert!(refusal.contains("UnknownIssuer"), "{refusal}");
}

#[tokio::test]
async fn a_certificate_for_another_host_is_refused() {
    let Some((url, _)) = server() else { return };
    // The certificate names 127.0.0.1 only: ask for `localhost` at that address.
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, rest) = rest.split_once('@').unwrap();
    let (_, port_and_rest) = rest.split_once(':').unwrap();
    let url = format!("{scheme}://{user}@localhost:{port_and_rest}");
    let url = with_parameter(&url, "hostaddr=127.0.0.1");
    let refusal = refused_by_tls(PostgresStore::connect(&url).await);
    assert!(refusal.contains("localhost"), "{refusal}");
    assert!(refusal.contains("not valid for name"), "{refusal}");
}

/// What a client sent first to a listener that answers "no TLS" to a TLS request: the codes
/// of the messages received (80877103: a TLS request, 196608: a plain start-up message).
async fn first_messages_sent(mode: &str) -> (Vec<u32>, Result<PostgresStore, OpenError>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut codes = Vec::new();
        loop {
            let mut header = [0u8; 8];
            if socket.read_exact(&mut header).await.is_err() {
                break;
            }
            let length = u32::from_be_bytes(header[..4].try_into().unwrap()) as usize;
            let code = u32::from_be_bytes(header[4..].try_into().unwrap());
            codes.push(code);
            if code == 80_877_103 {
                socket.write_all(b"N").await.unwrap();
                continue;
            }
            // A start-up message in clear: read it and hang up.
            let mut rest = vec![0u8; length.saturating_sub(8)];
            let _ = socket.read_exact(&mut rest).await;
            break;
        }
        codes
    });
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres?sslmode={mode}");
    let result = PostgresStore::connect_with_tls(&url, &PostgresTls::system_roots()).await;
    (server.await.unwrap(), result)
}

#[tokio::test]
async fn require_refuses_a_server_without_tls() {
    let (sent, result) = first_messages_sent("require").await;
    let refusal = refused_by_tls(result);
    assert!(refusal.contains("server does not support TLS"), "{refusal}");
    assert_eq!(sent, [80_877_103], "something was sent in clear");
}

#[tokio::test]
async fn prefer_talks_in_clear_only_to_a_server_that_has_no_tls() {
    let (sent, result) = first_messages_sent("prefer").await;
    assert!(result.is_err(), "the listener is no database");
    assert_eq!(
        sent,
        [80_877_103, 196_608],
        "TLS asked first, then plain text"
    );
    let (sent, result) = first_messages_sent("disable").await;
    assert!(result.is_err(), "the listener is no database");
    assert_eq!(sent, [196_608], "no TLS asked for");
}
