//! A task's sources as the databases keep them, for the provenance gate
//! ([`ProvenanceStore`](portcullis_core::ProvenanceStore)): one row per source, numbered from
//! 1 within its task (tenant and task id), its origin as JSON in clear and its text sealed
//! with keys (a tool's output, a user's message), and one row per task holding the last
//! number given and the bytes of text kept, which a writer locks to take the next number.
//!
//! Bounded per task as the gate reads them: a source's text is cut to
//! [`SOURCE_TEXT_LIMIT`] bytes, and one recorded once the task keeps [`TASK_TEXT_LIMIT`]
//! bytes of text is kept without its text. Its values are then found nowhere (a call using
//! them is refused, never allowed), and the task still counts as having read it.

use std::fmt;

use portcullis_core::{
    CallContext, Origin, Rejection, SOURCE_TEXT_LIMIT, SourceRecord, TASK_TEXT_LIMIT,
    sources_unavailable,
};

use crate::seal::{Sealing, is_key_missing};
use crate::values::{Failure, place};

/// The task of `ctx` as the stores key it: its tenant (empty for none) and its id.
pub(crate) fn task_of(ctx: &CallContext) -> (&str, &str) {
    (ctx.tenant().unwrap_or_default(), ctx.task_id())
}

/// A source as a database keeps it.
pub(crate) struct StoredSource {
    /// Its origin, as JSON.
    pub(crate) origin: String,
    /// Its text as kept (see [`kept_text`]), sealed with keys.
    pub(crate) text: String,
    /// The bytes of text kept, before sealing.
    pub(crate) text_bytes: i64,
}

impl StoredSource {
    /// `source` as number `number` of the task (`tenant`, `task`), which keeps `kept_bytes`
    /// bytes of text before it.
    pub(crate) fn of(
        sealing: &Sealing,
        (tenant, task): (&str, &str),
        number: i64,
        source: &SourceRecord,
        kept_bytes: i64,
    ) -> Result<Self, serde_json::Error> {
        let origin = serde_json::to_string(&source.origin)?;
        let text = kept_text(&source.text, kept_bytes);
        Ok(StoredSource {
            text: sealing.write(&text_place(tenant, task, number, &origin)?, text.to_owned()),
            text_bytes: i64::try_from(text.len()).unwrap_or(i64::MAX),
            origin,
        })
    }
}

impl StoredSource {
    /// The source that stands for the sources of a task the store ended, which read the
    /// untrusted source of `origin` first: that origin, without its text, as number `number`.
    pub(crate) fn standing_for(
        sealing: &Sealing,
        task: (&str, &str),
        number: i64,
        origin: &Origin,
    ) -> Result<Self, serde_json::Error> {
        let source = SourceRecord {
            origin: origin.clone(),
            text: String::new(),
        };
        StoredSource::of(sealing, task, number, &source, 0)
    }
}

/// The text of a source that a task keeping `kept_bytes` bytes of text keeps: cut to
/// [`SOURCE_TEXT_LIMIT`] bytes on a character boundary, and empty when it would take the
/// task past [`TASK_TEXT_LIMIT`]. The gate's index keeps a task's text by the same rule, so
/// that what a store kept and what a worker indexes agree.
fn kept_text(text: &str, kept_bytes: i64) -> &str {
    let mut end = text.len().min(SOURCE_TEXT_LIMIT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let room = TASK_TEXT_LIMIT.saturating_sub(usize::try_from(kept_bytes).unwrap_or(usize::MAX));
    if end <= room { &text[..end] } else { "" }
}

/// Where a source's text is stored, as sealing binds it: its task, its number and its
/// origin, so that a sealed text moved to another source, or under a changed origin (an
/// untrusted output made to read as trusted), does not open.
fn text_place(tenant: &str, task: &str, number: i64, origin: &str) -> serde_json::Result<String> {
    // As JSON, so that no two tasks' places read alike whatever their names hold.
    let row = serde_json::to_string(&(tenant, task, number, origin))?;
    Ok(place("provenance_sources.text", &row))
}

/// The sources stored for the task (`tenant`, `task`) after number `after`, read back from
/// their rows (number, origin, text) in the order of their numbers, where the task's sources
/// kept begin at number `first` (1 for a task the store never ended; the record standing for
/// the sources of an earlier life, or the first source of a new one, for a task it did). The
/// numbers must follow `after` (or `first`, for a reader of an earlier life) one by one: a
/// missing number is a row removed around the store, and a reader that skipped it could lose
/// the untrusted source the task read.
pub(crate) fn read_sources(
    sealing: &Sealing,
    (tenant, task): (&str, &str),
    after: u64,
    first: i64,
    rows: Vec<(i64, String, String)>,
) -> Result<Vec<(u64, SourceRecord)>, Rejection> {
    let mut expected = after.max(u64::try_from(first.saturating_sub(1)).unwrap_or(0));
    let mut sources = Vec::with_capacity(rows.len());
    for (number, origin, text) in rows {
        expected = expected.saturating_add(1);
        let unreadable = |error: &dyn fmt::Display| {
            sources_unavailable(format_args!(
                "source {number} of task `{task}` (tenant `{tenant}`) could not be read: {error}"
            ))
        };
        if u64::try_from(number).ok() != Some(expected) {
            return Err(unreadable(&format_args!(
                "source {expected} is missing: a row was removed outside the store"
            )));
        }
        let read = || -> Result<SourceRecord, Failure> {
            let text = sealing.read(&text_place(tenant, task, number, &origin)?, &text)?;
            Ok(SourceRecord {
                origin: serde_json::from_str::<Origin>(&origin)?,
                text: text.into_owned(),
            })
        };
        match read() {
            Ok(source) => sources.push((expected, source)),
            Err(error) if is_key_missing(error.as_ref()) => {
                return Err(unreadable(&format_args!(
                    "{error}: open the store with its seal keys (SealKeys)"
                )));
            }
            Err(error) => return Err(unreadable(&error)),
        }
    }
    Ok(sources)
}

/// The refusal of a source that could not be recorded: the output is withheld.
pub(crate) fn unrecorded(task: &str, error: &dyn fmt::Display) -> Rejection {
    sources_unavailable(format_args!(
        "a source of task `{task}` could not be recorded: {error}"
    ))
}

/// The refusal of a task's sources that could not be read.
pub(crate) fn unreadable(task: &str, error: &dyn fmt::Display) -> Rejection {
    sources_unavailable(format_args!(
        "the sources of task `{task}` could not be read: {error}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_on_a_character_and_kept_within_the_tasks_bound() {
        let long = format!("{}é", "a".repeat(SOURCE_TEXT_LIMIT - 1));
        assert_eq!(kept_text(&long, 0), "a".repeat(SOURCE_TEXT_LIMIT - 1));
        let full = i64::try_from(TASK_TEXT_LIMIT).unwrap();
        assert_eq!(kept_text("GB29", full - 4), "GB29");
        assert_eq!(kept_text("GB29", full - 3), "");
        assert_eq!(kept_text("GB29", i64::MAX), "");
        assert_eq!(kept_text("GB29", -1), "");
    }
}
