//! The entities inside a text the model wrote (`#[from(..., entities)]`): what an injected
//! instruction needs to smuggle into a message or a page to do harm somewhere else.
//!
//! - **Links**, with or without a scheme (`https://x.example/a`, `x.example/a`), found by
//!   [`linkify`]: trailing punctuation and enclosing brackets are not part of a link. A link
//!   is compared without its scheme, so `x.example/a` is found in `https://x.example/a`.
//! - **E-mail addresses**, found by [`linkify`].
//! - **IBANs**: two letters, two digits, then 11 to 30 letters and digits, written whole or
//!   in groups of four separated by spaces, dots, dashes or slashes. The checksum is not
//!   verified: a made-up account number is as dangerous as a real one.
//! - **Phone and account numbers**: 10 or more digits, with an optional leading `+` and
//!   spaces, dots, dashes, slashes and brackets between them (shorter runs are amounts and
//!   dates): card numbers, bank accounts, phones.
//! - **Codes**: any other word of 16 or more letters and digits that holds both: wallet
//!   addresses, keys, tracking codes.
//!
//! An entity is found in a source only as an entity the source holds, compared by its key:
//! a link by its host in lower case and its path as written, its scheme aside; an e-mail
//! address in lower case; an IBAN by its letters and digits in upper case; a number by its
//! digits; a code as written. So a link is not spelled out of the user's prose, and another
//! case of a link's path is another link.

use std::ops::Range;
use std::sync::OnceLock;

use linkify::{LinkFinder, LinkKind};
use regex::Regex;

use super::text::{fold, letters_and_digits, words};

/// `text` in lower case, onto `key`.
fn push_folded(key: &mut String, text: &str) {
    if text.is_ascii() {
        key.extend(text.chars().map(|c| c.to_ascii_lowercase()));
    } else {
        key.push_str(&fold(text));
    }
}

/// What kind of entity was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntityKind {
    Link,
    Email,
    Iban,
    Number,
    Code,
}

impl EntityKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EntityKind::Link => "link",
            EntityKind::Email => "e-mail address",
            EntityKind::Iban => "IBAN",
            EntityKind::Number => "phone or account number",
            EntityKind::Code => "code",
        }
    }
}

/// One entity inside a normalized text: its kind and the part of it that is compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entity<'a> {
    pub(crate) kind: EntityKind,
    pub(crate) text: &'a str,
    /// Where it stands in the text, all of it (a link's scheme included).
    span: Range<usize>,
}

impl Entity<'_> {
    /// What two spellings of one entity share, and two entities do not.
    pub(crate) fn key(&self) -> String {
        let mut key = String::with_capacity(self.text.len() + 7);
        match self.kind {
            EntityKind::Link => {
                let (host, path) = self
                    .text
                    .find(['/', '?', '#'])
                    .map_or((self.text, ""), |at| self.text.split_at(at));
                key.push_str("link:");
                push_folded(&mut key, host);
                key.push_str(path.trim_end_matches('/'));
            }
            EntityKind::Email => {
                key.push_str("email:");
                push_folded(&mut key, self.text);
            }
            EntityKind::Iban => {
                key.push_str("iban:");
                push_folded(&mut key, &letters_and_digits(self.text));
            }
            EntityKind::Number => {
                key.push_str("number:");
                key.extend(self.text.chars().filter(char::is_ascii_digit));
            }
            EntityKind::Code => {
                key.push_str("code:");
                key.push_str(self.text);
            }
        }
        key
    }
}

/// Bounded by anything but an ASCII letter or digit (`_` included, unlike `\b`): checked
/// around each match, since the regex crate has no look-around and its groups are slower.
fn iban() -> &'static Regex {
    static IBAN: OnceLock<Regex> = OnceLock::new();
    IBAN.get_or_init(|| {
        Regex::new(
            r"(?i)[a-z]{2} ?[0-9]{2}(?:[a-z0-9]{11,30}|(?:[\s.\-/]{1,3}[a-z0-9]{4}){2,7}(?:[\s.\-/]{1,3}[a-z0-9]{1,4})?)",
        )
        .expect("the IBAN pattern is valid")
    })
}

fn number() -> &'static Regex {
    static NUMBER: OnceLock<Regex> = OnceLock::new();
    NUMBER.get_or_init(|| {
        Regex::new(r"\+?\(?[0-9][0-9 ().\-/]{8,}[0-9]").expect("the number pattern is valid")
    })
}

fn script_links() -> &'static Regex {
    static SCRIPTS: OnceLock<Regex> = OnceLock::new();
    SCRIPTS.get_or_init(|| {
        Regex::new(r"(?i)(?:javascript|vbscript|data|file):\S+")
            .expect("the script link pattern is valid")
    })
}

fn links() -> &'static LinkFinder {
    static FINDER: OnceLock<LinkFinder> = OnceLock::new();
    FINDER.get_or_init(|| {
        let mut finder = LinkFinder::new();
        finder
            .url_must_have_scheme(false)
            .kinds(&[LinkKind::Url, LinkKind::Email]);
        finder
    })
}

