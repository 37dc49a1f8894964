//! A task's sources, indexed so that a value is looked up, not searched for: a call's check
//! costs as much for a task that read fifty pages as for one that read one.

use std::collections::HashMap;

use foldhash::fast::RandomState;
use std::sync::{Arc, Mutex, PoisonError};

use super::entities::{entities, one_entity};
use super::store::{SourceRecord, TASK_TEXT_LIMIT};
use super::text::{compact, fold, leaves, normalize, numbers, whole_number, words};
use crate::context::CallContext;
use crate::contract::Origin;

/// The sources of one task (or of one call: its request and a reviewer's edit), indexed.
#[derive(Debug, Default)]
pub(crate) struct TaskSources {
    /// The number of the last source of the store read into it.
    pub(crate) seen: u64,
    sources: Vec<Indexed>,
    /// Every word, in lower case (its first [`KEY_BYTES`] bytes), and where it stands:
    /// (source, word). Hashed with a seed of this process's, so that words an attacker chose
    /// cannot be made to collide.
    words: HashMap<Box<str>, Vec<(u32, u32)>, RandomState>,
    /// For the first two bytes of every word's key, the lengths of those keys (bit `n`: `n`
    /// bytes): a value is looked up only at the lengths a word starting as it does has.
    lengths: HashMap<[u8; 2], u64, RandomState>,
    /// Every number, in canonical form, and the sources holding it.
    numbers: HashMap<Box<str>, Vec<u32>, RandomState>,
    /// Every entity (link, e-mail address, IBAN, phone or account number, code), by its key,
    /// and the sources holding it.
    entities: HashMap<Box<str>, Vec<u32>, RandomState>,
    /// Every whole value of a source of whole values (a trusted output), by its keys (see
    /// [`LeafKey`]), and the sources holding it.
    leaves: HashMap<Box<str>, Vec<u32>, RandomState>,
    /// The length in bytes of the longest key.
    longest_key: usize,
    text_bytes: usize,
    /// The first untrusted source the task read, if it read one.
    first_untrusted: Option<usize>,
}

/// A whole value as a source of whole values is looked up by: `v:` and its normalized text
/// without whitespace (case counts), `n:` and the number it writes if it is nothing but one,
/// `e:` and the key of the entity it is if it is one (an IBAN in groups, a link without its
/// scheme).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeafKey(String);

impl LeafKey {
    /// The value as text: `compact` is its normalized text without whitespace.
    pub(crate) fn text(compact: &str) -> LeafKey {
        LeafKey(format!("v:{compact}"))
    }

    /// The value as a number: `canonical` as [`number_value`](super::text::number_value) writes it.
    pub(crate) fn number(canonical: &str) -> LeafKey {
        LeafKey(format!("n:{canonical}"))
    }

    /// The value as an entity: `key` as [`Entity::key`](super::entities::Entity::key) writes it.
    pub(crate) fn entity(key: &str) -> LeafKey {
        LeafKey(format!("e:{key}"))
    }

    /// Every key of one whole value, `normal` its normalized text.
    fn all(normal: &str) -> Vec<LeafKey> {
        let compact = compact(normal);
        if compact.is_empty() {
            return Vec::new();
        }
        let mut keys = vec![LeafKey::text(&compact)];
        if let Some(number) = whole_number(&compact) {
            keys.push(LeafKey::number(&number));
        }
        if let Some(entity) = one_entity(normal) {
            keys.push(LeafKey::entity(&entity.key()));
        }
        keys
    }
}

/// The most bytes of a word that its key holds: a longer word is found by its first ones, then
/// read whole, so that a long value costs lookups of at most this many lengths.
const KEY_BYTES: usize = 63;

#[derive(Debug)]
struct Indexed {
    origin: Origin,
    /// Whether it vouches for whole values only (a trusted output that is not prose): a value
    /// only inside one of its values is not vouched for.
    whole_values_only: bool,
    /// Its text, normalized.
    text: Box<str>,
    /// Where each of its words starts and ends in `text`.
    words: Vec<(u32, u32)>,
}

impl Indexed {
    fn word(&self, at: usize) -> Option<&str> {
        let (start, end) = *self.words.get(at)?;
        Some(&self.text[start as usize..end as usize])
    }
}

