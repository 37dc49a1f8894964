//! A task's sources, indexed so that a value is looked up, not searched for: a call's check
//! costs as much for a task that read fifty pages as for one that read one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::store::{Origin, SourceRecord, TASK_TEXT_LIMIT, TaskKey, task_key};
use super::text::{normalize, numbers, words};
use crate::CallContext;

/// The sources of one task (or of one call: its request and a reviewer's edit), indexed.
#[derive(Debug, Default)]
pub(crate) struct TaskSources {
    /// The number of the last source of the store read into it.
    pub(crate) seen: u64,
    sources: Vec<Indexed>,
    /// Every word, in lower case, and where it stands: (source, word).
    words: HashMap<Box<str>, Vec<(u32, u32)>>,
    /// Every number, in canonical form, and the sources holding it.
    numbers: HashMap<Box<str>, Vec<u32>>,
    /// The length in bytes of the longest word: no longer prefix of a value can start a run.
    longest_word: usize,
    text_bytes: usize,
    /// The first untrusted source the task read, if it read one.
    first_untrusted: Option<usize>,
}

#[derive(Debug)]
struct Indexed {
    origin: Origin,
    words: Vec<Box<str>>,
}

impl TaskSources {
    /// Adds one source. Its text counts against [`TASK_TEXT_LIMIT`] here too, so that a task
    /// whose store kept more is held to the same bound.
    pub(crate) fn add(&mut self, record: &SourceRecord) {
        let at = self.sources.len();
        let index = u32::try_from(at).unwrap_or(u32::MAX);
        if !record.origin.is_trusted() && self.first_untrusted.is_none() {
            self.first_untrusted = Some(at);
        }
        let room = TASK_TEXT_LIMIT.saturating_sub(self.text_bytes);
        let text = if record.text.len() <= room {
            record.text.as_str()
        } else {
            ""
        };
        self.text_bytes += text.len();
        let normal = normalize(text);
        let mut kept = Vec::new();
        for (position, (_, word)) in words(&normal).enumerate() {
            let lower = word.to_lowercase();
            self.longest_word = self.longest_word.max(lower.len());
            let position = u32::try_from(position).unwrap_or(u32::MAX);
            self.words
                .entry(lower.into_boxed_str())
                .or_default()
                .push((index, position));
            kept.push(Box::from(word));
        }
        for number in numbers(&normal) {
            let holders = self.numbers.entry(number.into_boxed_str()).or_default();
            if holders.last() != Some(&index) {
                holders.push(index);
            }
        }
        self.sources.push(Indexed {
            origin: record.origin.clone(),
            words: kept,
        });
    }

    /// The origin of source `index`.
    pub(crate) fn origin(&self, index: u32) -> &Origin {
        &self.sources[index as usize].origin
    }

    /// How many later messages of the user the task holds.
    pub(crate) fn user_messages(&self) -> u64 {
        self.sources
            .iter()
            .filter(|source| matches!(source.origin, Origin::UserMessage { .. }))
            .count() as u64
    }

    /// The first untrusted source the task read.
    pub(crate) fn first_untrusted(&self) -> Option<&Origin> {
        self.first_untrusted.map(|at| &self.sources[at].origin)
    }

    /// Calls `found` with every source holding the string whose letters and digits are
    /// `exact` (and `lower`, in lower case) as a run of whole words, compared in lower case
    /// when `fold`.
    pub(crate) fn holding_string(
        &self,
        exact: &str,
        lower: &str,
        fold: bool,
        found: &mut dyn FnMut(u32),
    ) {
        if lower.is_empty() {
            return;
        }
        let ends = lower
            .char_indices()
            .skip(1)
            .map(|(end, _)| end)
            .chain([lower.len()]);
        for end in ends {
            if end > self.longest_word {
                break;
            }
            let Some(starts) = self.words.get(&lower[..end]) else {
                continue;
            };
            for &(source, word) in starts {
                let wanted = if fold { lower } else { exact };
                if self.run_is(source, word, wanted, fold) {
                    found(source);
                }
            }
        }
    }

    /// Whether the words of `source` from `word` on spell `wanted` exactly, ending on a
    /// word's end.
    fn run_is(&self, source: u32, word: u32, wanted: &str, fold: bool) -> bool {
        let words = &self.sources[source as usize].words;
        let mut rest = wanted;
        for word in words.iter().skip(word as usize) {
            if rest.is_empty() {
                break;
            }
            let word = if fold {
                std::borrow::Cow::Owned(word.to_lowercase())
            } else {
                std::borrow::Cow::Borrowed(&**word)
            };
            match rest.strip_prefix(&*word) {
                Some(after) => rest = after,
                None => return false,
            }
        }
        rest.is_empty()
    }