/// The entities of a normalized text, in order of where they start.
pub(crate) fn entities(normal: &str) -> Vec<Entity<'_>> {
    let mut found: Vec<Entity<'_>> = Vec::new();
    // What no entity can be without is looked for first: most texts hold no IBAN or phone.
    let digits = normal.bytes().filter(u8::is_ascii_digit).count();
    let links = if normal.contains(['.', '@']) {
        Some(links().links(normal))
    } else {
        None
    };
    for link in links.into_iter().flatten() {
        let mut span = link.start()..link.end();
        let (kind, text) = match link.kind() {
            LinkKind::Email => {
                // An address in quotes ('eve@evil.example') is the address: the quote is
                // allowed in a local part, but nobody means it as one.
                let text = link.as_str().trim_start_matches(['\'', '`', '’']);
                span.start = span.end - text.len();
                (EntityKind::Email, text)
            }
            _ => {
                let text = link.as_str();
                let text = text.split_once("://").map_or(text, |(_, rest)| rest);
                (EntityKind::Link, text)
            }
        };
        found.push(Entity { kind, text, span });
    }
    let overlaps = |found: &[Entity<'_>], span: &Range<usize>| {
        found
            .iter()
            .any(|taken| taken.span.start < span.end && span.start < taken.span.end)
    };
    let check_digits = normal
        .as_bytes()
        .windows(2)
        .any(|pair| pair.iter().all(u8::is_ascii_digit));
    let ibans = check_digits.then(|| iban().find_iter(normal));
    for iban in ibans.into_iter().flatten() {
        let span = iban.range();
        let ascii_word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
        let bounded = !ascii_word(normal[..span.start].chars().next_back())
            && !ascii_word(normal[span.end..].chars().next());
        if bounded && !overlaps(&found, &span) {
            found.push(Entity {
                kind: EntityKind::Iban,
                text: iban.as_str(),
                span,
            });
        }
    }
    let numbers = (digits >= 10).then(|| number().find_iter(normal));
    for number in numbers.into_iter().flatten() {
        let span = number.range();
        let digits = number.as_str().bytes().filter(u8::is_ascii_digit).count();
        let glued = normal[..span.start]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric);
        if digits >= 10 && !glued && !overlaps(&found, &span) {
            found.push(Entity {
                kind: EntityKind::Number,
                text: number.as_str(),
                span,
            });
        }
    }
    // A link with a scheme of its own and no host: what linkify leaves, and a browser runs.
    let scripts = normal
        .contains(':')
        .then(|| script_links().find_iter(normal));
    for script in scripts.into_iter().flatten() {
        let span = script.range();
        let glued = normal[..span.start]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric);
        if !glued && !overlaps(&found, &span) {
            found.push(Entity {
                kind: EntityKind::Link,
                text: script.as_str(),
                span,
            });
        }
    }
    let long_word = !normal.is_ascii()
        || normal
            .as_bytes()
            .split(|byte| !byte.is_ascii_alphanumeric())
            .any(|run| run.len() >= 16);
    let long_words = long_word.then(|| words(normal).filter(|(_, word)| word.len() >= 16));
    for (start, word) in long_words.into_iter().flatten() {
        let span = start..start + word.len();
        let code = word.chars().count() >= 16
            && word.chars().any(|c| c.is_numeric())
            && word.chars().any(char::is_alphabetic);
        if code && !overlaps(&found, &span) {
            found.push(Entity {
                kind: EntityKind::Code,
                text: word,
                span,
            });
        }
    }
    found.sort_by_key(|entity| entity.span.start);
    found
}

/// The entity a whole value is, if it is one (an IBAN, an e-mail address, a link, a phone or
/// account number, a code): nothing but punctuation and spaces around it, a link's scheme
/// counting as part of it.
pub(crate) fn one_entity(normal: &str) -> Option<Entity<'_>> {
    let mut found = entities(normal);
    let only = found.pop().filter(|_| found.is_empty())?;
    let bare = |text: &str| !text.chars().any(char::is_alphanumeric);
    (bare(&normal[..only.span.start]) && bare(&normal[only.span.end..])).then_some(only)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(EntityKind, &str)> {
        entities(text)
            .into_iter()
            .map(|entity| (entity.kind, entity.text))
            .collect()
    }

    #[test]
    fn links_lose_their_scheme_brackets_and_trailing_dot() {
        assert_eq!(
            kinds("See https://evil.example/pay. Or <https://evil.example/b> or evil.example/c"),
            [
                (EntityKind::Link, "evil.example/pay"),
                (EntityKind::Link, "evil.example/b"),
                (EntityKind::Link, "evil.example/c"),
            ]
        );
    }

    #[test]
    fn e_mails_ibans_and_phones_are_found() {
        assert_eq!(
            kinds(
                "Mail eve@evil.example, pay GB29 NWBK 6016 1331 9268 19 or US133000000121212121212, call +1 (555) 123-4567 about 98.70 on 2022-03-01."
            ),
            [
                (EntityKind::Email, "eve@evil.example"),
                (EntityKind::Iban, "GB29 NWBK 6016 1331 9268 19"),
                (EntityKind::Iban, "US133000000121212121212"),
                (EntityKind::Number, "+1 (555) 123-4567"),
            ]
        );
    }

    #[test]
    fn ibans_with_dots_or_dashes_and_long_codes_are_found() {
        assert_eq!(
            kinds(
                "to GB29-NWBK-6016-1331-9268-19 or GB29.NWBK.6016.1331.9268.19, or bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"
            ),
            [
                (EntityKind::Iban, "GB29-NWBK-6016-1331-9268-19"),
                (EntityKind::Iban, "GB29.NWBK.6016.1331.9268.19"),
                (
                    EntityKind::Code,
                    "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"
                ),
            ]
        );
    }

    #[test]
    fn an_address_in_quotes_is_the_address() {
        assert_eq!(
            kinds("Send it to 'mark.black-2134@gmail.com' or `eve@evil.example`."),
            [
                (EntityKind::Email, "mark.black-2134@gmail.com"),
                (EntityKind::Email, "eve@evil.example"),
            ]
        );
    }

    #[test]
    fn plain_prose_has_no_entities() {
        assert!(kinds("Thanks for dinner, here is 12.00 for March 2022.").is_empty());
    }
}
