//! What a check finds, and how a finding is told: the path to the value, the rule it breaks,
//! in words.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::pointer::{Segment, pointer};
use crate::rejection::{RejectionCode, Violation};

/// What a call's arguments break: a constraint (the validate gate's `constraint_violation`), or
/// the shape itself, which the decode gate's codes name.
#[derive(Debug)]
pub(crate) enum Finding {
    Constraint(Violation),
    Shape {
        code: RejectionCode,
        path: String,
        message: String,
    },
}

/// What a check found so far, and how many more subschemas it may visit.
pub(super) struct Findings {
    pub(super) list: Vec<Finding>,
    pub(super) visits_left: usize,
}

impl Findings {
    pub(super) fn with_budget(visits_left: usize) -> Findings {
        Findings {
            list: Vec::new(),
            visits_left,
        }
    }

    pub(super) fn push(&mut self, finding: Finding) {
        self.list.push(finding);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// A fresh list for one branch of a union, on the same budget.
    pub(super) fn branch(&self) -> Findings {
        Findings::with_budget(self.visits_left)
    }

    /// Takes back the budget a branch left.
    pub(super) fn spent(&mut self, branch: &Findings) {
        self.visits_left = branch.visits_left;
    }
}

/// A step of the path to a value, borrowed from the arguments: a path is written out only for
/// a finding.
#[derive(Clone, Copy)]
pub(super) enum Step<'p> {
    Key(&'p str),
    Index(usize),
}

/// The path as a JSON pointer (RFC 6901).
pub(super) fn pointer_of(path: &[Step<'_>]) -> String {
    let segments: Vec<Segment> = path
        .iter()
        .map(|step| match step {
            Step::Key(key) => Segment::Key((*key).to_owned()),
            Step::Index(index) => Segment::Index(*index),
        })
        .collect();
    pointer(&segments)
}

/// Findings of a branch, ordered from closest to holding: shape findings weigh most.
pub(super) fn rank(findings: &[Finding]) -> (usize, usize) {
    let shapes = findings
        .iter()
        .filter(|finding| matches!(finding, Finding::Shape { .. }))
        .count();
    (shapes, findings.len())
}

pub(super) fn shape(code: RejectionCode, path: &[Step<'_>], message: &str) -> Finding {
    Finding::Shape {
        code,
        path: pointer_of(path),
        message: message.to_owned(),
    }
}

pub(super) fn constraint(
    path: &[Step<'_>],
    rule: &str,
    message: String,
    params: Map<String, Value>,
) -> Finding {
    Finding::Constraint(Violation {
        path: pointer_of(path),
        rule: rule.to_owned(),
        message,
        params,
    })
}

pub(super) fn bounds(
    min_name: &str,
    min: Option<u64>,
    max_name: &str,
    max: Option<u64>,
) -> Map<String, Value> {
    let mut params = Map::new();
    if let Some(min) = min {
        params.insert(min_name.to_owned(), min.into());
    }
    if let Some(max) = max {
        params.insert(max_name.to_owned(), max.into());
    }
    params
}

pub(super) fn length_message(params: &Map<String, Value>, unit: &str) -> String {
    match (params.get("min"), params.get("max")) {
        (Some(min), Some(max)) if min == max => format!("must have exactly {min} {unit}"),
        (Some(min), Some(max)) => format!("must have {min} to {max} {unit}"),
        (Some(min), None) => format!("must have at least {min} {unit}"),
        (None, Some(max)) => format!("must have at most {max} {unit}"),
        (None, None) => "has the wrong length".to_owned(),
    }
}

pub(super) fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// A constraint `rule` with its `params`, in words, as a violation says it.
pub(crate) fn describe(rule: &str, params: &Map<String, Value>, is_list: bool) -> String {
    let param = |name: &str| params.get(name).map(|value| value.to_string());
    let unit = if is_list { "items" } else { "characters" };
    let text: Cow<'static, str> = match rule {
        "length" => match (param("min"), param("max"), param("equal")) {
            (_, _, Some(equal)) => format!("must have exactly {equal} {unit}").into(),
            (Some(min), Some(max), _) => format!("must have {min} to {max} {unit}").into(),
            (Some(min), None, _) => format!("must have at least {min} {unit}").into(),
            (None, Some(max), _) => format!("must have at most {max} {unit}").into(),
            _ => "has the wrong length".into(),
        },
        "range" => {
            let bounds: Vec<String> = [
                ("min", "at least"),
                ("exclusive_min", "greater than"),
                ("max", "at most"),
                ("exclusive_max", "less than"),
            ]
            .iter()
            .filter_map(|(name, words)| param(name).map(|value| format!("{words} {value}")))
            .collect();
            format!("must be {}", bounds.join(" and ")).into()
        }
        "pattern" => match param("pattern") {
            Some(pattern) => format!("must match the pattern {pattern}").into(),
            None => "must match the required pattern".into(),
        },
        "email" => "must be an email address".into(),
        "url" => "must be a URL".into(),
        "contains" => format!("must contain {}", param("needle").unwrap_or_default()).into(),
        "does_not_contain" => {
            format!("must not contain {}", param("needle").unwrap_or_default()).into()
        }
        "must_match" => format!("must match {}", param("other").unwrap_or_default()).into(),
        "credit_card" => "must be a credit card number".into(),
        "non_control_character" => "must not contain control characters".into(),
        "required" => "is required".into(),
        custom => format!("failed the check `{custom}`").into(),
    };
    text.into_owned()
}
