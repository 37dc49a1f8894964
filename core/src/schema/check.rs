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

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use regex::Regex;
use serde_json::{Map, Number, Value};
use validator::{ValidateEmail, ValidateUrl};

use crate::json::{JsonView, Sets, View, canonical_text, identity_text, integer_value};
use crate::pointer::{Segment, pointer};
use crate::rejection::{RejectionCode, Violation};
use crate::schema::format_range;

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

type Id = usize;

/// The most subschemas one call's arguments are checked against. A value is checked once per
/// subschema that applies to it, so the count follows the arguments' size (a megabyte of them
/// is well within it), except where unions nest: each branch of an `anyOf` looks at the same
/// value, and a hostile value deep in nested unions would cost exponential time. Past the
/// budget the check stops and refuses.
const VISITS: usize = 2_000_000;

/// What a check found so far, and how many more subschemas it may visit.
struct Findings {
    list: Vec<Finding>,
    visits_left: usize,
}

impl Findings {
    fn with_budget(visits_left: usize) -> Findings {
        Findings {
            list: Vec::new(),
            visits_left,
        }
    }

    fn push(&mut self, finding: Finding) {
        self.list.push(finding);
    }

    fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// A fresh list for one branch of a union, on the same budget.
    fn branch(&self) -> Findings {
        Findings::with_budget(self.visits_left)
    }

    /// Takes back the budget a branch left.
    fn spent(&mut self, branch: &Findings) {
        self.visits_left = branch.visits_left;
    }
}

/// A step of the path to a value, borrowed from the arguments: a path is written out only for
/// a finding.
#[derive(Clone, Copy)]
enum Step<'p> {
    Key(&'p str),
    Index(usize),
}

/// The path as a JSON pointer (RFC 6901).
fn pointer_of(path: &[Step<'_>]) -> String {
    let segments: Vec<Segment> = path
        .iter()
        .map(|step| match step {
            Step::Key(key) => Segment::Key((*key).to_owned()),
            Step::Index(index) => Segment::Index(*index),
        })
        .collect();
    pointer(&segments)
}

/// The allowed values of an `enum` or `const`: compared one by one when they are few, by
/// their canonical text when they are many.
#[derive(Debug)]
enum Allowed {
    Few(Vec<Value>),
    Many(HashSet<String>),
}

impl Allowed {
    const FEW: usize = 16;

    fn new(values: &[Value]) -> Allowed {
        if values.len() <= Self::FEW {
            Allowed::Few(values.to_vec())
        } else {
            Allowed::Many(values.iter().map(canonical_text).collect())
        }
    }

    fn holds<J: JsonView>(&self, value: &J) -> bool {
        match self {
            Allowed::Few(values) => values.iter().any(|allowed| same(value, allowed)),
            Allowed::Many(texts) => texts.contains(&canonical_text(value)),
        }
    }
}

/// JSON Schema's equality: numbers by value, object members in any order.
fn same<J: JsonView>(value: &J, allowed: &Value) -> bool {
    match (value.view(), allowed) {
        (View::Null, Value::Null) => true,
        (View::Bool(a), Value::Bool(b)) => a == *b,
        (View::String(a), Value::String(b)) => a == b,
        (View::Number(a), Value::Number(b)) => compare(a, b).is_some_and(|order| order.is_eq()),
        (View::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b))
        }
        (View::Object(len), Value::Object(b)) => {
            let mut equal = len == b.len();
            value.for_each_member(&mut |key, member| {
                equal = equal && b.get(key).is_some_and(|allowed| same(member, allowed));
            });
            equal
        }
        _ => false,
    }
}

