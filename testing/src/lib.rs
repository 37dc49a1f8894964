//! The red-team kit: hostile calls written from each tool's contract, run through the gates of
//! a registry that runs dry, each with the refusal it must get.
//!
//! ```
//! use portcullis::prelude::*;
//! use portcullis_testing::red_team;
//!
//! /// Refund a payment.
//! #[tool(risk = "high", role = "billing", irreversible = "refunds settle at once")]
//! fn refund(
//!     #[validate(length(min = 5, max = 40))] payment_id: String,
//!     #[validate(range(min = 1, max = 500_000))] amount_cents: u64,
//! ) -> Result<String, ToolError> {
//!     Ok(format!("refunded {amount_cents} on {payment_id}"))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let billing = CallContext::new("bo").with_roles(["billing"]);
//! let report = red_team(Registry::builder().tool(Refund))
//!     .caller("billing", billing)
//!     .run()
//!     .await;
//! assert!(report.cases() > 40);
//! report.assert_all_refused();
//! # }
//! ```
//!
//! Nothing reaches production by accident: the kit takes the registry's builder, not a built
//! registry, and builds it dry (no tool runs) over stores of its own (audit, claims, budgets,
//! approvals, sources), so that its calls spend nothing real and leave no record behind.

#![deny(missing_docs)]

mod arguments;
mod corpus;
mod junit;
mod probes;
mod report;
mod schema;
mod valid;

pub mod passkey;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use portcullis_core::audit::MemoryAuditSink;
use portcullis_core::{
    CallContext, InMemoryProvenanceStore, Origin, Outcome, ProvenanceStore, Registry,
    RegistryBuilder, SourceRecord, ToolCall, ToolContract,
};
use probes::{Probe, Step};
use serde_json::{Map, Value};

pub use report::{Finding, Got, Report};

/// Starts a red-team run of the registry `builder` would build.
pub fn red_team(builder: RegistryBuilder) -> RedTeam {
    RedTeam {
        builder,
        callers: BTreeMap::new(),
        valid: BTreeMap::new(),
        corpus: Vec::new(),
    }
}

/// A red-team run being set up: who calls, a valid call for a tool whose schema says too
/// little to write one, and the user's own cases.
pub struct RedTeam {
    builder: RegistryBuilder,
    callers: BTreeMap<String, CallContext>,
    valid: BTreeMap<String, Map<String, Value>>,
    corpus: Vec<Result<corpus::Case, String>>,
}

impl RedTeam {
    /// Adds a caller, named `name` in the report, whose calls the kit makes to every tool it
    /// may use.
    pub fn caller(mut self, name: impl Into<String>, ctx: CallContext) -> Self {
        self.callers.insert(name.into(), ctx);
        self
    }

    /// Gives a call of `tool` that passes every gate, the start of every hostile case of that
    /// tool; without one the kit writes it from the tool's schema.
    pub fn valid_call(mut self, tool: impl Into<String>, arguments: Map<String, Value>) -> Self {
        self.valid.insert(tool.into(), arguments);
        self
    }

    /// Adds the user's own cases, one JSON object per line: `{"caller": "support", "tool":
    /// "refund_payment", "arguments": {...}, "expect": "policy_denied", "what": "..."}`, where
    /// `caller` names one given to [`caller`](RedTeam::caller), `arguments` is an object (or
    /// its JSON text, sent as it is), `expect` is the refusal's code or `"waits"`, and `what`
    /// (optional) says what the case breaks. A line that cannot be read is reported, and
    /// fails the run.
    pub fn corpus(mut self, json_lines: &str) -> Self {
        self.corpus.extend(corpus::read(json_lines));
        self
    }

    /// Runs every case, each in a task of its own, and reports what each got.
    pub async fn run(self) -> Report {
        let sources = Arc::new(InMemoryProvenanceStore::default());
        let registry = self
            .builder
            .isolated()
            .provenance_store(Arc::clone(&sources))
            .dry_run()
            .audit(MemoryAuditSink::default())
            .build();
        let mut report = Report::default();
        let registry = match registry {
            Ok(registry) => registry,
            Err(error) => {
                report.unusable(format!("the registry does not build: {error}"));
                return report;
            }
        };
        let mut run = Run {
            registry: &registry,
            sources,
            report,
            tasks: 0,
        };
        if self.callers.is_empty() {
            run.report
                .unusable("no caller: name one with `caller`".to_owned());
        }
        let mut attacked = BTreeSet::new();
        for (caller, ctx) in &self.callers {
            let tools = registry.export_json_schema(ctx);
            if tools.as_array().is_none_or(Vec::is_empty) {
                run.report.unusable(format!("{caller} may use no tool"));
            }
            for tool in tools.as_array().into_iter().flatten() {
                attacked.insert(tool["name"].as_str().unwrap_or_default().to_owned());
                run.attack(caller, ctx, tool, &self.valid).await;
            }
        }
        // A tool no caller is shown (no caller holds its roles, or a dynamic argument of it
        // has no value for them) is not attacked, and a pass must not hide it.
        for contract in registry.contracts() {
            if !attacked.contains(contract.name()) && !self.callers.is_empty() {
                run.report.unusable(format!(
                    "`{}`: no caller of the run is shown it; name one who may use it",
                    contract.name()
                ));
            }
        }
        for case in self.corpus {
            match case {
                Ok(case) => match self.callers.get(&case.caller) {
                    Some(ctx) => run.corpus_case(ctx, case).await,
                    None => run.report.unusable(format!(
                        "corpus: `{}` names no caller of the run",
                        case.caller
                    )),
                },
                Err(why) => run.report.unusable(format!("corpus: {why}")),
            }
        }
        run.report
    }
}

