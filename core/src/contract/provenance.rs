//! What a contract declares about where values come from: which arguments must have been
//! supplied by the user (or a trusted tool), whether the tool's own output can be trusted, and
//! what happens to a call whose values, or whose task, an untrusted source touched.
//!
//! The provenance gate ([`Registry::add_user_message`](crate::Registry::add_user_message)
//! tells the rest of the story) enforces it.

use serde::{Deserialize, Serialize};

/// The sources a value may come from for its argument to pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sources {
    /// The user's own messages, or a reviewer's edit (`#[from(user)]`).
    User,
    /// The user, or the output of a tool whose contract trusts it (`#[from(user, trusted)]`).
    UserOrTrusted,
}

/// What of a value must be found in a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Matching {
    /// The whole value: a string as a run of whole words, a number by its value, a list
    /// element by element.
    #[default]
    Whole,
    /// Every link, e-mail address, IBAN and phone number inside a text the model wrote
    /// (`#[from(..., entities)]`).
    Entities,
}

/// One argument's declared sources: `#[from(...)]` on a parameter or a field.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SourceRule {
    /// A JSON pointer into the arguments, `*` standing for every element of a list
    /// (`/recipient`, `/payees/*/iban`).
    pub pointer: String,
    /// Where its value may come from.
    pub from: Sources,
    /// Whether the whole value, or the entities inside it, must be found.
    pub matching: Matching,
}

/// How far the tool's output can be trusted as a source of later calls' values.
///
/// A tool's output is untrusted unless its contract says otherwise: text a third party can
/// write (an e-mail, a web page, a file, a transaction's note) may carry an attacker's words.
///
/// A trusted part vouches for the **whole values** it holds: a value passes when it is one of
/// them (a whole string, number, list element or map key), not when it is only a word or an
/// entity inside one. A trusted tool vouches for the name of a channel, not for the link a
/// member wrote into that name. [`Provenance::trusted_prose`] names the values whose words are
/// vouched for too.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "trusted", content = "fields")]
pub enum OutputTrust {
    /// No part of it: the default.
    #[default]
    None,
    /// All of it: data the user owns and no third party writes (`output = "trusted"`).
    All,
    /// Only the values at these JSON pointers into the output, `*` standing for every element
    /// of a list or value of a map (`trusted_output = ["/*/recipient"]`); the rest is not.
    Fields(Vec<String>),
}

/// What happens to a call with a value found only in untrusted sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUntrusted {
    /// It is refused with `untrusted_value`: the default.
    #[default]
    Refuse,
    /// It waits for a human, whose ticket shows where each value came from
    /// (`on_untrusted = "approve"`).
    Approve,
}

/// What happens to every call of the tool once its task read untrusted content
/// (`after_untrusted = "approve" | "refuse"`), whatever its arguments: for tools whose danger
/// is the call itself (a password change, an account closure).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AfterUntrusted {
    /// The call waits for a human.
    Approve,
    /// The call is refused with `untrusted_task`.
    Refuse,
}

/// Everything a contract declares about provenance.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Provenance {
    /// The arguments' declared sources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<SourceRule>,
    /// How far the tool's output can be trusted.
    #[serde(default, skip_serializing_if = "is_default")]
    pub output: OutputTrust,
    /// JSON pointers into the output (`*` standing for every element or member, `""` for all of
    /// it) whose text the user owns word for word, as prose: these values are trusted, and
    /// every word and entity inside them is vouched for, as the user's own words are
    /// (`trusted_prose = ["/notes"]`). For text no third party can write a word of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted_prose: Vec<String>,
    /// What happens to a call with a value found only in untrusted sources.
    #[serde(default, skip_serializing_if = "is_default")]
    pub on_untrusted: OnUntrusted,
    /// What happens to a call once its task read untrusted content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_untrusted: Option<AfterUntrusted>,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl Provenance {
    /// Whether the contract declares nothing about provenance: the gate has nothing to check,
    /// and the tool's output is an untrusted source.
    pub fn is_empty(&self) -> bool {
        *self == Provenance::default()
    }

    /// Whether a call of the tool is judged by the gate at all.
    pub(crate) fn checks_calls(&self) -> bool {
        !self.rules.is_empty() || self.after_untrusted.is_some()
    }
}

