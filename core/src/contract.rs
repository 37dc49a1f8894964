//! What a tool declares about itself: its name, description, risk, who may call it, how it is
//! undone, and the schema of its arguments.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::export::definitions::drop_unreferenced;
use crate::schema::type_includes;

/// How much harm a wrong call can do. Ordered: `Low < Medium < High < Critical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Harmless if wrong (reads, drafts).
    #[default]
    Low,
    /// A wrong call is a nuisance that is easy to undo.
    Medium,
    /// A wrong call does real damage; the tool must declare a rollback or why it has none.
    High,
    /// A wrong call does damage that matters to the business (money, production data).
    Critical,
}

impl Risk {
    /// The risk as written in the attribute, e.g. `"high"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
            Risk::Critical => "critical",
        }
    }
}

impl fmt::Display for Risk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a call needs a human's approval before it runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "snake_case", tag = "when", content = "predicate")]
pub enum Approval {
    /// The registry's default for the tool's risk decides.
    #[default]
    Default,
    /// Never: the contract opts out.
    Never,
    /// Always.
    Required,
    /// When the named predicate over context and arguments says so.
    Conditional(String),
}

/// The function that gives an argument's allowed values for a call's context: see
/// [`ContractBuilder::one_of`].
pub type AllowedValuesFn = fn(&crate::CallContext) -> Vec<Value>;

/// An argument whose allowed values come from a function, asked again at every export and
/// every call.
#[derive(Clone)]
struct DynamicValues {
    /// The argument's name as the model sees it.
    argument: String,
    values: AllowedValuesFn,
}

impl fmt::Debug for DynamicValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicValues")
            .field("argument", &self.argument)
            .finish_non_exhaustive()
    }
}

impl PartialEq for DynamicValues {
    fn eq(&self, other: &Self) -> bool {
        self.argument == other.argument && std::ptr::fn_addr_eq(self.values, other.values)
    }
}

/// A reviewer reads which arguments have dynamic values; the function itself has no data form.
impl Serialize for DynamicValues {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.argument)
    }
}

/// Where the values of a dynamic argument apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValuesApply {
    /// To the argument itself.
    Whole,
    /// To each element of a list argument; `nullable` says whether the list itself may be null.
    EachElement { nullable: bool },
}

/// What one dynamic argument may hold in one context, as its schema states it.
#[derive(Debug)]
pub(crate) struct AllowedValues<'a> {
    /// The argument's name as the model sees it.
    pub(crate) argument: &'a str,
    pub(crate) applies: ValuesApply,
    /// The function's values, with `null` added where the schema accepts null there.
    pub(crate) values: Vec<Value>,
}

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

/// Everything a tool declares, as data: what the model is shown, what the gates enforce and
/// what a reviewer reads.
///
/// The `#[tool]` attribute builds it; a hand-written [`Tool`](crate::Tool) builds it with
/// [`ToolContract::builder`].
///
/// ```
/// use portcullis_core::{Risk, ToolContract};
/// use serde_json::json;
///
/// let schema = json!({"type": "object", "additionalProperties": false});
/// let contract = ToolContract::builder("refund", "Refund a payment.", schema)
///     .risk(Risk::High)
///     .roles(["billing_admin"])
///     .irreversible("the payment provider cannot claw a refund back")
///     .build();
/// assert_eq!(contract.risk(), Risk::High);
/// assert!(contract.check().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolContract {
    name: String,
    description: String,
    risk: Risk,
    roles: Vec<String>,
    environments: Vec<String>,
    tenant_argument: Option<String>,
    environment_argument: Option<String>,
    policy: Option<String>,
    snapshot: Option<String>,
    approval: Approval,
    rollback: Option<String>,
    irreversible: Option<String>,
    idempotent: bool,
    open_world: bool,
    read_only: bool,
    cost: u64,
    max_calls_per_task: Option<u64>,
    #[serde(serialize_with = "serialize_millis")]
    timeout: Option<Duration>,
    sensitive: Vec<String>,
    #[serde(rename = "one_of")]
    dynamic_values: Vec<DynamicValues>,
    input_schema: Value,
    output_schema: Option<Value>,
}

fn serialize_millis<S: serde::Serializer>(
    timeout: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    timeout
        .map(|timeout| timeout.as_millis())
        .serialize(serializer)
}

