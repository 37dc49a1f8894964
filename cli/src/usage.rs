//! `portcullis usage` and `portcullis prune`: what each caller (an actor in its tenant) holds in
//! the store against its share, and the deletion of what the tasks' lifetime and the
//! retention allow.
//!
//! The shares, lifetimes and retention are the application's (`Store::with_shares`,
//! `with_lifetime`, `with_retention`): the store does not keep them, so the command takes
//! them as options, their defaults the store's own.

use std::io::Write;
use std::time::Duration;

use clap::Args;
use portcullis_core::TaskLifetime;
use portcullis_stores::{CallerUsage, Pruned, Retention, Shares};
use serde_json::{Value, json};

use crate::error::CliError;
use crate::store;
use crate::table::write_json;
use crate::table::{self, printable};

/// `portcullis usage`: what each caller holds.
#[derive(Debug, Args)]
pub struct Usage {
    /// Print a JSON object: the shares and a caller per element of `callers`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    shares: SharesArgs,
}

/// The shares the application's workers give the store.
#[derive(Debug, Args)]
pub struct SharesArgs {
    /// Live tasks the store holds at once, in its provenance and in its budget store each
    /// (`Shares::tasks`).
    #[arg(long, value_name = "TASKS", default_value_t = Shares::default().tasks)]
    tasks: u64,
    /// Live tasks one caller holds at once (`Shares::tasks_per_caller`); a hundredth of
    /// --tasks without it.
    #[arg(long, value_name = "TASKS")]
    tasks_per_caller: Option<u64>,
    /// Records of ended tasks the store keeps (`Shares::ended`).
    #[arg(long, value_name = "RECORDS", default_value_t = Shares::default().ended)]
    ended: u64,
    /// Records of ended tasks one caller holds (`Shares::ended_per_caller`); a hundredth
    /// of --ended without it.
    #[arg(long, value_name = "RECORDS")]
    ended_per_caller: Option<u64>,
    /// Calls one caller has claimed and not settled at once (`Shares::open_claims_per_caller`).
    #[arg(long, value_name = "CALLS", default_value_t = Shares::default().open_claims_per_caller)]
    open_claims_per_caller: u64,
    /// Agent runs one caller has going on at once (`Shares::runs_per_caller`).
    #[arg(long, value_name = "RUNS", default_value_t = Shares::default().runs_per_caller)]
    runs_per_caller: u64,
}

impl SharesArgs {
    fn shares(&self) -> Shares {
        Shares {
            tasks: self.tasks,
            tasks_per_caller: self.tasks_per_caller,
            ended: self.ended,
            ended_per_caller: self.ended_per_caller,
            open_claims_per_caller: self.open_claims_per_caller,
            runs_per_caller: self.runs_per_caller,
        }
    }
}

/// `portcullis prune`: ends and deletes what the lifetimes and retentions allow.
#[derive(Debug, Args)]
pub struct Prune {
    /// Change nothing: tell what would be ended and deleted.
    #[arg(long)]
    dry_run: bool,
    /// Print a JSON object of the counts.
    #[arg(long)]
    json: bool,
    /// A task that made no call for this long is ended (`TaskLifetime::idle`): 90s, 15m, 1h,
    /// 7d, 500ms.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "1h")]
    idle: Duration,
    /// A task that began this long ago is ended (`TaskLifetime::absolute`).
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "24h")]
    absolute: Duration,
    /// How long the record of an ended task is kept (`TaskLifetime::remembered`).
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "7d")]
    remembered: Duration,
    /// Agent runs not changed for this long, and held by no worker, are deleted.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "30d")]
    runs: Duration,
    /// Settled claims claimed this long ago are deleted (a call sent again under its id then
    /// runs again); never less than --absolute and --remembered together; a claim not
    /// settled is never deleted.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "30d")]
    claims: Duration,
    /// Pending calls that expired this long ago, and that no worker took, are deleted.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "30d")]
    approvals: Duration,
    /// Calls in rate windows and refusals older than this are deleted; never less than
    /// --absolute and --remembered together.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "30d")]
    windows: Duration,
    #[command(flatten)]
    shares: SharesArgs,
}

/// A duration as an operator writes it: a number and a unit (`ms`, `s`, `m`, `h`, `d`).
fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` has no unit: write 90s, 15m, 1h, 7d or 500ms"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` does not begin with a whole number"))?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60 * 1000,
        "h" => 60 * 60 * 1000,
        "d" => 24 * 60 * 60 * 1000,
        other => return Err(format!("`{other}` is no unit: use ms, s, m, h or d")),
    };
    Ok(Duration::from_millis(number.saturating_mul(unit_ms)))
}

