//! The arguments' schema, compiled once when the registry is built and checked against every
//! call's arguments as sent: what the schema shows the model is what the gates enforce.
//!
//! The arguments' own `Validate` checks what its author declared, but only where validator is
//! told to look (`#[validate(nested)]`, and never inside a map, a `Box` or an enum's variant),
//! while schemars shows the constraints of every type the arguments hold. This check walks the
//! schema itself, so no constraint it shows is left unchecked: inside containers, enum variants
//! and user types alike. Numbers are compared as they were sent, at the precision of JSON, so a
//! bound holds exactly as an independent JSON Schema validator reads it.
//!
//! Keywords the check does not know are refused when the registry is built, so that nothing is
//! shown that is not enforced. Formats other than `email` and `uri` (`uint8`, `double`,
//! `uuid`, ...) are annotations, as JSON Schema 2020-12 has them; the decode gate holds each
//! value to its Rust type.

mod compiled;
mod compiler;
mod findings;
mod scalars;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::json::{JsonView, Sets, View, canonical_text, identity_text};
use crate::rejection::RejectionCode;
use compiled::{Compiled, Id};
use compiler::{Compiler, has_unicode_classes};
use findings::{
    Findings, Step, bounds, constraint, escape, length_message, pointer_of, rank, shape,
};

pub(crate) use findings::{Finding, describe};

/// A compiled schema: its subschemas in an arena, `$ref`s resolved to indices.
#[derive(Debug)]
pub(crate) struct SchemaCheck {
    nodes: Vec<Compiled>,
    /// Nothing is left to check that the arguments' type and own checks do not: every
    /// property is checked in code, and the object around them is the arguments struct, whose
    /// `Deserialize` refuses unknown and missing members.
    checked_in_code: bool,
    /// The root's properties as compiled, before those checked in code were left out: which
    /// of their lists are sets still matters to [`SchemaCheck::identity_text`].
    root_properties: Vec<(String, Id)>,
    /// Some list of the arguments is a set (`uniqueItems`).
    has_sets: bool,
}

/// The most subschemas one call's arguments are checked against. A value is checked once per
/// subschema that applies to it, so the count follows the arguments' size (a megabyte of them
/// is well within it), except where unions nest: each branch of an `anyOf` looks at the same
/// value, and a hostile value deep in nested unions would cost exponential time. Past the
/// budget the check stops and refuses.
const VISITS: usize = 2_000_000;

impl SchemaCheck {
    /// Compiles `schema`, or says which part of it the check cannot enforce. The properties
    /// named in `checked_in_code` are left to the arguments' type and own checks.
    pub(crate) fn compile(
        schema: &Value,
        checked_in_code: &[String],
    ) -> Result<SchemaCheck, String> {
        let mut compiler = Compiler {
            root: schema,
            nodes: Vec::new(),
            by_location: HashMap::new(),
        };
        compiler.compile(schema, String::new())?;
        compiler.check_unions()?;
        let mut nodes = compiler.nodes;
        let root_properties = nodes[0].properties.clone();
        let has_sets = nodes.iter().any(|node| node.unique_items);
        let anything = nodes.len();
        nodes.push(Compiled::default());
        // A pattern with a class ECMA-262 reads otherwise than the argument's own (Rust)
        // check is still checked here.
        let divergent: Vec<bool> = nodes[0]
            .properties
            .iter()
            .map(|(_, id)| {
                nodes[*id]
                    .pattern
                    .as_ref()
                    .is_some_and(|(_, pattern)| has_unicode_classes(pattern))
            })
            .collect();
        for ((name, id), divergent) in nodes[0].properties.iter_mut().zip(divergent) {
            if checked_in_code.contains(name) && !divergent {
                *id = anything;
            }
        }
        let root = &nodes[0];
        let only_structure = root.allowed.is_none()
            && root.reference.is_none()
            && root.all_of.is_empty()
            && root.any_of.is_empty()
            && root.one_of.is_empty()
            && root.not.is_none()
            && root.pattern_properties.is_empty()
            && root.property_names.is_none()
            && root.min_properties.is_none()
            && root.max_properties.is_none()
            && root
                .additional
                .is_some_and(|additional| nodes[additional].nothing);
        let checked_in_code = !checked_in_code.is_empty()
            && only_structure
            && root.properties.iter().all(|(_, id)| *id == anything);
        Ok(SchemaCheck {
            nodes,
            checked_in_code,
            root_properties,
            has_sets,
        })
    }