#[derive(Debug, Default)]
struct Compiled {
    /// `false`: nothing is valid.
    nothing: bool,
    types: Vec<JsonType>,
    allowed: Option<Allowed>,
    // numbers
    minimum: Option<Number>,
    maximum: Option<Number>,
    exclusive_minimum: Option<Number>,
    exclusive_maximum: Option<Number>,
    multiple_of: Option<Number>,
    // strings
    min_length: Option<u64>,
    max_length: Option<u64>,
    pattern: Option<(Regex, String)>,
    format: Option<Format>,
    /// The range a numeric `format` (`uint8`, `float`, ...) states: the Rust type's own, which
    /// its `Deserialize` enforces.
    type_range: Option<(Value, Value)>,
    // arrays
    items: Option<Id>,
    prefix_items: Vec<Id>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    unique_items: bool,
    // objects
    /// Sorted by name.
    properties: Vec<(String, Id)>,
    pattern_properties: Vec<(Regex, Id)>,
    required: Vec<String>,
    additional: Option<Id>,
    property_names: Option<Id>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    // applicators
    reference: Option<Id>,
    all_of: Vec<Id>,
    any_of: Vec<Id>,
    one_of: Vec<Id>,
    not: Option<Id>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonType {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Array,
    Object,
}

impl JsonType {
    fn parse(name: &str) -> Option<JsonType> {
        Some(match name {
            "null" => JsonType::Null,
            "boolean" => JsonType::Boolean,
            "integer" => JsonType::Integer,
            "number" => JsonType::Number,
            "string" => JsonType::String,
            "array" => JsonType::Array,
            "object" => JsonType::Object,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            JsonType::Null => "null",
            JsonType::Boolean => "a boolean",
            JsonType::Integer => "an integer",
            JsonType::Number => "a number",
            JsonType::String => "a string",
            JsonType::Array => "an array",
            JsonType::Object => "an object",
        }
    }

    fn holds<J: JsonView>(self, value: &J) -> bool {
        match (self, value.view()) {
            (JsonType::Null, View::Null)
            | (JsonType::Boolean, View::Bool(_))
            | (JsonType::Number, View::Number(_))
            | (JsonType::String, View::String(_))
            | (JsonType::Array, View::Array(_))
            | (JsonType::Object, View::Object(_)) => true,
            (JsonType::Integer, View::Number(number)) => {
                integer_value(number).is_some() || number.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Format {
    Email,
    Uri,
}

/// Keywords that describe and constrain nothing.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "example",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentEncoding",
    "contentMediaType",
];

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

impl Compiled {
    fn check_number(&self, number: &Number, path: &[Step<'_>], out: &mut Findings) {
        let below = |bound: &Option<Number>, strict: bool| {
            bound
                .as_ref()
                .is_some_and(|bound| match compare(number, bound) {
                    Some(order) => order.is_lt() || (strict && order.is_eq()),
                    None => true,
                })
        };
        let above = |bound: &Option<Number>, strict: bool| {
            bound
                .as_ref()
                .is_some_and(|bound| match compare(number, bound) {
                    Some(order) => order.is_gt() || (strict && order.is_eq()),
                    None => true,
                })
        };
        if below(&self.minimum, false)
            || below(&self.exclusive_minimum, true)
            || above(&self.maximum, false)
            || above(&self.exclusive_maximum, true)
        {
            let mut params = Map::new();
            for (name, bound) in [
                ("min", &self.minimum),
                ("exclusive_min", &self.exclusive_minimum),
                ("max", &self.maximum),
                ("exclusive_max", &self.exclusive_maximum),
            ] {
                if let Some(bound) = bound {
                    params.insert(name.to_owned(), Value::Number(bound.clone()));
                }
            }
            let message = describe("range", &params, false);
            out.push(constraint(path, "range", message, params));
        }
        if let Some(divisor) = &self.multiple_of
            && !is_multiple(number, divisor)
        {
            let mut params = Map::new();
            params.insert("multiple_of".to_owned(), Value::Number(divisor.clone()));
            out.push(constraint(
                path,
                "multiple_of",
                format!("must be a multiple of {divisor}"),
                params,
            ));
        }
    }

    fn check_string(&self, text: &str, path: &[Step<'_>], out: &mut Findings) {
        // Reading a string costs by its length: a long one, looked at under many unions, must
        // not cost more than the budget allows.
        let reads = self.min_length.is_some()
            || self.max_length.is_some()
            || self.pattern.is_some()
            || self.format.is_some();
        if reads {
            out.visits_left = out.visits_left.saturating_sub(text.len() / 64);
        }

        if self.min_length.is_some() || self.max_length.is_some() {
            let length = text.chars().count() as u64;
            if self.min_length.is_some_and(|min| length < min)
                || self.max_length.is_some_and(|max| length > max)
            {
                let params = bounds("min", self.min_length, "max", self.max_length);
                let message = length_message(&params, "characters");
                out.push(constraint(path, "length", message, params));
            }
        }
        if let Some((regex, pattern)) = &self.pattern
            && !regex.is_match(text)
        {
            let mut params = Map::new();
            params.insert("pattern".to_owned(), Value::String(pattern.clone()));
            let message = format!("must match the pattern {}", Value::String(pattern.clone()));
            out.push(constraint(path, "pattern", message, params));
        }
        match self.format {
            Some(Format::Email) if !text.validate_email() => {
                out.push(constraint(
                    path,
                    "email",
                    "must be an email address".to_owned(),
                    Map::new(),
                ));
            }
            Some(Format::Uri) if !text.validate_url() => {
                out.push(constraint(
                    path,
                    "url",
                    "must be a URL".to_owned(),
                    Map::new(),
                ));
            }
            _ => {}
        }
    }
}

/// Findings of a branch, ordered from closest to holding: shape findings weigh most.
fn rank(findings: &[Finding]) -> (usize, usize) {
    let shapes = findings
        .iter()
        .filter(|finding| matches!(finding, Finding::Shape { .. }))
        .count();
    (shapes, findings.len())
}

fn shape(code: RejectionCode, path: &[Step<'_>], message: &str) -> Finding {
    Finding::Shape {
        code,
        path: pointer_of(path),
        message: message.to_owned(),
    }
}

fn constraint(
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

fn bounds(
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

fn length_message(params: &Map<String, Value>, unit: &str) -> String {
    match (params.get("min"), params.get("max")) {
        (Some(min), Some(max)) if min == max => format!("must have exactly {min} {unit}"),
        (Some(min), Some(max)) => format!("must have {min} to {max} {unit}"),
        (Some(min), None) => format!("must have at least {min} {unit}"),
        (None, Some(max)) => format!("must have at most {max} {unit}"),
        (None, None) => "has the wrong length".to_owned(),
    }
}

/// Two numbers by value: exactly where both are integers, as floats otherwise.
fn compare(a: &Number, b: &Number) -> Option<std::cmp::Ordering> {
    match (integer_value(a), integer_value(b)) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

fn is_multiple(number: &Number, divisor: &Number) -> bool {
    match (integer_value(number), integer_value(divisor)) {
        (Some(_), Some(0)) => false,
        (Some(number), Some(divisor)) => number % divisor == 0,
        _ => match (number.as_f64(), divisor.as_f64()) {
            (Some(number), Some(divisor)) if divisor != 0.0 => (number / divisor).fract() == 0.0,
            _ => false,
        },
    }
}

struct Compiler<'s> {
    root: &'s Value,
    nodes: Vec<Compiled>,
    /// Subschemas already compiled, by JSON pointer: a `$ref` to one of them, or back to one
    /// being compiled (a recursive type), is that index.
    by_location: HashMap<String, Id>,
}

impl<'s> Compiler<'s> {
    /// Refuses a union whose alternatives a value can fit alike when an earlier one carries
    /// constraints of its own. serde's untagged enum takes the first alternative that decodes,
    /// while `anyOf` holds if any alternative does: `Percent(u8 up to 100) | Cents(u32)` would
    /// let 250 pass as `Cents` and reach the tool as `Percent(250)`.
    fn check_unions(&self) -> Result<(), String> {
        let location_of = |wanted: Id| {
            self.by_location
                .iter()
                .find(|(_, id)| **id == wanted)
                .map_or_else(|| "/".to_owned(), |(location, _)| location.clone())
        };
        for (id, node) in self.nodes.iter().enumerate() {
            for (index, &earlier) in node.any_of.iter().enumerate() {
                let overlapping = node.any_of[index + 1..]
                    .iter()
                    .any(|&later| self.types(earlier, 0) & self.types(later, 0) != 0);
                if overlapping && self.constrained(earlier, &mut Vec::new()) {
                    return Err(format!(
                        "the union at `{}` has alternatives a value can fit alike, and an earlier one has constraints the later ones do not enforce: serde would take the earlier one without them; tag the enum, or make its alternatives take different JSON types",
                        location_of(id)
                    ));
                }
            }
        }
        Ok(())
    }

    /// The JSON types a subschema accepts, as a mask (an integer is a number too). A chain of
    /// references or unions deeper than any type has is taken to accept everything.
    fn types(&self, id: Id, depth: usize) -> u8 {
        let node = &self.nodes[id];
        if depth > 64 {
            return u8::MAX;
        }
        if let Some(reference) = node.reference {
            return self.types(reference, depth + 1);
        }
        if node.types.is_empty() {
            return node
                .any_of
                .iter()
                .chain(&node.one_of)
                .map(|&branch| self.types(branch, depth + 1))
                .reduce(|a, b| a | b)
                .unwrap_or(u8::MAX);
        }
        node.types
            .iter()
            .map(|kind| match kind {
                JsonType::Integer | JsonType::Number => 0b0000_1100,
                other => 1 << (*other as u8),
            })
            .fold(0, |mask, bit| mask | bit)
    }

    /// Whether a subschema, or one within it, constrains a value beyond what its Rust type's
    /// `Deserialize` refuses: a bound tighter than the type's range, a length, a pattern, a
    /// format, unique items, a `not`.
    fn constrained(&self, id: Id, seen: &mut Vec<Id>) -> bool {
        if seen.contains(&id) {
            return false;
        }
        seen.push(id);
        let node = &self.nodes[id];
        let beyond_type = |bound: &Option<Number>, edge: Option<&Value>| {
            bound
                .as_ref()
                .is_some_and(|bound| edge.and_then(Value::as_number) != Some(bound))
        };
        let range = node.type_range.as_ref();
        let own = beyond_type(&node.minimum, range.map(|(min, _)| min))
            || beyond_type(&node.maximum, range.map(|(_, max)| max))
            || node.exclusive_minimum.is_some()
            || node.exclusive_maximum.is_some()
            || node.multiple_of.is_some()
            || node.min_length.is_some()
            || node.max_length.is_some()
            || node.pattern.is_some()
            || node.format.is_some()
            || node.min_items.is_some()
            || node.max_items.is_some()
            || node.unique_items
            || node.min_properties.is_some()
            || node.max_properties.is_some()
            || node.not.is_some();
        own || node
            .properties
            .iter()
            .map(|(_, id)| *id)
            .chain(node.items)
            .chain(node.prefix_items.iter().copied())
            .chain(node.additional)
            .chain(node.reference)
            .chain(node.all_of.iter().copied())
            .chain(node.any_of.iter().copied())
            .chain(node.one_of.iter().copied())
            .collect::<Vec<Id>>()
            .into_iter()
            .any(|child| self.constrained(child, seen))
    }

    fn compile(&mut self, schema: &'s Value, location: String) -> Result<Id, String> {
        if let Some(&id) = self.by_location.get(&location) {
            return Ok(id);
        }
        let id = self.nodes.len();
        self.nodes.push(Compiled::default());
        self.by_location.insert(location.clone(), id);
        let compiled = match schema {
            Value::Bool(true) => Compiled::default(),
            Value::Bool(false) => Compiled {
                nothing: true,
                ..Compiled::default()
            },
            Value::Object(keywords) => self.keywords(keywords, &location)?,
            other => return Err(format!("`{other}` at `{location}` is not a schema")),
        };
        self.nodes[id] = compiled;
        Ok(id)
    }

    fn keywords(
        &mut self,
        keywords: &'s Map<String, Value>,
        location: &str,
    ) -> Result<Compiled, String> {
        let mut node = Compiled::default();
        let at = |keyword: &str| format!("{location}/{keyword}");
        for (keyword, value) in keywords {
            let unexpected = || format!("`{keyword}` at `{location}` has an unexpected value");
            match keyword.as_str() {
                annotation if ANNOTATIONS.contains(&annotation) || annotation.starts_with("x-") => {
                }
                "type" => {
                    let names: Vec<&Value> = match value {
                        Value::Array(names) => names.iter().collect(),
                        single => vec![single],
                    };
                    for name in names {
                        let kind = name
                            .as_str()
                            .and_then(JsonType::parse)
                            .ok_or_else(unexpected)?;
                        node.types.push(kind);
                    }
                }
                "enum" => {
                    let values = value.as_array().ok_or_else(unexpected)?;
                    node.allowed = Some(Allowed::new(values));
                }
                "const" => node.allowed = Some(Allowed::new(std::slice::from_ref(value))),
                "minimum" => node.minimum = Some(number(value).ok_or_else(unexpected)?),
                "maximum" => node.maximum = Some(number(value).ok_or_else(unexpected)?),
                "exclusiveMinimum" => {
                    node.exclusive_minimum = Some(number(value).ok_or_else(unexpected)?)
                }
                "exclusiveMaximum" => {
                    node.exclusive_maximum = Some(number(value).ok_or_else(unexpected)?)
                }
                "multipleOf" => node.multiple_of = Some(number(value).ok_or_else(unexpected)?),
                "minLength" => node.min_length = Some(value.as_u64().ok_or_else(unexpected)?),
                "maxLength" => node.max_length = Some(value.as_u64().ok_or_else(unexpected)?),
                "minItems" => node.min_items = Some(value.as_u64().ok_or_else(unexpected)?),
                "maxItems" => node.max_items = Some(value.as_u64().ok_or_else(unexpected)?),
                "minProperties" => {
                    node.min_properties = Some(value.as_u64().ok_or_else(unexpected)?)
                }
                "maxProperties" => {
                    node.max_properties = Some(value.as_u64().ok_or_else(unexpected)?)
                }
                "uniqueItems" => node.unique_items = value.as_bool().ok_or_else(unexpected)?,
                "pattern" => {
                    let pattern = value.as_str().ok_or_else(unexpected)?;
                    node.pattern = Some((regex(pattern, location)?, pattern.to_owned()));
                }
                "format" => {
                    let format = value.as_str().ok_or_else(unexpected)?;
                    node.type_range = format_range(format);
                    node.format = match format {
                        "email" => Some(Format::Email),
                        "uri" | "url" => Some(Format::Uri),
                        _ => None,
                    }
                }
                "required" => {
                    let names = value.as_array().ok_or_else(unexpected)?;
                    for name in names {
                        node.required
                            .push(name.as_str().ok_or_else(unexpected)?.to_owned());
                    }
                }
                "properties" => {
                    let properties = value.as_object().ok_or_else(unexpected)?;
                    for (name, schema) in properties {
                        let id =
                            self.compile(schema, format!("{}/{}", at(keyword), escape(name)))?;
                        node.properties.push((name.clone(), id));
                    }
                    node.properties.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
                }
                "patternProperties" => {
                    let properties = value.as_object().ok_or_else(unexpected)?;
                    for (pattern, schema) in properties {
                        let id =
                            self.compile(schema, format!("{}/{}", at(keyword), escape(pattern)))?;
                        node.pattern_properties
                            .push((regex(pattern, location)?, id));
                    }
                }
                "additionalProperties" => node.additional = Some(self.compile(value, at(keyword))?),
                "propertyNames" => node.property_names = Some(self.compile(value, at(keyword))?),
                "items" => node.items = Some(self.compile(value, at(keyword))?),
                "prefixItems" => node.prefix_items = self.list(value, &at(keyword))?,
                "allOf" => node.all_of = self.list(value, &at(keyword))?,
                "anyOf" => node.any_of = self.list(value, &at(keyword))?,
                "oneOf" => node.one_of = self.list(value, &at(keyword))?,
                "not" => node.not = Some(self.compile(value, at(keyword))?),
                "$ref" => {
                    let reference = value.as_str().ok_or_else(unexpected)?;
                    let target = reference
                        .strip_prefix('#')
                        .and_then(|pointer| self.root.pointer(pointer))
                        .ok_or_else(|| format!("the reference `{reference}` at `{location}` names no schema of this document"))?;
                    let target_location = reference.trim_start_matches('#').to_owned();
                    node.reference = Some(self.compile(target, target_location)?);
                }
                _ => {
                    return Err(format!(
                        "the schema uses `{keyword}` at `{}`, which the gates cannot enforce",
                        if location.is_empty() { "/" } else { location }
                    ));
                }
            }
        }
        if !node.properties.is_empty() && node.additional.is_none() {
            // serde ignores a member its type does not name, or reads it under an alias the
            // schema does not show: what the schema says of the named members would not hold
            // for it, and the model would believe it had said something.
            return Err(format!(
                "the object at `{}` accepts members it does not name: add `#[serde(deny_unknown_fields)]` to its type",
                if location.is_empty() { "/" } else { location }
            ));
        }
        Ok(node)
    }

    fn list(&mut self, value: &'s Value, location: &str) -> Result<Vec<Id>, String> {
        let schemas = value
            .as_array()
            .ok_or_else(|| format!("`{location}` is not a list of schemas"))?;
        schemas
            .iter()
            .enumerate()
            .map(|(index, schema)| self.compile(schema, format!("{location}/{index}")))
            .collect()
    }
}

fn number(value: &Value) -> Option<Number> {
    value.as_number().cloned()
}

/// A schema's pattern, compiled to match as ECMA-262 (which JSON Schema names) matches it:
/// `\d`, `\w` and `\b` are ASCII there and Unicode in Rust, where `^\d+$` would take Arabic
/// digits ("١٢٣") and `\w` Cyrillic look-alikes.
fn regex(pattern: &str, location: &str) -> Result<Regex, String> {
    Regex::new(&ecma_classes(pattern))
        .map_err(|error| format!("the pattern at `{location}` does not compile: {error}"))
}

/// Whether `pattern` uses a class that ECMA-262 and Rust read differently.
fn has_unicode_classes(pattern: &str) -> bool {
    ecma_classes(pattern) != pattern
}

/// `pattern` with `\d`, `\D`, `\w`, `\W`, `\b` and `\B` made ASCII, inside and outside
/// bracket classes.
fn ecma_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push(c);
                    break;
                };
                let replacement = match (next, in_class) {
                    ('d', false) => "[0-9]",
                    ('D', false) => "[^0-9]",
                    ('w', false) => "[0-9A-Za-z_]",
                    ('W', false) => "[^0-9A-Za-z_]",
                    ('b', false) => "(?-u:\\b)",
                    ('B', false) => "(?-u:\\B)",
                    ('d', true) => "0-9",
                    ('D', true) => "[:^digit:]",
                    ('w', true) => "0-9A-Za-z_",
                    ('W', true) => "[:^word:]",
                    // In a class, ECMA-262's `\b` is a backspace.
                    ('b', true) => "\\x08",
                    _ => {
                        out.push(c);
                        out.push(next);
                        continue;
                    }
                };
                out.push_str(replacement);
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
                // A `]` right after `[` or `[^` is a literal.
                let mut lookahead = chars.clone();
                match lookahead.next() {
                    Some('^') => {
                        out.push('^');
                        chars.next();
                        if lookahead.next() == Some(']') {
                            out.push(']');
                            chars.next();
                        }
                    }
                    Some(']') => {
                        out.push(']');
                        chars.next();
                    }
                    _ => {}
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

fn escape(name: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
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