impl ToolContract {
    /// Starts a contract with the three things every tool has.
    pub fn builder(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> ContractBuilder {
        ContractBuilder {
            contract: ToolContract {
                name: name.into(),
                description: description.into(),
                risk: Risk::Low,
                roles: Vec::new(),
                environments: Vec::new(),
                tenant_argument: None,
                environment_argument: None,
                policy: None,
                snapshot: None,
                approval: Approval::Default,
                rollback: None,
                irreversible: None,
                idempotent: false,
                open_world: true,
                read_only: false,
                cost: 0,
                max_calls_per_task: None,
                timeout: None,
                sensitive: Vec::new(),
                dynamic_values: Vec::new(),
                input_schema,
                output_schema: None,
            },
        }
    }

    /// The name the model calls the tool by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the tool does, for the model.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// How much harm a wrong call can do.
    pub fn risk(&self) -> Risk {
        self.risk
    }

    /// The roles that may call the tool (any one of them grants); empty means every caller.
    pub fn roles(&self) -> &[String] {
        &self.roles
    }

    /// The environments the tool may run in; empty means every environment.
    pub fn environments(&self) -> &[String] {
        &self.environments
    }

    /// The argument (its name as the model sees it) that must equal the caller's tenant.
    pub fn tenant_argument(&self) -> Option<&str> {
        self.tenant_argument.as_deref()
    }

    /// The argument (its name as the model sees it) that must equal the environment the call
    /// runs in.
    pub fn environment_argument(&self) -> Option<&str> {
        self.environment_argument.as_deref()
    }

    /// The name of the tool's own policy, if it declares one.
    pub fn policy(&self) -> Option<&str> {
        self.policy.as_deref()
    }

    /// The name of the hook that snapshots the state a call changes, if the tool declares one.
    pub fn snapshot(&self) -> Option<&str> {
        self.snapshot.as_deref()
    }

    /// Whether a caller with `ctx`'s roles may use the tool: the tool names no role, or the
    /// caller holds one of them. A tool the caller may not use is not exported to it.
    pub fn grants(&self, ctx: &crate::CallContext) -> bool {
        self.roles.is_empty() || self.roles.iter().any(|role| ctx.has_role(role))
    }

    /// When a call needs a human's approval.
    pub fn approval(&self) -> &Approval {
        &self.approval
    }

    /// Whether a compensating action is declared.
    pub fn has_rollback(&self) -> bool {
        self.rollback.is_some()
    }

    /// The name of the compensating function, if one is declared.
    pub fn rollback(&self) -> Option<&str> {
        self.rollback.as_deref()
    }

    /// Why the tool's effect cannot be undone, if it cannot.
    pub fn irreversible(&self) -> Option<&str> {
        self.irreversible.as_deref()
    }

    /// Whether repeating a call has the same effect as making it once.
    pub fn idempotent(&self) -> bool {
        self.idempotent
    }

    /// Whether the tool reaches beyond a closed set of things the registry's owner controls
    /// (the web, third-party services, other people's inboxes). Declared with
    /// `open_world = false` for tools that only touch their own system; true by default.
    pub fn open_world(&self) -> bool {
        self.open_world
    }

    /// Whether the tool only reads.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The cost of one call, in the unit the application's budgets use.
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// The most calls of this tool one task may make.
    pub fn max_calls_per_task(&self) -> Option<u64> {
        self.max_calls_per_task
    }

    /// How long one call may run.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The arguments to redact in logs and audit records (names as the model sees them).
    pub fn sensitive(&self) -> &[String] {
        &self.sensitive
    }

    /// The JSON Schema (2020-12) of the arguments, without the current values of dynamic
    /// arguments: what the model is shown is [`input_schema_for`](Self::input_schema_for).
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// The JSON Schema of the arguments as `ctx` sees it: [`input_schema`](Self::input_schema)
    /// with the current values of every dynamic argument ([`ContractBuilder::one_of`]) as its
    /// `enum` (on `items` for a list), plus `null` where the argument accepts null. Borrowed
    /// when the tool has no dynamic argument.
    ///
    /// A dynamic argument with no allowed value in `ctx` is left out of the schema when the
    /// call may leave it out (it then takes its default), and makes the whole result `None`
    /// when the call requires it: no call could pass, so the tool is not worth showing.
    ///
    /// A dynamic argument whose values are strings, numbers or booleans is shown as a schema
    /// of its own, their types and the `enum`, keeping only its description and title: the
    /// shape it had (a `$ref` to a Rust enum, a union for an `Option`) says less than the
    /// values, and providers take a `$ref` or a union beside an `enum` badly or not at all.
    pub fn input_schema_for(&self, ctx: &crate::CallContext) -> Option<Cow<'_, Value>> {
        if self.dynamic_values.is_empty() {
            return Some(Cow::Borrowed(&self.input_schema));
        }
        let mut schema = self.input_schema.clone();
        for allowed in self.allowed_values(ctx) {
            if allowed.values.iter().all(Value::is_null) {
                if self.requires(allowed.argument) {
                    return None;
                }
                if let Some(Value::Object(properties)) = schema.get_mut("properties") {
                    properties.remove(allowed.argument);
                }
                continue;
            }
            let Some(property) = schema
                .get_mut("properties")
                .and_then(|properties| properties.get_mut(allowed.argument))
            else {
                continue;
            };
            let target = match allowed.applies {
                ValuesApply::Whole => Some(property),
                ValuesApply::EachElement { .. } => property.get_mut("items"),
            };
            if let Some(Value::Object(target)) = target {
                restrict_to(target, allowed.values);
            }
        }
        drop_unreferenced(&mut schema);
        Some(Cow::Owned(schema))
    }