    /// Whether a list of the arguments may be a set (`uniqueItems`), whose elements the
    /// identity text puts in order.
    pub(crate) fn has_sets(&self) -> bool {
        self.has_sets
    }

    /// The text by which two calls of this tool are told apart as calls: see
    /// [`identity_text`]. The lists the schema calls sets (`uniqueItems`: a `HashSet`, a
    /// `BTreeSet`) are written in one order; in a union, those of the forms the value takes.
    /// Should finding those forms take more than the check's effort, no list counts as a set
    /// from there on: two spellings of one call may then be told apart, never two calls taken
    /// for one.
    pub(crate) fn identity_text(&self, canonical: &Value) -> String {
        if self.has_sets {
            let budget = RefCell::new(Findings::with_budget(VISITS));
            identity_text(canonical, SetsAt::new(self, &budget, vec![0], canonical))
        } else {
            canonical_text(canonical)
        }
    }

    /// Everything `arguments` break, each at its JSON pointer.
    pub(crate) fn check<J: JsonView>(&self, arguments: &J) -> Vec<Finding> {
        if self.checked_in_code {
            return Vec::new();
        }
        let mut findings = Findings::with_budget(VISITS);
        self.node(0, arguments, &mut Vec::new(), &mut findings);
        if findings.visits_left == 0 {
            // Whatever a branch that ran out decided, nothing of this check can be trusted.
            return vec![shape(
                RejectionCode::ArgumentsTooLarge,
                &[],
                "the arguments are too complex to check against their schema",
            )];
        }
        findings.list
    }

