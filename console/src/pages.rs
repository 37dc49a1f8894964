//! The console's pages, written on the server: every value from the store or the request is
//! escaped, and the pages carry no script but the console's own file. A page that needs a
//! signed-in reviewer sends the browser to the sign-in page otherwise.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use portcullis_core::audit::VerifyError;
use portcullis_core::{ApprovalStore, REDACTED, Ticket};
use serde_json::Value;

use crate::decide::{editable, recorded};
use crate::state::{Console, Tool};
use crate::web::{SignedIn, now_ms, signed_in};

/// `text` with the characters HTML gives a meaning to escaped.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            other => escaped.push(other),
        }
    }
    escaped
}

/// A page: the console's style and script, the reviewer's menu, the session's CSRF token for
/// the script to send.
fn page(title: &str, signed_in: Option<&SignedIn>, body: &str) -> Html<String> {
    let (token, menu) = match signed_in {
        Some(signed_in) => (
            format!(
                r#"<meta name="csrf-token" content="{}">"#,
                escape(&signed_in.session.csrf)
            ),
            format!(
                r#"<nav><a href="/queue">Queue</a><a href="/audit">Audit log</a><a href="/runs">Agent runs</a></nav><p class="who">{} <span class="roles">{}</span> <button type="button" id="signout">Sign out</button></p>"#,
                escape(signed_in.reviewer.id()),
                escape(&signed_in.reviewer.roles().join(", "))
            ),
        ),
        None => (String::new(), String::new()),
    };
    Html(format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · portcullis</title>
{token}
<link rel="stylesheet" href="/assets/console.css">
<script src="/assets/console.js" defer></script>
</head>
<body>
<header><a class="brand" href="/queue">portcullis</a>{menu}</header>
<main>
{body}
</main>
</body>
</html>
"#,
        title = escape(title)
    ))
}

/// The signed-in reviewer, or the way to the sign-in page.
fn reviewer(console: &Console, headers: &HeaderMap) -> Result<SignedIn, Redirect> {
    signed_in(console, headers).ok_or_else(|| Redirect::to("/signin"))
}

pub(crate) async fn home() -> Redirect {
    Redirect::to("/queue")
}

pub(crate) async fn signin() -> Html<String> {
    page(
        "Sign in",
        None,
        r#"<h1>Sign in</h1>
<form id="signin" class="card">
<label for="reviewer">Your reviewer name</label>
<input id="reviewer" name="reviewer" autocomplete="username webauthn" required maxlength="200">
<button type="submit">Sign in with your passkey</button>
</form>
<p id="message" role="status"></p>"#,
    )
}

pub(crate) async fn enrol() -> Html<String> {
    page(
        "Enrol a passkey",
        None,
        r#"<h1>Enrol a passkey</h1>
<div id="enrol" class="card">
<p>Your operator invited you to review calls of the agents. A passkey on this device will sign each of your decisions; nobody can decide in your name without it.</p>
<button type="button" id="create-passkey">Create your passkey</button>
</div>
<p id="message" role="status"></p>
<div id="enrolled" hidden>
<p>Your passkey is enrolled. Read this fingerprint to your operator, who confirms it before your passkey counts:</p>
<p class="fingerprint" id="fingerprint"></p>
</div>"#,
    )
}

/// How long ago, or how long from now, in words.
fn span(ms: u64) -> String {
    let minutes = ms / 60_000;
    match minutes {
        0 => "under a minute".to_owned(),
        1..=59 => format!("{minutes} min"),
        _ if minutes < 48 * 60 => format!("{} h {} min", minutes / 60, minutes % 60),
        _ => format!("{} days", minutes / (24 * 60)),
    }
}

fn caller(ticket: &Ticket) -> String {
    match &ticket.tenant {
        Some(tenant) => format!("{} ({tenant})", ticket.actor),
        None => ticket.actor.clone(),
    }
}

