//! The user's own cases, one JSON object per line, each with what it must get.

use portcullis_core::RejectionCode;
use serde::Deserialize;
use serde_json::Value;

use crate::report::Got;

/// One case of the corpus.
pub(crate) struct Case {
    pub(crate) caller: String,
    pub(crate) tool: String,
    /// An object, sent as a value, or a string: the arguments' JSON text, sent as it is.
    pub(crate) arguments: Value,
    pub(crate) expected: Got,
    pub(crate) what: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    caller: String,
    tool: String,
    arguments: Value,
    expect: String,
    what: Option<String>,
}

/// The cases of `json_lines`, or for a line that cannot be read, why not. Blank lines and
/// lines starting with `#` are skipped.
pub(crate) fn read(json_lines: &str) -> Vec<Result<Case, String>> {
    json_lines
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .map(|(index, line)| {
            let number = index + 1;
            let line: Line =
                serde_json::from_str(line).map_err(|error| format!("line {number}: {error}"))?;
            if !matches!(line.arguments, Value::Object(_) | Value::String(_)) {
                return Err(format!(
                    "line {number}: `arguments` must be an object or its JSON text"
                ));
            }
            let expected = match line.expect.as_str() {
                "waits" => Got::Waits,
                code => Got::Refused(
                    serde_json::from_value::<RejectionCode>(Value::from(code)).map_err(|_| {
                        format!("line {number}: `{code}` is no refusal code, nor `waits`")
                    })?,
                ),
            };
            Ok(Case {
                what: line.what.unwrap_or_else(|| format!("corpus line {number}")),
                caller: line.caller,
                tool: line.tool,
                arguments: line.arguments,
                expected,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_is_a_case_or_says_why_not() {
        let cases = read(concat!(
            "# the seed's hostile samples\n",
            "{\"caller\": \"a\", \"tool\": \"t\", \"arguments\": {\"x\": 1}, \"expect\": \"policy_denied\"}\n",
            "\n",
            "{\"caller\": \"a\", \"tool\": \"t\", \"arguments\": \"{\\\"x\\\":1,\\\"x\\\":2}\", \"expect\": \"waits\", \"what\": \"twice\"}\n",
            "{\"caller\": \"a\", \"tool\": \"t\", \"arguments\": [1], \"expect\": \"policy_denied\"}\n",
            "{\"caller\": \"a\", \"tool\": \"t\", \"arguments\": {}, \"expect\": \"refused\"}\n",
            "{\"caller\": \"a\", \"tool\": \"t\", \"arguments\": {}, \"expect\": \"waits\", \"extra\": 1}\n",
        ));
        assert_eq!(cases.len(), 5);
        let first = cases[0].as_ref().unwrap();
        assert_eq!(first.expected, Got::Refused(RejectionCode::PolicyDenied));
        assert_eq!(first.what, "corpus line 2");
        let second = cases[1].as_ref().unwrap();
        assert_eq!(
            (second.expected, second.what.as_str()),
            (Got::Waits, "twice")
        );
        assert_eq!(second.arguments, Value::from("{\"x\":1,\"x\":2}"));
        assert!(
            cases[2]
                .as_ref()
                .err()
                .unwrap()
                .starts_with("line 5: `arguments`")
        );
        assert_eq!(
            cases[3].as_ref().err().unwrap(),
            "line 6: `refused` is no refusal code, nor `waits`"
        );
        assert!(
            cases[4]
                .as_ref()
                .err()
                .unwrap()
                .contains("unknown field `extra`")
        );
    }
}
