//! A report as JUnit XML, the format CI systems show test results in: one test suite per tool,
//! one test case per hostile case, a failure for each that did not get its refusal.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::report::{Finding, Report};

impl Report {
    /// The report as JUnit XML: a `<testsuite>` per tool, a `<testcase>` per case (named
    /// for what it breaks, its class the tool and the caller), a `<failure>` in each that got
    /// something other than its refusal, and a suite `not attacked` with a failing case for
    /// each thing the kit could not attack.
    ///
    /// ```
    /// let report = portcullis_testing::Report::from_json_lines(
    ///     r#"{"not_attacked": "`payout`: give a valid call"}"#,
    /// )
    /// .unwrap();
    /// assert!(report.junit().contains(r#"<testsuite name="not attacked" tests="1" failures="1">"#));
    /// ```
    pub fn junit(&self) -> String {
        let mut suites = BTreeMap::<&str, Vec<&Finding>>::new();
        for finding in self.findings() {
            suites.entry(&finding.tool).or_default().push(finding);
        }
        let failures = self.failures().count() + self.not_attacked().len();
        let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            xml,
            "<testsuites name=\"portcullis red team\" tests=\"{}\" failures=\"{failures}\">",
            self.cases() + self.not_attacked().len(),
        );
        for (tool, findings) in suites {
            let failed = findings.iter().filter(|finding| !finding.held()).count();
            let _ = writeln!(
                xml,
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\">",
                escape(tool),
                findings.len(),
            );
            for finding in findings {
                let class = escape(&format!("{}.{}", finding.tool, finding.caller));
                let name = escape(&finding.case);
                if finding.held() {
                    let _ = writeln!(xml, "    <testcase name=\"{name}\" classname=\"{class}\"/>");
                    continue;
                }
                let _ = writeln!(
                    xml,
                    "    <testcase name=\"{name}\" classname=\"{class}\">\n      <failure \
                     message=\"expected {}, got {}\" type=\"{}\">arguments: {}</failure>\n    \
                     </testcase>",
                    escape(&finding.expected.to_string()),
                    escape(&finding.got.to_string()),
                    finding.gate,
                    escape(&finding.arguments),
                );
            }
            xml.push_str("  </testsuite>\n");
        }
        if !self.not_attacked().is_empty() {
            let _ = writeln!(
                xml,
                "  <testsuite name=\"not attacked\" tests=\"{0}\" failures=\"{0}\">",
                self.not_attacked().len()
            );
            for why in self.not_attacked() {
                let _ = writeln!(
                    xml,
                    "    <testcase name=\"{0}\" classname=\"not attacked\">\n      <failure \
                     message=\"{0}\"/>\n    </testcase>",
                    escape(why)
                );
            }
            xml.push_str("  </testsuite>\n");
        }
        xml.push_str("</testsuites>\n");
        xml
    }
}

/// `text` as XML character data or an attribute value. Characters XML 1.0 cannot carry at
/// all (most control characters, which hostile cases are made of) are written as `\u{..}`.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            '\t' | '\n' | '\r' => {
                let _ = write!(escaped, "&#{};", u32::from(c));
            }
            c if c.is_control() || c == '\u{fffe}' || c == '\u{ffff}' => {
                let _ = write!(escaped, "\\u{{{:x}}}", u32::from(c));
            }
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_xml_cannot_carry_is_escaped() {
        assert_eq!(
            escape("a<b & \"c\" 'd'\u{0}\u{1b}[2J\n\u{200b}"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;\\u{0}\\u{1b}[2J&#10;\u{200b}"
        );
    }
}
