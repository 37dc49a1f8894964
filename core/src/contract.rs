//! What a tool declares about itself: its name, description, risk, who may call it, how it is
//! undone, and the schema of its arguments.

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

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

    /// The JSON Schema (2020-12) of the arguments.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// The JSON Schema of the arguments as `ctx` sees it: [`input_schema`](Self::input_schema)
    /// with the current values of every dynamic enum filled in.
    pub fn input_schema_for(&self, _ctx: &crate::CallContext) -> std::borrow::Cow<'_, Value> {
        std::borrow::Cow::Borrowed(&self.input_schema)
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
        Ok(())
    }
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

    #[test]
    fn serializes_for_review() {
        let contract = builder("a").timeout(Duration::from_millis(1500)).build();
        let value = serde_json::to_value(&contract).unwrap();
        assert_eq!(value["timeout"], 1500);
        assert_eq!(value["risk"], "low");
        assert_eq!(value["approval"], json!({"when": "default"}));
    }
}