    fn node<'p, J: JsonView>(
        &self,
        id: Id,
        value: &'p J,
        path: &mut Vec<Step<'p>>,
        out: &mut Findings,
    ) {
        if out.visits_left == 0 {
            return;
        }
        out.visits_left -= 1;
        let node = &self.nodes[id];
        if node.nothing {
            out.push(shape(
                RejectionCode::InvalidValue,
                path,
                "no value is allowed here",
            ));
            return;
        }
        if !node.types.is_empty() && !node.types.iter().any(|kind| kind.holds(value)) {
            let expected: Vec<&str> = node.types.iter().map(|kind| kind.name()).collect();
            let message = format!("expected {}", expected.join(" or "));
            out.push(shape(RejectionCode::InvalidType, path, &message));
            return;
        }
        if let Some(allowed) = &node.allowed
            && !allowed.holds(value)
        {
            out.push(shape(
                RejectionCode::InvalidValue,
                path,
                "the value is not one of the allowed values",
            ));
            return;
        }
        if let Some(reference) = node.reference {
            self.node(reference, value, path, out);
        }
        match value.view() {
            View::Number(number) => node.check_number(number, path, out),
            View::String(text) => node.check_string(text, path, out),
            View::Array(items) => self.array(node, items, path, out),
            View::Object(len) => self.object(node, value, len, path, out),
            View::Null | View::Bool(_) => {}
        }
        for &branch in &node.all_of {
            self.node(branch, value, path, out);
        }
        if !node.any_of.is_empty() {
            self.any_of(&node.any_of, value, path, out);
        }
        if !node.one_of.is_empty() {
            self.one_of(&node.one_of, value, path, out);
        }
        if let Some(not) = node.not
            && self.passes(not, value, path, out)
        {
            let described = match &self.nodes[not].pattern {
                Some((_, pattern)) => format!("must not match the pattern {pattern}"),
                None => "must not have this form".to_owned(),
            };
            out.push(constraint(path, "not", described, Map::new()));
        }
    }

    /// Whether `value` takes the union's form `branch`, within `budget`: a form that could not
    /// be checked to the end is not taken.
    fn takes(&self, branch: Id, value: &Value, budget: &RefCell<Findings>) -> bool {
        let mut budget = budget.borrow_mut();
        let taken = self.passes(branch, value, &mut Vec::new(), &mut budget);
        taken && budget.visits_left > 0
    }

    fn passes<'p, J: JsonView>(
        &self,
        id: Id,
        value: &'p J,
        path: &mut Vec<Step<'p>>,
        out: &mut Findings,
    ) -> bool {
        let mut findings = out.branch();
        self.node(id, value, path, &mut findings);
        out.spent(&findings);
        findings.is_empty()
    }

    /// At least one branch holds; else the findings of the branch closest to holding: the one
    /// whose shape fits, with the fewest findings.
    fn any_of<'p, J: JsonView>(
        &self,
        branches: &[Id],
        value: &'p J,
        path: &mut Vec<Step<'p>>,
        out: &mut Findings,
    ) {
        let mut best: Option<Vec<Finding>> = None;
        for &branch in branches {
            let mut findings = out.branch();
            self.node(branch, value, path, &mut findings);
            out.spent(&findings);
            if findings.is_empty() {
                return;
            }
            if best
                .as_ref()
                .is_none_or(|best| rank(&findings.list) < rank(best))
            {
                best = Some(findings.list);
            }
        }
        out.list.extend(best.unwrap_or_default());
    }

    /// Exactly one branch holds.
    fn one_of<'p, J: JsonView>(
        &self,
        branches: &[Id],
        value: &'p J,
        path: &mut Vec<Step<'p>>,
        out: &mut Findings,
    ) {
        let holding = branches
            .iter()
            .filter(|&&branch| self.passes(branch, value, path, out))
            .count();
        match holding {
            1 => {}
            0 => self.any_of(branches, value, path, out),
            _ => out.push(shape(
                RejectionCode::InvalidValue,
                path,
                "the value fits more than one of the allowed forms",
            )),
        }
    }

    fn array<'p, J: JsonView>(
        &self,
        node: &Compiled,
        items: &'p [J],
        path: &mut Vec<Step<'p>>,
        out: &mut Findings,
    ) {
        let count = items.len() as u64;
        if node.min_items.is_some_and(|min| count < min)
            || node.max_items.is_some_and(|max| count > max)
        {
            let params = bounds("min", node.min_items, "max", node.max_items);
            let message = length_message(&params, "items");
            out.push(constraint(path, "length", message, params));
        }
        if node.unique_items {
            let mut seen = HashSet::with_capacity(items.len());
            if let Some(second) = items
                .iter()
                .position(|item| !seen.insert(canonical_text(item)))
            {
                path.push(Step::Index(second));
                out.push(shape(
                    RejectionCode::InvalidValue,
                    path,
                    "the value appears twice: each element must be unique",
                ));
                path.pop();
            }
        }
        for (index, item) in items.iter().enumerate() {
            let schema = node.prefix_items.get(index).copied().or(node.items);
            if let Some(schema) = schema {
                path.push(Step::Index(index));
                self.node(schema, item, path, out);
                path.pop();
            }
        }
    }

    fn object<'p, J: JsonView>(
        &self,
        node: &Compiled,
        value: &'p J,
        len: usize,
        path: &mut Vec<Step<'p>>,
        out: &mut Findings,
    ) {
        let count = len as u64;
        if node.min_properties.is_some_and(|min| count < min)
            || node.max_properties.is_some_and(|max| count > max)
        {
            let params = bounds("min", node.min_properties, "max", node.max_properties);
            let message = length_message(&params, "entries");
            out.push(constraint(path, "length", message, params));
        }
        for name in &node.required {
            if value.member(name).is_none() {
                out.push(Finding::Shape {
                    code: RejectionCode::MissingArgument,
                    path: format!("{}/{}", pointer_of(path), escape(name)),
                    message: format!("`{name}` is required"),
                });
            }
        }
        value.for_each_member(&mut |key, member| {
            path.push(Step::Key(key));
            if let Some(names) = node.property_names {
                let name = Value::String(key.to_owned());
                if !self.passes(names, &name, &mut Vec::new(), out) {
                    out.push(shape(
                        RejectionCode::InvalidValue,
                        path,
                        "this name is not allowed",
                    ));
                }
            }
            let mut matched = false;
            let property = node
                .properties
                .binary_search_by(|(name, _)| name.as_str().cmp(key))
                .ok()
                .map(|index| node.properties[index].1);
            if let Some(schema) = property {
                matched = true;
                self.node(schema, member, path, out);
            }
            for (pattern, schema) in &node.pattern_properties {
                if pattern.is_match(key) {
                    matched = true;
                    self.node(*schema, member, path, out);
                }
            }
            if !matched && let Some(additional) = node.additional {
                if self.nodes[additional].nothing {
                    out.push(shape(
                        RejectionCode::UnknownArgument,
                        path,
                        &format!("`{key}` is not an accepted name"),
                    ));
                } else {
                    self.node(additional, member, path, out);
                }
            }
            path.pop();
        });
    }
}