/// A string value, as the index compares it.
pub(crate) struct Wanted<'a> {
    /// Its letters and digits.
    pub(crate) letters: &'a str,
    /// The same, in lower case.
    pub(crate) lower: &'a str,
    /// Its normalized text without whitespace: the punctuation between, before and after its
    /// letters and digits must be the source's too.
    pub(crate) compact: &'a str,
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
        let mut spans = Vec::new();
        for (position, (start, word)) in words(&normal).enumerate() {
            let mut key = fold(word);
            let mut cut = key.len().min(KEY_BYTES);
            while !key.is_char_boundary(cut) {
                cut -= 1;
            }
            key.truncate(cut);
            self.longest_key = self.longest_key.max(key.len());
            *self.lengths.entry(start_of(&key)).or_default() |= length_bit(key.len());
            let position = u32::try_from(position).unwrap_or(u32::MAX);
            self.words
                .entry(key.into_boxed_str())
                .or_default()
                .push((index, position));
            let end = start + word.len();
            spans.push((
                u32::try_from(start).unwrap_or(u32::MAX),
                u32::try_from(end).unwrap_or(u32::MAX),
            ));
        }
        for number in numbers(&normal) {
            let holders = self.numbers.entry(number.into_boxed_str()).or_default();
            if holders.last() != Some(&index) {
                holders.push(index);
            }
        }
        for entity in entities(&normal) {
            let holders = self
                .entities
                .entry(entity.key().into_boxed_str())
                .or_default();
            if holders.last() != Some(&index) {
                holders.push(index);
            }
        }
        let whole_values_only = record.origin.vouches_for_whole_values_only();
        if whole_values_only {
            for leaf in leaves(text) {
                for key in LeafKey::all(&normalize(leaf)) {
                    let holders = self.leaves.entry(key.0.into_boxed_str()).or_default();
                    if holders.last() != Some(&index) {
                        holders.push(index);
                    }
                }
            }
        }
        // A user message is numbered by its place in the store, whichever worker added it.
        let origin = match record.origin {
            Origin::UserMessage { .. } => Origin::UserMessage {
                number: self.user_messages() + 1,
            },
            ref origin => origin.clone(),
        };
        self.sources.push(Indexed {
            origin,
            whole_values_only,
            text: normal.into(),
            words: spans,
        });
    }

    /// The origin of source `index`.
    pub(crate) fn origin(&self, index: u32) -> &Origin {
        &self.sources[index as usize].origin
    }

    /// Whether source `index` vouches for a value found in it: a source of words does for
    /// any run of its words, a source of whole values only when the value is one of them.
    pub(crate) fn vouches(&self, index: u32, key: &LeafKey) -> bool {
        !self.sources[index as usize].whole_values_only
            || self
                .leaves
                .get(key.0.as_str())
                .is_some_and(|holders| holders.contains(&index))
    }

    /// How many later messages of the user the task holds.
    pub(crate) fn user_messages(&self) -> u64 {
        self.sources
            .iter()
            .filter(|source| matches!(source.origin, Origin::UserMessage { .. }))
            .count() as u64
    }

    /// Whether the task holds a message of the user whose normalized text is `normal`.
    pub(crate) fn holds_user_message(&self, normal: &str) -> bool {
        self.sources.iter().any(|source| {
            matches!(source.origin, Origin::UserMessage { .. }) && *source.text == *normal
        })
    }

    /// The first untrusted source the task read.
    pub(crate) fn first_untrusted(&self) -> Option<&Origin> {
        self.first_untrusted.map(|at| &self.sources[at].origin)
    }

    /// Calls `found` with every source holding `wanted` as a run of whole words, compared in
    /// lower case, with the same punctuation around and between them, and with whether the
    /// run holds it in its case too.
    pub(crate) fn holding_string(&self, wanted: &Wanted<'_>, found: &mut dyn FnMut(u32, bool)) {
        let lower = wanted.lower;
        let Some(&lengths) = self.lengths.get(&start_of(lower)) else {
            return;
        };
        for end in 1..=lower.len().min(self.longest_key) {
            if lengths & length_bit(end) == 0 || !lower.is_char_boundary(end) {
                continue;
            }
            let Some(starts) = self.words.get(&lower[..end]) else {
                continue;
            };
            for &(source, word) in starts {
                let indexed = &self.sources[source as usize];
                let start = indexed.words[word as usize].0;
                let held = |last: usize, fold_case| {
                    let span = (start, indexed.words[last].1);
                    same_punctuation(&indexed.text, span, wanted.compact, fold_case)
                };
                // In its case first: what holds there holds in any case.
                if run_end(indexed, word as usize, wanted.letters, strip_exact)
                    .is_some_and(|last| held(last, false))
                {
                    found(source, true);
                } else if run_end(indexed, word as usize, lower, strip_folded)
                    .is_some_and(|last| held(last, true))
                {
                    found(source, false);
                }
            }
        }
    }

    /// Calls `found` with every source whose text holds `text` as it is: for a value without
    /// letters or digits, which no word can find. A scan, for a rare value.
    pub(crate) fn holding_text(&self, text: &str, found: &mut dyn FnMut(u32)) {
        for (at, source) in self.sources.iter().enumerate() {
            if source.text.contains(text) {
                found(u32::try_from(at).unwrap_or(u32::MAX));
            }
        }
    }

    /// Calls `found` with every source holding the number `canonical`.
    pub(crate) fn holding_number(&self, canonical: &str, found: &mut dyn FnMut(u32)) {
        for &source in self.numbers.get(canonical).into_iter().flatten() {
            found(source);
        }
    }

    /// Calls `found` with every source holding the entity whose key is `key`.
    pub(crate) fn holding_entity(&self, key: &str, found: &mut dyn FnMut(u32)) {
        for &source in self.entities.get(key).into_iter().flatten() {
            found(source);
        }
    }
}

