//! `portcullis manifest diff`: what changed between two contract manifests, tool by tool and
//! field by field, for the reviewer of a change that touches risk, roles, approval or what the
//! model reads.
//! The comparison is core's ([`Manifest::diff`]); this prints it.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use portcullis_core::manifest::{Manifest, ManifestDiff};
use serde_json::Value;

use crate::error::CliError;
use crate::table::printable;
use crate::table::write_json;

/// The manifest commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compare two manifests (the JSON of `Registry::manifest()`, or a lock file written by
    /// `manifest::compare_with_lock`): the tools added, removed and changed, and for a changed
    /// tool the contract fields that changed, old and new. Exits 0 when they are equal, 1 when
    /// they differ.
    Diff {
        /// The manifest before the change.
        old: PathBuf,
        /// The manifest after it.
        new: PathBuf,
        /// Print the differences as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one manifest command.
pub fn run(command: Command, out: &mut dyn Write) -> Result<(), CliError> {
    let Command::Diff { old, new, json } = command;
    let diff = read(&old)?.diff(&read(&new)?);
    if json {
        let mut value = serde_json::to_value(&diff).map_err(std::io::Error::from)?;
        value["equal"] = Value::Bool(diff.is_empty());
        write_json(out, &value)?;
    } else {
        write_text(&diff, out)?;
    }
    if diff.is_empty() {
        Ok(())
    } else {
        Err(CliError::ManifestsDiffer)
    }
}

/// The manifest at `path`.
fn read(path: &Path) -> Result<Manifest, CliError> {
    let bad = |why: String| CliError::BadFile(path.to_owned(), why);
    let text = std::fs::read_to_string(path)
        .map_err(|error| CliError::ReadFile(path.to_owned(), error))?;
    let document: Value = serde_json::from_str(&text)
        .map_err(|error| bad(format!("not JSON ({error}); expected a contract manifest")))?;
    Manifest::read(&document).map_err(bad)
}

fn write_text(diff: &ManifestDiff, out: &mut dyn Write) -> Result<(), CliError> {
    if diff.is_empty() {
        writeln!(out, "the manifests are equal")?;
        return Ok(());
    }
    for name in &diff.added {
        writeln!(out, "+ added tool {}", printable(name))?;
    }
    for name in &diff.removed {
        writeln!(out, "- removed tool {}", printable(name))?;
    }
    for changed in &diff.changed {
        writeln!(out, "~ changed tool {}", printable(&changed.tool))?;
        // Values are shown whole: a description's new last sentence is what a reviewer
        // must not miss.
        for field in &changed.fields {
            writeln!(
                out,
                "    {}: {} -> {}",
                printable(&field.field),
                printable(&field.old.to_string()),
                printable(&field.new.to_string())
            )?;
        }
    }
    Ok(())
}
