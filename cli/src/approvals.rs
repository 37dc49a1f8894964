//! `portcullis approvals`: the reviewer's queue. A decision is signed with the reviewer's key
//! and recorded in the store with `record_decision`, under the rules `Registry::resume`
//! applies; a worker of the application, which has the tools and the keyring, checks the
//! signature and runs the call (`Registry::run_decided`).

use std::io::{self, Write};
use std::path::PathBuf;

use clap::{Args, Subcommand};
use portcullis_core::audit::{AuditSink, Unchained};
use portcullis_core::{
    ApprovalDecision, ApprovalStore, Rejection, RejectionCode, Reviewer, SignedDecision, Ticket,
    record_decision,
};
use portcullis_stores::Store;
use serde_json::{Map, Value};

use crate::error::CliError;
use crate::table::write_json;
use crate::table::{self, now_ms, remaining, shorten};
use crate::{audit, keys, store};

/// The reviewer's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The tickets waiting for a decision, and those decided whose call no worker ran yet.
    List {
        /// Print a JSON array of tickets, each with a `state` of `pending` or `decided`.
        #[arg(long)]
        json: bool,
    },
    /// One ticket as a reviewer sees it: the real arguments, sensitive values included, only
    /// to a reviewer allowed to decide it (--reviewer, --role, --tenant); the redacted ones
    /// otherwise.
    Show {
        /// The ticket's id.
        ticket: String,
        #[command(flatten)]
        reviewer: ReviewerArgs,
        /// Print the ticket as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve the call as it is.
    Approve {
        /// The ticket's id.
        ticket: String,
        #[command(flatten)]
        reviewer: ReviewerArgs,
    },
    /// Approve the call with other arguments; they pass decode, validate, authorize and the
    /// budget again when the call runs.
    Edit {
        /// The ticket's id.
        ticket: String,
        /// The new arguments, a JSON object.
        #[arg(long, value_name = "JSON", value_parser = edited_arguments)]
        arguments: Value,
        #[command(flatten)]
        reviewer: ReviewerArgs,
    },
    /// Refuse the call; the message goes back to the model.
    Reject {
        /// The ticket's id.
        ticket: String,
        /// Why, for the model.
        #[arg(long)]
        message: String,
        #[command(flatten)]
        reviewer: ReviewerArgs,
    },
}

/// Who is reviewing, as the operator's identity system knows them.
#[derive(Debug, Args)]
pub struct ReviewerArgs {
    /// The reviewer's identity.
    #[arg(long = "reviewer", env = "PORTCULLIS_REVIEWER", value_name = "ID")]
    id: Option<String>,
    /// A role the reviewer holds (repeat it, or a comma-separated list in the variable).
    #[arg(
        long = "role",
        env = "PORTCULLIS_REVIEWER_ROLES",
        value_delimiter = ',',
        value_name = "ROLE"
    )]
    roles: Vec<String>,
    /// The reviewer's tenant: it then decides only that tenant's tickets.
    #[arg(long, env = "PORTCULLIS_REVIEWER_TENANT")]
    tenant: Option<String>,
    /// The reviewer's signing key (`portcullis keys generate`). Workers with a keyring count
    /// only signed decisions, with the roles their keyring gives the key.
    #[arg(long, env = "PORTCULLIS_REVIEWER_KEY_FILE", value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// The call digest `approvals show` printed: a signed decision is made only over the call
    /// the reviewer was shown, whatever the store holds by then.
    #[arg(long, value_name = "DIGEST")]
    call_digest: Option<String>,
    /// The audit key the application passes to `AuditKey::new`: a refused decision is
    /// recorded in the store's audit log, linked as the log is.
    #[arg(long, env = "PORTCULLIS_AUDIT_KEY_FILE", value_name = "FILE")]
    audit_key_file: Option<PathBuf>,
}

