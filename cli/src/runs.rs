//! `portcullis runs`: the agent runs the application's workers keep in the store: which wait
//! for a human and on which tickets, which ended and why, and what each did, step by step.
//!
//! The list reads what the store keeps in clear, so it needs no seal keys; a run's steps are
//! in its state, which the workers may have sealed (`--seal-key-file`).

use std::io::Write;

use clap::Subcommand;
use portcullis_agent::{RunStore, Step, StepEvent, StoredRun, Usage};
use portcullis_stores::{RunSummary, Store};
use serde_json::{Value, json};

use crate::error::CliError;
use crate::store;
use crate::table::write_json;
use crate::table::{self, now_ms, printable, remaining, shorten};

/// The operator's commands on runs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Every run, most recently changed first: its status, whom it acts for, the tickets it
    /// waits for, its steps and the model's tokens. Needs no seal keys.
    List {
        /// Print a JSON array of runs.
        #[arg(long)]
        json: bool,
    },
    /// One run: its steps as they happened, the tickets it waits for, what the model used.
    /// A sealed run needs the workers' seal keys (--seal-key-file).
    Show {
        /// The run's id.
        run: String,
        /// Print the run as the store keeps it (version, lease and state), as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one runs command against the store `target` names.
pub async fn run(
    command: Command,
    target: &store::StoreArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let store = store::open(target).await?;
    match command {
        Command::List { json } => list(&store, json, out).await,
        Command::Show { run, json } => show(&store, &run, json, out).await,
    }
}

async fn list(store: &Store, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let runs = store.run_summaries().await.map_err(CliError::Runs)?;
    if json {
        return write_json(out, &Value::Array(runs.iter().map(summary_json).collect()));
    }
    if runs.is_empty() {
        writeln!(out, "no run is stored")?;
        return Ok(());
    }
    let now = now_ms();
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            vec![
                run.id.clone(),
                status(run, now),
                run.actor.clone(),
                run.tenant.clone().unwrap_or_else(|| "-".to_owned()),
                table::utc(run.updated_ms),
                match run.tickets.as_slice() {
                    [] => "-".to_owned(),
                    tickets => tickets.join(", "),
                },
                run.steps.to_string(),
                run.usage.tokens().to_string(),
            ]
        })
        .collect();
    let headers = [
        "ID",
        "STATUS",
        "ACTOR",
        "TENANT",
        "UPDATED",
        "WAITS FOR",
        "STEPS",
        "TOKENS",
    ];
    write!(out, "{}", table::render(&headers, &rows))?;
    Ok(())
}

/// The run's status as an operator needs it: why a stopped run stopped, and whether a running
/// one is still held by its worker (one whose lease ended was left by a worker that stopped,
/// and the next resume takes it over).
fn status(run: &RunSummary, now: u64) -> String {
    match (run.status.as_str(), &run.stop_code) {
        ("stopped", Some(code)) => format!("stopped: {code}"),
        ("running", _) if run.held_until_ms > now => {
            format!("running (held {})", remaining(run.held_until_ms, now))
        }
        ("running", _) => "running (lease ended)".to_owned(),
        (other, _) => other.to_owned(),
    }
}

fn summary_json(run: &RunSummary) -> Value {
    json!({
        "id": run.id,
        "version": run.version,
        "status": run.status,
        "stop_code": run.stop_code,
        "actor": run.actor,
        "tenant": run.tenant,
        "task_id": run.task_id,
        "created_ms": run.created_ms,
        "updated_ms": run.updated_ms,
        "held_until_ms": run.held_until_ms,
        "tickets": run.tickets,
        "steps": run.steps,
        "usage": run.usage,
    })
}

