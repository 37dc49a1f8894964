//! `portcullis manifest diff`: what changed between two contract manifests, tool by tool and
//! field by field, for the reviewer of a change that touches risk, roles, approval or what the
//! model reads.
//!
//! Core compares a live registry with its lock file (`manifest::compare_with_lock`, a line
//! diff); it has no comparison of two manifest documents, so this one reads the manifest's
//! layout: `{"portcullis_manifest": 1, "tools": [{"name": ..., ...}, ...]}`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::table::printable;
use crate::{CliError, write_json};

/// The manifest layout version this command reads.
const FORMAT: u64 = 1;

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

/// The differences between two manifests.
#[derive(Debug, Default, Serialize)]
struct Diff {
    equal: bool,
    added: Vec<String>,
    removed: Vec<String>,
    changed: Vec<ChangedTool>,
}

/// A tool in both manifests whose contract changed.
#[derive(Debug, Serialize)]
struct ChangedTool {
    tool: String,
    fields: Vec<ChangedField>,
}

/// One contract field, before and after; `null` where a manifest lacks it.
#[derive(Debug, Serialize)]
struct ChangedField {
    field: String,
    old: Value,
    new: Value,
}

/// Runs one manifest command.
pub fn run(command: Command, out: &mut dyn Write) -> Result<(), CliError> {
    let Command::Diff { old, new, json } = command;
    let diff = compare(&read(&old)?, &read(&new)?);
    if json {
        let value = serde_json::to_value(&diff).map_err(std::io::Error::from)?;
        write_json(out, &value)?;
    } else {
        write_text(&diff, out)?;
    }
    if diff.equal {
        Ok(())
    } else {
        Err(CliError::ManifestsDiffer)
    }
}

type Tools = BTreeMap<String, Map<String, Value>>;

/// The manifest at `path`, its tools by name.
fn read(path: &Path) -> Result<Tools, CliError> {
    let bad = |why: &str| CliError::BadFile(path.to_owned(), why.to_owned());
    let text = std::fs::read_to_string(path)
        .map_err(|error| CliError::ReadFile(path.to_owned(), error))?;
    let document: Value = serde_json::from_str(&text)
        .map_err(|error| bad(&format!("not JSON ({error}); expected a contract manifest")))?;
    match document.get("portcullis_manifest").and_then(Value::as_u64) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(bad(&format!(
                "a manifest of layout {other}, which this portcullis does not read (it reads \
                 {FORMAT}): use the portcullis that wrote it"
            )));
        }
        None => {
            return Err(bad(
                "not a contract manifest: it has no `portcullis_manifest` version; write it \
                 with `Registry::manifest()`",
            ));
        }
    }
    let entries = document
        .get("tools")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("the manifest has no `tools` array"))?;
    let mut tools = Tools::new();
    for entry in entries {
        let fields = entry
            .as_object()
            .ok_or_else(|| bad("an entry of `tools` is not an object"))?;
        let name = fields
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("an entry of `tools` has no `name`"))?;
        if tools.insert(name.to_owned(), fields.clone()).is_some() {
            return Err(bad(&format!("the tool `{name}` is listed twice")));
        }
    }
    Ok(tools)
}

fn compare(old: &Tools, new: &Tools) -> Diff {
    let mut diff = Diff {
        added: new
            .keys()
            .filter(|name| !old.contains_key(*name))
            .cloned()
            .collect(),
        removed: old
            .keys()
            .filter(|name| !new.contains_key(*name))
            .cloned()
            .collect(),
        ..Diff::default()
    };
    for (name, old_fields) in old {
        let Some(new_fields) = new.get(name) else {
            continue;
        };
        let mut names: Vec<&String> = old_fields.keys().chain(new_fields.keys()).collect();
        names.sort();
        names.dedup();
        let fields: Vec<ChangedField> = names
            .into_iter()
            .filter_map(|field| {
                let (old, new) = (old_fields.get(field), new_fields.get(field));
                (old != new).then(|| ChangedField {
                    field: field.clone(),
                    old: old.cloned().unwrap_or(Value::Null),
                    new: new.cloned().unwrap_or(Value::Null),
                })
            })
            .collect();
        if !fields.is_empty() {
            diff.changed.push(ChangedTool {
                tool: name.clone(),
                fields,
            });
        }
    }
    diff.equal = diff.added.is_empty() && diff.removed.is_empty() && diff.changed.is_empty();
    diff
}

fn write_text(diff: &Diff, out: &mut dyn Write) -> Result<(), CliError> {
    if diff.equal {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools(entries: Value) -> Tools {
        entries
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| {
                let fields = entry.as_object().unwrap().clone();
                (fields["name"].as_str().unwrap().to_owned(), fields)
            })
            .collect()
    }

    #[test]
    fn a_diff_names_tools_and_fields() {
        let old = tools(json!([
            {"name": "pay", "risk": "high", "roles": ["finance"]},
            {"name": "gone", "risk": "low"},
        ]));
        let new = tools(json!([
            {"name": "pay", "risk": "critical", "roles": ["finance"], "cost": 2},
            {"name": "fresh", "risk": "low"},
        ]));
        let diff = compare(&old, &new);
        assert!(!diff.equal);
        assert_eq!(
            (diff.added, diff.removed),
            (vec!["fresh".to_owned()], vec!["gone".to_owned()])
        );
        let fields: Vec<&str> = diff.changed[0]
            .fields
            .iter()
            .map(|f| f.field.as_str())
            .collect();
        assert_eq!(fields, ["cost", "risk"]);
        assert!(compare(&old, &old).equal);
    }
}
