//! The authorize gate: this caller may make this call.
//!
//! It runs in two steps. Before the arguments are read: the caller must hold one of the tool's
//! roles (`role_denied`) and run in one of its environments (`environment_mismatch`), so a
//! caller who may not use a tool learns nothing of its arguments. After they are validated:
//! the argument marked `#[tenant]` must name the caller's tenant (`tenant_mismatch`), and the one
//! marked `#[environment]` the environment the call runs in (`environment_mismatch`); then the
//! tool's own policy and the registry's policies (`policy_denied`) and intent checks
//! (`intent_mismatch`) decide, in that order.

pub(crate) mod provenance;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, OnceLock, PoisonError};

use serde_json::Value;

use super::bound::BoundCall;
use super::decode::Canonical;
use crate::context::CallContext;
use crate::contract::{ToolContract, ValueSource};
use crate::future::BoxFuture;
use crate::future::Contained;
use crate::policy::{BudgetUsage, Decision, Policy, PolicyError, PolicyRequest, Ruling};
use crate::rejection::{Rejection, RejectionCode};

/// The provenance gate, for a call it judges.
pub(crate) struct Judge<'a> {
    pub(crate) provenance: &'a provenance::Provenance,
    /// The source of the reviewer's edit being judged, if it is one.
    pub(crate) edit: Option<&'a provenance::store::SourceRecord>,
    /// Where its findings are kept, for the ticket and the audit.
    pub(crate) found: &'a std::sync::OnceLock<Vec<crate::contract::ValueSource>>,
    /// Where the untrusted source that makes the call wait is kept, for the ticket.
    pub(crate) tainted_by: &'a std::sync::OnceLock<crate::contract::Origin>,
}

/// The registry-wide rules the authorize gate consults.
pub(crate) struct Rules {
    pub(crate) policies: Vec<Box<dyn Policy>>,
    pub(crate) intent_checks: Vec<Box<dyn Policy>>,
}

impl Rules {
    /// The policies, then the intent checks.
    pub(crate) fn all(&self) -> impl Iterator<Item = &dyn Policy> {
        self.policies
            .iter()
            .chain(&self.intent_checks)
            .map(|policy| &**policy)
    }

    /// Whether a policy or an intent check reads what the task spent.
    pub(crate) fn read_budget(&self) -> bool {
        self.all().any(|policy| policy.reads_budget())
    }
}

/// What the authorize gate consults beside the call: the registry's rules, what the task spent
/// (read for the policies that read it), where the declared values were found (by the
/// provenance gate now, or when an approved call began to wait), and where the rulings of
/// versioned rule sets are kept for the audit.
pub(crate) struct Consulted<'a> {
    pub(crate) rules: &'a Rules,
    pub(crate) usage: Option<BudgetUsage>,
    pub(crate) sources: &'a OnceLock<Vec<ValueSource>>,
    pub(crate) rulings: &'a Mutex<Vec<Ruling>>,
}

/// The authorize gate, once the arguments are valid: the `#[tenant]` and `#[environment]`
/// arguments, where the declared values came from (with `judge`), then the tool's own policy,
/// the registry's policies and its intent checks; the first refusal stands. Everything after
/// the typed policy judges the canonical arguments. Returns whether an untrusted source makes
/// the call wait for a human.
pub(crate) async fn authorize(
    contract: &ToolContract,
    bound: &dyn BoundCall<'_>,
    ctx: &CallContext,
    canonical: &Canonical<'_>,
    consulted: Consulted<'_>,
    judge: Option<Judge<'_>>,
) -> Result<bool, Rejection> {
    let Consulted {
        rules,
        usage,
        sources,
        rulings,
    } = consulted;
    if contract.tenant_argument().is_some() || contract.environment_argument().is_some() {
        authorize_arguments(contract, ctx, canonical.get()?)?;
    }
    let mut untrusted = false;
    if let Some(judge) = judge {
        let judged = judge
            .provenance
            .judge(contract, ctx, canonical.get()?, judge.edit)
            .await;
        let (found, refusal) = match judged {
            Ok(judged) => {
                untrusted = judged.needs_human;
                if let Some(origin) = judged.tainted_by {
                    let _ = judge.tainted_by.set(origin);
                }
                (judged.sources, None)
            }
            Err((refusal, found)) => (found, Some(refusal)),
        };
        let _ = judge.found.set(found);
        if let Some(refusal) = refusal {
            return Err(refusal);
        }
    }
    if let Some(decision) = bound.policy(ctx) {
        verdict(|| decision, RejectionCode::PolicyDenied, rulings).await?;
    }
    if rules.policies.is_empty() && rules.intent_checks.is_empty() {
        return Ok(untrusted);
    }
    let request = PolicyRequest {
        ctx,
        contract,
        arguments: canonical.get()?,
        sources: sources.get().map(Vec::as_slice),
        usage,
    };
    for policy in &rules.policies {
        verdict(
            || policy.evaluate(request),
            RejectionCode::PolicyDenied,
            rulings,
        )
        .await?;
    }
    for check in &rules.intent_checks {
        verdict(
            || check.evaluate(request),
            RejectionCode::IntentMismatch,
            rulings,
        )
        .await?;
    }
    Ok(untrusted)
}

