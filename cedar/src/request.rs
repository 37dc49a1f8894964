//! One call as a Cedar request: the caller as `Portcullis::Actor` (a member of each of its
//! roles, with its tenant), the tool as its action, the registry as the resource, and the
//! context the schema promises: the canonical arguments as `input`, the environment, the risk,
//! what the task spent, and where the declared values came from.

use std::collections::HashSet;
use std::sync::Arc;

use cedar_policy_core::ast::{Eid, Entity, EntityType, EntityUID, RestrictedExpr};
use cedar_policy_core::entities::TCComputation;
use cedar_policy_core::extensions::Extensions;
use cedar_policy_core::validator::CoreSchema;
use mcp_tools_sdk::data::Input;
use portcullis_core::{PolicyError, PolicyRequest, ValueSource};
use serde_json::Value;
use smol_str::SmolStr;

use crate::schema::Generated;

/// The entity types a request names, parsed once.
pub(crate) struct Types {
    actor: EntityType,
    role: EntityType,
    registry: EntityUID,
}

impl Types {
    pub(crate) fn new() -> Self {
        let parse = |name: &str| {
            EntityType::from_normalized_str(name).expect("the stub's entity type names parse")
        };
        Types {
            actor: parse("Portcullis::Actor"),
            role: parse("Portcullis::Role"),
            registry: EntityUID::from_components(
                parse("Portcullis::Registry"),
                Eid::new("registry"),
                None,
            ),
        }
    }
}

/// The Cedar request of `request` and the entities it reads.
pub(crate) fn cedar_request(
    generated: &Generated,
    types: &Types,
    request: &PolicyRequest<'_>,
) -> Result<(cedar_policy::Request, cedar_policy::Entities), PolicyError> {
    let ctx = request.ctx;
    // Without the error's own words, which quote the values read: a `#[sensitive]` value
    // would reach the log.
    let failed = |what: &str| PolicyError::new(format!("`{}`: {what}", request.contract.name()));
    let actor_uid = EntityUID::from_components(types.actor.clone(), Eid::new(ctx.actor()), None);
    let roles: HashSet<EntityUID> = ctx
        .roles()
        .iter()
        .map(|role| EntityUID::from_components(types.role.clone(), Eid::new(role.as_str()), None))
        .collect();
    let tenant = ctx
        .tenant()
        .map(|tenant| (SmolStr::new_static("tenant"), RestrictedExpr::val(tenant)));
    let extensions = Extensions::all_available();
    let actor = Entity::new(
        actor_uid.clone(),
        tenant,
        HashSet::new(),
        roles,
        [],
        extensions,
    )
    .map_err(|_| failed("the caller could not be described"))?;
    // The roles have no parents: the actor's ancestors are its roles, known already.
    let entities = generated
        .actions
        .clone()
        .add_entities(
            [Arc::new(actor)],
            None::<&CoreSchema<'_>>,
            TCComputation::AssumeAlreadyComputed,
            extensions,
        )
        .map_err(|_| failed("the caller could not be described"))?;
    let call = format!(
        r#"{{"params":{{"name":{},"arguments":{}}}}}"#,
        Value::from(request.contract.name()),
        given(request.arguments)
    );
    let input =
        Input::from_json_str(&call).map_err(|_| failed("the arguments could not be read"))?;
    // Never zero for unknown: a rule over what the task spent would pass.
    let usage = request
        .usage
        .ok_or_else(|| failed("what the task spent was not read"))?;
    let context = [
        (
            SmolStr::new_static("environment"),
            RestrictedExpr::val(ctx.environment().unwrap_or("")),
        ),
        (
            SmolStr::new_static("risk"),
            RestrictedExpr::val(request.contract.risk().as_str()),
        ),
        (
            SmolStr::new_static("budget"),
            record([
                ("calls", RestrictedExpr::val(long(usage.calls))),
                ("cost", RestrictedExpr::val(long(usage.cost))),
            ]),
        ),
        (
            SmolStr::new_static("provenance"),
            provenance(request.sources),
        ),
    ];
    let (cedar_request, entities) = generated
        .requests
        .generate_request(
            actor_uid,
            types.registry.clone(),
            context,
            entities,
            &input,
            None,
        )
        .map_err(|_| failed("the call could not be put to Cedar"))?;
    Ok((cedar_request.into(), entities.into()))
}

/// The arguments as they were given: a `null` member is an optional argument left out (the
/// canonical arguments write `None` as `null`), so that `context.input has note` means that a
/// note was given.
fn given(arguments: &Value) -> Value {
    match arguments {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(name, value)| (name.clone(), given(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(given).collect()),
        other => other.clone(),
    }
}

/// A count as a Cedar `Long`, the largest `Long` for one past it.
fn long(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

fn record<const N: usize>(pairs: [(&'static str, RestrictedExpr); N]) -> RestrictedExpr {
    RestrictedExpr::record(
        pairs
            .into_iter()
            .map(|(name, value)| (SmolStr::new_static(name), value)),
    )
    .expect("the names of a record written here differ")
}

/// Where the declared values came from: the pointers of the values found in each kind of
/// source.
fn provenance(sources: Option<&[ValueSource]>) -> RestrictedExpr {
    let mut user = Vec::new();
    let mut trusted = Vec::new();
    let mut untrusted = Vec::new();
    let mut nowhere = Vec::new();
    for source in sources.unwrap_or_default() {
        let path = RestrictedExpr::val(source.path.as_str());
        match &source.found_in {
            Some(origin) if origin.is_user() => user.push(path),
            Some(_) if source.vouched_by_trusted_tool() => trusted.push(path),
            Some(_) => untrusted.push(path),
            None => nowhere.push(path),
        }
    }
    record([
        ("judged", RestrictedExpr::val(sources.is_some())),
        ("user", RestrictedExpr::set(user)),
        ("trusted", RestrictedExpr::set(trusted)),
        ("untrusted", RestrictedExpr::set(untrusted)),
        ("nowhere", RestrictedExpr::set(nowhere)),
    ])
}
