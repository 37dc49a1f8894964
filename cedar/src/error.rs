//! Why Cedar policies could not be loaded, checked or swapped in.

use std::path::PathBuf;

/// Why Cedar policies could not be loaded, checked or swapped in.
#[derive(Debug, thiserror::Error)]
pub enum CedarError {
    /// A file or directory of policies could not be read.
    #[error("cannot read {0}: {1}")]
    Read(PathBuf, #[source] std::io::Error),
    /// A directory holds no `.cedar` file.
    #[error("{0} holds no `.cedar` file")]
    NoPolicyFile(PathBuf),
    /// A source of policies is not Cedar (Cedar's own diagnostics).
    #[error("the policies of {0} do not parse: {1}")]
    Parse(String, String),
    /// Two policies have the same id.
    #[error("two policies have the id `{0}`: give one another `@id`")]
    DuplicateId(String),
    /// The policies do not fit the tools' schema (Cedar's own diagnostics, one per line).
    #[error("Cedar's validator refused them against the tools' schema:\n{0}")]
    Invalid(String),
    /// The tools could not be described in Cedar.
    #[error("the tools cannot be described in Cedar: {0}")]
    Schema(String),
    /// The policy already serves a registry with other tools.
    #[error(
        "this Cedar policy already serves a registry with other tools: give each registry a \
         `Cedar` of its own"
    )]
    OtherRegistry,
}
