//! A whole agent run around the gates: the model looks an invoice up, pays it with a wrong
//! call that the gates refuse and the model corrects, and the payment waits for a reviewer,
//! who approves it; the run then resumes and the model answers. Each step is printed as it
//! happened.
//!
//! ```sh
//! cargo run -p portcullis-examples --example agent                                   # a scripted model plays the run
//! OPENAI_API_KEY=sk-... cargo run -p portcullis-examples --example agent --features rig  # OpenAI's model, through rig
//! ```
//!
//! The feature `rig` turns on the agent's adapter over rig, with rig's TLS. With it and
//! `OPENAI_API_KEY` set, `OPENAI_MODEL` picks the model (`gpt-4o-mini` by default) and
//! `OPENAI_BASE_URL` another OpenAI-compatible endpoint. A real model may take another road
//! (make no wrong call, ask a question): the printout shows the one it took.

use std::sync::Arc;

use portcullis::agent::{
    Agent, InMemoryRunStore, Message, Model, Run, RunOutcome, RunState, RunStore, ScriptedModel,
    Step, StepEvent,
};
use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis::{ApprovalDecision, Ticket};
use serde_json::json;

/// Look up an invoice by its number: who sent it, how much, when it is due.
#[tool(read_only)]
fn find_invoice(invoice_id: u64) -> Result<String, ToolError> {
    match invoice_id {
        42 => Ok("invoice 42: Acme Corp, 125000 cents, due 2026-12-01, unpaid".to_owned()),
        other => Err(ToolError::new(
            "invoice_not_found",
            format!("there is no invoice {other}"),
        )),
    }
}

/// Pay an invoice, in full. The money leaves at once.
#[tool(
    risk = "high",
    irreversible = "the transfer settles at once",
    approval = "required"
)]
fn pay_invoice(
    /// The invoice's number.
    invoice_id: u64,
    /// The amount, in cents: an integer.
    amount_cents: u64,
) -> Result<String, ToolError> {
    // Move the money here.
    Ok(format!(
        "paid {amount_cents} cents for invoice {invoice_id}"
    ))
}

const PROFILE: Profile = Profile::OpenAiChat { strict: false };
const REQUEST: &str = "Please pay invoice 42.";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("OPENAI_API_KEY").is_some() {
        #[cfg(feature = "rig")]
        return play(openai()?).await;
        #[cfg(not(feature = "rig"))]
        println!(
            "(OPENAI_API_KEY is set, but OpenAI is reached through rig: add `--features rig`)"
        );
    }
    println!("(a scripted model plays the run)\n");
    let scripted = ScriptedModel::new()
        .call("find_invoice", json!({"invoice_id": 42}))
        .call(
            "pay_invoice",
            json!({"invoice_id": 42, "amount_cents": "$1,250.00"}),
        )
        .call(
            "pay_invoice",
            json!({"invoice_id": 42, "amount_cents": 125000}),
        )
        .answer("Invoice 42 from Acme Corp is paid: $1,250.00.");
    play(scripted).await
}

/// OpenAI's model (`OPENAI_MODEL`, `gpt-4o-mini` by default), through rig.
#[cfg(feature = "rig")]
fn openai() -> Result<portcullis::agent::RigModel, Box<dyn std::error::Error>> {
    use portcullis::agent::rig_core::providers::openai::OpenAI;
    use portcullis::agent::{Prices, RigModel};

    let name = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".to_owned());
    println!("({name} plays the run, through rig)\n");
    let chat = OpenAI::from_env()?.chat(name);
    Ok(RigModel::new(chat, PROFILE)
        .with_request(|request| {
            request.preamble(
                "You settle supplier invoices. Look an invoice up before you pay it, and pay \
                 its full amount.",
            )
        })
        // gpt-4o-mini's list prices, in micro-dollars per million tokens.
        .with_prices(Prices {
            input_per_million: 150_000,
            output_per_million: 600_000,
        }))
}