/// A run under way: the registry it attacks and what it found.
struct Run<'r> {
    registry: &'r Registry,
    /// The registry's store of the tasks' sources, where a probe puts what its task read.
    sources: Arc<InMemoryProvenanceStore>,
    report: Report,
    /// The tasks begun so far: each case gets a task of its own.
    tasks: u64,
}

impl Run<'_> {
    /// Sends `probe`'s calls in a task of their own, which first read the probe's untrusted
    /// text, if it has one; what the last call got.
    async fn probe(&mut self, ctx: &CallContext, probe: &Probe) -> Got {
        let ctx = probe.caller.as_ref().unwrap_or(ctx);
        let task = self.next_task();
        if let Some(text) = &probe.untrusted {
            let source = SourceRecord {
                origin: Origin::ToolOutput {
                    tool: "red_team_untrusted_output".to_owned(),
                    call_id: "0".to_owned(),
                    trusted: false,
                    prose: false,
                },
                text: text.clone(),
            };
            let reader = ctx.clone().with_task_id(&task);
            if let Err(refusal) = self.sources.record(&reader, &source).await {
                return Got::Refused(refusal.code());
            }
        }
        let outcome = dispatch(self.registry, ctx, &task, &probe.steps).await;
        let got = Got::of(&outcome);
        match &probe.like {
            Some(like) if got == probe.expected => {
                let other = self.send(ctx, std::slice::from_ref(like)).await;
                let name = probe.steps.last().map(|step| step.tool.as_str());
                match refused_alike(&outcome, name.unwrap_or_default(), &other, &like.tool) {
                    true => got,
                    false => Got::Revealed,
                }
            }
            _ => got,
        }
    }

    /// Sends `steps` as `ctx` in a task of their own; the last one's outcome.
    async fn send(&mut self, ctx: &CallContext, steps: &[Step]) -> Outcome {
        let task = self.next_task();
        dispatch(self.registry, ctx, &task, steps).await
    }

    /// The id of a task no case used before.
    fn next_task(&mut self) -> String {
        self.tasks += 1;
        format!("red-team-{}", self.tasks)
    }

    /// Every case of the tool `tool` (an entry of the exported tool list) as `caller`.
    async fn attack(
        &mut self,
        caller: &str,
        ctx: &CallContext,
        tool: &Value,
        given: &BTreeMap<String, Map<String, Value>>,
    ) {
        let registry = self.registry;
        let name = tool["name"].as_str().unwrap_or_default();
        let schema = &tool["input_schema"];
        let valid = given
            .get(name)
            .cloned()
            .or_else(|| valid::valid_arguments(schema));
        let (Some(valid), Some(contract)) = (valid, registry.contract(name)) else {
            self.report.unusable(format!(
                "`{name}`: its schema says too little to write a valid call; give one with \
                 `valid_call`"
            ));
            return;
        };
        let valid = within_reach(contract, ctx, valid);
        let control = Got::of(&self.send(ctx, &[Step::new(name, "1", &valid)]).await);
        if !control.passed() {
            self.report.unusable(format!(
                "`{name}` as {caller}: the valid call is refused ({control}); give one that \
                 passes with `valid_call`"
            ));
            return;
        }
        let finding = |case: String, arguments: String, expected: Got, got: Got| Finding {
            tool: name.to_owned(),
            caller: caller.to_owned(),
            case,
            arguments,
            expected,
            got,
            gate: expected.gate(),
        };
        if registry.always_waits(contract) {
            self.report.push(finding(
                "a valid call, which a human must decide".to_owned(),
                Value::Object(valid.clone()).to_string(),
                Got::Waits,
                control,
            ));
        }
        for case in arguments::hostile(schema, &valid, registry.limits()) {
            let got = Got::of(&self.send(ctx, &[Step::text(name, &case.arguments)]).await);
            let expected = Got::Refused(case.expected);
            self.report
                .push(finding(case.what, case.arguments, expected, got));
        }
        for probe in probes::probes(contract, schema, ctx, &valid, registry) {
            let got = self.probe(ctx, &probe).await;
            let last = probe.steps.last().map(|step| step.arguments.to_string());
            self.report.push(Finding {
                gate: probe.gate,
                ..finding(probe.what, last.unwrap_or_default(), probe.expected, got)
            });
        }
    }

    /// One case of the user's corpus.
    async fn corpus_case(&mut self, ctx: &CallContext, case: corpus::Case) {
        let step = Step {
            tool: case.tool.clone(),
            id: "1".to_owned(),
            arguments: case.arguments.clone(),
        };
        let got = Got::of(&self.send(ctx, &[step]).await);
        let arguments = match case.arguments {
            Value::String(text) => text,
            arguments => arguments.to_string(),
        };
        self.report.push(Finding {
            tool: case.tool,
            caller: case.caller,
            case: case.what,
            arguments,
            expected: case.expected,
            got,
            gate: case.expected.gate(),
        });
    }
}