/// Awaits one policy's decision; a denial, an error and a panic all refuse the call, a panic
/// while the policy makes its future (a closure decides then) as much as one while it runs.
/// The ruling of a versioned rule set is kept in `rulings`, whichever way it went.
async fn verdict<'a>(
    evaluate: impl FnOnce() -> BoxFuture<'a, Result<Decision, PolicyError>>,
    code: RejectionCode,
    rulings: &Mutex<Vec<Ruling>>,
) -> Result<(), Rejection> {
    let undecided = |reason: &str| {
        Rejection::new(
            code,
            "a policy could not decide on this call, so it is refused",
        )
        .with_reason(reason)
        .with_retryable(false)
    };
    let decided = match catch_unwind(AssertUnwindSafe(evaluate)) {
        Ok(future) => Contained { future }.await,
        Err(_) => Err(()),
    };
    match decided {
        Ok(Ok(Decision::Allow)) => Ok(()),
        Ok(Ok(Decision::Deny { rule, message })) => Err(Rejection::new(code, message)
            .with_reason(rule)
            .with_retryable(false)),
        Ok(Ok(Decision::Ruled(ruling))) => {
            let refusal = (!ruling.allowed).then(|| {
                let (reason, message) = ruling.refusal();
                Rejection::new(code, message)
                    .with_reason(reason)
                    .with_retryable(false)
            });
            rulings
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(ruling);
            refusal.map_or(Ok(()), Err)
        }
        Ok(Err(error)) => {
            // The model is told only that no policy could decide; the operator, why.
            tracing::warn!(%error, "a policy could not decide on a call, which is refused");
            Err(undecided("policy_error"))
        }
        Err(()) => Err(undecided("policy_panicked")),
    }
}

/// The checks on who is calling, before the arguments are read.
pub(crate) fn authorize_caller(
    contract: &ToolContract,
    ctx: &CallContext,
) -> Result<(), Rejection> {
    if !contract.grants(ctx) {
        return Err(Rejection::new(
            RejectionCode::RoleDenied,
            "the caller holds none of the roles this tool requires",
        ));
    }
    let allowed = contract.environments();
    if !allowed.is_empty() {
        let runs_in = ctx.environment();
        if !runs_in.is_some_and(|environment| allowed.iter().any(|allowed| allowed == environment))
        {
            let message = match runs_in {
                Some(environment) => {
                    format!("this tool may not run in the `{environment}` environment")
                }
                None => "this tool runs only in named environments, and the call runs in none"
                    .to_owned(),
            };
            return Err(
                Rejection::new(RejectionCode::EnvironmentMismatch, message).with_retryable(false)
            );
        }
    }
    Ok(())
}