    /// Whether the arguments' schema lists `argument` as required.
    fn requires(&self, argument: &str) -> bool {
        self.input_schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|required| required.iter().any(|name| name == argument))
    }

    /// The arguments whose allowed values come from a function (names as the model sees them).
    pub fn dynamic_arguments(&self) -> impl Iterator<Item = &str> {
        self.dynamic_values
            .iter()
            .map(|dynamic| dynamic.argument.as_str())
    }

    /// Asks every dynamic argument's function for its values in `ctx`, and reads from the
    /// schema where they apply, so that the export and the check agree.
    pub(crate) fn allowed_values(&self, ctx: &crate::CallContext) -> Vec<AllowedValues<'_>> {
        self.dynamic_values
            .iter()
            .map(|dynamic| {
                let property = self
                    .input_schema
                    .get("properties")
                    .and_then(|properties| properties.get(&dynamic.argument));
                let items = property
                    .filter(|property| type_includes(property.get("type"), "array"))
                    .and_then(|property| property.get("items"));
                let (applies, values_schema) = match (property, items) {
                    (Some(property), Some(items)) => (
                        ValuesApply::EachElement {
                            nullable: accepts_null(property),
                        },
                        Some(items),
                    ),
                    (property, _) => (ValuesApply::Whole, property),
                };
                let mut values = (dynamic.values)(ctx);
                if values_schema.is_some_and(accepts_null) && !values.contains(&Value::Null) {
                    values.push(Value::Null);
                }
                AllowedValues {
                    argument: &dynamic.argument,
                    applies,
                    values,
                }
            })
            .collect()
    }

    /// The JSON Schema of the output, where the output type has one.
    pub fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }

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
        Ok(())
    }
}

/// Makes `node` the schema of exactly `values` (see [`ToolContract::input_schema_for`]).
fn restrict_to(node: &mut Map<String, Value>, values: Vec<Value>) {
    if let Some(types) = scalar_types(&values) {
        node.retain(|keyword, _| matches!(keyword.as_str(), "description" | "title"));
        let types = match types.as_slice() {
            [single] => Value::from(*single),
            several => Value::from(several.to_vec()),
        };
        node.insert("type".to_owned(), types);
    }
    node.insert("enum".to_owned(), Value::Array(values));
}

/// The JSON types of `values` in order of first use, an integer counting as a number where
/// both occur; `None` if one of them is an object or an array.
fn scalar_types(values: &[Value]) -> Option<Vec<&'static str>> {
    let mut types = Vec::new();
    for value in values {
        let name = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::String(_) => "string",
            Value::Number(number) if number.is_f64() => "number",
            Value::Number(_) => "integer",
            Value::Array(_) | Value::Object(_) => return None,
        };
        if !types.contains(&name) {
            types.push(name);
        }
    }
    if types.contains(&"number") {
        types.retain(|name| *name != "integer");
    }
    Some(types)
}

/// Whether `schema` accepts `null`: by its `type`, or by a branch of an `anyOf`/`oneOf` (how
/// schemars writes `Option` of a type with a `$ref`).
fn accepts_null(schema: &Value) -> bool {
    type_includes(schema.get("type"), "null")
        || ["anyOf", "oneOf"].iter().any(|keyword| {
            schema
                .get(keyword)
                .and_then(Value::as_array)
                .is_some_and(|branches| {
                    branches
                        .iter()
                        .any(|branch| type_includes(branch.get("type"), "null"))
                })
        })
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

/// Builds a [`ToolContract`]; see [`ToolContract::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ContractBuilder {
    contract: ToolContract,
}

impl ContractBuilder {
    /// Sets the risk.
    pub fn risk(mut self, risk: Risk) -> Self {
        self.contract.risk = risk;
        self
    }

