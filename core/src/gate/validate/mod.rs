//! The validate gate: every declared constraint, all violations reported at once.
//!
//! validator reports violations keyed by Rust field names; the model only knows the names in
//! the schema. Each name is translated by looking it up in the schema: the exact name first,
//! then the same name in another case convention (`sku_code` for `skuCode`, from
//! `rename_all`). A field renamed to an unrelated name inside a user's own `#[args]` type keeps
//! its Rust name in the path.
//!
//! Before the constraints, the values of the arguments whose allowed values come from a function
//! (`#[one_of]`) are checked against what that function returns for the call's context: the
//! same refusal as a value outside a Rust enum, `invalid_value` (`allowed.rs`).

mod allowed;

use std::collections::HashSet;

use serde_json::{Map, Value};
use validator::{ValidationError, ValidationErrors, ValidationErrorsKind};

use super::decode::{self, Canonical};
use crate::context::CallContext;
use crate::contract::ToolContract;
use crate::pointer::{Segment, pointer};
use crate::rejection::{Rejection, RejectionCode, Violation};
use crate::schema::check::{SchemaCheck, describe};

/// The validate gate: the values of `#[one_of]` arguments, then every constraint: those of the
/// schema the arguments break as sent (`shown`, found by the compiled schema), and those of the
/// arguments' own checks (`checked`), every violation named as the model knows it and reported
/// once.
pub(crate) fn validate(
    checked: Result<(), ValidationErrors>,
    shown: Vec<Violation>,
    contract: &ToolContract,
    ctx: &CallContext,
    left_out: &[&str],
    canonical: &Canonical<'_>,
) -> Result<(), Rejection> {
    if contract.dynamic_arguments().next().is_some() {
        allowed::check_allowed_values(contract, ctx, left_out, canonical.get()?)?;
    }
    violations(checked, shown, contract.input_schema())
}

/// A tool's arguments held to its JSON Schema by the gates' own check, for a process that has
/// the schema but not the tool: the console checks a reviewer's edit before the passkey signs
/// it, and shows the refusal the gates would give. The worker's gates check the edit again when
/// it runs; this check adds nothing the arguments' Rust type and own checks would refuse.
///
/// ```
/// use portcullis_core::{ArgumentsCheck, RejectionCode};
/// use serde_json::json;
///
/// let check = ArgumentsCheck::compile(json!({
///     "type": "object",
///     "properties": {"amount_cents": {"type": "integer", "minimum": 1, "maximum": 50000}},
///     "required": ["amount_cents"],
///     "additionalProperties": false
/// }))
/// .unwrap();
/// assert!(check.check(&json!({"amount_cents": 900})).is_ok());
/// let refused = check.check(&json!({"amount_cents": 90000})).unwrap_err();
/// assert_eq!(refused.code(), RejectionCode::ConstraintViolation);
/// assert_eq!(refused.path(), Some("/amount_cents"));
/// ```
pub struct ArgumentsCheck {
    check: SchemaCheck,
    schema: Value,
}

impl ArgumentsCheck {
    /// Compiles `schema`, or says which part of it the gates' check cannot enforce.
    pub fn compile(schema: Value) -> Result<Self, String> {
        let check = SchemaCheck::compile(&schema, &[])?;
        Ok(ArgumentsCheck { check, schema })
    }

    /// The gates' refusal of `arguments`: the first break of the schema's shape, with the
    /// decode gate's code, or every constraint violated (`constraint_violation`).
    pub fn check(&self, arguments: &Value) -> Result<(), Rejection> {
        let shown = decode::violations(self.check.check(arguments))?;
        violations(Ok(()), shown, &self.schema)
    }
}

impl std::fmt::Debug for ArgumentsCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentsCheck")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// How many violations a refusal keeps: a hostile call may break a constraint in every one of
/// a hundred thousand elements, and the refusal stays small.
const KEPT_VIOLATIONS: usize = 100;

/// The rule family a violation belongs to: validator and the schema name some rules apart
/// (`regex` and `contains` are checked as a schema's `pattern`, `does_not_contain` as its
/// `not`).
fn family(rule: &str) -> &str {
    match rule {
        "regex" | "contains" => "pattern",
        "does_not_contain" => "not",
        other => other,
    }
}