/// The checks on what the arguments name: the canonical value of the `#[tenant]` argument is
/// the caller's tenant, that of the `#[environment]` argument the environment the call runs in
/// (a string: a string, a newtype of one, or a unit enum variant by its serde name).
fn authorize_arguments(
    contract: &ToolContract,
    ctx: &CallContext,
    canonical: &Value,
) -> Result<(), Rejection> {
    let named = |argument: &str| canonical.get(argument).and_then(Value::as_str);
    if let Some(argument) = contract.tenant_argument() {
        let named = named(argument);
        match (ctx.tenant(), named) {
            (Some(tenant), Some(named)) if tenant == named => {}
            (None, _) => {
                return Err(Rejection::new(
                    RejectionCode::TenantMismatch,
                    "this tool is scoped to a tenant, and the caller belongs to none",
                )
                .with_path(format!("/{argument}"))
                .with_retryable(false));
            }
            _ => {
                return Err(Rejection::new(
                    RejectionCode::TenantMismatch,
                    "the call names another tenant than the caller's",
                )
                .with_path(format!("/{argument}"))
                .with_hint("act only on the caller's own tenant"));
            }
        }
    }
    if let Some(argument) = contract.environment_argument() {
        let named = named(argument);
        if named.is_none() || named != ctx.environment() {
            let runs_in = ctx.environment().unwrap_or("no environment");
            return Err(Rejection::new(
                RejectionCode::EnvironmentMismatch,
                format!("the call names another environment than the one it runs in (`{runs_in}`)"),
            )
            .with_path(format!("/{argument}"))
            .with_hint(format!(
                "name the environment the call runs in: `{runs_in}`"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn contract() -> crate::ContractBuilder {
        ToolContract::builder(
            "t",
            "A tool.",
            json!({"type": "object", "additionalProperties": false}),
        )
    }

    fn code(result: Result<(), Rejection>) -> Option<RejectionCode> {
        result.err().map(|rejection| rejection.code())
    }

    #[test]
    fn roles_grant_any_of_them() {
        let tool = contract().roles(["admin", "ops"]).build();
        let ops = CallContext::new("a").with_roles(["viewer", "ops"]);
        let viewer = CallContext::new("b").with_roles(["viewer"]);
        assert_eq!(code(authorize_caller(&tool, &ops)), None);
        assert_eq!(
            code(authorize_caller(&tool, &viewer)),
            Some(RejectionCode::RoleDenied)
        );
        let open = contract().build();
        assert_eq!(code(authorize_caller(&open, &viewer)), None);
    }

    #[test]
    fn environments_are_allowed_by_name() {
        let tool = contract().environments(["staging", "production"]).build();
        let staging = CallContext::new("a").with_environment("staging");
        let dev = CallContext::new("a").with_environment("development");
        let nowhere = CallContext::new("a");
        assert_eq!(code(authorize_caller(&tool, &staging)), None);
        assert_eq!(
            code(authorize_caller(&tool, &dev)),
            Some(RejectionCode::EnvironmentMismatch)
        );
        assert_eq!(
            code(authorize_caller(&tool, &nowhere)),
            Some(RejectionCode::EnvironmentMismatch)
        );
    }

    #[test]
    fn tenants_must_match_and_exist() {
        let tool = contract().tenant_argument("tenant_id").build();
        let scope = |tenant: Value| json!({ "tenant_id": tenant });
        let member = CallContext::new("a").with_tenant("t_001");
        assert_eq!(
            code(authorize_arguments(&tool, &member, &scope(json!("t_001")))),
            None
        );
        let other = authorize_arguments(&tool, &member, &scope(json!("t_999"))).unwrap_err();
        assert_eq!(
            (other.code(), other.path()),
            (RejectionCode::TenantMismatch, Some("/tenant_id"))
        );
        assert_eq!(
            code(authorize_arguments(&tool, &member, &scope(json!(1)))),
            Some(RejectionCode::TenantMismatch)
        );
        let homeless = CallContext::new("a");
        assert_eq!(
            code(authorize_arguments(
                &tool,
                &homeless,
                &scope(json!("t_001"))
            )),
            Some(RejectionCode::TenantMismatch)
        );
    }

    #[test]
    fn environment_arguments_must_name_where_the_call_runs() {
        let tool = contract().environment_argument("environment").build();
        let scope = |environment: Value| json!({ "environment": environment });
        let production = CallContext::new("a").with_environment("production");
        assert_eq!(
            code(authorize_arguments(
                &tool,
                &production,
                &scope(json!("production"))
            )),
            None
        );
        let rejection =
            authorize_arguments(&tool, &production, &scope(json!("development"))).unwrap_err();
        assert_eq!(rejection.code(), RejectionCode::EnvironmentMismatch);
        assert_eq!(rejection.path(), Some("/environment"));
        let nowhere = CallContext::new("a");
        assert_eq!(
            code(authorize_arguments(
                &tool,
                &nowhere,
                &scope(json!("production"))
            )),
            Some(RejectionCode::EnvironmentMismatch)
        );
    }
}
