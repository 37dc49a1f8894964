//! The rules every contract must follow, checked when a registry is built (`#[tool]` checks
//! them at compile time).

use std::fmt;

use serde_json::Value;

use super::{Approval, Risk, ToolContract};
use crate::schema::{SCHEMA_DEPTH, reached, resolved};

/// A contract that breaks a rule every tool must follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractError {
    /// The tool's name as declared.
    pub tool: String,
    /// Which rule is broken and how to fix it.
    pub reason: String,
}

impl fmt::Display for ContractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tool `{}`: {}", self.tool, self.reason)
    }
}

impl std::error::Error for ContractError {}

impl ToolContract {
    /// Checks the rules every contract must follow. `#[tool]` enforces them at compile time;
    /// the registry checks hand-written tools when it is built.
    pub fn check(&self) -> Result<(), ContractError> {
        let fail = |reason: String| {
            Err(ContractError {
                tool: self.name.clone(),
                reason,
            })
        };
        if let Some(reason) = name_problem(&self.name) {
            return fail(reason);
        }
        if self.description.trim().is_empty() {
            return fail(
                "the description is empty: the model reads it to decide when to call the tool"
                    .into(),
            );
        }
        let undo_declared = self.rollback.is_some() || self.irreversible.is_some();
        if self.risk >= Risk::High && !undo_declared && !self.read_only {
            return fail(format!(
                "risk is {} but neither a rollback nor an irreversible reason is declared",
                self.risk
            ));
        }
        if self.rollback.is_some() && self.irreversible.is_some() {
            return fail(
                "a tool with a rollback is not irreversible: declare one or the other".into(),
            );
        }
        if self.read_only && self.rollback.is_some() {
            return fail("a read-only tool has nothing to roll back".into());
        }
        if self.risk == Risk::Critical && self.approval == Approval::Never {
            return fail(
                "a critical tool always needs approval: remove `approval = \"never\"`".into(),
            );
        }
        if self.caller_confirms && self.risk == Risk::Critical {
            return fail(
                "a critical tool's calls wait for an operator: the caller's own confirmation is not enough; remove `caller_confirms`, or lower the risk".into(),
            );
        }
        if self.caller_confirms && self.approval == Approval::Never {
            return fail(
                "`caller_confirms` asks the caller to confirm, and `approval = \"never\"` asks no one: keep one".into(),
            );
        }
        if self.read_only && self.irreversible.is_some() {
            return fail(
                "a read-only tool changes nothing, so nothing about it is irreversible".into(),
            );
        }
        if self.roles.iter().any(|role| role.trim().is_empty()) {
            return fail("a role name is empty".into());
        }
        if self
            .environments
            .iter()
            .any(|environment| environment.trim().is_empty())
        {
            return fail("an environment name is empty".into());
        }
        if self.input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return fail("the argument schema must describe an object".into());
        }
        if self.input_schema.get("additionalProperties") != Some(&Value::Bool(false)) {
            return fail(
                "the arguments type must refuse unknown arguments: add `#[serde(deny_unknown_fields)]`".into(),
            );
        }
        if let Some(unknown) = self.dynamic_arguments().find(|argument| {
            self.input_schema
                .get("properties")
                .and_then(|properties| properties.get(*argument))
                .is_none()
        }) {
            return fail(format!(
                "`one_of` names `{unknown}`, which is not one of the tool's arguments"
            ));
        }
        if let Some(rule) = self.provenance.rules.iter().find(|rule| {
            let root = &self.input_schema;
            reached(root, root, rule.pointer.split('/').skip(1), 0)
                .iter()
                .any(|node| holds_map(root, node, 0))
        }) {
            return fail(format!(
                "`#[from]` on `{}` reaches a map, whose keys no source can vouch for: take a list of entries (a `Vec` of a struct that holds the key as a field)",
                rule.pointer
            ));
        }
        Ok(())
    }
}

/// Whether `node` is or holds a map: an object whose keys are data, not field names.
fn holds_map(root: &Value, node: &Value, depth: usize) -> bool {
    let node = resolved(root, node);
    if depth > SCHEMA_DEPTH {
        return false;
    }
    if node
        .get("additionalProperties")
        .is_some_and(Value::is_object)
        || node.get("patternProperties").is_some()
    {
        return true;
    }
    let children = node
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|properties| properties.values())
        .chain(node.get("items"))
        .chain(
            ["anyOf", "oneOf", "allOf", "prefixItems"]
                .iter()
                .filter_map(|key| node.get(*key).and_then(Value::as_array))
                .flatten(),
        );
    children
        .into_iter()
        .any(|child| holds_map(root, child, depth + 1))
}

/// Why `name` is not a valid tool name, if it is not: 1 to 64 characters of ASCII letters,
/// digits, `_` and `-` (the strictest provider's rule).
pub fn name_problem(name: &str) -> Option<String> {
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Some(format!(
            "the name `{name}` contains {c:?}: use only ASCII letters, digits, `_` and `-`"
        ));
    }
    // Only ASCII is left, so bytes are characters.
    if name.is_empty() || name.len() > 64 {
        return Some(format!(
            "the name `{name}` must be 1 to 64 characters long, not {}",
            name.len()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ContractBuilder;
    use serde_json::json;

    fn builder(name: &str) -> ContractBuilder {
        ToolContract::builder(
            name,
            "Does a thing.",
            json!({"type": "object", "additionalProperties": false}),
        )
    }

    #[test]
    fn names_follow_the_strictest_provider() {
        assert!(name_problem("delete_record-2").is_none());
        assert!(name_problem("").is_some());
        assert!(name_problem(&"a".repeat(65)).is_some());
        assert!(name_problem("delete record").is_some());
        assert!(name_problem("dеlete").is_some(), "Cyrillic е");
    }

    #[test]
    fn dangerous_tools_say_how_they_are_undone() {
        let error = builder("drop")
            .risk(Risk::Critical)
            .build()
            .check()
            .unwrap_err();
        assert!(error.reason.contains("rollback"), "{error}");
        assert!(
            builder("drop")
                .risk(Risk::Critical)
                .rollback("undrop")
                .build()
                .check()
                .is_ok()
        );
        assert!(
            builder("drop")
                .risk(Risk::High)
                .irreversible("gone")
                .build()
                .check()
                .is_ok()
        );
    }

    #[test]
    fn contradictions_are_refused() {
        assert!(
            builder("a")
                .rollback("b")
                .irreversible("c")
                .build()
                .check()
                .is_err()
        );
        assert!(
            builder("a")
                .read_only()
                .rollback("b")
                .build()
                .check()
                .is_err()
        );
        assert!(builder("a").roles([""]).build().check().is_err());
        let not_object = ToolContract::builder("a", "b", json!({"type": "string"})).build();
        assert!(not_object.check().is_err());
        let open_object = ToolContract::builder("a", "b", json!({"type": "object"})).build();
        assert!(
            open_object
                .check()
                .unwrap_err()
                .reason
                .contains("deny_unknown_fields")
        );
    }

    #[test]
    fn serializes_for_review() {
        let contract = builder("a")
            .timeout(std::time::Duration::from_millis(1500))
            .build();
        let value = serde_json::to_value(&contract).unwrap();
        assert_eq!(value["timeout"], 1500);
        assert_eq!(value["risk"], "low");
        assert_eq!(value["approval"], json!({"when": "default"}));
    }
}