impl ReviewerArgs {
    fn reviewer(&self) -> Option<Reviewer> {
        let id = self.id.as_deref()?;
        let reviewer = Reviewer::new(id).with_roles(self.roles.iter().cloned());
        Some(match &self.tenant {
            Some(tenant) => reviewer.with_tenant(tenant),
            None => reviewer,
        })
    }

    fn required(&self) -> Result<Reviewer, CliError> {
        self.reviewer().ok_or(CliError::NoReviewer)
    }
}

/// Runs one approvals command against the store `target` names, opened once the command's own
/// arguments are known to be usable.
pub async fn run(
    command: Command,
    target: &store::StoreArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        Command::List { json } => list(&store::open(target).await?, json, out).await,
        Command::Show {
            ticket,
            reviewer,
            json,
        } => {
            let store = store::open(target).await?;
            show(&store, &ticket, reviewer.reviewer(), json, out).await
        }
        Command::Approve { ticket, reviewer } => {
            let decision = ApprovalDecision::Approve {
                reviewer: reviewer.required()?,
            };
            decide(target, &ticket, decision, &reviewer, out).await
        }
        Command::Edit {
            ticket,
            arguments,
            reviewer,
        } => {
            let decision = ApprovalDecision::Edit {
                reviewer: reviewer.required()?,
                arguments,
            };
            decide(target, &ticket, decision, &reviewer, out).await
        }
        Command::Reject {
            ticket,
            message,
            reviewer,
        } => {
            let decision = ApprovalDecision::Reject {
                reviewer: reviewer.required()?,
                message,
            };
            decide(target, &ticket, decision, &reviewer, out).await
        }
    }
}

/// Whether a reviewer decided the ticket yet.
#[derive(Clone, Copy)]
enum State {
    Pending,
    Decided,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Decided => "decided",
        }
    }
}

async fn list(store: &Store, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let mut tickets: Vec<(Ticket, State)> = store
        .pending()
        .await
        .map_err(CliError::Refused)?
        .into_iter()
        .map(|ticket| (ticket, State::Pending))
        .collect();
    for id in store.decided().await.map_err(CliError::Refused)? {
        // A worker may take the call between the two reads; it is then no longer waiting.
        if let Some(pending) = store.get(&id).await.map_err(CliError::Refused)? {
            tickets.push((pending.ticket, State::Decided));
        }
    }
    if json {
        let tickets: Vec<Value> = tickets
            .into_iter()
            .map(|(ticket, state)| with_state(&ticket, state))
            .collect();
        return write_json(out, &Value::Array(tickets));
    }
    if tickets.is_empty() {
        writeln!(out, "no call waits for a decision")?;
        return Ok(());
    }
    let now = now_ms();
    let rows: Vec<Vec<String>> = tickets
        .iter()
        .map(|(ticket, state)| {
            vec![
                ticket.id.clone(),
                ticket.tool.clone(),
                ticket.actor.clone(),
                ticket.tenant.clone().unwrap_or_else(|| "-".to_owned()),
                ticket.risk.to_string(),
                state.name().to_owned(),
                remaining(ticket.expires_ms, now),
                shorten(&ticket.description, 60),
            ]
        })
        .collect();
    let headers = [
        "ID",
        "TOOL",
        "ACTOR",
        "TENANT",
        "RISK",
        "STATE",
        "EXPIRES IN",
        "DESCRIPTION",
    ];
    write!(out, "{}", table::render(&headers, &rows))?;
    Ok(())
}

