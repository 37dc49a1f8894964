//! Everything that stops a command, and the exit code and hint each gives.

use std::fmt;
use std::io;
use std::path::PathBuf;

use portcullis_core::audit::ChainBreak;
use portcullis_core::{Rejection, RejectionCode};

/// Everything that stops a command, with what to do about it.
#[derive(Debug)]
pub enum CliError {
    /// No `--store` and no `PORTCULLIS_STORE`.
    NoStoreGiven,
    /// The SQLite file does not exist; it is not created, as a typo would create an empty store.
    NoDatabase(PathBuf),
    /// The store refused to open.
    StoreUnavailable {
        /// The location, any password in it hidden.
        location: String,
        /// Why.
        reason: String,
    },
    /// The store opened but could not be read.
    StoreRead(io::Error),
    /// A decision without a reviewer.
    NoReviewer,
    /// Options that do not go together, or a key that does not fit the log.
    Usage(String),
    /// The store or core refused: the ticket is unknown, decided, or the reviewer may not.
    Refused(Rejection),
    /// The audit log does not verify.
    ChainBroken {
        /// Where.
        chain_break: ChainBreak,
        /// Whether a key was given, for the hint that a keyed log needs one.
        keyed: bool,
    },
    /// Two manifests differ; the differences are already printed.
    ManifestsDiffer,
    /// A file named on the command line could not be read.
    ReadFile(PathBuf, io::Error),
    /// A file named on the command line could not be written.
    WriteFile(PathBuf, io::Error),
    /// The call stored under a ticket is not the call the ticket was opened for, or not the
    /// one the reviewer was shown: someone changed it in the store. Nothing is signed.
    CallChanged(String),
    /// A file named on the command line is not what the command expects.
    BadFile(PathBuf, String),
    /// The output could not be written.
    Output(io::Error),
    /// No run of that id is stored.
    RunNotFound(String),
    /// The runs could not be read: the database failed, or a run is sealed with keys not
    /// given.
    Runs(portcullis_agent::RunStoreError),
    /// Red-team cases got through, or something was not attacked; the table is printed.
    CasesGotThrough {
        /// How many cases did not get their refusal.
        through: usize,
        /// How many cases ran.
        cases: usize,
        /// How many things the kit could not attack.
        not_attacked: usize,
    },
    /// The red-team entry point could not be started, failed, or wrote no report.
    EntryFailed(PathBuf, String),
}

impl CliError {
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            // The store, not the ticket or the claim, failed.
            CliError::Refused(rejection)
                if matches!(
                    rejection.code(),
                    RejectionCode::ApprovalsUnavailable
                        | RejectionCode::ClaimsUnavailable
                        | RejectionCode::AuditUnavailable
                ) =>
            {
                3
            }
            CliError::Refused(_)
            | CliError::CallChanged(_)
            | CliError::ChainBroken { .. }
            | CliError::ManifestsDiffer
            | CliError::RunNotFound(_)
            | CliError::CasesGotThrough { .. } => 1,
            CliError::NoStoreGiven | CliError::NoReviewer | CliError::Usage(_) => 2,
            CliError::NoDatabase(_)
            | CliError::StoreUnavailable { .. }
            | CliError::StoreRead(_)
            | CliError::Runs(_) => 3,
            CliError::ReadFile(..)
            | CliError::WriteFile(..)
            | CliError::BadFile(..)
            | CliError::Output(_) => 4,
            CliError::EntryFailed(..) => 5,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::NoStoreGiven => f.write_str(
                "no store given: pass --store <path to the SQLite file | postgres:// URL> or set \
                 PORTCULLIS_STORE",
            ),
            CliError::NoDatabase(path) => write!(
                f,
                "no store database at {}: check the path; the command line never creates a \
                 store, the application does",
                path.display()
            ),
            CliError::StoreUnavailable { location, reason } => {
                write!(f, "the store at {location} could not be opened: {reason}")
            }
            CliError::StoreRead(error) => write!(
                f,
                "the store could not be read: {error}; check that the database is reachable \
                 and try again"
            ),
            CliError::NoReviewer => f.write_str(
                "who decides? pass --reviewer <id> or set PORTCULLIS_REVIEWER (with --role and \
                 --tenant as the reviewer holds them)",
            ),
            CliError::Usage(why) => f.write_str(why),
            CliError::Refused(rejection) => {
                write!(f, "refused ({}): {}", rejection.code(), rejection.message())?;
                match rejection.hint() {
                    Some(hint) => write!(f, "; {hint}"),
                    None => Ok(()),
                }
            }
            CliError::ChainBroken { chain_break, keyed } => {
                write!(f, "the audit chain is broken: {chain_break}")?;
                if !keyed && matches!(chain_break, ChainBreak::Altered { position: 0 }) {
                    f.write_str(
                        "; if the application keys its log (audit_key), pass --key-file or set \
                         PORTCULLIS_AUDIT_KEY_FILE",
                    )?;
                }
                Ok(())
            }
            CliError::CallChanged(ticket) => write!(
                f,
                "the call stored under ticket {ticket} is not the call the ticket was opened \
                 for, or not the one `approvals show` printed (its call digest differs): it was \
                 changed in the store, so nothing was signed; show it again, and find out who \
                 can write the store"
            ),
            CliError::ManifestsDiffer => {
                f.write_str("the manifests differ: review the changes above before accepting them")
            }
            CliError::ReadFile(path, error) => {
                write!(f, "{} could not be read: {error}", path.display())
            }
            CliError::WriteFile(path, error) => {
                write!(f, "{} could not be written: {error}", path.display())
            }
            CliError::BadFile(path, why) => write!(f, "{}: {why}", path.display()),
            CliError::Output(error) => write!(f, "the output could not be written: {error}"),
            CliError::RunNotFound(id) => write!(
                f,
                "no run `{id}` is stored; list the runs with `portcullis runs list`"
            ),
            CliError::Runs(error) => write!(f, "{error}"),
            CliError::CasesGotThrough {
                through,
                cases,
                not_attacked,
            } => {
                write!(f, "{through} of {cases} red-team cases got through")?;
                if *not_attacked > 0 {
                    write!(f, ", and {not_attacked} things were not attacked")?;
                }
                f.write_str(": the gates or the contracts let them pass; see the table above")
            }
            CliError::EntryFailed(entry, why) => write!(
                f,
                "the red-team entry point {} {why}; see `portcullis check --help`",
                entry.display()
            ),
        }
    }
}

impl std::error::Error for CliError {}

/// Writing the output is the only place an `io::Error` is not a store's or a file's.
impl From<io::Error> for CliError {
    fn from(error: io::Error) -> Self {
        CliError::Output(error)
    }
}
