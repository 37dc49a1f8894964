//! Opening the store the command was pointed at, without creating one.

use std::path::{Path, PathBuf};

use clap::Args;
use portcullis_core::audit::AuditRecord;
use portcullis_stores::{Location, PostgresTls, SealKeys, Store};

use crate::error::CliError;

/// Where the store is, how to reach it, and the keys that open what it sealed.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// The store the application's workers share: a SQLite file (never created here) or a
    /// `postgres://` URL (its `sslmode` and `sslrootcert` are honoured: `require` for TLS or
    /// nothing, the server's certificate and host name always verified).
    #[arg(long, env = "PORTCULLIS_STORE", global = true, value_name = "LOCATION")]
    store: Option<String>,
    /// The PEM file of the certificate authorities that a PostgreSQL server's certificate must
    /// be signed by (instead of the URL's `sslrootcert`, or the platform's roots).
    #[arg(
        long,
        env = "PORTCULLIS_POSTGRES_CA",
        global = true,
        value_name = "PATH"
    )]
    postgres_ca: Option<PathBuf>,
    /// The keys that open what the store sealed (pending calls' arguments, decisions, claims'
    /// outcomes), as the application's workers were given them (`SealKeys`).
    #[arg(
        long,
        env = "PORTCULLIS_SEAL_KEY_FILE",
        global = true,
        value_name = "FILE"
    )]
    seal_key_file: Option<PathBuf>,
}

/// Opens the store `args` name, creating and migrating nothing: a mistyped path or URL would
/// otherwise become an empty store that reports nothing waiting, which an operator could
/// believe.
pub async fn open(args: &StoreArgs) -> Result<Store, CliError> {
    let keys = args
        .seal_key_file
        .as_deref()
        .map(|path| {
            SealKeys::load(path)
                .map_err(|error| CliError::BadFile(path.to_owned(), error.to_string()))
        })
        .transpose()?;
    let location = args.store.as_deref().ok_or(CliError::NoStoreGiven)?;
    let tls = match (Location::of(location), &args.postgres_ca) {
        (Location::Sqlite(path), _) => {
            let path = Path::new(path);
            if !path.is_file() {
                return Err(CliError::NoDatabase(path.to_owned()));
            }
            PostgresTls::default()
        }
        (Location::Postgres(_), None) => PostgresTls::default(),
        (Location::Postgres(_), Some(ca)) => PostgresTls::ca_file(ca)
            .map_err(|error| CliError::BadFile(ca.clone(), error.to_string()))?,
    };
    let store = Store::open_existing_with_tls(location, &tls)
        .await
        .map_err(|error| CliError::StoreUnavailable {
            location: without_password(location),
            reason: error.to_string(),
        })?;
    Ok(match keys {
        Some(keys) => store.sealed_with(keys),
        None => store,
    })
}

/// The audit records from sequence `from` on, at most `limit` of them.
pub async fn audit_records(
    store: &Store,
    from: u64,
    limit: Option<u64>,
) -> Result<Vec<AuditRecord>, CliError> {
    store
        .audit_records(from, limit)
        .await
        .map_err(CliError::StoreRead)
}

/// `location` with the password of a URL (`user:password@`, or a `?password=` among its
/// parameters) hidden, so that an error message pasted into a ticket does not carry it.
fn without_password(location: &str) -> String {
    let Some((scheme, rest)) = location.split_once("://") else {
        return location.to_owned();
    };
    let rest = match rest.split_once('?') {
        Some((before, _parameters)) => format!("{before}?***"),
        None => rest.to_owned(),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((user_info, host)) => {
            let user = user_info
                .split_once(':')
                .map_or(user_info, |(user, _)| user);
            format!("{scheme}://{user}:***@{host}{}", &rest[authority_end..])
        }
        None => format!("{scheme}://{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::without_password;

    #[test]
    fn a_password_in_a_url_is_hidden() {
        assert_eq!(
            without_password("postgres://ops:s3cret@db.internal:5432/portcullis"),
            "postgres://ops:***@db.internal:5432/portcullis"
        );
        assert_eq!(
            without_password("postgres://db.internal/portcullis"),
            "postgres://db.internal/portcullis"
        );
        assert_eq!(
            without_password("postgresql://db/portcullis?user=ops&password=s3cret"),
            "postgresql://db/portcullis?***"
        );
        assert_eq!(without_password("/var/lib/state.db"), "/var/lib/state.db");
    }
}