/// The schemas that apply to one value of the arguments, for [`SchemaCheck::identity_text`].
struct SetsAt<'c> {
    check: &'c SchemaCheck,
    /// The effort spent finding the forms of unions, shared by the whole value.
    budget: &'c RefCell<Findings>,
    /// With every schema they refer to or combine, each once: of a union, the forms the value
    /// takes (the tag of an enum decides; a list in another form may be a set).
    ids: Vec<Id>,
}

impl<'c> SetsAt<'c> {
    fn new(
        check: &'c SchemaCheck,
        budget: &'c RefCell<Findings>,
        ids: Vec<Id>,
        value: &Value,
    ) -> Self {
        let mut seen = HashSet::new();
        let mut expanded = Vec::with_capacity(ids.len());
        let mut pending = ids;
        while let Some(id) = pending.pop() {
            if !seen.insert(id) {
                continue;
            }
            expanded.push(id);
            let node = &check.nodes[id];
            pending.extend(node.reference);
            pending.extend(&node.all_of);
            for &branch in node.any_of.iter().chain(&node.one_of) {
                if check.takes(branch, value, budget) {
                    pending.push(branch);
                }
            }
        }
        SetsAt {
            check,
            budget,
            ids: expanded,
        }
    }
}

impl Sets<Value> for SetsAt<'_> {
    fn is_set(&self) -> bool {
        self.ids.iter().any(|&id| self.check.nodes[id].unique_items)
    }

    fn item(&self, index: usize, item: &Value) -> Self {
        let items = self.ids.iter().filter_map(|&id| {
            let node = &self.check.nodes[id];
            node.prefix_items.get(index).copied().or(node.items)
        });
        SetsAt::new(self.check, self.budget, items.collect(), item)
    }

    fn member(&self, key: &str, member: &Value) -> Self {
        let mut members = Vec::new();
        for &id in &self.ids {
            let node = &self.check.nodes[id];
            let properties = match id {
                0 => &self.check.root_properties,
                _ => &node.properties,
            };
            let before = members.len();
            if let Ok(found) = properties.binary_search_by(|(name, _)| name.as_str().cmp(key)) {
                members.push(properties[found].1);
            }
            members.extend(
                node.pattern_properties
                    .iter()
                    .filter(|(pattern, _)| pattern.is_match(key))
                    .map(|(_, schema)| *schema),
            );
            if members.len() == before {
                members.extend(node.additional);
            }
        }
        SetsAt::new(self.check, self.budget, members, member)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compiler::ecma_classes;
    use serde_json::json;

    fn findings(schema: Value, value: Value) -> Vec<(String, String)> {
        let check = SchemaCheck::compile(&schema, &[]).expect("the schema compiles");
        check
            .check(&value)
            .into_iter()
            .map(|finding| match finding {
                Finding::Constraint(violation) => (violation.path, violation.rule),
                Finding::Shape { code, path, .. } => (path, code.to_string()),
            })
            .collect()
    }

    fn pair(path: &str, rule: &str) -> (String, String) {
        (path.to_owned(), rule.to_owned())
    }

    #[test]
    fn one_call_has_one_identity_whatever_order_its_sets_are_written_in() {
        let set = json!({"type": "array", "uniqueItems": true});
        let list = json!({"type": "array", "items": {"type": "integer"}});
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "tags": set,
                "route": {"type": "array", "items": {"type": "string"}},
                "kept": set,
                "by_shelf": {"type": "object", "patternProperties": {"^[0-9]+$": set}, "additionalProperties": false},
                "shape": {"oneOf": [
                    {"type": "object", "properties": {"set": set}, "required": ["set"], "additionalProperties": false},
                    {"type": "object", "properties": {"list": list}, "required": ["list"], "additionalProperties": false}
                ]},
                "nested": {"$ref": "#/$defs/Sets"}
            },
            "$defs": {"Sets": {"type": "array", "uniqueItems": true, "items": set}}
        });
        // `kept` is checked in code: its order still does not make another call.
        let check = SchemaCheck::compile(&schema, &["kept".to_owned()]).expect("compiles");
        let identity = |value: Value| check.identity_text(&value);
        let call = json!({
            "tags": ["b", "a"], "route": ["x", "y"], "kept": [2, 1], "by_shelf": {"7": [3, 1]},
            "shape": {"set": ["q", "p"]}, "nested": [["d", "c"], ["a"]]
        });
        let respelt = json!({
            "tags": ["a", "b"], "route": ["x", "y"], "kept": [1, 2], "by_shelf": {"7": [1, 3]},
            "shape": {"set": ["p", "q"]}, "nested": [["a"], ["c", "d"]]
        });
        assert_eq!(identity(call.clone()), identity(respelt));
        // The order of a list that is no set is part of the call.
        let mut reversed = call.clone();
        reversed["route"] = json!(["y", "x"]);
        assert_ne!(identity(call.clone()), identity(reversed));
        let list = |items: Value| identity(json!({"shape": {"list": items}}));
        assert_ne!(list(json!([1, 2])), list(json!([2, 1])));
        // Elements are compared whole: other elements, or other counts, are another call.
        let tags = |items: Value| identity(json!({"tags": items}));
        assert_ne!(tags(json!(["a,b"])), tags(json!(["a", "b"])));
        assert_ne!(tags(json!([1, 1, 2])), tags(json!([1, 2, 2])));
    }

    #[test]
    fn constraints_inside_maps_boxes_and_variants_are_found() {
        let schema = json!({
            "type": "object",
            "properties": {
                "by_name": {"type": "object", "additionalProperties": {"$ref": "#/$defs/Dims"}},
                "shape": {"oneOf": [
                    {"type": "object", "properties": {"Boxed": {"$ref": "#/$defs/Dims"}}, "required": ["Boxed"], "additionalProperties": false},
                    {"type": "string", "const": "Point"},
                ]},
            },
            "additionalProperties": false,
            "$defs": {"Dims": {"type": "object", "properties": {"width": {"type": "integer", "minimum": 1}}, "additionalProperties": false}},
        });
        let value = json!({"by_name": {"a": {"width": 0}, "b": {"width": 2}}, "shape": {"Boxed": {"width": 0.0}}});
        assert_eq!(
            findings(schema, value),
            [
                pair("/by_name/a/width", "range"),
                pair("/shape/Boxed/width", "range")
            ]
        );
    }

    #[test]
    fn sets_refuse_the_second_occurrence() {
        let schema = json!({"type": "array", "uniqueItems": true, "items": {"type": "integer"}});
        assert_eq!(
            findings(schema.clone(), json!([1, 2, 1.0])),
            [pair("/2", "invalid_value")]
        );
        assert!(findings(schema, json!([1, 2, 3])).is_empty());
    }

    #[test]
    fn bounds_hold_exactly() {
        let schema = json!({"type": "number", "exclusiveMaximum": 100.0, "minimum": 0.1});
        assert!(findings(schema.clone(), json!(99.99999999999999)).is_empty());
        assert!(findings(schema.clone(), json!(0.1)).is_empty());
        assert_eq!(findings(schema.clone(), json!(100)), [pair("", "range")]);
        assert_eq!(
            findings(schema, json!(0.09999999999999999)),
            [pair("", "range")]
        );
        let schema = json!({"type": "integer", "maximum": u64::MAX});
        assert!(findings(schema.clone(), json!(u64::MAX)).is_empty());
        assert_eq!(findings(schema, json!(1.9e19)), [pair("", "range")]);
    }

    #[test]
    fn not_a_pattern_and_formats() {
        let schema = json!({"type": "string", "not": {"pattern": "admin"}, "format": "email"});
        assert_eq!(
            findings(schema.clone(), json!("admin@example.com")),
            [pair("", "not")]
        );
        assert_eq!(findings(schema, json!("nobody")), [pair("", "email")]);
    }

    #[test]
    fn unknown_keywords_are_refused_when_compiled() {
        let error = SchemaCheck::compile(&json!({"type": "object", "dependentRequired": {}}), &[])
            .unwrap_err();
        assert!(error.contains("dependentRequired"), "{error}");
        assert!(SchemaCheck::compile(&json!({"$ref": "#/$defs/Missing"}), &[]).is_err());
        assert!(SchemaCheck::compile(&json!({"pattern": "(unclosed"}), &[]).is_err());
    }

    #[test]
    fn nested_unions_cannot_make_the_check_explode() {
        // Each level is a union of two branches that look at the same value: checked naively,
        // a violation at depth 30 costs 2^30 visits.
        let schema = json!({"$ref": "#/$defs/U", "$defs": {"U": {"anyOf": [
            {"type": "array", "items": {"$ref": "#/$defs/U"}},
            {"type": "array", "items": {"$ref": "#/$defs/U"}},
            {"type": "string"},
        ]}}});
        let mut value = json!(1);
        for _ in 0..30 {
            value = json!([value]);
        }
        let findings = findings(schema, value);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].1, "arguments_too_large");
    }

    #[test]
    fn patterns_match_as_ecma_262_reads_them() {
        let schema = json!({"type": "string", "pattern": "^\\d+\\b[\\w-]*$"});
        assert!(
            findings(schema.clone(), json!("123 ab-c")).len() == 1,
            "a space is no word"
        );
        assert!(findings(schema.clone(), json!("123")).is_empty());
        assert_eq!(
            findings(schema.clone(), json!("١٢٣")),
            [pair("", "pattern")]
        );
        assert_eq!(findings(schema, json!("12é")), [pair("", "pattern")]);
        assert_eq!(ecma_classes(r"[^\d\W]\s\\d"), r"[^0-9[:^word:]]\s\\d");
        assert_eq!(ecma_classes(r"[]\d]"), r"[]0-9]");
    }

    #[test]
    fn objects_must_refuse_members_they_do_not_name() {
        let open = json!({"type": "object", "properties": {"inner": {
            "type": "object", "properties": {"quantity": {"type": "integer", "maximum": 5}}
        }}, "additionalProperties": false});
        let error = SchemaCheck::compile(&open, &[]).unwrap_err();
        assert!(error.contains("/properties/inner"), "{error}");
        assert!(error.contains("deny_unknown_fields"), "{error}");
    }

    #[test]
    fn overlapping_unions_with_constraints_are_refused() {
        let percent_or_cents = json!({"anyOf": [
            {"type": "integer", "format": "uint8", "minimum": 0, "maximum": 100},
            {"type": "integer", "format": "uint32", "minimum": 0, "maximum": 4_294_967_295u64},
        ]});
        let error = SchemaCheck::compile(&percent_or_cents, &[]).unwrap_err();
        assert!(error.contains("tag the enum"), "{error}");
        // The type's own range is no constraint of its own: serde refuses 300 as a `u8`.
        let small_or_large = json!({"anyOf": [
            {"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255},
            {"type": "integer", "format": "uint32", "minimum": 0, "maximum": 4_294_967_295u64},
        ]});
        assert!(SchemaCheck::compile(&small_or_large, &[]).is_ok());
        let count_or_label = json!({"anyOf": [
            {"type": "integer", "maximum": 9},
            {"type": "string"},
        ]});
        assert!(SchemaCheck::compile(&count_or_label, &[]).is_ok());
        let endless = json!({"$ref": "#/$defs/A", "$defs": {"A": {"anyOf": [
            {"$ref": "#/$defs/A"},
            {"type": "string", "maxLength": 3},
        ]}}});
        assert!(SchemaCheck::compile(&endless, &[]).is_err());
    }

    #[test]
    fn recursive_types_compile_once() {
        let schema = json!({"$ref": "#/$defs/Tree", "$defs": {"Tree": {"type": "object", "properties": {
            "label": {"type": "string", "maxLength": 2},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
        }, "additionalProperties": false}}});
        let value = json!({"label": "a", "children": [{"label": "abc", "children": []}]});
        assert_eq!(
            findings(schema, value),
            [pair("/children/0/label", "length")]
        );
    }
}
