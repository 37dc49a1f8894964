//! A Cedar policy set as a policy team writes it: loaded from text or from a directory of
//! `.cedar` files, each policy named, the whole set named by the digest of its text.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use cedar_policy::{Policy, PolicyId, PolicySet};
use sha2::{Digest, Sha256};

use crate::error::CedarError;

/// A set of Cedar policies, parsed, each with an id, and not yet checked against any tools: a
/// [`Cedar`](crate::Cedar) policy checks it against the registry's tools when the registry is
/// built, or when it is swapped in.
///
/// A policy's id is its `@id("...")` annotation; without one, `policy0`, `policy1`, ... in the
/// order of the text, or, from a directory, the file's name without `.cedar` and the policy's
/// place in the file (`refunds.0`). The audit records these ids: give the policies that matter
/// an `@id`.
///
/// ```
/// use portcullis_cedar::CedarPolicies;
///
/// let policies = CedarPolicies::from_text(r#"
///     @id("finance_pays_out")
///     permit(principal in Portcullis::Role::"finance",
///            action == Portcullis::Action::"schedule_payout", resource);
/// "#)?;
/// assert_eq!(policies.ids().collect::<Vec<_>>(), ["finance_pays_out"]);
/// assert_eq!(policies.version().len(), 32);
/// # Ok::<(), portcullis_cedar::CedarError>(())
/// ```
#[derive(Debug, Clone)]
pub struct CedarPolicies {
    pub(crate) set: PolicySet,
    version: String,
}

impl CedarPolicies {
    /// The policies in `text`.
    pub fn from_text(text: &str) -> Result<Self, CedarError> {
        let mut named = BTreeMap::new();
        add_source(&mut named, "text", text, |index| format!("policy{index}"))?;
        Self::from_named(named)
    }

    /// The policies in every `.cedar` file of `directory` (not of its subdirectories), read in
    /// the order of their names. A directory with no `.cedar` file is refused: an empty set
    /// decides nothing, and is more likely a wrong path than a wish.
    pub fn from_dir(directory: impl AsRef<Path>) -> Result<Self, CedarError> {
        let directory = directory.as_ref();
        let unreadable = |error| CedarError::Read(directory.to_owned(), error);
        let mut files: Vec<PathBuf> = std::fs::read_dir(directory)
            .map_err(unreadable)?
            .map(|entry| entry.map(|entry| entry.path()))
            .collect::<Result<_, _>>()
            .map_err(unreadable)?;
        files.retain(|path| {
            path.extension()
                .is_some_and(|extension| extension == "cedar")
        });
        files.sort();
        if files.is_empty() {
            return Err(CedarError::NoPolicyFile(directory.to_owned()));
        }
        let mut named = BTreeMap::new();
        for file in &files {
            let text = std::fs::read_to_string(file)
                .map_err(|error| CedarError::Read(file.clone(), error))?;
            let stem = file
                .file_stem()
                .map_or_else(String::new, |stem| stem.to_string_lossy().into_owned());
            add_source(&mut named, &file.display().to_string(), &text, |index| {
                format!("{stem}.{index}")
            })?;
        }
        Self::from_named(named)
    }

    fn from_named(named: BTreeMap<String, Policy>) -> Result<Self, CedarError> {
        let mut digest = Sha256::new();
        let mut set = PolicySet::new();
        for (id, policy) in named {
            digest.update(id.as_bytes());
            digest.update([0]);
            digest.update(policy.to_string().as_bytes());
            digest.update([0]);
            set.add(policy)
                .map_err(|error| CedarError::Parse(id.clone(), error.to_string()))?;
        }
        let mut version = String::with_capacity(32);
        for byte in &digest.finalize()[..16] {
            let _ = write!(version, "{byte:02x}");
        }
        Ok(CedarPolicies { set, version })
    }

    /// The set's version: the first 32 hexadecimal digits (128 bits) of the SHA-256 of its
    /// policies' ids and texts, so that every worker loading the same policies names the same
    /// version, and the audit record of each call names the version that decided it.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The policies' ids, in order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.set
            .policies()
            .map(|policy| AsRef::<str>::as_ref(policy.id()))
    }
}

