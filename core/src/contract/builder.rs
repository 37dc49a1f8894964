//! [`ContractBuilder`]: how `#[tool]` and hand-written tools state a contract.

use std::time::Duration;

use serde_json::Value;

use super::provenance::{
    AfterUntrusted, Matching, OnUntrusted, OutputTrust, Provenance, SourceRule, Sources,
};
use super::sensitive::pointer_of;
use super::tool_contract::{AllowedValuesFn, Approval, DynamicValues, Risk, ToolContract};

/// Builds a [`ToolContract`]; see [`ToolContract::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ContractBuilder {
    pub(super) contract: ToolContract,
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
                approvers: Vec::new(),
                caller_confirms: false,
                rollback: None,
                irreversible: None,
                idempotent: false,
                open_world: true,
                read_only: false,
                cost: 0,
                max_calls_per_task: None,
                audit_required: None,
                timeout: None,
                sensitive: Vec::new(),
                provenance: Provenance::default(),
                checked_in_code: Vec::new(),
                dynamic_values: Vec::new(),
                input_schema,
                output_schema: None,
            },
        }
    }
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

    /// Sets the roles of which a reviewer must hold one to decide this tool's calls (the
    /// registry's default when not set).
    pub fn approvers<I, S>(mut self, roles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.contract.approvers = roles.into_iter().map(Into::into).collect();
        self
    }

    /// Sets whether a call must be recorded as about to run before it runs; see
    /// [`ToolContract::audit_required`].
    pub fn audit_required(mut self, required: bool) -> Self {
        self.contract.audit_required = Some(required);
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

    /// Lets the caller confirm its own calls: see
    /// [`ToolContract::caller_confirms`]. [`check`](ToolContract::check) refuses it on a
    /// critical tool.
    pub fn caller_confirms(mut self) -> Self {
        self.contract.caller_confirms = true;
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
    /// it for `#[one_of(function)]`. The value checked is the argument in the canonical
    /// arguments, as the arguments' `Serialize` writes it; a hand-written tool whose
    /// `Serialize` leaves the argument out has its calls refused. Naming the argument again
    /// replaces its function.
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

    /// Adds sensitive values: an argument's name as the model sees it (`password`), or a JSON
    /// pointer into the arguments where `*` stands for every element of a list or value of a
    /// map (`/cards/*/number`).
    pub fn sensitive<I, S>(mut self, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for pointer in values.into_iter().map(|value| pointer_of(value.into())) {
            if !self.contract.sensitive.contains(&pointer) {
                self.contract.sensitive.push(pointer);
            }
        }
        self
    }

    /// Requires the value of an argument (its name as the model sees it, or a JSON pointer into
    /// the arguments where `*` stands for every element of a list) to come `from` these
    /// sources: `#[from(...)]` writes it. Declaring a pointer again replaces its rule.
    pub fn from_sources(
        mut self,
        argument: impl Into<String>,
        from: Sources,
        matching: Matching,
    ) -> Self {
        let pointer = pointer_of(argument.into());
        let rules = &mut self.contract.provenance.rules;
        rules.retain(|rule| rule.pointer != pointer);
        rules.push(SourceRule {
            pointer,
            from,
            matching,
        });
        self
    }

    /// Sets how far the tool's output can be trusted as a source (untrusted by default).
    pub fn output_trust(mut self, trust: OutputTrust) -> Self {
        self.contract.provenance.output = trust;
        self
    }

    /// Trusts the text at these JSON pointers into the output (`*` for every element or member,
    /// `""` for all of it) word for word, as the user's own words: every word and entity inside
    /// it is vouched for, where a trusted output vouches for its whole values only. For prose no
    /// third party can write a word of (`trusted_prose = [...]` writes it).
    pub fn trusted_prose<I, S>(mut self, pointers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.contract
            .provenance
            .trusted_prose
            .extend(pointers.into_iter().map(Into::into));
        self
    }

    /// Sets what happens to a call with a value found only in untrusted sources.
    pub fn on_untrusted(mut self, then: OnUntrusted) -> Self {
        self.contract.provenance.on_untrusted = then;
        self
    }

    /// Sets what happens to every call of the tool once its task read untrusted content.
    pub fn after_untrusted(mut self, then: AfterUntrusted) -> Self {
        self.contract.provenance.after_untrusted = Some(then);
        self
    }

    /// Names arguments whose Rust type and own checks enforce everything their schema shows, so
    /// that the validate gate need not walk their schema again: `#[tool]` names the arguments
    /// of plain types (strings, integers, booleans, `f64`, and options of them) whose only
    /// constraints are the `#[validate]` rules on them. Name nothing you are not sure of: an
    /// argument named here is held to its type and its own checks alone.
    pub fn checked_in_code<I, S>(mut self, arguments: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.contract
            .checked_in_code
            .extend(arguments.into_iter().map(Into::into));
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