    /// Sets the roles that may call the tool (any one of them grants).
    pub fn roles<I, S>(mut self, roles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.contract.roles = roles.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the environments the tool may run in.
    pub fn environments<I, S>(mut self, environments: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.contract.environments = environments.into_iter().map(Into::into).collect();
        self
    }

    /// Names the argument that must equal the caller's tenant.
    pub fn tenant_argument(mut self, argument: impl Into<String>) -> Self {
        self.contract.tenant_argument = Some(argument.into());
        self
    }

    /// Names the argument that must equal the environment the call runs in.
    pub fn environment_argument(mut self, argument: impl Into<String>) -> Self {
        self.contract.environment_argument = Some(argument.into());
        self
    }

    /// Names the tool's own policy (see [`Tool::policy`](crate::Tool::policy)).
    pub fn policy(mut self, policy: impl Into<String>) -> Self {
        self.contract.policy = Some(policy.into());
        self
    }

    /// Names the snapshot hook (see [`Tool::snapshot`](crate::Tool::snapshot)).
    pub fn snapshot(mut self, hook: impl Into<String>) -> Self {
        self.contract.snapshot = Some(hook.into());
        self
    }

    /// Sets when a call needs approval.
    pub fn approval(mut self, approval: Approval) -> Self {
        self.contract.approval = approval;
        self
    }

    /// Names the compensating function.
    pub fn rollback(mut self, compensation: impl Into<String>) -> Self {
        self.contract.rollback = Some(compensation.into());
        self
    }

    /// Declares that the effect cannot be undone, and why.
    pub fn irreversible(mut self, reason: impl Into<String>) -> Self {
        self.contract.irreversible = Some(reason.into());
        self
    }

    /// Declares that the tool only touches things the registry's owner controls (MCP's
    /// `openWorldHint: false`).
    pub fn closed_world(mut self) -> Self {
        self.contract.open_world = false;
        self
    }

    /// Declares that repeating a call has the same effect as making it once.
    pub fn idempotent(mut self) -> Self {
        self.contract.idempotent = true;
        self
    }

    /// Declares that the tool only reads.
    pub fn read_only(mut self) -> Self {
        self.contract.read_only = true;
        self
    }

    /// Sets the cost of one call.
    pub fn cost(mut self, cost: u64) -> Self {
        self.contract.cost = cost;
        self
    }

    /// Sets the most calls of this tool one task may make.
    pub fn max_calls_per_task(mut self, calls: u64) -> Self {
        self.contract.max_calls_per_task = Some(calls);
        self
    }

    /// Sets how long one call may run.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.contract.timeout = Some(timeout);
        self
    }

    /// Gives `argument` (its name as the model sees it) the values `values` returns for the
    /// call's context: the export shows them as the argument's `enum` (on `items` for a
    /// list), and a call with another value is refused with `invalid_value`. `#[tool]` writes
    /// it for `#[one_of(function)]`; a hand-written tool must also implement
    /// [`Tool::argument_json`](crate::Tool::argument_json) for the argument, or its calls are
    /// refused. Naming the argument again replaces its function.
    ///
    /// The function runs at every export and at every call: keep it fast, and deterministic
    /// for a given context, so that the values the model is shown are the values its call is
    /// held to. A panic in it during a call refuses the call with `tool_panicked`.
    pub fn one_of(mut self, argument: impl Into<String>, values: AllowedValuesFn) -> Self {
        let argument = argument.into();
        self.contract
            .dynamic_values
            .retain(|dynamic| dynamic.argument != argument);
        self.contract
            .dynamic_values
            .push(DynamicValues { argument, values });
        self
    }

