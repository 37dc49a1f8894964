//! Opening the store the command was pointed at, without creating one.

use std::path::Path;

use portcullis_core::audit::AuditRecord;
use portcullis_stores::{Location, SealKeys, Store};

use crate::CliError;

/// The store a command was pointed at: where it is, and the file of the keys that open what
/// it sealed.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub location: Option<&'a str>,
    pub seal_key_file: Option<&'a Path>,
}

/// Opens the store `target` names, creating and migrating nothing: a mistyped path or URL would
/// otherwise become an empty store that reports nothing waiting, which an operator could
/// believe.
pub async fn open(target: Target<'_>) -> Result<Store, CliError> {
    let keys = target
        .seal_key_file
        .map(|path| {
            SealKeys::load(path)
                .map_err(|error| CliError::BadFile(path.to_owned(), error.to_string()))
        })
        .transpose()?;
    let location = target.location.ok_or(CliError::NoStoreGiven)?;
    if let Location::Sqlite(path) = Location::of(location) {
        let path = Path::new(path);
        if !path.is_file() {
            return Err(CliError::NoDatabase(path.to_owned()));
        }
    }
    let store =
        Store::open_existing(location)
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