/// Parses the policies of one source into `named`, each under its `@id` or the id `fallback`
/// gives its place.
fn add_source(
    named: &mut BTreeMap<String, Policy>,
    source: &str,
    text: &str,
    fallback: impl Fn(usize) -> String,
) -> Result<(), CedarError> {
    let parsed = PolicySet::from_str(text)
        .map_err(|error| CedarError::Parse(source.to_owned(), diagnostics(&error)))?;
    if let Some(template) = parsed.templates().next() {
        return Err(CedarError::Parse(
            source.to_owned(),
            format!(
                "`{}` is a template (it has a `?principal` or `?resource` slot): link it into \
                 policies before loading them",
                template.id()
            ),
        ));
    }
    // The parser names the policies `policy0`, `policy1`, ... in the order of the text.
    let mut policies: Vec<&Policy> = parsed.policies().collect();
    policies.sort_by_key(|policy| {
        AsRef::<str>::as_ref(policy.id())
            .strip_prefix("policy")
            .and_then(|index| index.parse::<usize>().ok())
    });
    for (index, policy) in policies.into_iter().enumerate() {
        let id = policy
            .annotation("id")
            .map_or_else(|| fallback(index), str::to_owned);
        if named.contains_key(&id) {
            return Err(CedarError::DuplicateId(id));
        }
        named.insert(id.clone(), policy.new_id(PolicyId::new(id)));
    }
    Ok(())
}

/// Cedar's own diagnostics, each with its help, one per line.
pub(crate) fn diagnostics(error: &dyn miette::Diagnostic) -> String {
    let mut text = error.to_string();
    if let Some(related) = error.related() {
        for diagnostic in related {
            let _ = write!(text, "\n  {diagnostic}");
            if let Some(help) = diagnostic.help() {
                let _ = write!(text, " ({help})");
            }
        }
    }
    if let Some(help) = error.help() {
        let _ = write!(text, " ({help})");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_from_annotations_or_places_and_the_version_from_the_text() {
        let text = r#"
            permit(principal, action, resource);
            @id("no_payouts")
            forbid(principal, action == Portcullis::Action::"schedule_payout", resource);
        "#;
        let policies = CedarPolicies::from_text(text).unwrap();
        assert_eq!(
            policies.ids().collect::<Vec<_>>(),
            ["no_payouts", "policy0"]
        );
        let again = CedarPolicies::from_text(text).unwrap();
        assert_eq!(policies.version(), again.version());
        let other = CedarPolicies::from_text("permit(principal, action, resource);").unwrap();
        assert_ne!(policies.version(), other.version());
    }

    #[test]
    fn a_directory_names_policies_by_file_and_refuses_duplicates() {
        let directory = tempfile::tempdir().unwrap();
        std::fs::write(
            directory.path().join("refunds.cedar"),
            "permit(principal, action, resource);\nforbid(principal, action, resource) when { context.risk == \"critical\" };",
        )
        .unwrap();
        std::fs::write(directory.path().join("notes.txt"), "not a policy").unwrap();
        let policies = CedarPolicies::from_dir(directory.path()).unwrap();
        assert_eq!(
            policies.ids().collect::<Vec<_>>(),
            ["refunds.0", "refunds.1"]
        );
        std::fs::write(
            directory.path().join("again.cedar"),
            "@id(\"refunds.0\") permit(principal, action, resource);",
        )
        .unwrap();
        assert!(matches!(
            CedarPolicies::from_dir(directory.path()),
            Err(CedarError::DuplicateId(id)) if id == "refunds.0"
        ));
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            CedarPolicies::from_dir(empty.path()),
            Err(CedarError::NoPolicyFile(_))
        ));
    }

    #[test]
    fn broken_text_and_templates_are_refused_with_cedars_words() {
        let broken = CedarPolicies::from_text("permit(principal, action resource);").unwrap_err();
        assert!(
            matches!(&broken, CedarError::Parse(source, _) if source == "text"),
            "{broken}"
        );
        let template =
            CedarPolicies::from_text("permit(principal == ?principal, action, resource);")
                .unwrap_err();
        assert!(template.to_string().contains("template"), "{template}");
    }
}