/// `valid` with the caller's own tenant and environment in the tool's `#[tenant]` and
/// `#[environment]` arguments, so that the call starts from one that passes.
fn within_reach(
    contract: &ToolContract,
    ctx: &CallContext,
    mut valid: Map<String, Value>,
) -> Map<String, Value> {
    let own = [
        (contract.tenant_argument(), ctx.tenant()),
        (contract.environment_argument(), ctx.environment()),
    ];
    for (argument, value) in own {
        if let (Some(argument), Some(value)) = (argument, value) {
            valid.insert(argument.to_owned(), Value::from(value));
        }
    }
    valid
}

/// Whether `outcome`, of a call of the tool `name`, is refused as `other`, of a call of
/// `other_name`, is: the same code, gate and message but for the name, and a hint that does
/// not name the tool.
fn refused_alike(outcome: &Outcome, name: &str, other: &Outcome, other_name: &str) -> bool {
    let (Some(refusal), Some(other_refusal)) = (outcome.rejection(), other.rejection()) else {
        return false;
    };
    let unnamed = |message: &str, name: &str| message.replace(&format!("{name:?}"), "\"…\"");
    // The hint names the tool if one of its words is the name (`refund`, not `refund_status`).
    let names = |hint: &str| {
        hint.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
            .any(|word| word == name)
    };
    refusal.code() == other_refusal.code()
        && refusal.retryable() == other_refusal.retryable()
        && unnamed(refusal.message(), name) == unnamed(other_refusal.message(), other_name)
        && !names(refusal.hint().unwrap_or_default())
}

/// Sends `steps` in order as `ctx`, in task `task`, then ends the task; the last one's outcome.
async fn dispatch(registry: &Registry, ctx: &CallContext, task: &str, steps: &[Step]) -> Outcome {
    let ctx = ctx.clone().with_task_id(task);
    let mut last = None;
    for step in steps {
        // A string is the arguments' JSON text as sent; anything else is sent as a value.
        let call = match &step.arguments {
            Value::String(text) => {
                ToolCall::new(format!("{task}-{}", step.id), &step.tool, text.as_str())
            }
            arguments => {
                ToolCall::new(format!("{task}-{}", step.id), &step.tool, arguments.clone())
            }
        };
        last = Some(registry.dispatch(&ctx, &call).await);
    }
    // Every case is a task of its own, over once its calls are: ended, as a worker ends its
    // tasks, so that a run of many cases holds no more of the stores than one case does.
    registry.end_task(task).await;
    last.expect("a probe sends at least one call")
}

impl Got {
    /// What `outcome` is, for a case.
    fn of(outcome: &Outcome) -> Got {
        match (outcome.rejection(), outcome) {
            (Some(rejection), _) => Got::Refused(rejection.code()),
            (None, Outcome::Pending(_)) => Got::Waits,
            (None, _) => Got::Ran,
        }
    }

    /// Whether the call got through every gate: it would have run, or waits for a human.
    fn passed(&self) -> bool {
        matches!(
            self,
            Got::Ran | Got::Waits | Got::Refused(portcullis_core::RejectionCode::DryRun)
        )
    }
}

#[cfg(test)]
mod tests {
    use portcullis_core::{Rejection, RejectionCode};

    use super::*;

    fn unknown(message: &str, hint: &str) -> Outcome {
        let refusal = Rejection::new(RejectionCode::UnknownTool, message).with_hint(hint);
        Outcome::Rejected(refusal)
    }

    #[test]
    fn a_refusal_that_tells_the_tool_exists_is_not_alike() {
        let invented = unknown(
            "there is no tool named \"pay_zz\"",
            "the available tools are a",
        );
        let alike = unknown(
            "there is no tool named \"pay\"",
            "the available tools are a",
        );
        assert!(refused_alike(&alike, "pay", &invented, "pay_zz"));
        let other_words = unknown("you may not use \"pay\"", "the available tools are a");
        assert!(!refused_alike(&other_words, "pay", &invented, "pay_zz"));
        let named = unknown(
            "there is no tool named \"pay\"",
            "ask for the role to use pay",
        );
        assert!(!refused_alike(&named, "pay", &invented, "pay_zz"));
        let denied = Outcome::Rejected(Rejection::new(RejectionCode::RoleDenied, "no"));
        assert!(!refused_alike(&denied, "pay", &invented, "pay_zz"));
    }
}
