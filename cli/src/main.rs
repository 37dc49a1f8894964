//! `portcullis`: the operator's command line. It decides pending approvals, reads and verifies
//! the audit log, lists and shows agent runs, shows what each caller holds and prunes what the
//! lifetimes and retentions allow, compares contract manifests and prints tool exports, against
//! the store the application's workers share (a SQLite file or a PostgreSQL URL).
//!
//! Its exit codes are [`EXIT_CODES`], printed under every command's `--help`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod approvals;
mod audit;
mod check;
mod claims;
mod console;
mod keys;
mod manifest;
mod reviewers;
mod runs;
mod store;
mod table;
mod tools;
mod usage;

use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use portcullis_core::audit::ChainBreak;
use portcullis_core::{Rejection, RejectionCode};

/// What each exit code means.
const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  a refusal or a failed check: the ticket or the claim's settlement was refused, the
     audit chain is broken, the manifests differ, no run has the id given, a red-team case
     got through
  2  a usage error: an unknown option, a missing reviewer, edited arguments that are not
     a JSON object, an audit key the log is not chained with
  3  the store could not be opened or read: no database file at the path, a connection
     that failed, a schema newer than this build knows, a run sealed with keys not given
     (--seal-key-file)
  4  a file named on the command line (manifest, export, audit key, signing key) could not
     be read or written, or is not in the expected format, or the output could not be
     written
  5  the red-team entry point (check --entry) could not be started, failed, or wrote no
     report or something else";

/// The operator's command line for portcullis: approvals, the audit log, agent runs, contract
/// manifests and tool exports.
#[derive(Debug, Parser)]
#[command(name = "portcullis", version)]
struct Cli {
    #[command(flatten)]
    store: store::StoreArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Calls waiting for a human: list, show, approve, edit, reject.
    #[command(subcommand)]
    Approvals(approvals::Command),
    /// The audit log: tail, export, verify its chain.
    #[command(subcommand)]
    Audit(audit::Command),
    /// Run the application's red-team entry point: a table of the cases that got through, JUnit
    /// XML for CI.
    Check(check::Check),
    /// Claims of calls: list the open ones, settle one whose outcome is unknown.
    #[command(subcommand)]
    Claims(claims::Command),
    /// The approval console: reviewers decide waiting calls in the browser, with a passkey.
    Console(console::Console),
    /// Reviewers' signing keys: generate one, print its public key.
    #[command(subcommand)]
    Keys(keys::Command),
    /// Contract manifests: what changed between two.
    #[command(subcommand)]
    Manifest(manifest::Command),
    /// End the tasks past their lifetime and delete what the retention allows: runs, settled
    /// claims, expired pending calls, old window rows (never the audit log); tells what it
    /// removed (--dry-run: what it would). A sealed store's tasks end only with its seal keys
    /// (--seal-key-file): a task whose sources do not read is left as it is.
    Prune(usage::Prune),
    /// Reviewers who decide in the console with a passkey: invite, list, confirm, withdraw.
    #[command(subcommand)]
    Reviewers(reviewers::Command),
    /// Agent runs: list them, show one's steps, tickets and usage.
    #[command(subcommand)]
    Runs(runs::Command),
    /// The tool list as a provider is shown it.
    #[command(subcommand)]
    Tools(tools::Command),
    /// What each caller (tenant, actor) holds in the store against its share: live and ended
    /// tasks, sources' text, open claims, runs, pending approvals.
    Usage(usage::Usage),
}

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
    fn exit_code(&self) -> u8 {
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

/// Writes `value` as indented JSON and a line break.
pub fn write_json(out: &mut dyn Write, value: &serde_json::Value) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).map_err(io::Error::from)?;
    writeln!(out, "{}", table::terminal_safe(&text))?;
    Ok(())
}

impl Cli {
    async fn run(self, out: &mut dyn Write) -> Result<(), CliError> {
        match self.command {
            Command::Approvals(command) => approvals::run(command, &self.store, out).await,
            Command::Check(check) => check::run(check, out),
            Command::Audit(command) => audit::run(command, &self.store, out).await,
            Command::Claims(command) => claims::run(command, &self.store, out).await,
            Command::Console(console) => console::run(console, &self.store, out).await,
            Command::Keys(command) => keys::run(command, out),
            Command::Manifest(command) => manifest::run(command, out),
            Command::Reviewers(command) => reviewers::run(command, &self.store, out).await,
            Command::Runs(command) => runs::run(command, &self.store, out).await,
            Command::Tools(command) => tools::run(command, out),
            Command::Prune(prune) => usage::prune(prune, &self.store, out).await,
            Command::Usage(shown) => usage::usage(shown, &self.store, out).await,
        }
    }
}

/// `command` and every command under it, their long help ending with the exit codes, so that
/// `portcullis approvals approve --help` tells them too.
fn with_exit_codes(command: clap::Command) -> clap::Command {
    let help = match command.get_after_long_help() {
        Some(own) => format!("{own}\n\n{EXIT_CODES}"),
        None => EXIT_CODES.to_owned(),
    };
    command
        .after_long_help(help)
        .mut_subcommands(with_exit_codes)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let matches = with_exit_codes(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = cli.run(&mut out).await;
    let flushed = out.flush().map_err(CliError::Output);
    match result.and(flushed) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stopped early (`| head`) took all it wanted.
        Err(CliError::Output(error)) if error.kind() == io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(error) => {
            // Nothing is left to tell if stderr is closed too; the exit code still says it.
            let _ = writeln!(io::stderr(), "portcullis: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}
