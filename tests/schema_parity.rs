//! Parity between dispatch and an independent JSON Schema validator, over inputs generated
//! from each tool's exported schema itself.
//!
//! `parity.rs` knows the fields of the shared tools and their edge cases by name. This test
//! knows nothing of any tool: it walks the exported schema and generates arguments near every
//! edge it states (numbers at, just inside and just beyond each bound, integral floats where
//! integers go, strings and lists one short of and one over their lengths, repeated elements of
//! sets, missing and unknown members, enum tags of the wrong type, every branch of every union),
//! then dispatches each, as a value and as text, and checks it with the `jsonschema` crate. It
//! covers the shared tools and the shapes of `common/shapes.rs`: maps and sets of validated
//! types, `Box`, `Vec<Option<T>>`, enum payloads, internally and adjacently tagged and untagged
//! enums, `f32` and `f64` bounds, `does_not_contain`, user types without
//! `#[validate(nested)]`. Over 100,000 inputs; no disagreement is allowed.
//!
//! "Accepted by the gates" means completed, waiting for approval, or refused by the execute
//! gate (the buggy tools panic, `charge_card` fails, `slow_report` may time out).
//!
//! Not compared, because no JSON Schema keyword states them:
//!
//! * the custom check of `transfer-funds` (`no_test_reference`): arguments whose `reference`
//!   contains "test" in any case are only checked to be refused;
//! * whole numbers beyond 2^53 written as floats, which the gates refuse where an integer is
//!   expected (the float may stand for another number): never generated.
//!
//! Where the independent validator is itself wrong, or disagrees on matters of taste, the
//! generator stays out of the way: emails and URIs come from lists both judge alike (see
//! `parity.rs` for the esoteric inputs on which validator and jsonschema differ), and strings
//! never end in a newline (Python's `re`, unlike Rust's and ECMA-262's, lets `$` match before
//! a final newline; jsonschema follows ECMA-262, as the gates do).

#[allow(clippy::too_many_arguments)]
mod common;
#[path = "common/shapes.rs"]
mod shapes;

use std::collections::BTreeMap;

use common::generated::{Rng, accepted, holds_inexact_integer, seed_of, silence_tool_panics};
use portcullis::prelude::*;
use serde_json::{Map, Number, Value, json};

/// Cases per tool; the slow tool waits up to its timeout for some of them.
const CASES: usize = 10_000;
const SLOW_CASES: usize = 300;

/// Generates arguments near the edges a schema states.
struct Generator<'s> {
    root: &'s Value,
    rng: Rng,
    /// Whether this case may break the schema on purpose (a wrong type, a wrong tag, a missing
    /// or unknown member) besides going to the edges of its bounds; half the cases are clean, so
    /// that deep objects are accepted often enough.
    noisy: bool,
}

const EMAILS: &[&str] = &[
    "alice@example.com",
    "bob.smith@mail.example.org",
    "not an email",
    "alice",
    "@example.com",
];
const URIS: &[&str] = &[
    "https://example.com/path",
    "http://localhost:8080/x?y=1",
    "not a url",
    "example.com",
];
const CHARS: &[char] = &[
    'a', 'b', 'e', 's', 't', 'z', '_', 'A', 'Z', '0', '9', ' ', '-', 'é', '日', '🦀', 'x', 'd',
];
const WORDS: &[&str] = &[
    "users",
    "orders",
    "admin",
    "superadmin",
    "acme",
    "x",
    "Point",
];