async fn show(store: &Store, id: &str, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let run = RunStore::get(store, id)
        .await
        .map_err(CliError::Runs)?
        .ok_or_else(|| CliError::RunNotFound(id.to_owned()))?;
    if json {
        let raw = serde_json::to_value(&run).map_err(std::io::Error::from)?;
        return write_json(out, &raw);
    }
    let state = &run.state;
    let now = now_ms();
    let (ctx, usage) = (&state.ctx, state.usage);
    let held = if run.held_until_ms > now {
        format!(
            "until {} (in {})",
            table::utc(run.held_until_ms),
            remaining(run.held_until_ms, now)
        )
    } else {
        "no".to_owned()
    };
    let rows = [
        ("run", state.id.clone()),
        ("status", state.status.as_str().to_owned()),
        ("actor", ctx.actor().to_owned()),
        ("tenant", ctx.tenant().unwrap_or("-").to_owned()),
        ("task", ctx.task_id().to_owned()),
        ("started", table::utc(state.created_ms)),
        ("updated", table::utc(state.updated_ms)),
        ("held", held),
        ("model turns", state.turns.to_string()),
        ("usage", usage_text(usage)),
        ("version", run.version.to_string()),
    ];
    for (label, value) in rows {
        writeln!(out, "{:<12} {}", format!("{label}:"), printable(&value))?;
    }
    tickets(&run, now, out)?;
    writeln!(out, "steps:")?;
    for step in &state.steps {
        writeln!(
            out,
            "  {:>3}  {}  {}",
            step.number,
            table::utc(step.time_ms),
            printable(&step_text(step))
        )?;
    }
    Ok(())
}

/// The tickets of the run's last turn: the calls that wait for a human, and those decided
/// whose result the run has not yet sent to the model.
fn tickets(run: &StoredRun, now: u64, out: &mut dyn Write) -> Result<(), CliError> {
    let calls: Vec<_> = run
        .state
        .turn
        .iter()
        .filter_map(|call| call.ticket.as_ref().map(|ticket| (call, ticket)))
        .collect();
    if calls.is_empty() {
        return Ok(());
    }
    writeln!(out, "tickets:")?;
    for (call, ticket) in calls {
        let stands = match &call.result {
            None => format!(
                "waits for a decision, expires {} (in {})",
                table::utc(ticket.expires_ms),
                remaining(ticket.expires_ms, now)
            ),
            Some(result) if result.is_error => "ended, refused".to_owned(),
            Some(_) => "ended, completed".to_owned(),
        };
        writeln!(
            out,
            "  {}  {} (call {}): {stands}",
            printable(&ticket.id),
            printable(&ticket.tool),
            printable(&call.call.id)
        )?;
    }
    Ok(())
}

fn usage_text(usage: Usage) -> String {
    format!(
        "{} tokens ({} read, {} written), cost {}",
        usage.tokens(),
        usage.input_tokens,
        usage.output_tokens,
        usage.cost
    )
}

/// A step as a person reads it. What the user and the model wrote is cut short, and made
/// printable by the caller: it is text a model or a user chose.
fn step_text(step: &Step) -> String {
    let quoted = |text: &str| format!("\"{}\"", shorten(text, 80));
    match &step.event {
        StepEvent::UserMessage { text } => format!("the user wrote {}", quoted(text)),
        StepEvent::ModelTurn { text, calls, usage } => {
            let did = if calls.is_empty() {
                "the model answered".to_owned()
            } else {
                format!("the model called {}", calls.join(", "))
            };
            let said = match text {
                Some(text) if !calls.is_empty() => format!(", saying {}", quoted(text)),
                _ => String::new(),
            };
            format!("{did}{said} ({} tokens)", usage.tokens())
        }
        StepEvent::ToolCall {
            call_id,
            tool,
            result,
            code,
            message,
        } => {
            let ended = match (result.as_str(), code, message) {
                ("waiting", ..) => "waits for a human".to_owned(),
                (_, Some(code), Some(message)) => {
                    format!("refused with {code}: {}", quoted(message))
                }
                (_, Some(code), None) => format!("refused with {code}"),
                (result, None, _) => result.to_owned(),
            };
            format!("{tool} (call {call_id}): {ended}")
        }
        StepEvent::Paused { tickets } => format!("paused, waiting for {}", tickets.join(", ")),
        StepEvent::Resumed => "resumed".to_owned(),
        StepEvent::Finished { answer } => format!("finished, answering {}", quoted(answer)),
        StepEvent::Stopped { reason } => format!("stopped ({}): {reason}", reason.code()),
        other => other.kind().replace('_', " "),
    }
}
