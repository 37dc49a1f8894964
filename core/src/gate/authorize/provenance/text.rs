//! How text and values are compared: one normalization for sources and arguments alike.
//!
//! 1. Invisible characters are removed: zero-width spaces and joiners, the soft hyphen, word
//!    joiners, bidi embeddings, overrides, isolates and marks, variation selectors, Unicode tag
//!    characters and the byte-order mark (see [`is_invisible`]).
//! 2. The text is put in Unicode NFKC: full-width digits and letters, ligatures and other
//!    compatibility forms become their plain characters (`１２３` is `123`); every dash becomes
//!    `-`, the ideographic full stop `.`, and the decimal digits of other scripts ASCII ones
//!    (`١٢٣` is `123`).
//! 3. It is cut into **words**: maximal runs of letters and digits (Unicode alphanumerics).
//!    Everything else (spaces, punctuation, symbols, combining marks left over) only separates
//!    words.
//!
//! A string value is found in a source when the letters and digits of the value, in order,
//! are exactly the letters and digits of a run of whole words of the source, with the same
//! punctuation between them and right around them (whitespace aside): `GB29 NWBK 6016` and
//! `GB29NWBK6016` are the same value, `NWBK` is not found in `GB29NWBK6016`, nor
//! `update.my.password` in "update my password". Case counts. A value that is one entity (a
//! link, an e-mail address, an IBAN, a phone or account number, a code: see the `entities`
//! module) is found as that entity in a source, by its key. A value without letters or
//! digits must be in a source as it is.
//!
//! A number is found by its value: a source holds the numbers written in it in decimal (a run
//! of ASCII digits, after NFKC, not glued to a letter before it, with an optional `.` and
//! fraction, an optional `-` before it), so `7`, `7.0` and `07` are one value; a number grouped
//! in thousands with `,`, `'` or spaces is read whole too (`1,000` holds 1000, and 1 and 000).
//! Digits of other scripts are read as their ASCII digits.

use std::borrow::Cow;

use serde_json::Value;
use unicode_normalization::UnicodeNormalization;

/// Characters that render as nothing, or only reorder what is around them: removed before
/// anything is compared, so that they can neither hide a value nor split one.
pub(crate) fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// `text` with invisible characters removed, in NFKC, every dash a `-` and every full stop a
/// `.` (a browser reads `evil。example` as a host, and a phone number is dialled whatever its
/// dashes).
pub(crate) fn normalize(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    let visible: String = text.chars().filter(|c| !is_invisible(*c)).collect();
    let normal: String = visible
        .nfkc()
        .filter(|c| !is_invisible(*c))
        .map(|c| match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{FE58}' | '\u{FE63}' => '-',
            '\u{3002}' | '\u{FF61}' | '\u{2024}' => '.',
            other => ascii_digit(other).unwrap_or(other),
        })
        .collect();
    Cow::Owned(normal)
}

/// The first digit of each block of ten decimal digits of another script than Latin: Arabic-Indic,
/// Extended Arabic-Indic, NKo, Devanagari, Bengali, Gurmukhi, Gujarati, Oriya, Tamil, Telugu,
/// Kannada, Malayalam, Sinhala, Thai, Lao, Tibetan, Myanmar, Khmer, Mongolian.
const ZEROS: [u32; 21] = [
    0x0660, 0x06F0, 0x07C0, 0x0966, 0x09E6, 0x0A66, 0x0AE6, 0x0B66, 0x0BE6, 0x0C66, 0x0CE6, 0x0D66,
    0x0DE6, 0x0E50, 0x0ED0, 0x0F20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x19D0,
];

/// The ASCII digit a decimal digit of another script writes, so that `١٢٣` is the number 123.
fn ascii_digit(c: char) -> Option<char> {
    let code = u32::from(c);
    ZEROS
        .iter()
        .find_map(|zero| code.checked_sub(*zero).filter(|value| *value < 10))
        .and_then(|value| char::from_digit(value, 10))
}

/// The words of normalized text, with their byte offsets.
pub(crate) fn words(normal: &str) -> impl Iterator<Item = (usize, &str)> {
    normal
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(move |word| (word.as_ptr() as usize - normal.as_ptr() as usize, word))
}

/// The letters and digits of normalized text, in order: what a string value is compared by.
pub(crate) fn letters_and_digits(normal: &str) -> Cow<'_, str> {
    if normal.chars().all(char::is_alphanumeric) {
        return Cow::Borrowed(normal);
    }
    let mut kept = String::with_capacity(normal.len());
    if normal.is_ascii() {
        for byte in normal.bytes().filter(u8::is_ascii_alphanumeric) {
            kept.push(char::from(byte));
        }
    } else {
        kept.extend(normal.chars().filter(|c| c.is_alphanumeric()));
    }
    Cow::Owned(kept)
}