/// The last word of the run of `source`'s words from `first` on that spell `wanted`, each
/// taken off its front by `strip`, ending on a word's end.
fn run_end(
    source: &Indexed,
    first: usize,
    wanted: &str,
    strip: impl for<'w> Fn(&'w str, &str) -> Option<&'w str>,
) -> Option<usize> {
    let mut rest = wanted;
    let mut at = first;
    loop {
        rest = strip(rest, source.word(at)?)?;
        if rest.is_empty() {
            return Some(at);
        }
        at += 1;
    }
}

/// Whether the words of `text` over `span` have, whitespace aside, the punctuation of
/// `compact` between them, and `text` right before and after them the punctuation `compact`
/// begins and ends with; compared in lower case when `fold`.
fn same_punctuation(text: &str, (start, end): (u32, u32), compact: &str, fold_case: bool) -> bool {
    let (start, end) = (start as usize, end as usize);
    let lead = compact.find(char::is_alphanumeric).unwrap_or(compact.len());
    let trail = compact
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_alphanumeric())
        .map_or(lead, |(at, c)| at + c.len_utf8());
    let run = text[start..end].chars().filter(|c| !c.is_whitespace());
    let core = compact[lead..trail].chars();
    let same = if !fold_case {
        run.eq(core)
    } else if text[start..end].is_ascii() && core.as_str().is_ascii() {
        run.map(|c| c.to_ascii_lowercase())
            .eq(core.map(|c| c.to_ascii_lowercase()))
    } else {
        run.flat_map(char::to_lowercase)
            .eq(core.flat_map(char::to_lowercase))
    };
    same && text[..start].ends_with(&compact[..lead]) && text[end..].starts_with(&compact[trail..])
}

/// `rest` without `word` in front of it.
fn strip_exact<'r>(rest: &'r str, word: &str) -> Option<&'r str> {
    rest.strip_prefix(word)
}

/// `rest` without `word` folded in front of it (`rest` is folded already).
fn strip_folded<'r>(rest: &'r str, word: &str) -> Option<&'r str> {
    if word.is_ascii() {
        let head = rest.as_bytes().get(..word.len())?;
        let same = head
            .iter()
            .zip(word.bytes())
            .all(|(folded, byte)| *folded == byte.to_ascii_lowercase());
        return same.then(|| &rest[word.len()..]);
    }
    let mut chars = rest.char_indices();
    for wanted in word.chars().flat_map(char::to_lowercase) {
        match chars.next() {
            Some((_, c)) if c == wanted => {}
            _ => return None,
        }
    }
    Some(chars.next().map_or("", |(at, _)| &rest[at..]))
}

/// The first two bytes of a word (or its one byte and a zero).
fn start_of(word: &str) -> [u8; 2] {
    let bytes = word.as_bytes();
    [
        bytes.first().copied().unwrap_or(0),
        bytes.get(1).copied().unwrap_or(0),
    ]
}

