//! Text for a terminal: aligned tables, and cells that cannot carry escape sequences.
//!
//! Tickets and audit records hold text a model wrote (a description, a tool name it invented);
//! printed raw, an escape sequence in it could rewrite what the operator sees on the screen.

use std::io::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::CliError;

/// `rows` under `headers`, columns padded to their widest cell, every cell made printable.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let printable: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| printable(cell)).collect())
        .collect();
    let mut widths: Vec<usize> = headers
        .iter()
        .map(|header| header.chars().count())
        .collect();
    for row in &printable {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let header_row: Vec<String> = headers.iter().map(|header| (*header).to_owned()).collect();
    for row in std::iter::once(&header_row).chain(&printable) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text
}

/// `text` with control characters (escape sequences, line breaks) and bidirectional overrides
/// (which reorder what a line appears to say) written as escapes.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if steers_terminal(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Whether `c` steers a terminal rather than showing: a control character or a bidirectional
/// override.
fn steers_terminal(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// JSON text with the characters that steer a terminal and that serde_json writes as they
/// are (DEL, the C1 controls, one of which opens an escape sequence, and the bidirectional
/// overrides) escaped as `\uXXXX`. They occur only inside strings, so the JSON means the
/// same; a model-written value cannot rewrite the operator's screen.
pub fn terminal_safe(json: &str) -> String {
    json.chars()
        .map(|c| {
            // C0 controls other than DEL are escaped by serde_json, or are its own line breaks.
            if c == '\u{7f}' || (!c.is_ascii() && steers_terminal(c)) {
                format!("\\u{:04x}", u32::from(c))
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `text` cut to at most `max` characters, an ellipsis marking the cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// How long until `until_ms`: `59m`, `2h05m`, `40s`, or `expired`.
pub fn remaining(until_ms: u64, now_ms: u64) -> String {
    let Some(left) = until_ms.checked_sub(now_ms).filter(|left| *left > 0) else {
        return "expired".to_owned();
    };
    let seconds = left / 1000;
    match (seconds / 3600, seconds / 60 % 60, seconds % 60) {
        (0, 0, seconds) => format!("{seconds}s"),
        (0, minutes, _) => format!("{minutes}m"),
        (hours, minutes, _) => format!("{hours}h{minutes:02}m"),
    }
}

/// `ms` since the Unix epoch as a UTC time, `2025-01-31 23:59:59`.
pub fn utc(ms: u64) -> String {
    let seconds = ms / 1000;
    let (days, of_day) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    )
}

/// The Gregorian date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`), so that
/// times print without a calendar crate.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Writes `value` as indented JSON and a line break.
pub fn write_json(out: &mut dyn Write, value: &serde_json::Value) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).map_err(io::Error::from)?;
    writeln!(out, "{}", terminal_safe(&text))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_for_a_terminal_escapes_what_steers_it() {
        let value = serde_json::json!({"description": "pay\u{9b}2J\u{202e}evil\u{7f}"});
        let text = terminal_safe(&serde_json::to_string_pretty(&value).unwrap());
        assert_eq!(
            text,
            "{\n  \"description\": \"pay\\u009b2J\\u202eevil\\u007f\"\n}"
        );
        let read: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(read, value, "the same JSON");
    }

    #[test]
    fn times_print_as_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc(1_738_367_999_000), "2025-01-31 23:59:59");
    }

    #[test]
    fn escapes_cannot_reach_the_terminal() {
        assert_eq!(printable("ok\u{1b}[2Jgone\n"), "ok\\u{1b}[2Jgone\\n");
        assert_eq!(printable("pay\u{202e}lla"), "pay\\u{202e}lla");
        let table = render(&["tool"], &[vec!["a\u{1b}]0;x\u{7}".to_owned()]]);
        assert!(!table.contains('\u{1b}'));
    }

    #[test]
    fn remaining_time_reads_at_a_glance() {
        assert_eq!(remaining(1_000, 2_000), "expired");
        assert_eq!(remaining(41_000, 1_000), "40s");
        assert_eq!(remaining(3_540_000, 0), "59m");
        assert_eq!(remaining(7_500_000, 0), "2h05m");
    }
}