async fn show(
    store: &Store,
    ticket_id: &str,
    reviewer: Option<Reviewer>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let pending = store
        .get(ticket_id)
        .await
        .map_err(CliError::Refused)?
        .ok_or_else(|| CliError::Refused(not_pending()))?;
    let state = match pending.decision {
        Some(_) => State::Decided,
        None => State::Pending,
    };
    // Who may decide a ticket may read what it would approve; anyone else sees what the model
    // and the audit see.
    let may_decide = match &reviewer {
        Some(reviewer) => reviewer.may_decide(&pending.ticket),
        None => Err(Rejection::new(
            RejectionCode::ReviewerNotAllowed,
            "no reviewer given (--reviewer, --role, --tenant)",
        )),
    };
    let (arguments, redacted) = match &may_decide {
        Ok(()) => (&pending.canonical, false),
        Err(_) => (&pending.ticket.arguments, true),
    };
    if json {
        let mut shown = with_state(&pending.ticket, state);
        shown["arguments"] = arguments.clone();
        shown["arguments_redacted"] = Value::Bool(redacted);
        shown["call_digest"] = Value::from(pending.digest());
        return write_json(out, &shown);
    }
    let ticket = &pending.ticket;
    let now = now_ms();
    let rows = [
        ("ticket", ticket.id.clone()),
        ("state", state.name().to_owned()),
        ("tool", ticket.tool.clone()),
        ("risk", ticket.risk.to_string()),
        (
            "irreversible",
            ticket
                .irreversible
                .clone()
                .unwrap_or_else(|| "no".to_owned()),
        ),
        ("actor", ticket.actor.clone()),
        (
            "tenant",
            ticket.tenant.clone().unwrap_or_else(|| "-".to_owned()),
        ),
        ("call id", ticket.call_id.clone()),
        ("description", ticket.description.clone()),
        ("opened", table::utc(ticket.created_ms)),
        (
            "expires",
            format!(
                "{} (in {})",
                table::utc(ticket.expires_ms),
                remaining(ticket.expires_ms, now)
            ),
        ),
        ("approvers", approvers(ticket)),
        ("contract sha256", ticket.contract_hash.clone()),
        ("call digest", pending.digest()),
    ];
    for (label, value) in rows {
        writeln!(
            out,
            "{:<16} {}",
            format!("{label}:"),
            table::printable(&value)
        )?;
    }
    match may_decide {
        Ok(()) => writeln!(out, "arguments (real, sensitive values included):")?,
        Err(refusal) => writeln!(
            out,
            "arguments (sensitive values redacted: {}):",
            refusal.message()
        )?,
    }
    let arguments = serde_json::to_string_pretty(arguments).map_err(io::Error::from)?;
    for line in arguments.lines() {
        writeln!(out, "{}", table::printable(line))?;
    }
    if !ticket.sources.is_empty() {
        writeln!(out, "where the values came from:")?;
        for found in &ticket.sources {
            let verdict = if found.allowed {
                ""
            } else {
                "  <- NOT a source this argument takes"
            };
            writeln!(
                out,
                "  {}: {}{verdict}",
                table::printable(&found.label()),
                table::printable(&found.found_where())
            )?;
        }
    }
    Ok(())
}

fn approvers(ticket: &Ticket) -> String {
    let roles = match ticket.approvers.as_slice() {
        [] => "any reviewer".to_owned(),
        roles => format!("a reviewer holding {}", roles.join(" or ")),
    };
    if ticket.self_approval {
        format!("{roles}, the actor included")
    } else {
        format!("{roles}, not the actor")
    }
}