/// Where a source entered its task.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Origin {
    /// The request the task began with ([`CallContext::with_request`](crate::CallContext::with_request)).
    Request,
    /// A later message of the user ([`Registry::add_user_message`](crate::Registry::add_user_message)),
    /// numbered from 1 in the order the task's store holds them.
    UserMessage {
        /// Its number within the task.
        number: u64,
    },
    /// The arguments a reviewer typed in an edit of a waiting call.
    Edit {
        /// The reviewer.
        reviewer: String,
        /// The ticket the edit decided.
        ticket: String,
    },
    /// The output of a tool call (or the message of its error).
    ToolOutput {
        /// The tool.
        tool: String,
        /// The provider's id of the call.
        call_id: String,
        /// Whether the tool's contract trusts this part of its output
        /// ([`OutputTrust`](crate::OutputTrust)).
        trusted: bool,
        /// Whether this part is trusted prose, whose words are vouched for
        /// ([`Provenance::trusted_prose`]); a trusted part that is not vouches for its whole
        /// values only.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        prose: bool,
    },
}

impl Origin {
    /// Whether the user (or a reviewer, for them) supplied it.
    pub fn is_user(&self) -> bool {
        matches!(
            self,
            Origin::Request | Origin::UserMessage { .. } | Origin::Edit { .. }
        )
    }

    /// Whether it vouches for whole values only: a trusted tool's output that is not prose
    /// ([`Provenance::trusted_prose`]). The user's words, and trusted prose, vouch for every
    /// run of their words.
    pub fn vouches_for_whole_values_only(&self) -> bool {
        matches!(
            self,
            Origin::ToolOutput {
                trusted: true,
                prose: false,
                ..
            }
        )
    }

    /// Whether a value found in it may reach an argument declared `#[from(user, trusted)]`.
    pub fn is_trusted(&self) -> bool {
        match self {
            Origin::ToolOutput { trusted, .. } => *trusted,
            _ => true,
        }
    }
}

/// Where one value of a call was found: what a ticket shows its reviewer and an audit record
/// keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueSource {
    /// The value, as a JSON pointer into the arguments (`/recipient`, `/payees/1/iban`).
    pub path: String,
    /// For an entity inside a text: its kind (`link`, `e-mail address`, `IBAN`, `phone
    /// number`, `code`) and its number within the text, from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
    /// Where it was found; `None`: nowhere.
    pub found_in: Option<Origin>,
    /// Whether it was found only inside a longer value of a trusted output (a word of a name,
    /// a link in a title), which vouches for its whole values only: it is judged as a value
    /// from an untrusted source.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inside: bool,
    /// Whether the value may come from there.
    pub allowed: bool,
}

impl ValueSource {
    /// The value as a reviewer's list shows it: its pointer, and the entity found in it
    /// (`/subject (IBAN 1)`).
    pub fn label(&self) -> String {
        match &self.entity {
            Some(entity) => format!("{} ({entity})", self.path),
            None => self.path.clone(),
        }
    }

    /// Where the value was found, as a reviewer reads it.
    pub fn found_where(&self) -> String {
        match &self.found_in {
            None => "nowhere in the task".to_owned(),
            Some(origin) if self.inside => format!("only inside a longer value of {origin}"),
            Some(origin) => origin.to_string(),
        }
    }

    /// Whether a trusted tool's output vouches for the value (it is a whole value there).
    pub fn vouched_by_trusted_tool(&self) -> bool {
        !self.inside
            && matches!(
                self.found_in,
                Some(Origin::ToolOutput { trusted: true, .. })
            )
    }

    /// The value as a sentence names it: "the value of `/recipient`", "IBAN 1 in `/subject`".
    pub(crate) fn named(&self) -> String {
        match &self.entity {
            Some(entity) => format!("{entity} in `{}`", self.path),
            None => format!("the value of `{}`", self.path),
        }
    }
}
