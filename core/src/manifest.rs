//! The contract manifest: every tool's contract as one stable, sorted JSON document, to commit
//! beside the code as a lock file, so that a change of risk, role or approval shows up in
//! review as a diff rather than slipping in with a refactor.
//!
//! ```no_run
//! # fn registry() -> portcullis_core::Registry { unimplemented!() }
//! // tests/contracts.rs
//! #[test]
//! fn contracts_match_the_lock_file() {
//!     portcullis_core::manifest::assert_matches_lock(&registry(), "portcullis.lock.json");
//! }
//! ```
//!
//! Run the test with `PORTCULLIS_UPDATE_LOCK=1` to write the lock file after a deliberate
//! change.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::contract::entry;
use crate::json::sorted;
use crate::registry::Registry;

/// The environment variable that makes [`compare_with_lock`] write the lock file instead of
/// comparing with it.
pub const UPDATE_VARIABLE: &str = "PORTCULLIS_UPDATE_LOCK";

/// The version of the manifest's layout, written into it.
const FORMAT: u64 = 1;

/// Lines of unchanged text shown around each change.
const CONTEXT_LINES: usize = 2;

impl Registry {
    /// Every tool's contract as a stable, sorted JSON document: tools by name, roles and
    /// environments sorted, the description the model reads, the arguments whose values come
    /// from a function (`one_of`), and the argument and output schemas as SHA-256s of their
    /// canonical JSON.
    ///
    /// ```
    /// use portcullis_core::Registry;
    ///
    /// let manifest = Registry::builder().build().unwrap().manifest();
    /// assert_eq!(manifest["tools"], serde_json::json!([]));
    /// ```
    pub fn manifest(&self) -> Value {
        let tools: Vec<Value> = self.contracts().map(entry).collect();
        // Members in key order whatever map serde_json keeps, so that the manifest is written
        // the same by every build.
        sorted(&json!({ "portcullis_manifest": FORMAT, "tools": tools }))
    }
}

/// Why a registry's manifest does not match its lock file.
#[derive(Debug)]
#[non_exhaustive]
pub enum LockMismatch {
    /// There is no lock file yet.
    Missing(PathBuf),
    /// The contracts changed; the diff, old lines with `-`, new lines with `+`.
    Changed {
        /// The lock file.
        path: PathBuf,
        /// A readable line diff of the lock file against the current manifest.
        diff: String,
    },
    /// The lock file could not be read or written.
    Io(PathBuf, std::io::Error),
}

impl fmt::Display for LockMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockMismatch::Missing(path) => write!(
                f,
                "there is no contract lock file at {}: run the test with \
                 {UPDATE_VARIABLE}=1 to write it, and commit it",
                path.display()
            ),
            LockMismatch::Changed { path, diff } => write!(
                f,
                "the tool contracts changed since {} was written:\n{diff}\nIf the change is \
                 intended, run the test with {UPDATE_VARIABLE}=1 and commit the lock file, so \
                 that reviewers see it",
                path.display()
            ),
            LockMismatch::Io(path, error) => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for LockMismatch {}

/// Compares `registry`'s manifest with the lock file at `path`, or writes the lock file when
/// the environment variable [`UPDATE_VARIABLE`] is `1`.
pub fn compare_with_lock(registry: &Registry, path: impl AsRef<Path>) -> Result<(), LockMismatch> {
    let path = path.as_ref();
    let current = lock_text(&registry.manifest());
    if std::env::var(UPDATE_VARIABLE).is_ok_and(|value| value == "1") {
        return std::fs::write(path, current)
            .map_err(|error| LockMismatch::Io(path.to_owned(), error));
    }
    let locked = match std::fs::read_to_string(path) {
        Ok(locked) => locked,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(LockMismatch::Missing(path.to_owned()));
        }
        Err(error) => return Err(LockMismatch::Io(path.to_owned(), error)),
    };
    // Line endings may have been changed by a checkout; the contracts have not.
    if locked.replace("\r\n", "\n") == current {
        return Ok(());
    }
    Err(LockMismatch::Changed {
        path: path.to_owned(),
        diff: line_diff(&locked, &current),
    })
}

/// [`compare_with_lock`] for a test: panics with the readable diff when the contracts
/// changed.
#[track_caller]
pub fn assert_matches_lock(registry: &Registry, path: impl AsRef<Path>) {
    if let Err(mismatch) = compare_with_lock(registry, path) {
        panic!("{mismatch}");
    }
}

/// What changed between two manifests, tool by tool and field by field.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ManifestDiff {
    /// The tools only the new manifest has.
    pub added: Vec<String>,
    /// The tools only the old manifest has.
    pub removed: Vec<String>,
    /// The tools in both whose contract changed.
    pub changed: Vec<ChangedTool>,
}

impl ManifestDiff {
    /// Whether the manifests are equal.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// A tool whose contract changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ChangedTool {
    /// The tool.
    pub tool: String,
    /// Its contract fields that changed, by name.
    pub fields: Vec<ChangedField>,
}

/// One contract field, before and after; `null` where a manifest lacks it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ChangedField {
    /// The field, such as `risk` or `roles`.
    pub field: String,
    /// Its old value.
    pub old: Value,
    /// Its new value.
    pub new: Value,
}