    /// Names the arguments to redact.
    pub fn sensitive<I, S>(mut self, arguments: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.contract.sensitive = arguments.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the output's schema.
    pub fn output_schema(mut self, schema: Option<Value>) -> Self {
        self.contract.output_schema = schema;
        self
    }

    /// Finishes the contract. Call [`ToolContract::check`] to test it against the rules.
    pub fn build(self) -> ToolContract {
        self.contract
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    fn two_products(_: &crate::CallContext) -> Vec<Value> {
        vec![json!("p-1"), json!("p-2")]
    }

    #[test]
    fn scalar_values_replace_a_reference_or_a_union_with_their_own_schema() {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "sort": {"$ref": "#/$defs/Sort", "description": "order", "default": "asc"},
                "size": {"anyOf": [{"$ref": "#/$defs/Size"}, {"type": "null"}]},
                "sizes": {"type": "array", "items": {"$ref": "#/$defs/Size"}},
                "weight": {"type": "number"},
            },
            "$defs": {
                "Sort": {"type": "string", "enum": ["asc", "desc"]},
                "Size": {"type": "integer", "minimum": 0},
            },
        });
        let contract = ToolContract::builder("a", "b", schema)
            .one_of("sort", |_| vec![json!("desc")])
            .one_of("size", |_| vec![json!(1), json!(2)])
            .one_of("sizes", |_| vec![json!(3)])
            .one_of("weight", |_| vec![json!(1), json!(2.5)])
            .build();
        let exported = contract
            .input_schema_for(&crate::CallContext::new("alice"))
            .unwrap();
        let properties = &exported["properties"];
        assert_eq!(
            properties["sort"],
            json!({"description": "order", "type": "string", "enum": ["desc"]})
        );
        assert_eq!(
            properties["size"],
            json!({"type": ["integer", "null"], "enum": [1, 2, null]})
        );
        assert_eq!(
            properties["sizes"]["items"],
            json!({"type": "integer", "enum": [3]})
        );
        assert_eq!(
            properties["weight"],
            json!({"type": "number", "enum": [1, 2.5]})
        );
    }

    #[test]
    fn structured_values_keep_the_shape_beside_their_enum() {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {"point": {"$ref": "#/$defs/Point"}},
            "$defs": {"Point": {"type": "object"}},
        });
        let contract = ToolContract::builder("a", "b", schema)
            .one_of("point", |_| vec![json!({"x": 1})])
            .build();
        let exported = contract
            .input_schema_for(&crate::CallContext::new("alice"))
            .unwrap();
        assert_eq!(
            exported["properties"]["point"],
            json!({"$ref": "#/$defs/Point", "enum": [{"x": 1}]})
        );
    }

    #[test]
    fn a_required_argument_with_no_allowed_value_means_no_schema_to_show() {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "product": {"type": "string"},
                "products": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["product", "products"],
        });
        let ctx = crate::CallContext::new("alice");
        let whole = ToolContract::builder("a", "b", schema.clone())
            .one_of("product", |_| Vec::new())
            .build();
        assert!(whole.input_schema_for(&ctx).is_none());
        let each = ToolContract::builder("a", "b", schema)
            .one_of("products", |_| Vec::new())
            .build();
        assert!(each.input_schema_for(&ctx).is_none());
    }

    #[test]
    fn an_optional_argument_with_no_allowed_value_is_not_shown() {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "coupon": {"type": ["string", "null"]},
                "products": {"type": "array", "items": {"type": "string"}, "default": []},
                "quantity": {"type": "integer"},
            },
            "required": ["quantity"],
        });
        let contract = ToolContract::builder("a", "b", schema)
            .one_of("coupon", |_| Vec::new())
            .one_of("products", |_| Vec::new())
            .build();
        let exported = contract
            .input_schema_for(&crate::CallContext::new("alice"))
            .unwrap();
        assert_eq!(
            exported["properties"],
            json!({"quantity": {"type": "integer"}})
        );
    }

    #[test]
    fn only_dynamic_arguments_make_a_schema_of_their_own() {
        let ctx = crate::CallContext::new("alice");
        let fixed = builder("a").build();
        assert!(matches!(
            fixed.input_schema_for(&ctx),
            Some(Cow::Borrowed(_))
        ));

        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "product": {"type": ["string", "null"]},
                "products": {"type": "array", "items": {"type": "string"}},
            },
        });
        let dynamic = ToolContract::builder("a", "b", schema)
            .one_of("product", two_products)
            .one_of("products", two_products)
            .build();
        let exported = dynamic.input_schema_for(&ctx).unwrap();
        assert_eq!(
            exported["properties"]["product"],
            json!({"type": ["string", "null"], "enum": ["p-1", "p-2", null]})
        );
        assert_eq!(
            exported["properties"]["products"]["items"]["enum"],
            json!(["p-1", "p-2"])
        );
        assert!(
            dynamic.input_schema()["properties"]["product"]
                .get("enum")
                .is_none()
        );
        assert_eq!(
            serde_json::to_value(&dynamic).unwrap()["one_of"],
            json!(["product", "products"])
        );
    }

    #[test]
    fn serializes_for_review() {
        let contract = builder("a").timeout(Duration::from_millis(1500)).build();
        let value = serde_json::to_value(&contract).unwrap();
        assert_eq!(value["timeout"], 1500);
        assert_eq!(value["risk"], "low");
        assert_eq!(value["approval"], json!({"when": "default"}));
    }
}
