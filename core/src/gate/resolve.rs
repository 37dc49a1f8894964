//! The resolve gate: the tool exists.

use std::collections::HashMap;

use crate::suggest;
use crate::{Rejection, RejectionCode};

/// Looks `name` up exactly: no case folding, no Unicode normalization, so a look-alike or a
/// name with an invisible character never reaches a real tool.
pub(crate) fn resolve<'a, T>(
    tools: &'a HashMap<String, T>,
    name: &str,
) -> Result<&'a T, Rejection> {
    tools.get(name).ok_or_else(|| {
        // Debug formatting shows invisible and control characters as escapes.
        let shown: String = name.chars().take(64).collect();
        let hint =
            suggest::did_you_mean(name, tools.keys().map(String::as_str)).unwrap_or_else(|| {
                let mut names: Vec<&str> = tools.keys().map(String::as_str).collect();
                names.sort_unstable();
                format!("the available tools are {}", names.join(", "))
            });
        Rejection::new(
            RejectionCode::UnknownTool,
            format!("there is no tool named {shown:?}"),
        )
        .with_hint(hint)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_names_only() {
        let tools = HashMap::from([("delete_record".to_string(), 1)]);
        assert_eq!(resolve(&tools, "delete_record"), Ok(&1));
        for name in [
            "Delete_Record",
            "delete_record ",
            "dеlete_record",
            "delete\u{200b}_record",
        ] {
            let rejection = resolve(&tools, name).unwrap_err();
            assert_eq!(rejection.code(), RejectionCode::UnknownTool);
            assert_eq!(
                rejection.hint(),
                Some("did you mean `delete_record`?"),
                "{name:?}"
            );
        }
    }

    #[test]
    fn strangers_get_the_list() {
        let tools = HashMap::from([("b".to_string(), 1), ("a".to_string(), 2)]);
        let rejection = resolve(&tools, "transfer_funds").unwrap_err();
        assert_eq!(rejection.hint(), Some("the available tools are a, b"));
    }
}