impl<'s> Generator<'s> {
    fn resolve<'v>(&self, schema: &'v Value) -> &'v Value
    where
        's: 'v,
    {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(reference) => reference
                .strip_prefix('#')
                .and_then(|pointer| self.root.pointer(pointer))
                .map_or(schema, |target| self.resolve(target)),
            None => schema,
        }
    }

    fn value(&mut self, schema: &Value, depth: usize) -> Value {
        let schema = self.resolve(schema);
        if depth > 6 {
            return Value::Null;
        }
        for keyword in ["oneOf", "anyOf"] {
            if let Some(branches) = schema.get(keyword).and_then(Value::as_array) {
                let branch = self.rng.pick(branches).clone();
                return self.value(&branch, depth + 1);
            }
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            return self.choice(values);
        }
        if let Some(value) = schema.get("const") {
            return self.choice(std::slice::from_ref(value));
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(single)) => vec![single.as_str()],
            Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
            _ => vec!["string", "integer", "object"],
        };
        let kind = if self.noisy && self.rng.percent(3) {
            *self.rng.pick(&[
                "null", "boolean", "string", "integer", "number", "array", "object",
            ])
        } else {
            *self.rng.pick(&types)
        };
        match kind {
            "null" => Value::Null,
            "boolean" => Value::Bool(self.rng.percent(50)),
            "integer" => self.integer(schema),
            "number" => self.number(schema),
            "string" => self.string(schema),
            "array" => self.array(schema, depth),
            _ => self.object(schema, depth),
        }
    }

    /// One of the allowed values, or now and then a value of another type or spelling (an enum
    /// tag as its variant's index).
    fn choice(&mut self, values: &[Value]) -> Value {
        match self.rng.below(if self.noisy { 20 } else { 1_000_000 }) {
            0 => json!(0),
            1 => json!(self.rng.pick(WORDS).to_lowercase()),
            2 => Value::Null,
            _ => self.rng.pick(values).clone(),
        }
    }

    fn bounds(schema: &Value) -> Vec<f64> {
        ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]
            .iter()
            .filter_map(|keyword| schema.get(*keyword).and_then(Value::as_f64))
            .collect()
    }

    fn integer(&mut self, schema: &Value) -> Value {
        let exact: Vec<i128> = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]
            .iter()
            .filter_map(|keyword| {
                let bound = schema.get(*keyword)?;
                bound
                    .as_i64()
                    .map(i128::from)
                    .or_else(|| bound.as_u64().map(i128::from))
                    .or_else(|| bound.as_f64().map(|f| f as i128))
            })
            .collect();
        let base = match exact.is_empty() || self.rng.percent(20) {
            true => self.rng.below(200) as i128 - 20,
            false => self
                .rng
                .pick(&exact)
                .saturating_add(*self.rng.pick(&[-1, 0, 0, 1])),
        };
        let within = (-(1i128 << 53)..=(1i128 << 53)).contains(&base);
        match self.rng.below(10) {
            // A whole number written as a float: an integer to JSON Schema and to the gates.
            0 | 1 if within => json!(base as f64),
            2 if self.noisy => json!(base as f64 + 0.5),
            _ => int_value(base),
        }
    }

    fn number(&mut self, schema: &Value) -> Value {
        let bounds = Self::bounds(schema);
        if bounds.is_empty() || self.rng.percent(15) {
            return json!(*self.rng.pick(&[0.0, 0.5, 1.0, -2.25, 3.0e10, 99.5]));
        }
        let bound = *self.rng.pick(&bounds);
        let nudged = match self.rng.below(8) {
            0 => next_after(bound, true),
            1 => next_after(bound, false),
            2 => bound + 1e-6,
            3 => bound - 1e-6,
            4 => bound + 1.0,
            5 => bound - 1.0,
            _ => bound,
        };
        Number::from_f64(nudged).map_or(Value::Null, Value::Number)
    }

    fn string(&mut self, schema: &Value) -> Value {
        match schema.get("format").and_then(Value::as_str) {
            Some("email") => return json!(self.rng.pick(EMAILS)),
            Some("uri") => return json!(self.rng.pick(URIS)),
            _ => {}
        }
        if self.rng.percent(25) {
            return json!(self.rng.pick(WORDS));
        }
        let lengths: Vec<usize> = ["minLength", "maxLength"]
            .iter()
            .filter_map(|keyword| schema.get(*keyword).and_then(Value::as_u64))
            .map(|length| length as usize)
            .collect();
        let length = match lengths.is_empty() {
            true => self.rng.below(12),
            false => (*self.rng.pick(&lengths) + self.rng.below(3)).saturating_sub(1),
        };
        // Mostly the lower-case letters the tools' patterns take.
        let text: String = (0..length)
            .map(|_| match self.rng.percent(75) {
                true => (b'a' + self.rng.below(26) as u8) as char,
                false => *self.rng.pick(CHARS),
            })
            .collect();
        json!(text)
    }

    fn array(&mut self, schema: &Value, depth: usize) -> Value {
        let lengths: Vec<usize> = ["minItems", "maxItems"]
            .iter()
            .filter_map(|keyword| schema.get(*keyword).and_then(Value::as_u64))
            .map(|length| length as usize)
            .collect();
        let length = match lengths.is_empty() {
            true => self.rng.below(4),
            false => (*self.rng.pick(&lengths) + self.rng.below(3)).saturating_sub(1),
        };
        let prefix = schema.get("prefixItems").and_then(Value::as_array).cloned();
        let items = schema.get("items").cloned().unwrap_or(json!({}));
        let mut elements: Vec<Value> = (0..length.min(6))
            .map(|index| {
                let item = prefix
                    .as_ref()
                    .and_then(|prefix| prefix.get(index))
                    .unwrap_or(&items)
                    .clone();
                self.value(&item, depth + 1)
            })
            .collect();
        // A repeated element, for sets above all.
        if !elements.is_empty() && self.rng.percent(20) {
            let repeated = elements[self.rng.below(elements.len())].clone();
            elements.push(respell(repeated));
        }
        Value::Array(elements)
    }

    fn object(&mut self, schema: &Value, depth: usize) -> Value {
        let mut members = Map::new();
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                let wanted = match required.contains(&name.as_str()) {
                    true if self.noisy => 97,
                    true => 100,
                    false => 50,
                };
                if self.rng.percent(wanted) {
                    let value = self.value(property, depth + 1);
                    members.insert(name.clone(), value);
                }
            }
        }
        match schema.get("additionalProperties") {
            Some(Value::Bool(false)) | None => {
                if self.noisy && self.rng.percent(3) {
                    members.insert("role".to_owned(), json!("admin"));
                }
            }
            Some(values) => {
                for _ in 0..self.rng.below(3) {
                    let key = self.rng.pick(WORDS).to_string();
                    let value = self.value(&values.clone(), depth + 1);
                    members.insert(key, value);
                }
            }
        }
        Value::Object(members)
    }
}