pub(crate) async fn queue(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let signed_in = match reviewer(&console, &headers) {
        Ok(signed_in) => signed_in,
        Err(to_sign_in) => return to_sign_in.into_response(),
    };
    let tickets = match console.store.pending().await {
        Ok(tickets) => tickets,
        Err(rejection) => return unavailable(&signed_in, rejection.message()),
    };
    let now = now_ms();
    let mut mine: Vec<Ticket> = tickets
        .into_iter()
        .filter(|ticket| signed_in.reviewer.may_decide(ticket).is_ok())
        .collect();
    mine.sort_by_key(|ticket| std::cmp::Reverse(ticket.created_ms));
    let mut body = String::from("<h1>Calls waiting for you</h1>");
    if mine.is_empty() {
        body.push_str(r#"<p class="empty">No call waits for a decision you may take.</p>"#);
    } else {
        body.push_str(
            r#"<table class="queue"><thead><tr><th>Risk</th><th>Tool</th><th>Caller</th><th>Waiting</th><th>Expires in</th><th></th></tr></thead><tbody>"#,
        );
        for ticket in &mine {
            let _ = write!(
                body,
                r#"<tr><td><span class="risk risk-{risk}">{risk}</span></td><td><code>{tool}</code></td><td>{caller}</td><td>{age}</td><td>{expires}</td><td><a class="button" href="/tickets/{id}">Review</a></td></tr>"#,
                risk = ticket.risk,
                tool = escape(&ticket.tool),
                caller = escape(&caller(ticket)),
                age = span(now.saturating_sub(ticket.created_ms)),
                expires = span(ticket.expires_ms.saturating_sub(now)),
                id = escape(&ticket.id),
            );
        }
        body.push_str("</tbody></table>");
    }
    page("Queue", Some(&signed_in), &body).into_response()
}

fn unavailable(signed_in: &SignedIn, why: &str) -> Response {
    let body = format!(
        r#"<h1>The store cannot be read</h1><p class="refusal">{}</p>"#,
        escape(why)
    );
    (
        StatusCode::SERVICE_UNAVAILABLE,
        page("Unavailable", Some(signed_in), &body),
    )
        .into_response()
}

fn not_yours(signed_in: &SignedIn) -> Response {
    (
        StatusCode::NOT_FOUND,
        page(
            "No such ticket",
            Some(signed_in),
            r#"<h1>No such ticket</h1><p>No call waits under this ticket for a decision you may take. <a href="/queue">Back to the queue</a></p>"#,
        ),
    )
        .into_response()
}

pub(crate) async fn ticket(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let signed_in = match reviewer(&console, &headers) {
        Ok(signed_in) => signed_in,
        Err(to_sign_in) => return to_sign_in.into_response(),
    };
    let pending = match console.store.get(&id).await {
        Ok(Some(pending)) if pending.decision.is_none() => pending,
        Ok(_) => return not_yours(&signed_in),
        Err(rejection) => return unavailable(&signed_in, rejection.message()),
    };
    let ticket = &pending.ticket;
    if signed_in.reviewer.may_decide(ticket).is_err() {
        tracing::warn!(target: "portcullis_console", action = "refused", reviewer = %signed_in.reviewer.id(), ticket = %id, "a reviewer opened a ticket they may not decide");
        return not_yours(&signed_in);
    }
    let now = now_ms();
    let tool = console.tools.get(&ticket.tool);
    let shown = shown_arguments(&pending.canonical, &ticket.arguments);
    let mut body = format!(
        r#"<article class="ticket" id="ticket" data-ticket="{id}">
<h1><code>{tool_name}</code> <span class="risk risk-{risk}">{risk} risk</span></h1>
<p class="description">{description}</p>"#,
        id = escape(&ticket.id),
        tool_name = escape(&ticket.tool),
        risk = ticket.risk,
        description = escape(tool.map_or("", |tool| tool.description.as_str())),
    );
    if let Some(reason) = &ticket.irreversible {
        let _ = write!(
            body,
            r#"<p class="irreversible">Cannot be undone: {}</p>"#,
            escape(reason)
        );
    }
    let _ = write!(
        body,
        r#"<dl class="facts">
<dt>Caller</dt><dd>{caller}</dd>
<dt>Call</dt><dd><code>{call}</code></dd>
<dt>Waiting</dt><dd>{age}</dd>
<dt>Expires in</dt><dd>{expires}</dd>
<dt>Who may decide</dt><dd>{approvers}</dd>
<dt>Contract</dt><dd><code class="hash">{hash}</code></dd>
</dl>
<h2>Arguments</h2>
{arguments}"#,
        caller = escape(&caller(ticket)),
        call = escape(&ticket.call_id),
        age = span(now.saturating_sub(ticket.created_ms)),
        expires = span(ticket.expires_ms.saturating_sub(now)),
        approvers = escape(&ticket.approvers.join(", ")),
        hash = escape(&ticket.contract_hash),
        arguments = arguments_table(&shown),
    );
    if !ticket.sources.is_empty() {
        body.push_str(
            r#"<h2>Where the values came from</h2><table class="sources"><thead><tr><th>Value</th><th>Found in</th><th></th></tr></thead><tbody>"#,
        );
        for found in &ticket.sources {
            let verdict = if found.allowed {
                ""
            } else {
                r#"<span class="warning">not a source this argument takes</span>"#
            };
            let _ = write!(
                body,
                "<tr><td><code>{}</code></td><td>{}</td><td>{verdict}</td></tr>",
                escape(&found.label()),
                escape(&found.found_where())
            );
        }
        body.push_str("</tbody></table>");
    }
    body.push_str(&decision_forms(&shown, tool));
    body.push_str("</article>");
    page(&format!("Ticket {}", ticket.tool), Some(&signed_in), &body).into_response()
}

/// The arguments the call runs with, as the reviewer is shown them: the call's canonical
/// arguments (what the reviewer's signature covers and the worker runs), masked wherever the
/// ticket's redacted copy masks a sensitive value. The redacted copy alone is not shown: a
/// store's writer could make it say one thing and the call another.
fn shown_arguments(canonical: &Value, recorded_copy: &Value) -> Value {
    if !recorded(recorded_copy) {
        return recorded_copy.clone();
    }
    let mut shown = canonical.clone();
    mask(&mut shown, recorded_copy);
    shown
}

fn mask(shown: &mut Value, recorded_copy: &Value) {
    match (shown, recorded_copy) {
        (shown, Value::String(text)) if text == REDACTED => {
            *shown = Value::String(REDACTED.to_owned());
        }
        (Value::Object(shown), Value::Object(recorded_copy)) => {
            for (name, value) in shown.iter_mut() {
                if let Some(recorded_value) = recorded_copy.get(name) {
                    mask(value, recorded_value);
                }
            }
        }
        (Value::Array(shown), Value::Array(recorded_copy)) => {
            for (value, recorded_value) in shown.iter_mut().zip(recorded_copy) {
                mask(value, recorded_value);
            }
        }
        _ => {}
    }
}

/// The arguments as shown, sensitive ones masked.
fn arguments_table(arguments: &Value) -> String {
    let Value::Object(members) = arguments else {
        return format!("<pre>{}</pre>", escape(&arguments.to_string()));
    };
    let mut table = String::from(r#"<table class="arguments"><tbody>"#);
    for (name, value) in members {
        let shown = match value {
            Value::String(text) if text == REDACTED => {
                r#"<span class="masked">sensitive, not shown</span>"#.to_owned()
            }
            Value::String(text) => format!("<code>{}</code>", escape(text)),
            other => format!(
                "<code>{}</code>",
                escape(&serde_json::to_string_pretty(other).unwrap_or_default())
            ),
        };
        let _ = write!(
            table,
            r#"<tr><th scope="row">{}</th><td data-argument="{}">{shown}</td></tr>"#,
            escape(name),
            escape(name)
        );
    }
    table.push_str("</tbody></table>");
    table
}

/// Approve, edit (a form from the tool's schema, when the console has it), reject.
fn decision_forms(shown: &Value, tool: Option<&Tool>) -> String {
    let mut forms = String::from(
        r#"<section class="decide">
<h2>Your decision</h2>
<p id="message" role="status"></p>
<form id="approve" class="card"><button type="submit" class="approve">Approve with your passkey</button></form>"#,
    );
    if let Some(tool) = tool.filter(|_| recorded(shown)) {
        forms.push_str(&edit_form(shown, &tool.schema));
    }
    forms.push_str(
        r#"<form id="reject" class="card">
<label for="reject-message">Why not (the agent's model reads this)</label>
<textarea id="reject-message" name="message" required maxlength="2000"></textarea>
<button type="submit" class="reject">Reject with your passkey</button>
</form>
</section>"#,
    );
    forms
}

/// An input for each argument the schema describes at the top level, with the constraints the
/// browser can check for help; the gates check the edit again. Sensitive arguments are not
/// shown and stay as the call sent them.
fn edit_form(arguments: &Value, schema: &Value) -> String {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut fields = String::new();
    let properties = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (name, property) in &properties {
        let current = &arguments[name.as_str()];
        if !editable(arguments, name) {
            continue;
        }
        let id = format!("edit-{}", escape(name));
        let name_attr = escape(name);
        let required_attr = if required.contains(&name.as_str()) {
            " required"
        } else {
            ""
        };
        let mut bounds = String::new();
        for (keyword, attribute) in [
            ("minimum", "min"),
            ("maximum", "max"),
            ("minLength", "minlength"),
            ("maxLength", "maxlength"),
        ] {
            if let Some(bound) = property.get(keyword).filter(|bound| bound.is_number()) {
                let _ = write!(bounds, r#" {attribute}="{bound}""#);
            }
        }
        let kind = property["type"].as_str().unwrap_or_default();
        let input = if let Some(values) = property["enum"].as_array() {
            let mut select =
                format!(r#"<select id="{id}" name="{name_attr}" data-type="json"{required_attr}>"#);
            if current.is_null() {
                select.push_str(r#"<option value="" selected>(not given)</option>"#);
            }
            for value in values {
                let selected = if value == current { " selected" } else { "" };
                let _ = write!(
                    select,
                    r#"<option value="{}"{selected}>{}</option>"#,
                    escape(&value.to_string()),
                    escape(
                        &value
                            .as_str()
                            .map_or_else(|| value.to_string(), str::to_owned)
                    )
                );
            }
            select.push_str("</select>");
            select
        } else {
            match kind {
                "integer" | "number" => format!(
                    r#"<input id="{id}" name="{name_attr}" type="number" data-type="number" step="{step}" value="{value}"{bounds}{required_attr}>"#,
                    step = if kind == "integer" { "1" } else { "any" },
                    value = if current.is_number() {
                        current.to_string()
                    } else {
                        String::new()
                    },
                ),
                "string" => {
                    let pattern = property["pattern"]
                        .as_str()
                        .map(|pattern| format!(r#" pattern="{}""#, escape(pattern)))
                        .unwrap_or_default();
                    format!(
                        r#"<input id="{id}" name="{name_attr}" type="text" data-type="string" value="{value}"{bounds}{pattern}{required_attr}>"#,
                        value = escape(current.as_str().unwrap_or_default()),
                    )
                }
                "boolean" => format!(
                    r#"<input id="{id}" name="{name_attr}" type="checkbox" data-type="boolean"{checked}>"#,
                    checked = if current == &Value::Bool(true) {
                        " checked"
                    } else {
                        ""
                    },
                ),
                _ => format!(
                    r#"<textarea id="{id}" name="{name_attr}" data-type="json"{required_attr}>{value}</textarea>"#,
                    value = escape(&serde_json::to_string_pretty(current).unwrap_or_default()),
                ),
            }
        };
        let help = property["description"]
            .as_str()
            .map(|help| format!(r#"<small>{}</small>"#, escape(help)))
            .unwrap_or_default();
        let _ = write!(
            fields,
            r#"<label for="{id}">{name_attr}</label>{input}{help}"#
        );
    }
    format!(
        r#"<form id="edit" class="card" novalidate>
<fieldset><legend>Edit the arguments, then approve the call as edited</legend>
{fields}
</fieldset>
<button type="submit" class="edit">Approve as edited with your passkey</button>
</form>"#
    )
}

/// Whether a record or run of `tenant` is the reviewer's to see: a reviewer of a tenant sees
/// that tenant's only; one without a tenant reviews the whole service.
fn of_tenant(signed_in: &SignedIn, tenant: Option<&str>) -> bool {
    signed_in
        .reviewer
        .tenant()
        .is_none_or(|own| tenant == Some(own))
}

pub(crate) async fn audit(
    State(console): State<Arc<Console>>,
    Query(filter): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let signed_in = match reviewer(&console, &headers) {
        Ok(signed_in) => signed_in,
        Err(to_sign_in) => return to_sign_in.into_response(),
    };
    const SHOWN: u64 = 500;
    let (status, length) = match console
        .store
        .verify_audit(console.audit_key.as_ref(), None)
        .await
    {
        Ok(reached) => (
            format!(
                r#"<p class="chain chain-ok" id="chain">The chain verifies: {} records, {}.</p>"#,
                reached.length,
                if console.audit_key.is_some() {
                    "keyed (HMAC-SHA-256)"
                } else {
                    "unkeyed: it shows accidents, not a forger"
                }
            ),
            reached.length,
        ),
        Err(VerifyError::Broken(chain_break)) => (
            format!(
                r#"<p class="chain chain-broken" id="chain">The chain is broken: {}.</p>"#,
                escape(&chain_break.to_string())
            ),
            u64::MAX,
        ),
        Err(VerifyError::Unreadable(error)) => {
            return unavailable(&signed_in, &error.to_string());
        }
    };
    let from = if length == u64::MAX {
        0
    } else {
        length.saturating_sub(SHOWN)
    };
    let records = match console.store.audit_records(from, Some(SHOWN)).await {
        Ok(records) => records,
        Err(error) => return unavailable(&signed_in, &error.to_string()),
    };
    let wanted = |key: &str, value: &str| {
        filter
            .get(key)
            .is_none_or(|wanted| wanted.is_empty() || wanted == value)
    };
    let value = |key: &str| escape(filter.get(key).map_or("", String::as_str));
    let mut body = format!(
        r#"<h1>Audit log</h1>
{status}
<form class="filter" method="get" action="/audit">
<label>Task <input name="task" value="{task}"></label>
<label>Tool <input name="tool" value="{tool}"></label>
<label>Decision <input name="decision" value="{decision}"></label>
<button type="submit">Filter</button>
</form>
<table class="audit"><thead><tr><th>#</th><th>Task</th><th>Caller</th><th>Tool</th><th>Decision</th><th>Code</th><th>Resolution</th></tr></thead><tbody>"#,
        task = value("task"),
        tool = value("tool"),
        decision = value("decision"),
    );
    for record in records.iter().rev().filter(|record| {
        of_tenant(&signed_in, record.tenant.as_deref())
            && wanted("task", &record.task_id)
            && wanted("tool", &record.tool)
            && wanted("decision", &record.decision)
    }) {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            record.sequence,
            escape(&record.task_id),
            escape(&record.actor),
            escape(&record.tool),
            escape(&record.decision),
            escape(record.code.as_deref().unwrap_or("")),
            escape(record.resolution.as_deref().unwrap_or("")),
        );
    }
    body.push_str("</tbody></table>");
    page("Audit log", Some(&signed_in), &body).into_response()
}

pub(crate) async fn runs(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let signed_in = match reviewer(&console, &headers) {
        Ok(signed_in) => signed_in,
        Err(to_sign_in) => return to_sign_in.into_response(),
    };
    let runs = match console.store.run_summaries().await {
        Ok(runs) => runs,
        Err(error) => return unavailable(&signed_in, &error.to_string()),
    };
    let now = now_ms();
    let mut body = String::from(
        r#"<h1>Agent runs</h1><table class="runs"><thead><tr><th>Run</th><th>Status</th><th>Caller</th><th>Task</th><th>Waiting on</th><th>Changed</th></tr></thead><tbody>"#,
    );
    for run in runs
        .iter()
        .filter(|run| of_tenant(&signed_in, run.tenant.as_deref()))
    {
        let _ = write!(
            body,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ago</td></tr>",
            escape(&run.id),
            escape(&run.status),
            escape(&run.actor),
            escape(&run.task_id),
            run.tickets
                .iter()
                .map(|ticket| format!(r#"<a href="/tickets/{0}">{0}</a>"#, escape(ticket)))
                .collect::<Vec<_>>()
                .join(" "),
            span(now.saturating_sub(run.updated_ms)),
        );
    }
    body.push_str("</tbody></table>");
    page("Agent runs", Some(&signed_in), &body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped() {
        assert_eq!(
            escape(r#"<script>alert("x" & 'y')</script>"#),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
    }

    #[test]
    fn the_edit_form_follows_the_schema_and_leaves_sensitive_arguments_out() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "amount_cents": {"type": "integer", "minimum": 1, "maximum": 50000},
                "currency": {"type": "string", "enum": ["EUR", "USD"]},
                "iban": {"type": "string"},
                "note": {"type": "string", "maxLength": 140, "description": "for the \"ledger\""}
            },
            "required": ["amount_cents", "currency", "iban"]
        });
        let arguments = serde_json::json!({
            "amount_cents": 900, "currency": "EUR", "iban": REDACTED, "note": "<b>"
        });
        let form = edit_form(&arguments, &schema);
        assert!(form.contains(r#"type="number" data-type="number" step="1" value="900" min="1" max="50000" required"#), "{form}");
        assert!(
            form.contains(r#"<option value="&quot;EUR&quot;" selected>EUR</option>"#),
            "{form}"
        );
        assert!(!form.contains("iban"), "{form}");
        assert!(
            form.contains(r#"value="&lt;b&gt;" maxlength="140""#),
            "{form}"
        );
        assert!(form.contains("for the &quot;ledger&quot;"), "{form}");
    }
}