/// A manifest read back (a document of [`Registry::manifest`], or a lock file), to compare
/// with another.
///
/// ```
/// use portcullis_core::manifest::Manifest;
/// use serde_json::json;
///
/// let old = json!({"portcullis_manifest": 1, "tools": [{"name": "pay", "risk": "high"}]});
/// let new = json!({"portcullis_manifest": 1, "tools": [{"name": "pay", "risk": "critical"}]});
/// let changes = Manifest::read(&old).unwrap().diff(&Manifest::read(&new).unwrap());
/// assert_eq!(changes.changed[0].fields[0].field, "risk");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    tools: BTreeMap<String, Map<String, Value>>,
}

impl Manifest {
    /// Reads `document`; refuses one that is not a manifest of this layout, saying why.
    pub fn read(document: &Value) -> Result<Self, String> {
        match document.get("portcullis_manifest").and_then(Value::as_u64) {
            Some(FORMAT) => {}
            Some(other) => {
                return Err(format!(
                    "a manifest of layout {other}, which this portcullis does not read (it \
                     reads {FORMAT}): use the portcullis that wrote it"
                ));
            }
            None => {
                return Err(
                    "not a contract manifest: it has no `portcullis_manifest` version; \
                            write it with `Registry::manifest()`"
                        .to_owned(),
                );
            }
        }
        let entries = document
            .get("tools")
            .and_then(Value::as_array)
            .ok_or("the manifest has no `tools` array")?;
        let mut tools = BTreeMap::new();
        for entry in entries {
            let fields = entry
                .as_object()
                .ok_or("an entry of `tools` is not an object")?;
            let name = fields
                .get("name")
                .and_then(Value::as_str)
                .ok_or("an entry of `tools` has no `name`")?;
            if tools.insert(name.to_owned(), fields.clone()).is_some() {
                return Err(format!("the tool `{name}` is listed twice"));
            }
        }
        Ok(Manifest { tools })
    }

    /// What changed from this manifest to `new`: the tools added, removed and changed, and for
    /// each changed tool, the fields that changed.
    pub fn diff(&self, new: &Manifest) -> ManifestDiff {
        let (old, new) = (&self.tools, &new.tools);
        let mut changes = ManifestDiff {
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
            changed: Vec::new(),
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
                changes.changed.push(ChangedTool {
                    tool: name.clone(),
                    fields,
                });
            }
        }
        changes
    }
}

/// The manifest as its lock file holds it: pretty JSON, its members in key order as
/// [`Registry::manifest`] writes them.
fn lock_text(manifest: &Value) -> String {
    let mut text = serde_json::to_string_pretty(manifest).unwrap_or_default();
    text.push('\n');
    text
}

/// The lines of `old` and `new` that differ, with a little context, from their longest
/// common subsequence.
fn line_diff(old: &str, new: &str) -> String {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    // common[i][j]: the length of the longest common subsequence of old[i..] and new[j..].
    let mut common = vec![vec![0usize; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            common[i][j] = if old[i] == new[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let mut lines: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            lines.push((' ', old[i]));
            i += 1;
            j += 1;
        } else if i < old.len() && (j == new.len() || common[i + 1][j] >= common[i][j + 1]) {
            lines.push(('-', old[i]));
            i += 1;
        } else {
            lines.push(('+', new[j]));
            j += 1;
        }
    }
    let changed: Vec<usize> = (0..lines.len())
        .filter(|&index| lines[index].0 != ' ')
        .collect();
    let mut diff = String::new();
    let mut last_shown: Option<usize> = None;
    for (index, (mark, line)) in lines.iter().enumerate() {
        let near_change = changed
            .iter()
            .any(|&change| change.abs_diff(index) <= CONTEXT_LINES);
        if !near_change {
            continue;
        }
        if last_shown.is_some_and(|last| index > last + 1) {
            diff.push_str("  ...\n");
        }
        diff.push_str(&format!("{mark} {line}\n"));
        last_shown = Some(index);
    }
    diff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_names_tools_and_fields() {
        let manifest = |tools: Value| json!({"portcullis_manifest": 1, "tools": tools});
        let old = manifest(json!([
            {"name": "pay", "risk": "high", "roles": ["finance"]},
            {"name": "gone", "risk": "low"},
        ]));
        let new = manifest(json!([
            {"name": "pay", "risk": "critical", "roles": ["finance"], "cost": 2},
            {"name": "fresh", "risk": "low"},
        ]));
        let read = |document: &Value| Manifest::read(document);
        let (old, new) = (read(&old).unwrap(), read(&new).unwrap());
        let changes = old.diff(&new);
        assert_eq!(
            (changes.added, changes.removed),
            (vec!["fresh".to_owned()], vec!["gone".to_owned()])
        );
        let fields: Vec<&str> = changes.changed[0]
            .fields
            .iter()
            .map(|f| f.field.as_str())
            .collect();
        assert_eq!(fields, ["cost", "risk"]);
        assert!(old.diff(&old).is_empty());
        let twice = manifest(json!([{"name": "pay"}, {"name": "pay"}]));
        assert_eq!(read(&twice).unwrap_err(), "the tool `pay` is listed twice");
        assert!(
            read(&json!({"tools": []}))
                .unwrap_err()
                .contains("not a contract manifest")
        );
    }

    #[test]
    fn the_diff_shows_changed_lines_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\n";
        let new = "a\nb\nc\nD\ne\nf\ng\n";
        assert_eq!(line_diff(old, new), "  b\n  c\n- d\n+ D\n  e\n  f\n");
    }
}