/// Turns the violations found into a refusal; `schema` is the arguments' schema, used to name
/// each of validator's violations as the model knows it. A constraint both found is reported
/// once, in validator's words (its message, if the author wrote one).
fn violations(
    checked: Result<(), ValidationErrors>,
    shown: Vec<Violation>,
    schema: &Value,
) -> Result<(), Rejection> {
    if checked.is_ok() && shown.is_empty() {
        return Ok(());
    }
    let mut violations = Vec::new();
    if let Err(errors) = checked {
        collect(
            &errors,
            Some(schema),
            schema,
            &mut Vec::new(),
            &mut violations,
        );
    }
    let key = |violation: &Violation| (violation.path.clone(), family(&violation.rule).to_owned());
    let mut known: HashSet<(String, String)> = violations.iter().map(key).collect();
    for violation in shown {
        if known.insert(key(&violation)) {
            violations.push(violation);
        }
    }
    violations.sort_by(|a, b| (&a.path, &a.rule).cmp(&(&b.path, &b.rule)));
    let total = violations.len();
    violations.truncate(KEPT_VIOLATIONS);
    let message = match violations.as_slice() {
        [only] if total == 1 => format!("`{}` {}", only.path, only.message),
        kept => {
            let each: Vec<String> = kept
                .iter()
                .map(|violation| format!("`{}` {}", violation.path, violation.message))
                .collect();
            let shown = if total > kept.len() {
                format!(" (the first {})", kept.len())
            } else {
                String::new()
            };
            format!(
                "{total} constraints are violated{shown}: {}",
                each.join("; ")
            )
        }
    };
    let path = violations.first().map(|violation| violation.path.clone());
    let mut rejection = Rejection::new(RejectionCode::ConstraintViolation, message)
        .with_hint("fix every listed value and call again");
    if let Some(path) = path {
        rejection = rejection.with_path(path);
    }
    Err(rejection.with_violations(violations))
}

fn collect(
    errors: &ValidationErrors,
    node: Option<&Value>,
    root: &Value,
    path: &mut Vec<Segment>,
    out: &mut Vec<Violation>,
) {
    for (field, kind) in errors.errors() {
        // validator wraps the errors of a list in `_tmp_validator`, and puts struct-level
        // checks under `__all__`: both belong to the value at `path` itself.
        let (name, child) = if field == "_tmp_validator" || field == "__all__" {
            (None, node)
        } else {
            let (name, child) = property(node, root, field);
            (Some(name), child)
        };
        let pushed = name.map(|name| path.push(Segment::Key(name))).is_some();
        match kind {
            ValidationErrorsKind::Field(field_errors) => {
                for error in field_errors {
                    out.push(violation(
                        error,
                        child.map(|child| resolve(child, root)),
                        path,
                    ));
                }
            }
            ValidationErrorsKind::Struct(inner) => collect(inner, child, root, path, out),
            ValidationErrorsKind::List(items) => {
                let item_schema = child.and_then(|child| items_schema(child, root));
                for (index, inner) in items {
                    path.push(Segment::Index(*index));
                    collect(inner, item_schema, root, path, out);
                    path.pop();
                }
            }
        }
        if pushed {
            path.pop();
        }
    }
}

/// Follows a local `$ref` (`#/$defs/Name`) to the schema it names.
fn resolve<'a>(node: &'a Value, root: &'a Value) -> &'a Value {
    let target = node
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|reference| reference.strip_prefix('#'))
        .and_then(|pointer| root.pointer(pointer));
    match target {
        Some(target) => resolve(target, root),
        None => node,
    }
}

/// The subschemas a value may match: the node itself, or each branch of an `anyOf`/`oneOf`
/// (an `Option<Struct>` is `anyOf: [{$ref}, {type: null}]`).
fn branches<'a>(node: &'a Value, root: &'a Value) -> Vec<&'a Value> {
    let node = resolve(node, root);
    ["anyOf", "oneOf", "allOf"]
        .iter()
        .filter_map(|keyword| node.get(keyword).and_then(Value::as_array))
        .flatten()
        .map(|branch| resolve(branch, root))
        .chain(std::iter::once(node))
        .collect()
}

