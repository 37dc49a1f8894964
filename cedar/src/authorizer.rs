//! The registry policy that asks Cedar: the current policy set, checked against the
//! registry's tools, swapped whole while calls are served.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use cedar_policy::{
    ActionConstraint, AuthorizationError, Authorizer, Decision as CedarDecision, Effect, EntityUid,
    Policy as CedarPolicy, PolicySet, ValidationMode, Validator,
};
use portcullis_core::{
    BoxFuture, Decision, Policy, PolicyError, PolicyRequest, Ruling, ToolContract,
};

use crate::error::CedarError;
use crate::policies::CedarPolicies;
use crate::policies::diagnostics;
use crate::request::{Types, cedar_request};
use crate::schema::Generated;

/// A registry policy that lets Cedar decide every call: the `permit` and `forbid` policies of
/// a [`CedarPolicies`] set, over the schema generated from the registry's tools.
///
/// Add it with [`RegistryBuilder::policy`](portcullis_core::RegistryBuilder::policy); the
/// registry's `build` checks the set against the tools' schema, and a set that names an
/// argument no tool has, or compares a value with one of another type, fails the build with
/// Cedar's diagnostics. A clone shares the set: keep one to [`swap`](Cedar::swap) a new set in
/// while the registry serves calls.
///
/// Cedar's decision stands, with one choice left to the registry: a call of a tool that no
/// `permit` names in its scope (its action, an `in` list holding it or `call_tool`, or any
/// action) is allowed unless a `forbid` matches, so that the policy team's rules cover the tools
/// they name and the contracts' own gates the rest; [`default_deny`](Cedar::default_deny)
/// refuses it instead, as Cedar alone would.
///
/// Every call's audit record names the version of the set that decided and the ids of the
/// policies that did ([`AuditRecord::rulings`](portcullis_core::audit::AuditRecord::rulings)); the
/// model is told only `forbidden_by_policy` or `no_policy_permits`. A policy that errors on a
/// call refuses it: Cedar would skip it, and a skipped `forbid` is an allowance.
#[derive(Clone)]
pub struct Cedar {
    shared: Arc<Shared>,
}

struct Shared {
    current: RwLock<Arc<Live>>,
    default_deny: AtomicBool,
    /// The registry's tools as Cedar sees them, from the registry's build on.
    tools: OnceLock<Generated>,
    types: Types,
    authorizer: Authorizer,
}

/// A policy set in service, with what is worked out from it once: for each of the registry's
/// tools, the policies whose scope can take its calls. A policy whose scope names other
/// actions is never satisfied by a call of the tool, nor evaluated past its scope, so leaving
/// it out changes no decision, and a call is evaluated against only its tool's policies.
struct Live {
    policies: CedarPolicies,
    by_tool: HashMap<String, Scoped>,
}

/// The policies of one tool.
struct Scoped {
    policies: PolicySet,
    /// Whether a `permit` among them names the tool in its scope.
    named_by_a_permit: bool,
}

impl Live {
    fn new(policies: CedarPolicies, tools: &[String]) -> Self {
        let by_tool = tools
            .iter()
            .map(|tool| (tool.clone(), scoped(&policies, tool)))
            .collect();
        Live { policies, by_tool }
    }
}

impl Cedar {
    /// A policy that decides by `policies`.
    pub fn new(policies: CedarPolicies) -> Self {
        Cedar {
            shared: Arc::new(Shared {
                current: RwLock::new(Arc::new(Live::new(policies, &[]))),
                default_deny: AtomicBool::new(false),
                tools: OnceLock::new(),
                types: Types::new(),
                authorizer: Authorizer::new(),
            }),
        }
    }

    /// Refuses a call of a tool no `permit` names (`no_policy_permits`), as Cedar alone does;
    /// for every clone of this policy, which is one policy.
    pub fn default_deny(self) -> Self {
        self.shared.default_deny.store(true, Ordering::SeqCst);
        self
    }

    /// The version of the set in service.
    pub fn version(&self) -> String {
        self.live().policies.version().to_owned()
    }

    /// The Cedar schema of the registry's tools, once the registry is built.
    pub fn schema(&self) -> Option<&str> {
        self.shared.tools.get().map(|tools| tools.text.as_str())
    }

    /// Checks `policies` against the registry's tools and puts them in service, all at once:
    /// a call is decided by the set before or the set after, never by a mix, and its audit
    /// record names which. A set that does not validate is refused, and the set in service
    /// stays. Returns the version put in service. Before the registry is built, the set is
    /// checked by the build.
    pub fn swap(&self, policies: CedarPolicies) -> Result<String, CedarError> {
        let tools = self.shared.tools.get();
        if let Some(tools) = tools {
            validate(tools, &policies)?;
        }
        let version = policies.version().to_owned();
        let names = tools.map_or(&[][..], |tools| &tools.names);
        self.put_in_service(Live::new(policies, names));
        Ok(version)
    }