/// `text` in lower case, character by character (so that a word and the run it is part of
/// fold alike).
pub(crate) fn fold(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    text.chars().flat_map(char::to_lowercase).collect()
}

/// The numbers written in normalized text, in their canonical decimal form: each run of
/// digits, and a number grouped in thousands (`1,000`, `1'000`, `1 000.50`) whole too.
pub(crate) fn numbers(normal: &str) -> Vec<String> {
    let bytes = normal.as_bytes();
    let mut found = Vec::new();
    for grouped in thousands().captures_iter(normal) {
        let digits: String = grouped[2].chars().filter(char::is_ascii_digit).collect();
        let fraction = grouped.get(3).map_or("", |fraction| fraction.as_str());
        if let Some(number) = decimal(&grouped[1] == "-", &format!("{digits}{fraction}")) {
            found.push(number);
        }
    }
    let mut at = 0;
    while at < bytes.len() {
        if !bytes[at].is_ascii_digit() {
            at += 1;
            continue;
        }
        // Glued to a letter or digit before it (`UK12`, `ab7`), it is part of a word.
        let glued = normal[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric());
        let start = at;
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            at += 1;
        }
        if at + 1 < bytes.len() && bytes[at] == b'.' && bytes[at + 1].is_ascii_digit() {
            at += 1;
            while at < bytes.len() && bytes[at].is_ascii_digit() {
                at += 1;
            }
        }
        if glued {
            continue;
        }
        // A `-` is a sign only where it does not join two words (`id-3`, `2022-03`).
        let negative = start > 0
            && bytes[start - 1] == b'-'
            && !normal[..start - 1]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric());
        if let Some(number) = decimal(negative, &normal[start..at]) {
            found.push(number);
        }
    }
    found
}

/// A number grouped in thousands: its sign, its groups, its fraction.
fn thousands() -> &'static regex::Regex {
    static THOUSANDS: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    THOUSANDS.get_or_init(|| {
        regex::Regex::new(r"(?:^|[^0-9A-Za-z.,'])(-?)([0-9]{1,3}(?:[,' ][0-9]{3})+)(\.[0-9]+)?")
            .expect("the thousands pattern is valid")
    })
}

/// The canonical decimal form of a JSON number: digits without leading zeros, a fraction
/// without trailing zeros, `-` for a negative value other than zero.
pub(crate) fn number_value(number: &serde_json::Number) -> Option<String> {
    let text = number.to_string();
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.as_str()),
    };
    match text.split_once(['e', 'E']) {
        None => decimal(negative, text),
        Some((mantissa, exponent)) => {
            let exponent: i32 = exponent.parse().ok()?;
            let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
            let digits = format!("{whole}{fraction}");
            let point = i32::try_from(whole.len()).ok()? + exponent;
            if !(-400..=400).contains(&point) {
                return None;
            }
            let plain = if point <= 0 {
                format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
            } else if point as usize >= digits.len() {
                format!("{digits}{}", "0".repeat(point as usize - digits.len()))
            } else {
                let (whole, fraction) = digits.split_at(point as usize);
                format!("{whole}.{fraction}")
            };
            decimal(negative, &plain)
        }
    }
}

/// `digits` (`123` or `123.450`) in canonical form.
fn decimal(negative: bool, digits: &str) -> Option<String> {
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole = whole.trim_start_matches('0');
    let fraction = fraction.trim_end_matches('0');
    let mut canonical = String::with_capacity(digits.len() + 1);
    let zero = whole.is_empty() && fraction.is_empty();
    if negative && !zero {
        canonical.push('-');
    }
    canonical.push_str(if whole.is_empty() { "0" } else { whole });
    if !fraction.is_empty() {
        canonical.push('.');
        canonical.push_str(fraction);
    }
    Some(canonical)
}