/// The bit of a word's length in [`TaskSources::lengths`].
fn length_bit(length: usize) -> u64 {
    1 << length.min(63)
}

/// One task as a worker keeps it: the sources it read from the store, and the request its
/// calls bring, indexed once for all of them.
#[derive(Debug, Default)]
pub(crate) struct Task {
    pub(crate) read: TaskSources,
    request: Option<(Box<str>, TaskSources)>,
}

impl Task {
    /// The sources read from the store, and `request` indexed (again only when it changed).
    pub(crate) fn with_request(&mut self, request: Option<&str>) -> [&TaskSources; 2] {
        match request {
            Some(text)
                if self
                    .request
                    .as_ref()
                    .is_none_or(|(kept, _)| **kept != *text) =>
            {
                let mut indexed = TaskSources::default();
                indexed.add(&SourceRecord {
                    origin: Origin::Request,
                    text: text.to_owned(),
                });
                self.request = Some((Box::from(text), indexed));
            }
            Some(_) => {}
            None => self.request = None,
        }
        let request = self.request.as_ref().map(|(_, indexed)| indexed);
        [request.unwrap_or(&NOTHING), &self.read]
    }
}

/// No sources.
pub(crate) static NOTHING: std::sync::LazyLock<TaskSources> =
    std::sync::LazyLock::new(TaskSources::default);

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
    /// Each task (its tenant, empty for none, and its id), with when it was last used: so few
    /// that a scan finds one faster than a hash, and without copying the keys.
    entries: Vec<Cached>,
    clock: u64,
}

#[derive(Debug)]
struct Cached {
    tenant: String,
    task_id: String,
    used: u64,
    task: Arc<Mutex<Task>>,
}

impl SourceCache {
    /// The indexed sources of the task of `ctx`, as far as this worker read them.
    pub(crate) fn task(&self, ctx: &CallContext) -> Arc<Mutex<Task>> {
        let mut cache = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        cache.clock += 1;
        let now = cache.clock;
        let tenant = ctx.tenant().unwrap_or_default();
        let task_id = ctx.task_id();
        if let Some(cached) = cache
            .entries
            .iter_mut()
            .find(|cached| cached.task_id == task_id && cached.tenant == tenant)
        {
            cached.used = now;
            return Arc::clone(&cached.task);
        }
        if cache.entries.len() >= CACHED_TASKS
            && let Some(oldest) = (0..cache.entries.len()).min_by_key(|&at| cache.entries[at].used)
        {
            cache.entries.swap_remove(oldest);
        }
        let task = Arc::new(Mutex::new(Task::default()));
        cache.entries.push(Cached {
            tenant: tenant.to_owned(),
            task_id: task_id.to_owned(),
            used: now,
            task: Arc::clone(&task),
        });
        task
    }

    /// Lets go of every task whose id is `task`.
    pub(crate) fn forget(&self, task: &str) {
        let mut cache = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        cache.entries.retain(|cached| cached.task_id != task);
    }
}

/// Locks a task; a panic while it was held left its sources whole (each change is one `add`),
/// or at worst missing a source, which makes its values found nowhere.
pub(crate) fn lock(task: &Mutex<Task>) -> std::sync::MutexGuard<'_, Task> {
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
                    prose: false,
                },
                text: (*text).to_owned(),
            });
        }
        sources
    }

    /// The sources holding `value` in its case, or in any case with `any_case`.
    fn holders(sources: &TaskSources, value: &str, any_case: bool) -> Vec<u32> {
        let normal = normalize(value);
        let letters = letters_and_digits(&normal);
        let compact: String = normal.chars().filter(|c| !c.is_whitespace()).collect();
        let wanted = Wanted {
            letters: &letters,
            lower: &fold(&letters),
            compact: &compact,
        };
        let mut found = Vec::new();
        sources.holding_string(&wanted, &mut |at, in_case| {
            if in_case || any_case {
                found.push(at);
            }
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
        assert_eq!(holders(&sources, "Street 123, Cityville", false), [1]);
        assert_eq!(
            holders(&sources, "Street 123 Cityville", false),
            Vec::<u32>::new(),
            "the punctuation between the words is the source's too"
        );
        assert_eq!(
            holders(&sources, "Street.123, Cityville", false),
            Vec::<u32>::new()
        );
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