/// Runs the request with `model`, a reviewer approving what waits, and prints each step.
async fn play(model: impl Model) -> Result<(), Box<dyn std::error::Error>> {
    let registry = Registry::builder()
        .tool(FindInvoice)
        .tool(PayInvoice)
        .profile(PROFILE)
        .build()?;
    let store = Arc::new(InMemoryRunStore::default());
    let agent = Agent::builder(registry.clone(), model)
        .store(store.clone())
        .max_turns(8)
        // A dollar, in micro-dollars.
        .max_cost(1_000_000)
        .build()?;

    let mut run = agent.run(&CallContext::new("alice"), REQUEST).await?;
    let mut printed = 0;
    // A real model may ask for approval more than once; four rounds are plenty here.
    for _ in 0..4 {
        let state = store.get(&run.id).await?.ok_or("the run is stored")?.state;
        for step in &run.steps[printed..] {
            println!("{}", line(step, &state));
        }
        printed = run.steps.len();
        if !matches!(run.outcome, RunOutcome::Paused { .. }) {
            break;
        }
        // A reviewer reads each ticket and approves it, as the approvals queue or the command
        // line would let her.
        for ticket in run.tickets() {
            println!("reviewer rita: approves ticket {}", ticket.id);
            let approve = ApprovalDecision::Approve {
                reviewer: "rita".into(),
            };
            registry.resume(&ticket.id, approve).await;
        }
        run = agent.resume(&run.id).await?;
    }
    summary(&run);
    Ok(())
}

/// One step, as a person wants to read it.
fn line(step: &Step, state: &RunState) -> String {
    match &step.event {
        StepEvent::UserMessage { text } => format!("user: {text}"),
        StepEvent::ModelTurn { calls, text, .. } if calls.is_empty() => match text {
            Some(_) => "model: answers".to_owned(),
            None => "model: answers with nothing".to_owned(),
        },
        StepEvent::ModelTurn { calls, .. } => format!("model: calls {}", calls.join(", ")),
        StepEvent::ToolCall {
            tool,
            code: Some(code),
            message,
            ..
        } => format!(
            "gate: {tool} refused ({code}): {}",
            message.as_deref().unwrap_or_default()
        ),
        StepEvent::ToolCall {
            tool,
            result: outcome,
            call_id,
            ..
        } if outcome == "waiting" => format!("gate: {tool} waits for a reviewer (call {call_id})"),
        StepEvent::ToolCall { tool, call_id, .. } => {
            let output = result(state, call_id).unwrap_or_default();
            format!("gate: {tool} ran: {output}")
        }
        StepEvent::Paused { tickets } => waiting(state, tickets),
        StepEvent::Resumed => "resumed: the reviewer decided".to_owned(),
        StepEvent::Finished { answer } => format!("finished: {answer}"),
        StepEvent::Stopped { reason } => format!("stopped ({}): {reason}", reason.code()),
        other => other.kind().to_owned(),
    }
}

/// What the model was sent for call `call_id`.
fn result(state: &RunState, call_id: &str) -> Option<String> {
    let sent = state.transcript.iter().find_map(|message| match message {
        Message::Tool(result) if result.call_id == call_id => Some(result.content.clone()),
        _ => None,
    });
    sent.or_else(|| {
        state
            .turn
            .iter()
            .filter(|call| call.call.id == call_id)
            .find_map(|call| call.result.as_ref().map(|result| result.content.clone()))
    })
}

fn waiting(state: &RunState, tickets: &[String]) -> String {
    let described: Vec<String> = tickets
        .iter()
        .map(|id| {
            let ticket: Option<&Ticket> = state
                .turn
                .iter()
                .find_map(|call| call.ticket.as_ref().filter(|ticket| &ticket.id == id));
            match ticket {
                Some(ticket) => format!("ticket {id}: {} {}", ticket.tool, ticket.arguments),
                None => format!("ticket {id}"),
            }
        })
        .collect();
    format!("waiting for approval: {}", described.join("; "))
}

fn summary(run: &Run) {
    println!(
        "\n{} steps; the model read {} tokens and wrote {} (cost {} micro-dollars)",
        run.steps.len(),
        run.usage.input_tokens,
        run.usage.output_tokens,
        run.usage.cost
    );
}