    /// Calls `found` with every source holding the number `canonical`.
    pub(crate) fn holding_number(&self, canonical: &str, found: &mut dyn FnMut(u32)) {
        for &source in self.numbers.get(canonical).into_iter().flatten() {
            found(source);
        }
    }
}

/// The indexed sources of the tasks a worker served last, so that a call reads from the store
/// only the sources recorded since the task's previous call. At most [`CACHED_TASKS`] tasks
/// are kept; one let go is read again whole from the store when it comes back.
#[derive(Debug, Default)]
pub(crate) struct SourceCache {
    tasks: Mutex<Cache>,
}

/// Tasks whose indexed sources a worker keeps.
pub(crate) const CACHED_TASKS: usize = 64;

#[derive(Debug, Default)]
struct Cache {
    /// Each task, with when it was last used.
    entries: HashMap<TaskKey, (u64, Arc<Mutex<TaskSources>>)>,
    clock: u64,
}

impl SourceCache {
    /// The indexed sources of the task of `ctx`, as far as this worker read them.
    pub(crate) fn task(&self, ctx: &CallContext) -> Arc<Mutex<TaskSources>> {
        let mut cache = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        cache.clock += 1;
        let now = cache.clock;
        let key = task_key(ctx);
        if let Some((used, task)) = cache.entries.get_mut(&key) {
            *used = now;
            return Arc::clone(task);
        }
        if cache.entries.len() >= CACHED_TASKS
            && let Some(oldest) = cache
                .entries
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(key, _)| key.clone())
        {
            cache.entries.remove(&oldest);
        }
        let task = Arc::new(Mutex::new(TaskSources::default()));
        cache.entries.insert(key, (now, Arc::clone(&task)));
        task
    }

    /// Lets go of every task whose id is `task`.
    pub(crate) fn forget(&self, task: &str) {
        let mut cache = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        cache.entries.retain(|(_, id), _| id != task);
    }
}

/// Locks a task's sources; a panic while they were held left them whole (each change is one
/// `add`), or at worst missing a source, which makes its values found nowhere.
pub(crate) fn lock(task: &Mutex<TaskSources>) -> std::sync::MutexGuard<'_, TaskSources> {
    task.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::authorize::provenance::text::letters_and_digits;

    fn sources(texts: &[&str]) -> TaskSources {
        let mut sources = TaskSources::default();
        for (at, text) in texts.iter().enumerate() {
            sources.add(&SourceRecord {
                origin: Origin::ToolOutput {
                    tool: "t".into(),
                    call_id: format!("c{at}"),
                    trusted: false,
                },
                text: (*text).to_owned(),
            });
        }
        sources
    }

    fn holders(sources: &TaskSources, value: &str, fold: bool) -> Vec<u32> {
        let exact = letters_and_digits(&normalize(value));
        let mut found = Vec::new();
        sources.holding_string(&exact, &exact.to_lowercase(), fold, &mut |at| {
            found.push(at)
        });
        found.dedup();
        found
    }

    #[test]
    fn a_string_is_a_run_of_whole_words() {
        let sources = sources(&["Pay GB29NWBK6016 now", "Dalton Street 123, Cityville"]);
        assert_eq!(holders(&sources, "GB29 NWBK 6016", false), [0]);
        assert_eq!(holders(&sources, "NWBK6016", false), Vec::<u32>::new());
        assert_eq!(holders(&sources, "Dalton Street 123", false), [1]);
        assert_eq!(holders(&sources, "Street 123 Cityville", false), [1]);
        assert_eq!(holders(&sources, "dalton street", false), Vec::<u32>::new());
        assert_eq!(holders(&sources, "dalton street", true), [1]);
    }

    #[test]
    fn a_task_over_its_text_limit_keeps_later_sources_without_text() {
        let big = "x ".repeat(TASK_TEXT_LIMIT / 2);
        let sources = sources(&[&big, "secret GB29"]);
        assert_eq!(holders(&sources, "GB29", false), Vec::<u32>::new());
        assert!(sources.first_untrusted().is_some());
    }
}