/// The text of a JSON value as a source: its object keys, strings and numbers, one per line.
/// `keep` says which, by their path from the root (a key's is its value's), belong to this
/// source.
pub(crate) fn source_text(value: &Value, keep: &dyn Fn(&[PathStep<'_>]) -> bool) -> String {
    let mut text = String::new();
    collect(value, &mut Vec::new(), keep, &mut |leaf| {
        text.push_str(leaf);
        text.push('\n');
    });
    text
}

/// The whole values of a JSON value as a source of whole values (a trusted output): its object
/// keys, strings and numbers, exactly one per line, a line break inside one written as a space
/// (values are compared whitespace aside). `keep` as for [`source_text`].
pub(crate) fn leaf_text(value: &Value, keep: &dyn Fn(&[PathStep<'_>]) -> bool) -> String {
    let mut text = String::new();
    collect(value, &mut Vec::new(), keep, &mut |leaf| {
        text.extend(leaf.chars().map(|c| if c == '\n' { ' ' } else { c }));
        text.push('\n');
    });
    text
}

/// The lines of a source of whole values: each one whole value ([`leaf_text`]).
pub(crate) fn leaves(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n')
}

/// A whole value as the index keys it: its normalized text without whitespace (case counts),
/// so that `GB29 NWBK 6016` is the leaf `GB29NWBK6016`.
pub(crate) fn compact(normal: &str) -> Cow<'_, str> {
    if normal.contains(char::is_whitespace) {
        Cow::Owned(normal.chars().filter(|c| !c.is_whitespace()).collect())
    } else {
        Cow::Borrowed(normal)
    }
}

/// The number a whole value writes, in canonical form, if it is nothing but one (`98.70`,
/// `-5`, `1,000`): a whole value vouches for a number only when it is that number. `compact`
/// is the value without whitespace.
pub(crate) fn whole_number(compact: &str) -> Option<String> {
    let (negative, digits) = match compact.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, compact),
    };
    let (whole, fraction) = match digits.split_once('.') {
        Some((whole, fraction)) if !fraction.is_empty() => (whole, Some(fraction)),
        Some(_) => return None,
        None => (digits, None),
    };
    let plain: String = match whole.find([',', '\'']) {
        None => whole.to_owned(),
        Some(at) => {
            let separator = whole.as_bytes()[at] as char;
            let mut groups = whole.split(separator);
            let first = groups.next().unwrap_or_default();
            let grouped = (1..=3).contains(&first.len()) && groups.all(|group| group.len() == 3);
            if !grouped {
                return None;
            }
            whole.chars().filter(|c| *c != separator).collect()
        }
    };
    match fraction {
        Some(fraction) if fraction.bytes().all(|b| b.is_ascii_digit()) => {
            decimal(negative, &format!("{plain}.{fraction}"))
        }
        Some(_) => None,
        None => decimal(negative, &plain),
    }
}

/// One step down a JSON value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PathStep<'a> {
    Key(&'a str),
    Index(usize),
}

/// Calls `leaf` with every key, string and number of `value` that `keep` keeps.
fn collect<'a>(
    value: &'a Value,
    path: &mut Vec<PathStep<'a>>,
    keep: &dyn Fn(&[PathStep<'_>]) -> bool,
    leaf: &mut dyn FnMut(&str),
) {
    match value {
        Value::String(string) => {
            if keep(path) {
                leaf(string);
            }
        }
        Value::Number(number) => {
            if keep(path) {
                leaf(&number.to_string());
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                path.push(PathStep::Index(index));
                collect(item, path, keep, leaf);
                path.pop();
            }
        }
        Value::Object(members) => {
            for (key, member) in members {
                path.push(PathStep::Key(key));
                // A key is read as its value is: a map's keys are data (an IBAN, a name), and
                // an untrusted one may carry an instruction.
                if keep(path) {
                    leaf(key);
                }
                collect(member, path, keep, leaf);
                path.pop();
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_and_compatibility_characters_are_normalized_away() {
        assert_eq!(normalize("GB\u{200B}29\u{202E}NW"), "GB29NW");
        assert_eq!(normalize("ＧＢ２９"), "GB29");
        assert_eq!(normalize("ﬁle"), "file");
    }

    #[test]
    fn words_are_runs_of_letters_and_digits() {
        let words: Vec<&str> = words("Pay GB29-NWBK, now!").map(|(_, w)| w).collect();
        assert_eq!(words, ["Pay", "GB29", "NWBK", "now"]);
        assert_eq!(letters_and_digits("GB29 NWBK-60"), "GB29NWBK60");
    }

    #[test]
    fn numbers_are_read_by_value() {
        assert_eq!(
            numbers("pay 98.70 or 007, id-3 UK12 -5"),
            ["98.7", "7", "3", "-5"]
        );
        assert_eq!(numbers("1,000"), ["1000", "1", "0"]);
        assert_eq!(
            numbers("$12'345.50 or -1 000"),
            ["12345.5", "-1000", "12", "345.5", "-1", "0"]
        );
        let value = |text: &str| number_value(&serde_json::from_str(text).unwrap());
        assert_eq!(value("98.7").as_deref(), Some("98.7"));
        assert_eq!(value("100").as_deref(), Some("100"));
        assert_eq!(value("-0.0").as_deref(), Some("0"));
        assert_eq!(value("1e21").as_deref(), Some("1000000000000000000000"));
        assert_eq!(value("1.5e-3").as_deref(), Some("0.0015"));
    }

    #[test]
    fn a_json_source_holds_its_keys_strings_and_numbers() {
        let output =
            serde_json::json!({"iban": "GB29", "amount": 10.5, "ok": true, "list": [1, "x"]});
        let text = source_text(&output, &|_| true);
        assert!(text.contains("GB29\n") && text.contains("10.5\n") && text.contains("x\n"));
        assert!(text.contains("iban\n") && !text.contains("true"));
    }
}
