//! A decision, signed by the reviewer's passkey: the console computes the challenge of exactly
//! the decision asked for (the digest a worker will recompute), keeps the decision in the
//! session, and records it with the assertion the browser returns, after the check a worker
//! makes. An edit is checked against the tool's schema by the gates' own check before it is
//! signed; the worker's gates check it again when it runs.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use portcullis_core::encoding::base64url;
use portcullis_core::{
    ApprovalDecision, ApprovalStore, PendingCall, REDACTED, SignedDecision, record_decision,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::sessions::Signing;
use crate::signin::Assertion;
use crate::state::Console;
use crate::web::{Refusal, SignedIn, now_ms, signed_in_with_token};

/// The decision a reviewer asks to sign.
#[derive(Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub(crate) enum Asked {
    Approve,
    /// The arguments the reviewer changed; the others stay as the call sent them (sensitive
    /// ones, which the page does not show, among them).
    Edit {
        arguments: Map<String, Value>,
    },
    Reject {
        message: String,
    },
}

/// The pending call of ticket `id`, if the signed-in reviewer may decide it.
pub(crate) async fn decidable(
    console: &Console,
    signed_in: &SignedIn,
    id: &str,
) -> Result<PendingCall, Refusal> {
    let pending = console
        .store
        .get(id)
        .await?
        .filter(|pending| pending.decision.is_none())
        .ok_or_else(|| {
            Refusal::new(
                StatusCode::NOT_FOUND,
                "ticket_not_pending",
                "no call waits under this ticket: it is unknown, decided or ended",
            )
        })?;
    if let Err(rejection) = signed_in.reviewer.may_decide(&pending.ticket) {
        tracing::warn!(target: "portcullis_console", action = "refused", reviewer = %signed_in.reviewer.id(), ticket = %id, code = %rejection.code());
        return Err(Refusal {
            status: StatusCode::FORBIDDEN,
            ..Refusal::from(rejection)
        });
    }
    Ok(pending)
}

/// The challenge of the decision asked for.
pub(crate) async fn challenge(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(asked): Json<Asked>,
) -> Result<Json<Value>, Refusal> {
    let signed_in = signed_in_with_token(&console, &headers)?;
    let pending = decidable(&console, &signed_in, &id).await?;
    let reviewer = signed_in.reviewer.clone();
    let decision = match asked {
        Asked::Approve => ApprovalDecision::Approve { reviewer },
        Asked::Reject { message } => {
            if message.trim().is_empty() {
                return Err(Refusal::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "message_required",
                    "say why, for the model: the message goes back to it",
                ));
            }
            ApprovalDecision::Reject { reviewer, message }
        }
        Asked::Edit { arguments } => ApprovalDecision::Edit {
            reviewer,
            arguments: edited(&console, &pending, arguments)?,
        },
    };
    if pending.ticket.call_digest != pending.digest() {
        return Err(Refusal::new(
            StatusCode::CONFLICT,
            "call_changed",
            "the call stored under this ticket is not the one it was opened for: nothing is signed; tell your operator",
        ));
    }
    let signed_ms = now_ms();
    let challenge = SignedDecision::passkey_challenge(&pending.ticket, &decision, signed_ms);
    console.sessions.start_signing(
        &signed_in.cookie,
        Signing {
            ticket: id,
            decision,
            signed_ms,
        },
    );
    let credentials: Vec<String> = console
        .keyring
        .current()
        .passkeys_of(signed_in.reviewer.id())
        .map(|(_, credential)| credential.credential_id.clone())
        .collect();
    Ok(Json(json!({
        "challenge": base64url(&challenge),
        "credentials": credentials,
        "rp_id": console.rp_id,
    })))
}

/// The arguments of an edit: the call's, with the reviewer's changes, checked as the gates
/// check them.
fn edited(
    console: &Console,
    pending: &PendingCall,
    changes: Map<String, Value>,
) -> Result<Value, Refusal> {
    let Some(tool) = console.tools.get(&pending.ticket.tool) else {
        return Err(Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "tool_schema_unknown",
            "the console was not given this tool's schema (--exports), so it cannot check an edit: approve or reject",
        ));
    };
    if !recorded(&pending.ticket.arguments) {
        return Err(Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "edit_unavailable",
            "the call's arguments are too large for the ticket to show them: approve or reject",
        ));
    }
    for (name, value) in &changes {
        if !editable(&pending.ticket.arguments, name) || holds_redacted(value) {
            return Err(Refusal {
                path: Some(format!("/{name}")),
                ..Refusal::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "argument_not_editable",
                    format!(
                        "`{name}` holds a sensitive value the page does not show: it stays as the call sent it"
                    ),
                )
            });
        }
    }
    let mut arguments = match &pending.canonical {
        Value::Object(arguments) => arguments.clone(),
        _ => Map::new(),
    };
    arguments.extend(changes);
    let arguments = Value::Object(arguments);
    tool.check.check(&arguments)?;
    Ok(arguments)
}

/// Whether the ticket shows the call's arguments (it records a digest instead of arguments too
/// large to keep).
pub(crate) fn recorded(arguments: &Value) -> bool {
    match arguments {
        Value::Object(members) => {
            !(members.len() == 1
                && members
                    .get("unrecorded")
                    .is_some_and(|unrecorded| unrecorded.get("sha256").is_some()))
        }
        _ => false,
    }
}

/// Whether the reviewer may change argument `name`: not where the ticket masks a sensitive value,
/// at any depth (the reviewer never saw it, and the audit would not show the change).
pub(crate) fn editable(arguments: &Value, name: &str) -> bool {
    !arguments.get(name).is_some_and(holds_redacted)
}

fn holds_redacted(value: &Value) -> bool {
    match value {
        Value::String(text) => text == REDACTED,
        Value::Array(items) => items.iter().any(holds_redacted),
        Value::Object(members) => members.values().any(holds_redacted),
        _ => false,
    }
}

/// Records the decision the passkey signed.
pub(crate) async fn decide(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(assertion): Json<Assertion>,
) -> Result<Json<Value>, Refusal> {
    let signed_in = signed_in_with_token(&console, &headers)?;
    let Some(signing) = console.sessions.take_signing(&signed_in.cookie, &id) else {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "decision_not_started",
            "no decision on this ticket waits for your passkey: choose it again",
        ));
    };
    let pending = decidable(&console, &signed_in, &id).await?;
    let signed = SignedDecision::by_passkey(
        signing.decision,
        &assertion.credential_id,
        signing.signed_ms,
        assertion.signature.clone(),
        assertion.signed_data(),
    );
    console.keyring.current().check(&pending, &signed)?;
    let kind = match &signed.decision {
        ApprovalDecision::Approve { .. } => "approved",
        ApprovalDecision::Edit { .. } => "edited",
        ApprovalDecision::Reject { .. } => "rejected",
    };
    record_decision(&console.store, &id, signed).await?;
    tracing::info!(target: "portcullis_console", action = kind, reviewer = %signed_in.reviewer.id(), ticket = %id, tool = %pending.ticket.tool);
    Ok(Json(json!({"decided": kind})))
}
