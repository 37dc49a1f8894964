//! TLS for the PostgreSQL store's connections, through rustls with the `ring` provider.
//!
//! The URL's `sslmode` decides whether TLS is used:
//! - `disable`: never; for a Unix socket or a loopback address only.
//! - `prefer` (the default, as in libpq): TLS whenever the server offers it, and plain text only
//!   when the server answers that it does not speak TLS at all. A certificate that does not
//!   verify refuses the connection: there is no fallback to plain text after a failed handshake.
//!   An attacker on the network can still answer "no TLS" for the server, so `prefer` protects
//!   against listeners, not against a machine in the middle.
//! - `require`, and libpq's `verify-ca` and `verify-full` as its synonyms: TLS or no connection.
//!
//! Whenever TLS is used, the server's certificate chain is verified against the roots the
//! operator gives, and the certificate must name the host of the URL (its `host`, even where
//! `hostaddr` gives the address to dial). Unlike libpq, which verifies nothing under `prefer`
//! and `require` without a root certificate, nothing here accepts an unverified server. The
//! roots are a CA file given to [`PostgresTls::ca_file`] or as the URL's `sslrootcert`
//! parameter, or otherwise the platform's trusted roots (libpq's `sslrootcert=system`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::OpenError;

/// Whose certificates a PostgreSQL store's connections trust. The default reads the URL's
/// `sslrootcert` (a PEM file, or `system`), and trusts the platform's roots without it.
///
/// ```no_run
/// # async fn connect() -> Result<(), portcullis_stores::OpenError> {
/// use portcullis_stores::{PostgresStore, PostgresTls};
///
/// let tls = PostgresTls::ca_file("/etc/portcullis/postgres-ca.pem")?;
/// let store = PostgresStore::connect_with_tls(
///     "postgres://portcullis@db.internal/payments?sslmode=require",
///     &tls,
/// )
/// .await?;
/// # drop(store);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Default)]
pub struct PostgresTls {
    roots: Roots,
}

#[derive(Clone, Default)]
enum Roots {
    /// The URL's `sslrootcert`, or the platform's roots.
    #[default]
    FromUrl,
    /// The platform's roots.
    System,
    /// These certificates, read from `file`, and nothing else.
    File {
        file: PathBuf,
        certificates: Arc<[CertificateDer<'static>]>,
    },
}

impl PostgresTls {
    /// Trusts the certificate authorities in the PEM file at `path`, and no other: the CA
    /// that signed the server's certificate, or a bundle such as a cloud provider's.
    pub fn ca_file(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let file = path.as_ref().to_owned();
        Ok(PostgresTls {
            roots: Roots::File {
                certificates: read_ca_file(&file)?.into(),
                file,
            },
        })
    }

    /// Trusts the platform's roots (libpq's `sslrootcert=system`), whatever the URL says.
    pub fn system_roots() -> Self {
        PostgresTls {
            roots: Roots::System,
        }
    }
}

impl fmt::Debug for PostgresTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.roots {
            Roots::FromUrl => f.write_str("PostgresTls(from the URL)"),
            Roots::System => f.write_str("PostgresTls(the platform's roots)"),
            Roots::File { file, .. } => write!(f, "PostgresTls({})", file.display()),
        }
    }
}

/// A client to the database at `url`, connected as the store's connections are (the same
/// `sslmode`, roots and host name check). For tools beside the store: checks, migrations of
/// one's own, tests. The connection runs on a task of the current tokio runtime until the
/// client is dropped.
pub async fn postgres_client(
    url: &str,
    tls: &PostgresTls,
) -> Result<tokio_postgres::Client, OpenError> {
    let (config, connector) = connection(url, tls)?;
    let (client, connection) = config.connect(connector).await.map_err(connect_error)?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!(%error, "a PostgreSQL client's connection ended");
        }
    });
    Ok(client)
}

/// How to reach the database at `url`: its configuration, with the parameters read here
/// (`sslrootcert`, libpq's `verify-*` modes) taken out, and the TLS connector to use.
pub(super) fn connection(
    url: &str,
    tls: &PostgresTls,
) -> Result<(tokio_postgres::Config, MakeRustlsConnect), OpenError> {
    let (url, root_certificate) = read_tls_parameters(url);
    let config: tokio_postgres::Config = url.parse().map_err(OpenError::database)?;
    let trusted = if config.get_ssl_mode() == SslMode::Disable {
        // Never used: no root is read that the connection will not need.
        RootCertStore::empty()
    } else {
        root_store(&roots(&tls.roots, root_certificate)?)?
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client_config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| OpenError::Tls(Box::new(error)))?
        .with_root_certificates(trusted)
        .with_no_client_auth();
    Ok((config, MakeRustlsConnect::new(client_config)))
}

/// The roots to trust: those given to the store, or the URL's `sslrootcert` (a file, or
/// `system`), or the platform's; refused where both name roots, and not the same file.
fn roots(given: &Roots, root_certificate: Option<String>) -> Result<Roots, OpenError> {
    Ok(match (given, root_certificate) {
        (Roots::FromUrl, None) | (Roots::System, None) => Roots::System,
        (Roots::FromUrl, Some(file)) if file == "system" => Roots::System,
        (Roots::FromUrl, Some(file)) => {
            let file = PathBuf::from(file);
            Roots::File {
                certificates: read_ca_file(&file)?.into(),
                file,
            }
        }
        (given, None) => given.clone(),
        (Roots::File { file, .. }, Some(named)) if *file == Path::new(&named) => given.clone(),
        (_, Some(_)) => {
            return Err(tls_error(
                "the roots are given twice, as the URL's sslrootcert and to the store: give \
                 them once",
            ));
        }
    })
}

