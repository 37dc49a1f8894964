//! `portcullis claims`: the claims of calls that have not ended, and the settlement of one whose
//! outcome is unknown. A worker that stopped in the middle of a call leaves its claim running;
//! once the claim's lease has run out, every repeat of the call is refused with
//! `outcome_unknown`, for good. An operator who found out how the call ended (the payment
//! provider's dashboard, the tool's own logs) settles the claim with that outcome: repeats then
//! get it. Each settlement is written to the store's audit log, before and after, with who
//! settled it and why.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use portcullis_core::audit::{AuditKey, AuditRecord, AuditSink, Unchained};
use portcullis_core::{
    CallKey, ClaimState, DEFAULT_CLAIM_LEASE, OpenClaim, Outcome, Rejection, RejectionCode,
    claim_not_found,
};
use portcullis_stores::Store;
use serde_json::{Value, json};

use crate::error::CliError;
use crate::table::write_json;
use crate::table::{self, now_ms, shorten};
use crate::{audit, store};

/// The operator's commands on claims.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The claims of calls not settled: `running` (within their lease), `pending` (waiting
    /// for a reviewer), and `outcome_unknown` (past their lease and never reported: a repeat
    /// is refused until an operator settles them).
    List {
        /// Print a JSON array of claims.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        lease: LeaseArgs,
    },
    /// Settle a claim whose outcome is unknown with the outcome found out: repeats of the
    /// call get it instead of `outcome_unknown`. Refused for any other claim (running within
    /// its lease, waiting for a reviewer, settled already). Written to the audit log with who
    /// settled it and why.
    Settle {
        /// The claim's id, as `portcullis claims list` shows it.
        claim: String,
        /// How the call ended.
        #[arg(long, value_enum)]
        outcome: SettledAs,
        /// The tool's output, as JSON, for a call that completed (null without it).
        #[arg(long, value_name = "JSON", value_parser = json_value)]
        output: Option<Value>,
        /// Why the call failed, for the model, for a call that failed.
        #[arg(long, required_if_eq("outcome", "failed"))]
        message: Option<String>,
        /// Who settles it, as the operator's identity system knows them.
        #[arg(long, env = "PORTCULLIS_OPERATOR", value_name = "ID")]
        operator: String,
        /// How the outcome was found out, for the audit log.
        #[arg(long)]
        reason: String,
        /// The file holding the application's audit key (its exact bytes), if it keys its
        /// log: the settlement's records are chained with it.
        #[arg(long, env = "PORTCULLIS_AUDIT_KEY_FILE", value_name = "PATH")]
        key_file: Option<PathBuf>,
        #[command(flatten)]
        lease: LeaseArgs,
    },
}

/// How a settled call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SettledAs {
    /// The tool ran and succeeded.
    Completed,
    /// The tool did not run, or ran and failed.
    Failed,
}

/// The claim lease the application's registries use.
#[derive(Debug, Args)]
pub struct LeaseArgs {
    /// The application's claim lease (`RegistryBuilder::claim_lease`), in seconds: a running
    /// claim older than this has an unknown outcome. Give the application's own: a shorter one
    /// would let a claim be settled while its worker may still report.
    #[arg(
        long = "claim-lease-secs",
        env = "PORTCULLIS_CLAIM_LEASE_SECS",
        value_name = "SECONDS",
        default_value_t = DEFAULT_CLAIM_LEASE.as_secs()
    )]
    seconds: u64,
}

impl LeaseArgs {
    /// Claims made before this instant are past their lease.
    fn start_ms(&self) -> u64 {
        now_ms().saturating_sub(self.seconds.saturating_mul(1000))
    }
}

