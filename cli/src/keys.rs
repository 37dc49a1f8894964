//! `portcullis keys`: a reviewer's signing key. The secret stays with the reviewer; the public
//! key goes into the keyring the application's workers load, with the roles the reviewer
//! decides with.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use portcullis_core::{DecisionKey, Keyring, Reviewer};

use crate::error::CliError;

/// The key commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Make a new signing key in FILE (readable by its owner only; an existing file is never
    /// overwritten) and print a keyring (JSON) that lets it decide as the reviewer: the
    /// workers load it with `Keyring::load`; merge several reviewers' into one.
    Generate {
        /// Where to write the secret key.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// The reviewer the key decides as.
        #[arg(long = "reviewer", value_name = "ID")]
        id: String,
        /// A role the reviewer decides with (repeat it).
        #[arg(long = "role", value_name = "ROLE")]
        roles: Vec<String>,
        /// The tenant whose tickets alone the reviewer decides.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Print the public key of the secret key in FILE.
    Public {
        /// The secret key.
        #[arg(value_name = "FILE")]
        key_file: PathBuf,
    },
}

/// Runs one key command.
pub fn run(command: Command, out: &mut dyn Write) -> Result<(), CliError> {
    match command {
        Command::Generate {
            out: path,
            id,
            roles,
            tenant,
        } => {
            let key = DecisionKey::generate();
            write_secret(&path, &key.to_text())?;
            let mut reviewer = Reviewer::new(id).with_roles(roles);
            if let Some(tenant) = tenant {
                reviewer = reviewer.with_tenant(tenant);
            }
            // Only the keyring goes to the output, so that it can be sent to a file as it is.
            let keyring = Keyring::new().reviewer(reviewer, key.public_key());
            writeln!(out, "{}", keyring.to_json())?;
            Ok(())
        }
        Command::Public { key_file } => {
            writeln!(out, "{}", read_key(&key_file)?.public_key())?;
            Ok(())
        }
    }
}

/// Reads the secret key in `path`.
pub fn read_key(path: &Path) -> Result<DecisionKey, CliError> {
    DecisionKey::load(path).map_err(|error| CliError::BadFile(path.to_owned(), error.to_string()))
}

/// Writes `secret` to a new file at `path` that only its owner may read.
fn write_secret(path: &Path, secret: &str) -> Result<(), CliError> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .map_err(|error| CliError::WriteFile(path.to_owned(), error))?;
    writeln!(file, "{secret}").map_err(|error| CliError::WriteFile(path.to_owned(), error))
}
