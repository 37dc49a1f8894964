//! The workload the benchmarks share: the reference delete tool's arguments, a tool with
//! them and nothing configured, the same with every gate configured, and its registry.

// `transfer_funds` in the shared tools takes ten arguments on purpose (one per tool argument).
#[allow(clippy::too_many_arguments)]
#[path = "../../tests/common/mod.rs"]
pub mod common;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use common::{Environment, TABLE_NAME};
use portcullis::audit::{AuditKey, AuditRecord, AuditSink, Checkpoint, Unchained};
use portcullis::prelude::*;
use portcullis::{
    BoxFuture, BudgetLimits, CircuitBreaker, Decision, PolicyError, PolicyRequest, RateLimit,
    ReadOnlyRequests, RegistryBuilder,
};

/// The tool with nothing configured.
pub const TOOL: &str = "delete_record";
/// The tool with every gate configured.
pub const GUARDED_TOOL: &str = "delete_guarded";
/// The arguments of every call: those of the reference tool `delete_database_record`.
pub const ARGUMENTS: &str = r#"{"table_name":"user_records","record_id":4242,"environment":"staging","confirm_force":true,"admin_note":"duplicate created by a retried import"}"#;

/// Delete one record from a database table (the reference tool's arguments, a scalar output).
#[tool(
    risk = "high",
    role = "admin",
    irreversible = "a benchmark deletes nothing"
)]
pub fn delete_record(
    #[validate(length(min = 3, max = 50), regex(path = *TABLE_NAME))] table_name: String,
    #[validate(range(min = 1))] record_id: u64,
    environment: Environment,
    #[serde(default)] confirm_force: bool,
    #[validate(length(max = 200))]
    #[sensitive]
    admin_note: Option<String>,
) -> Result<u64, ToolError> {
    let _ = (table_name, environment, confirm_force, admin_note);
    Ok(record_id)
}

/// User 1 of the `users` table is never deleted.
async fn protect_user_one(
    _ctx: &CallContext,
    args: &DeleteGuardedArgs,
) -> Result<Decision, PolicyError> {
    Ok(if args.table_name == "users" && args.record_id == 1 {
        Decision::deny("super_admin_protected", "user 1 is never deleted")
    } else {
        Decision::Allow
    })
}

/// Delete one record from a database table, with every gate configured.
#[tool(
    risk = "high",
    role = "admin",
    environments = ["staging", "production"],
    policy = protect_user_one,
    cost = 2,
    max_calls_per_task = 1_000_000_000,
    irreversible = "a benchmark deletes nothing"
)]
pub fn delete_guarded(
    #[validate(length(min = 3, max = 50), regex(path = *TABLE_NAME))] table_name: String,
    #[validate(range(min = 1))] record_id: u64,
    #[environment] environment: Environment,
    #[serde(default)] confirm_force: bool,
    #[validate(length(max = 200))]
    #[sensitive]
    admin_note: Option<String>,
) -> Result<u64, ToolError> {
    let _ = (table_name, environment, confirm_force, admin_note);
    Ok(record_id)
}

/// Keeps only the latest record: the chain and its hashes are computed for every call, and
/// the benchmark's memory stays flat.
#[derive(Default)]
pub struct LatestRecord(std::sync::Mutex<Option<AuditRecord>>);

impl AuditSink for LatestRecord {
    fn append(&self, entry: Unchained) -> BoxFuture<'_, std::io::Result<()>> {
        let mut latest = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let head = latest
            .as_ref()
            .map_or_else(Checkpoint::genesis, Checkpoint::after);
        *latest = Some(entry.chain_after(&head));
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The registry of (d): every gate has something to check.
pub fn guarded_registry() -> Registry {
    every_gate(guarded_builder())
        .build()
        .expect("the guarded tool forms a registry")
}

/// The guarded tool and a registry-wide policy that reads the arguments as JSON.
pub fn guarded_builder() -> RegistryBuilder {
    Registry::builder()
        .tool(DeleteGuarded)
        .policy(|request: &PolicyRequest<'_>| {
            Ok(if request.arguments["record_id"].as_u64() == Some(0) {
                Decision::deny("no_record_zero", "record 0 does not exist")
            } else {
                Decision::Allow
            })
        })
}

/// `registry` with what every call of (d) passes besides its tool's own checks: an intent
/// check, budgets (per task, a rate limit, a circuit breaker) that never refuse, and an audit
/// chained under a key, kept in memory.
pub fn every_gate(registry: RegistryBuilder) -> RegistryBuilder {
    every_gate_but_audit(registry)
        .audit(LatestRecord::default())
        .audit_key(AuditKey::new([7; 32].to_vec()).expect("32 bytes make an audit key"))
}

/// [`every_gate`] without the audit: what the two records of a call cost is the difference.
pub fn every_gate_but_audit(registry: RegistryBuilder) -> RegistryBuilder {
    let huge = Some(u64::MAX);
    registry
        .intent_check(ReadOnlyRequests::default())
        .budget(BudgetLimits {
            max_calls_per_task: huge,
            max_cost_per_task: huge,
            stalled_loop_after: None,
            rate_limit: Some(RateLimit {
                calls: u32::MAX,
                per: Duration::from_secs(1),
            }),
            circuit_breaker: Some(CircuitBreaker {
                failures: 5,
                cool_down: Duration::from_secs(30),
            }),
        })
}

/// Polls `future` to completion with a no-op waker; for futures that finish without waiting
/// on anything (the dispatch of a sync tool finishes on the first poll).
pub fn poll_to_end<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
    }
}

/// The caller of the guarded tool: an admin in staging, with a request the intent check reads.
pub fn guarded_caller() -> CallContext {
    common::admin()
        .with_environment("staging")
        .with_request("Delete record 4242 of user_records, it is a duplicate.")
}