    fn put_in_service(&self, live: Live) {
        *self
            .shared
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(live);
    }

    fn live(&self) -> Arc<Live> {
        Arc::clone(
            &self
                .shared
                .current
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    fn decide(&self, request: &PolicyRequest<'_>) -> Result<Decision, PolicyError> {
        let tools =
            self.shared.tools.get().ok_or_else(|| {
                PolicyError::new("the Cedar policy was not prepared by a registry")
            })?;
        let live = self.live();
        let tool = request.contract.name();
        let scoped = live
            .by_tool
            .get(tool)
            .ok_or_else(|| PolicyError::new(format!("`{tool}` is not a tool of the registry")))?;
        let (cedar_request, entities) = cedar_request(tools, &self.shared.types, request)?;
        let response =
            self.shared
                .authorizer
                .is_authorized(&cedar_request, &scoped.policies, &entities);
        let version = live.policies.version();
        // Named by policy only: Cedar's words for an error quote the values it read.
        let failed: Vec<String> = response
            .diagnostics()
            .errors()
            .map(|error| match error {
                AuthorizationError::PolicyEvaluationError(error) => error.policy_id().to_string(),
            })
            .collect();
        if !failed.is_empty() {
            return Err(PolicyError::new(format!(
                "Cedar policies {version}: the policies {} failed on the call",
                failed.join(", ")
            )));
        }
        let rules: Vec<String> = response
            .diagnostics()
            .reason()
            .map(|id| id.to_string())
            .collect();
        let allowed = match response.decision() {
            CedarDecision::Allow => true,
            // No policy decided: no forbid matched, and no permit.
            CedarDecision::Deny if rules.is_empty() => {
                !self.shared.default_deny.load(Ordering::SeqCst) && !scoped.named_by_a_permit
            }
            CedarDecision::Deny => false,
        };
        Ok(Decision::Ruled(Ruling {
            rule_set: "cedar".to_owned(),
            version: version.to_owned(),
            allowed,
            rules,
        }))
    }
}

impl Policy for Cedar {
    fn evaluate<'a>(
        &'a self,
        request: PolicyRequest<'a>,
    ) -> BoxFuture<'a, Result<Decision, PolicyError>> {
        // Decided inside the future, where the gate contains a panic as the policy's.
        Box::pin(async move { self.decide(&request) })
    }

    fn prepare(&self, tools: &[&ToolContract]) -> Result<(), PolicyError> {
        let generated =
            Generated::for_contracts(tools).map_err(|error| PolicyError::new(error.to_string()))?;
        match self.shared.tools.get() {
            Some(prepared) if prepared.text != generated.text => {
                return Err(PolicyError::new(CedarError::OtherRegistry.to_string()));
            }
            Some(_) => {}
            None => {
                let policies = self.live().policies.clone();
                validate(&generated, &policies)
                    .map_err(|error| PolicyError::new(error.to_string()))?;
                self.put_in_service(Live::new(policies, &generated.names));
                let _ = self.shared.tools.set(generated);
            }
        }
        Ok(())
    }

    fn reads_budget(&self) -> bool {
        true
    }
}

/// Checks every policy of `policies` against the tools' schema, strictly: a name the schema
/// does not have, a comparison of values of two types, an attribute read without checking that
/// an optional one is there, are each an error.
fn validate(tools: &Generated, policies: &CedarPolicies) -> Result<(), CedarError> {
    let result =
        Validator::new(tools.schema.clone()).validate(&policies.set, ValidationMode::Strict);
    if result.validation_passed() {
        return Ok(());
    }
    let found: Vec<String> = result
        .validation_errors()
        .map(|error| diagnostics(error))
        .collect();
    Err(CedarError::Invalid(found.join("\n")))
}

/// The policies of `policies` whose scope can take a call of `tool`.
fn scoped(policies: &CedarPolicies, tool: &str) -> Scoped {
    let action = |uid: &EntityUid, name: &str| {
        uid.type_name().to_string() == "Portcullis::Action" && uid.id().unescaped() == name
    };
    let takes = |policy: &CedarPolicy| match policy.action_constraint() {
        ActionConstraint::Any => true,
        ActionConstraint::Eq(uid) => action(&uid, tool),
        ActionConstraint::In(uids) => uids
            .iter()
            .any(|uid| action(uid, tool) || action(uid, "call_tool")),
    };
    let mut scoped = Scoped {
        policies: PolicySet::new(),
        named_by_a_permit: false,
    };
    for policy in policies.set.policies().filter(|policy| takes(policy)) {
        scoped.named_by_a_permit |= policy.effect() == Effect::Permit;
        scoped
            .policies
            .add(policy.clone())
            .expect("the policies of a set have distinct ids");
    }
    scoped
}