fn normalized(name: &str) -> String {
    name.trim_start_matches("r#")
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The schema name of Rust field `field`, and its subschema.
fn property<'a>(
    node: Option<&'a Value>,
    root: &'a Value,
    field: &str,
) -> (String, Option<&'a Value>) {
    let candidates: Vec<&Map<String, Value>> = node
        .map(|node| branches(node, root))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|branch| branch.get("properties").and_then(Value::as_object))
        .collect();
    let exact = candidates
        .iter()
        .find_map(|properties| properties.get_key_value(field));
    let wanted = normalized(field);
    let found = exact.or_else(|| {
        candidates.iter().find_map(|properties| {
            properties
                .iter()
                .find(|(name, _)| normalized(name) == wanted)
        })
    });
    match found {
        Some((name, schema)) => (name.clone(), Some(schema)),
        None => (field.to_owned(), None),
    }
}

fn items_schema<'a>(node: &'a Value, root: &'a Value) -> Option<&'a Value> {
    branches(node, root).into_iter().find_map(|branch| {
        branch
            .get("items")
            .or_else(|| branch.get("additionalProperties"))
    })
}

fn violation(error: &ValidationError, schema: Option<&Value>, path: &[Segment]) -> Violation {
    let mut params: Map<String, Value> = error
        .params
        .iter()
        .filter(|(name, _)| name.as_ref() != "value")
        .map(|(name, value)| (name.to_string(), value.clone()))
        .collect();
    let is_list = matches!(error.params.get("value"), Some(Value::Array(_)));
    let rule = match error.code.as_ref() {
        "regex" => "pattern",
        other => other,
    };
    if rule == "pattern"
        && let Some(pattern) = schema.and_then(|schema| schema.get("pattern"))
    {
        params.insert("pattern".into(), pattern.clone());
    }
    let message = match &error.message {
        Some(message) => message.to_string(),
        None => describe(rule, &params, is_list),
    };
    Violation {
        path: pointer(path),
        rule: rule.to_owned(),
        message,
        params,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::schema_for;
    use schemars::JsonSchema;
    use validator::Validate;

    #[derive(Validate, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Order {
        #[validate(length(min = 3, max = 10))]
        customer_name: String,
        #[validate(range(min = 1, max = 100))]
        quantity: u32,
        #[validate(nested)]
        lines: Vec<Line>,
    }

    #[derive(Validate, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Line {
        #[validate(range(exclusive_min = 0.0))]
        unit_price: f64,
    }

    #[test]
    fn reports_every_violation_with_schema_names() {
        let order = Order {
            customer_name: "Al".into(),
            quantity: 0,
            lines: vec![Line { unit_price: 1.0 }, Line { unit_price: 0.0 }],
        };
        let rejection =
            violations(order.validate(), Vec::new(), &schema_for::<Order>()).unwrap_err();
        assert_eq!(rejection.code(), RejectionCode::ConstraintViolation);
        let found: Vec<(&str, &str)> = rejection
            .violations()
            .iter()
            .map(|violation| (violation.path.as_str(), violation.rule.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("/customerName", "length"),
                ("/lines/1/unitPrice", "range"),
                ("/quantity", "range")
            ]
        );
        assert_eq!(rejection.path(), Some("/customerName"));
        assert_eq!(
            rejection.violations()[0].message,
            "must have 3 to 10 characters"
        );
        assert_eq!(
            rejection.violations()[1].message,
            "must be greater than 0.0"
        );
        assert_eq!(rejection.violations()[2].params["min"], 1);
        assert!(rejection.violations()[2].params.get("value").is_none());
    }

    #[test]
    fn valid_arguments_pass() {
        let order = Order {
            customer_name: "Alice".into(),
            quantity: 3,
            lines: vec![Line { unit_price: 2.5 }],
        };
        assert!(violations(order.validate(), Vec::new(), &schema_for::<Order>()).is_ok());
    }
}
