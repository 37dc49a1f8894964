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
mod error;
mod keys;
mod manifest;
mod reviewers;
mod runs;
mod store;
mod table;
mod tools;
mod usage;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::error::CliError;

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