/// Runs one claims command against the store `target` names.
pub async fn run(
    command: Command,
    target: &store::StoreArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        Command::List { json, lease } => {
            let store = store::open(target).await?;
            list(&store, lease.start_ms(), json, out).await
        }
        Command::Settle {
            claim,
            outcome,
            output,
            message,
            operator,
            reason,
            key_file,
            lease,
        } => {
            let outcome = match (outcome, output, message) {
                (SettledAs::Completed, output, None) => {
                    Outcome::Completed(output.unwrap_or(Value::Null))
                }
                (SettledAs::Failed, None, Some(message)) => Outcome::Rejected(
                    Rejection::new(RejectionCode::ToolFailed, message).with_retryable(false),
                ),
                (SettledAs::Completed, _, Some(_)) => {
                    return Err(CliError::Usage(
                        "--message is for a call that failed; a completed call takes --output"
                            .to_owned(),
                    ));
                }
                (SettledAs::Failed, Some(_), _) => {
                    return Err(CliError::Usage(
                        "--output is for a call that completed; a failed call takes --message"
                            .to_owned(),
                    ));
                }
                (SettledAs::Failed, None, None) => {
                    return Err(CliError::Usage("a failed call takes --message".to_owned()));
                }
            };
            let key = key_file.as_deref().map(audit::read_key).transpose()?;
            let store = store::open(target).await?;
            let settlement = Settlement {
                operator: &operator,
                reason: &reason,
                key,
            };
            settle(&store, &claim, &outcome, lease.start_ms(), &settlement, out).await
        }
    }
}

/// Where an open claim stands, as the operator reads it.
fn state_name(claim: &OpenClaim, lease_start_ms: u64) -> &'static str {
    match claim.state {
        _ if claim.is_abandoned(lease_start_ms) => "outcome_unknown",
        ClaimState::Pending(_) => "pending",
        _ => "running",
    }
}

async fn list(
    store: &Store,
    lease_start_ms: u64,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let claims = store.open_claims().await.map_err(CliError::Refused)?;
    if json {
        let claims: Vec<Value> = claims
            .iter()
            .map(|claim| {
                json!({
                    "id": claim.key.claim_id(),
                    "tool": claim.key.tool,
                    "call_id": claim.key.call_id,
                    "task": claim.key.task,
                    "actor": claim.key.actor,
                    "tenant": claim.key.tenant,
                    "state": state_name(claim, lease_start_ms),
                    "ticket": match &claim.state {
                        ClaimState::Pending(ticket) => Value::from(ticket.id.as_str()),
                        _ => Value::Null,
                    },
                    "claimed_ms": claim.claimed_ms,
                })
            })
            .collect();
        return write_json(out, &Value::Array(claims));
    }
    if claims.is_empty() {
        writeln!(out, "no claim is open: every claimed call was settled")?;
        return Ok(());
    }
    let rows: Vec<Vec<String>> = claims
        .iter()
        .map(|claim| {
            vec![
                claim.key.claim_id(),
                shorten(&claim.key.tool, 40),
                shorten(&claim.key.call_id, 30),
                shorten(&claim.key.task, 30),
                shorten(&claim.key.actor, 30),
                claim.key.tenant.clone().unwrap_or_else(|| "-".to_owned()),
                state_name(claim, lease_start_ms).to_owned(),
                table::utc(claim.claimed_ms),
            ]
        })
        .collect();
    let headers = [
        "ID",
        "TOOL",
        "CALL ID",
        "TASK",
        "ACTOR",
        "TENANT",
        "STATE",
        "CLAIMED (UTC)",
    ];
    write!(out, "{}", table::render(&headers, &rows))?;
    Ok(())
}

/// Who settles, why, and the key the audit log is chained with.
struct Settlement<'a> {
    operator: &'a str,
    reason: &'a str,
    key: Option<AuditKey>,
}