/// `url` without its `sslrootcert` parameter, whose value is returned, and with libpq's
/// `sslmode=verify-ca` and `verify-full` read as `require`, which verifies as much (and the
/// host name too).
fn read_tls_parameters(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut root_certificate = None;
    let mut kept = Vec::new();
    for parameter in query.split('&') {
        match parameter.split_once('=') {
            Some(("sslrootcert", value)) => root_certificate = Some(percent_decoded(value)),
            Some(("sslmode", "verify-ca" | "verify-full")) => kept.push("sslmode=require"),
            _ => kept.push(parameter),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, root_certificate)
}

/// `value` with its `%XX` escapes read, as a URL's parameters are (a path with a space).
fn percent_decoded(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let escape = (bytes[at] == b'%')
            .then(|| value.get(at + 1..at + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escape {
            Some(byte) => {
                decoded.push(byte);
                at += 3;
            }
            None => {
                decoded.push(bytes[at]);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

fn root_store(roots: &Roots) -> Result<RootCertStore, OpenError> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::File { file, certificates } => {
            for certificate in certificates.iter() {
                store.add(certificate.clone()).map_err(|error| {
                    tls_error(format!(
                        "{} holds a certificate that cannot be a root: {error}",
                        file.display()
                    ))
                })?;
            }
        }
        Roots::FromUrl | Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            // Not refused here: a server without TLS under `prefer` needs no roots, and any
            // certificate is refused at the handshake by an empty set.
            if added == 0 {
                tracing::warn!(
                    errors = ?found.errors,
                    "the platform has no trusted roots: TLS to PostgreSQL will refuse every \
                     server unless its CA is given (sslrootcert in the URL)"
                );
            }
        }
    }
    Ok(store)
}

fn read_ca_file(file: &Path) -> Result<Vec<CertificateDer<'static>>, OpenError> {
    let unreadable = |error: &dyn fmt::Display| {
        tls_error(format!(
            "the CA file {} could not be read: {error}",
            file.display()
        ))
    };
    let certificates = CertificateDer::pem_file_iter(file)
        .map_err(|error| unreadable(&error))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| unreadable(&error))?;
    if certificates.is_empty() {
        return Err(tls_error(format!(
            "the CA file {} holds no PEM certificate",
            file.display()
        )));
    }
    Ok(certificates)
}

fn tls_error(reason: impl Into<String>) -> OpenError {
    OpenError::Tls(reason.into().into())
}

/// A failed connection, as [`OpenError::Tls`] when TLS refused it (a certificate that does
/// not verify, a server without TLS under `require`). tokio-postgres tells its TLS failures
/// apart only by their message's beginning.
pub(super) fn connect_error(error: tokio_postgres::Error) -> OpenError {
    if error
        .to_string()
        .starts_with("error performing TLS handshake")
    {
        OpenError::Tls(Box::new(error))
    } else {
        OpenError::Database(Box::new(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslrootcert_is_taken_out_of_the_url_and_decoded() {
        let (url, root) = read_tls_parameters(
            "postgres://u@db/app?sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20bundle.pem&application_name=x",
        );
        assert_eq!(
            url,
            "postgres://u@db/app?sslmode=require&application_name=x"
        );
        assert_eq!(root.as_deref(), Some("/etc/ca bundle.pem"));
        let (url, root) = read_tls_parameters("postgres://u@db/app?sslrootcert=system");
        assert_eq!(url, "postgres://u@db/app");
        assert_eq!(root.as_deref(), Some("system"));
        assert_eq!(
            read_tls_parameters("postgres://u@db/app"),
            ("postgres://u@db/app".to_owned(), None)
        );
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ca.pem");
        std::fs::write(&file, "not a certificate\n").unwrap();
        let error = PostgresTls::ca_file(&file).err().unwrap();
        assert!(matches!(error, OpenError::Tls(_)), "{error}");
        assert!(
            error.to_string().contains("holds no PEM certificate"),
            "{error}"
        );
        let missing = PostgresTls::ca_file(file.with_extension("missing"))
            .err()
            .unwrap();
        assert!(
            missing.to_string().contains("could not be read"),
            "{missing}"
        );
    }

    #[test]
    fn roots_are_read_only_for_a_connection_that_may_use_tls() {
        let url = "postgres://u@db/app?sslrootcert=/nonexistent/ca.pem";
        assert!(connection(&format!("{url}&sslmode=disable"), &PostgresTls::default()).is_ok());
        let error = connection(&format!("{url}&sslmode=require"), &PostgresTls::default())
            .err()
            .unwrap();
        assert!(error.to_string().contains("could not be read"), "{error}");
    }

    #[test]
    fn roots_given_twice_are_refused() {
        // Refused before the file is read, so none is needed.
        let error = connection(
            "postgres://u@db/app?sslrootcert=/nonexistent/ca.pem",
            &PostgresTls::system_roots(),
        )
        .err()
        .unwrap();
        assert!(error.to_string().contains("given twice"), "{error}");
    }
}
