//! Serving the console over TLS, with the operator's certificate and key (PEM). Each handshake
//! runs in a task of its own and must finish within ten seconds, so that a client that opens a
//! connection and says nothing holds up no one else; at most 256 are under way at once.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::Listener;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

const HANDSHAKE: Duration = Duration::from_secs(10);
/// The most handshakes under way at once: past it, a new connection is closed at once.
const HANDSHAKES: usize = 256;

/// The server's TLS settings from a certificate chain and its private key, both PEM files.
pub(crate) fn server_config(certificate: &Path, key: &Path) -> io::Result<Arc<ServerConfig>> {
    let unreadable = |file: &Path, error: &dyn std::fmt::Display| {
        io::Error::other(format!("{}: {error}", file.display()))
    };
    let chain = CertificateDer::pem_file_iter(certificate)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
        .map_err(|error| unreadable(certificate, &error))?;
    if chain.is_empty() {
        return Err(unreadable(certificate, &"no certificate in it"));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|error| unreadable(key, &error))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|error| {
            io::Error::other(format!("the certificate and key do not serve: {error}"))
        })?;
    Ok(Arc::new(config))
}

/// Connections whose TLS handshake finished, for axum to serve.
pub(crate) struct TlsListener {
    handshaken: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub(crate) fn new(listener: TcpListener, config: Arc<ServerConfig>) -> io::Result<Self> {
        let local = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (handshaken, receiver) = mpsc::channel(64);
        let under_way = Arc::new(Semaphore::new(HANDSHAKES));
        tokio::spawn(async move {
            loop {
                let (stream, address) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    // Out of file descriptors, say: wait, then go on accepting.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = under_way.clone().try_acquire_owned() else {
                    continue;
                };
                let (acceptor, handshaken) = (acceptor.clone(), handshaken.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    if let Ok(Ok(stream)) =
                        tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await
                    {
                        let _ = handshaken.send((stream, address)).await;
                    }
                });
            }
        });
        Ok(TlsListener {
            handshaken: receiver,
            local,
        })
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.handshaken.recv().await {
            Some(accepted) => accepted,
            // The accepting task ended only with the runtime.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}