impl Settlement<'_> {
    /// A record of this settlement of `call`'s claim, at stage `decision`.
    fn record(&self, call: &CallKey, decision: &str, summary: String) -> AuditRecord {
        AuditRecord {
            version: 2,
            sequence: 0,
            time_ms: now_ms(),
            trace_id: String::new(),
            task_id: call.task.clone(),
            actor: call.actor.clone(),
            tenant: call.tenant.clone(),
            tool: call.tool.clone(),
            call_id: call.call_id.clone(),
            // A claim keeps the fingerprint of the call's arguments, not the arguments.
            arguments: Value::Null,
            decision: decision.to_owned(),
            gate: Some("repeat".to_owned()),
            code: None,
            reason: None,
            summary,
            resolution: Some(format!("settled by {}: {}", self.operator, self.reason)),
            original_arguments: None,
            snapshot_before: None,
            snapshot_after: None,
            snapshot_missing: None,
            sources: Vec::new(),
            rulings: Vec::new(),
            budget_calls: 0,
            budget_cost: 0,
            duration_us: 0,
            previous_hash: String::new(),
            hash: String::new(),
        }
    }

    /// Appends `record` to the store's audit log; `meanwhile` says where the settlement stands
    /// if it cannot be.
    async fn write(
        &self,
        store: &Store,
        record: AuditRecord,
        meanwhile: &str,
    ) -> Result<(), CliError> {
        let decision = record.decision.clone();
        store
            .append(Unchained::new(record, self.key.clone()))
            .await
            .map_err(|error| {
                CliError::Refused(
                    Rejection::new(
                        RejectionCode::AuditUnavailable,
                        format!(
                            "the settlement's {decision} record could not be written ({error}): \
                             {meanwhile}"
                        ),
                    )
                    .with_hint("check that the database is reachable, then try again"),
                )
            })
    }
}

/// What the settled outcome is, for the audit record and the operator.
fn outcome_summary(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Completed(output) => format!("completed: {}", shorten(&output.to_string(), 200)),
        Outcome::Rejected(rejection) => format!("failed: {}", rejection.message()),
        // An operator settles a call as completed or failed only.
        _ => "settled".to_owned(),
    }
}

/// Settles the claim `id` with `outcome`: the store judges it and writes it in one step, and
/// the audit log has an `about_to_settle` record before and a `settled` or `settle_refused`
/// record after.
async fn settle(
    store: &Store,
    id: &str,
    outcome: &Outcome,
    lease_start_ms: u64,
    settlement: &Settlement<'_>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let id = id.trim().to_ascii_lowercase();
    let call = store
        .find_claim(&id)
        .await
        .map_err(CliError::Refused)?
        .ok_or_else(|| CliError::Refused(claim_not_found()))?;
    check_key(store, settlement.key.as_ref()).await?;
    let summary = outcome_summary(outcome);
    // Write-ahead: without its record, nothing is settled.
    settlement
        .write(
            store,
            settlement.record(&call, "about_to_settle", summary.clone()),
            "nothing was settled",
        )
        .await?;
    match store.settle_abandoned(&call, outcome, lease_start_ms).await {
        Ok(()) => {
            settlement
                .write(
                    store,
                    settlement.record(&call, "settled", summary.clone()),
                    "the claim IS settled and its about_to_settle record is in the log",
                )
                .await?;
            writeln!(
                out,
                "claim {id} ({} call {} of {} in task {}) settled as {summary} by {}: repeats \
                 of the call now get this outcome",
                table::printable(&call.tool),
                table::printable(&call.call_id),
                table::printable(&call.actor),
                table::printable(&call.task),
                table::printable(settlement.operator),
            )?;
            Ok(())
        }
        Err(refusal) => {
            let mut record =
                settlement.record(&call, "settle_refused", refusal.message().to_owned());
            record.code = Some(refusal.code().as_str().to_owned());
            settlement
                .write(
                    store,
                    record,
                    "the settlement was refused and nothing was settled",
                )
                .await?;
            Err(CliError::Refused(refusal))
        }
    }
}

/// Refuses a key under which the log's last record does not verify: records chained with
/// another key, or none where the application keys its log, would break the chain.
async fn check_key(store: &Store, key: Option<&AuditKey>) -> Result<(), CliError> {
    let end = audit::log_end(store).await?;
    let Some(end) = end.checked_sub(1) else {
        return Ok(());
    };
    let last = store::audit_records(store, end, Some(1)).await?;
    match last.first() {
        Some(record) if !record.is_linked_with(key) => Err(CliError::Usage(
            if key.is_some() {
                "the audit log is not chained with this key: pass the application's audit key \
                 (--key-file or PORTCULLIS_AUDIT_KEY_FILE)"
            } else {
                "the application keys its audit log: pass its key (--key-file or \
                 PORTCULLIS_AUDIT_KEY_FILE), so that the settlement's records chain with it"
            }
            .to_owned(),
        )),
        _ => Ok(()),
    }
}

/// A JSON value, as a tool's output.
fn json_value(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|error| format!("the output must be JSON: {error}"))
}