/// Runs `portcullis usage` against the store `target` names.
pub async fn usage(
    usage: Usage,
    target: &store::StoreArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let store = store::open(target).await?;
    let callers = store.usage().await.map_err(CliError::StoreRead)?;
    let shares = usage.shares.shares();
    if usage.json {
        let value = json!({
            "shares": {
                "tasks": shares.tasks,
                "tasks_per_caller": shares.tasks_per_caller(),
                "ended": shares.ended,
                "ended_per_caller": shares.ended_per_caller(),
                "open_claims_per_caller": shares.open_claims_per_caller,
                "runs_per_caller": shares.runs_per_caller,
            },
            "callers": callers.iter().map(caller_json).collect::<Vec<_>>(),
        });
        return write_json(out, &value);
    }
    let per_caller = shares.tasks_per_caller();
    let ended_per_caller = shares.ended_per_caller();
    if callers.is_empty() {
        writeln!(out, "no caller holds anything in the store")?;
    } else {
        let held = |count: u64, share: u64| {
            if count >= share {
                format!("{count} (full)")
            } else {
                count.to_string()
            }
        };
        let rows: Vec<Vec<String>> = callers
            .iter()
            .map(|caller| {
                vec![
                    name(&caller.tenant),
                    name(&caller.actor),
                    held(caller.provenance_tasks, per_caller),
                    held(caller.budget_tasks, per_caller),
                    format!(
                        "{} / {}",
                        held(caller.provenance_ended, ended_per_caller),
                        held(caller.budget_ended, ended_per_caller)
                    ),
                    caller.source_bytes.to_string(),
                    held(caller.open_claims, shares.open_claims_per_caller),
                    caller.runs.to_string(),
                    caller.pending_approvals.to_string(),
                ]
            })
            .collect();
        let headers = [
            "TENANT",
            "ACTOR",
            "SOURCE TASKS",
            "BUDGET TASKS",
            "ENDED (SOURCES / BUDGET)",
            "TEXT BYTES",
            "OPEN CLAIMS",
            "RUNS",
            "PENDING",
        ];
        write!(out, "{}", table::render(&headers, &rows))?;
    }
    writeln!(
        out,
        "shares: {per_caller} live tasks per caller of {} in the provenance and the budget \
         store each; {ended_per_caller} records of ended tasks per caller of {}; {} open \
         claims and {} runs going on per caller",
        shares.tasks, shares.ended, shares.open_claims_per_caller, shares.runs_per_caller
    )?;
    Ok(())
}

/// A tenant or an actor as the table shows it: `-` for none.
fn name(text: &str) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        printable(text)
    }
}

fn caller_json(caller: &CallerUsage) -> Value {
    json!({
        "tenant": (!caller.tenant.is_empty()).then_some(&caller.tenant),
        "actor": caller.actor,
        "provenance_tasks": caller.provenance_tasks,
        "provenance_ended": caller.provenance_ended,
        "source_bytes": caller.source_bytes,
        "budget_tasks": caller.budget_tasks,
        "budget_ended": caller.budget_ended,
        "open_claims": caller.open_claims,
        "runs": caller.runs,
        "pending_approvals": caller.pending_approvals,
    })
}

/// Runs `portcullis prune` against the store `target` names.
pub async fn prune(
    prune: Prune,
    target: &store::StoreArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let store = store::open(target)
        .await?
        .with_shares(prune.shares.shares())
        .with_lifetime(TaskLifetime {
            idle: prune.idle,
            absolute: prune.absolute,
            remembered: prune.remembered,
        })
        .with_retention(Retention {
            runs: prune.runs,
            claims: prune.claims,
            approvals: prune.approvals,
            windows: prune.windows,
        });
    let pruned = store
        .prune(prune.dry_run)
        .await
        .map_err(CliError::StoreRead)?;
    if prune.json {
        return write_json(out, &pruned_json(&pruned, prune.dry_run));
    }
    let verb = if prune.dry_run { "would be" } else { "were" };
    let lines = [
        (
            pruned.provenance_deleted,
            "clean provenance tasks past their lifetime",
            "deleted with their sources",
        ),
        (
            pruned.provenance_ended,
            "tainted provenance tasks past their lifetime",
            "ended, their texts deleted and their taint kept",
        ),
        (
            pruned.provenance_forgotten,
            "records of ended provenance tasks past their time",
            "deleted",
        ),
        (pruned.sources_deleted, "source rows", "deleted in all"),
        (
            pruned.budget_ended,
            "budget tasks past their lifetime",
            "ended (refused task_expired while remembered)",
        ),
        (
            pruned.budget_forgotten,
            "records of ended budget tasks past their time",
            "deleted",
        ),
        (pruned.runs, "agent runs past their retention", "deleted"),
        (
            pruned.claims,
            "settled claims past their retention",
            "deleted",
        ),
        (
            pruned.approvals,
            "expired pending calls past their retention",
            "deleted",
        ),
        (
            pruned.window_rows,
            "rate and refusal window rows past their retention",
            "deleted",
        ),
    ];
    for (count, what, done) in lines {
        writeln!(out, "{count} {what} {verb} {done}")?;
    }
    if prune.dry_run {
        writeln!(out, "dry run: nothing was changed")?;
    }
    Ok(())
}

fn pruned_json(pruned: &Pruned, dry_run: bool) -> Value {
    json!({
        "dry_run": dry_run,
        "provenance_deleted": pruned.provenance_deleted,
        "provenance_ended": pruned.provenance_ended,
        "provenance_forgotten": pruned.provenance_forgotten,
        "sources_deleted": pruned.sources_deleted,
        "budget_ended": pruned.budget_ended,
        "budget_forgotten": pruned.budget_forgotten,
        "runs": pruned.runs,
        "claims": pruned.claims,
        "approvals": pruned.approvals,
        "window_rows": pruned.window_rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_read_with_their_units() {
        assert_eq!(duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("7d"), Ok(Duration::from_secs(7 * 24 * 3600)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(duration("12").is_err());
        assert!(duration("1w").is_err());
        assert!(duration("h").is_err());
    }
}