async fn decide(
    target: &store::StoreArgs,
    ticket_id: &str,
    decision: ApprovalDecision,
    reviewer_args: &ReviewerArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let verb = match &decision {
        ApprovalDecision::Approve { .. } => "approved",
        ApprovalDecision::Edit { .. } => "approved with edited arguments",
        ApprovalDecision::Reject { .. } => "rejected",
    };
    let reviewer = decision.reviewer().id().to_owned();
    let key = reviewer_args
        .key_file
        .as_deref()
        .map(keys::read_key)
        .transpose()?;
    let store = store::open(target).await?;
    let decision = match &key {
        Some(key) => {
            // The reviewer signs the call the store holds, after checking that it is the call
            // the ticket was opened for.
            let pending = store
                .get(ticket_id)
                .await
                .map_err(CliError::Refused)?
                .ok_or_else(|| CliError::Refused(not_pending()))?;
            let Some(shown) = reviewer_args.call_digest.as_deref() else {
                return Err(CliError::Usage(
                    "a signed decision needs --call-digest, as `portcullis approvals show` \
                     printed it for the call you reviewed"
                        .to_owned(),
                ));
            };
            let digest = pending.digest();
            if digest != pending.ticket.call_digest || digest != shown {
                return Err(CliError::CallChanged(pending.ticket.id));
            }
            key.sign(&pending.ticket, decision)
        }
        None => SignedDecision::from(decision),
    };
    let pending = match record_decision(&store, ticket_id, decision).await {
        Ok(pending) => pending,
        Err(refusal) => {
            audit_refusal(&store, ticket_id, &reviewer, &refusal, reviewer_args).await?;
            return Err(CliError::Refused(refusal));
        }
    };
    let signed = match key {
        Some(key) => format!("signed with {}", key.public_key()),
        None => "unsigned: only workers that accept unsigned decisions run it".to_owned(),
    };
    writeln!(
        out,
        "ticket {} ({}) {verb} by {} ({signed}): the decision is recorded; a worker of the \
         application runs it (Registry::run_decided)",
        pending.ticket.id,
        table::printable(&pending.ticket.tool),
        table::printable(&reviewer),
    )?;
    Ok(())
}

/// Records in the store's audit log that `reviewer`'s decision on ticket `ticket_id` was
/// refused, when the ticket is there to tell which call it was. Linked with the audit key
/// given, and only if the log's last record is linked the same way: a record linked otherwise
/// would break the application's chain, so the operator is told instead.
async fn audit_refusal(
    store: &Store,
    ticket_id: &str,
    reviewer: &str,
    refusal: &Rejection,
    reviewer_args: &ReviewerArgs,
) -> Result<(), CliError> {
    if refusal.code() == RejectionCode::ApprovalsUnavailable {
        return Ok(());
    }
    let Ok(Some(pending)) = store.get(ticket_id).await else {
        return Ok(());
    };
    let key = reviewer_args
        .audit_key_file
        .as_deref()
        .map(audit::read_key)
        .transpose()?;
    let end = audit::log_end(store).await?;
    if end > 0 {
        let last = store::audit_records(store, end - 1, Some(1)).await?;
        if last
            .first()
            .is_some_and(|last| !last.is_linked_with(key.as_ref()))
        {
            eprintln!(
                "portcullis: the refusal was not audited: the audit log is linked with another \
                 key; pass the application's audit key with --audit-key-file"
            );
            return Ok(());
        }
    }
    let record = Unchained::refused_decision(&pending, reviewer, refusal, key);
    store.append(record).await.map_err(CliError::StoreRead)
}

/// Edited arguments: a JSON object, as a tool takes its arguments.
fn edited_arguments(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(arguments @ Value::Object(_)) => Ok(arguments),
        Ok(other) => Err(format!(
            "the arguments must be a JSON object, as the tool takes them, not {}",
            shorten(&other.to_string(), 40)
        )),
        Err(error) => Err(format!(
            "the arguments must be a JSON object, and this is not JSON: {error}"
        )),
    }
}

/// The ticket as JSON, with whether it was decided.
fn with_state(ticket: &Ticket, state: State) -> Value {
    let mut fields = match serde_json::to_value(ticket) {
        Ok(Value::Object(fields)) => fields,
        // A ticket is a struct of strings and JSON values: it serializes as an object.
        _ => Map::new(),
    };
    fields.insert("state".to_owned(), Value::from(state.name()));
    Value::Object(fields)
}

/// What `record_decision` answers for an unknown ticket, for `show` to answer alike.
fn not_pending() -> Rejection {
    Rejection::new(
        RejectionCode::TicketNotPending,
        "no call waits under this ticket: it is unknown, or its call ended already",
    )
    .with_hint("list the waiting tickets with `portcullis approvals list`")
}