/// An integral float for an integer, now and then: equal to JSON Schema, and to the gates.
fn respell(value: Value) -> Value {
    match value.as_i64() {
        Some(integer) if integer.abs() < 1 << 53 => json!(integer as f64),
        _ => value,
    }
}

fn int_value(value: i128) -> Value {
    if let Ok(small) = i64::try_from(value) {
        json!(small)
    } else if let Ok(big) = u64::try_from(value) {
        json!(big)
    } else {
        json!(value as f64)
    }
}

/// The next float after `value`, up or down.
fn next_after(value: f64, up: bool) -> f64 {
    if value == 0.0 {
        return if up {
            f64::from_bits(1)
        } else {
            -f64::from_bits(1)
        };
    }
    let bits = value.to_bits();
    let away_from_zero = (value > 0.0) == up;
    f64::from_bits(if away_from_zero { bits + 1 } else { bits - 1 })
}

fn registry() -> Registry {
    Registry::builder()
        .tool(common::DeleteDatabaseRecord)
        .tool(common::PlaceOrder)
        .tool(common::TransferFunds)
        .tool(common::ListTables)
        .tool(common::SlowReport)
        .tool(common::BuggyTool)
        .tool(common::BuggyAsyncTool)
        .tool(common::ChargeCard)
        .tool(common::ScheduleDelivery)
        .tool(shapes::Pack)
        .tool(shapes::Transform)
        .tool(shapes::Weigh)
        .tool(shapes::RenameUser)
        .approver(portcullis::AutoApprove)
        // Thousands of refused calls, as one caller.
        .refusal_limit(None)
        .build()
        .expect("the tools form a registry")
}

/// Checks `count` generated cases of `tool`; returns how many were compared.
async fn check_tool(registry: &Registry, tool: &str, count: usize) -> usize {
    silence_tool_panics();
    let ctx = common::admin();
    let schema = registry
        .contract(tool)
        .unwrap_or_else(|| panic!("`{tool}` is registered"))
        .input_schema()
        .clone();
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap_or_else(|error| panic!("the schema of `{tool}` compiles: {error}"));
    let mut generator = Generator {
        root: &schema,
        rng: Rng::new(seed_of(tool)),
        noisy: false,
    };
    let (mut compared, mut accepted_count) = (0, 0);
    let mut disagreements = Vec::new();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for index in 0..count {
        generator.noisy = index % 2 == 1;
        let args = generator.value(&schema, 0);
        let custom = tool == "transfer-funds"
            && args["reference"]
                .as_str()
                .is_some_and(|reference| reference.to_lowercase().contains("test"));
        if holds_inexact_integer(&args) {
            continue;
        }
        let text = args.to_string();
        let as_value = registry
            .dispatch(
                &ctx,
                &ToolCall::new(format!("v{index}"), tool, args.clone()),
            )
            .await;
        let as_text = registry
            .dispatch(
                &ctx,
                &ToolCall::new(format!("t{index}"), tool, text.clone()),
            )
            .await;
        let gates = accepted(&as_value);
        if custom {
            if gates {
                disagreements.push(format!("{text}: accepted despite the custom check"));
            }
            continue;
        }
        compared += 1;
        let schema_says = validator.is_valid(&args);
        accepted_count += usize::from(gates);
        let label = as_value
            .rejection()
            .map_or("accepted", |rejection| rejection.code().as_str());
        *outcomes.entry(label.to_owned()).or_default() += 1;
        if gates != schema_says || accepted(&as_text) != gates {
            let errors: Vec<String> = validator
                .iter_errors(&args)
                .map(|error| format!("{} at {}", error, error.instance_path()))
                .collect();
            disagreements.push(format!(
                "{text}\n    value: {as_value:?}\n    text: {as_text:?}\n    jsonschema: {errors:?}"
            ));
        }
    }
    println!(
        "{tool}: {compared} compared, {accepted_count} accepted, {} disagreements; {outcomes:?}",
        disagreements.len()
    );
    assert!(
        disagreements.is_empty(),
        "`{tool}`: {} disagreements, the first ones:\n{}",
        disagreements.len(),
        disagreements[..disagreements.len().min(10)].join("\n")
    );
    assert!(accepted_count > 0, "no case of `{tool}` was accepted");
    assert!(accepted_count < compared, "no case of `{tool}` was refused");
    compared
}

#[tokio::test]
async fn dispatch_agrees_with_the_exported_schema_over_100_000_inputs() {
    let registry = registry();
    let mut compared = 0;
    for contract in registry.contracts() {
        let tool = contract.name().to_owned();
        let count = if tool == "slow_report" {
            SLOW_CASES
        } else {
            CASES
        };
        compared += check_tool(&registry, &tool, count).await;
    }
    assert!(compared >= 100_000, "only {compared} inputs compared");
}
