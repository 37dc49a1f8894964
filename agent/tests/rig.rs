//! The agent loop through rig's OpenAI client, over real HTTP: a local server answers with
//! OpenAI Chat Completions' recorded responses, and checks, as OpenAI does, that every tool
//! call is answered by a `tool` message with its id. The tests then assert what the server
//! was sent: our tools in OpenAI's format, our results as `tool` messages with the calls' ids
//! and our outcome texts, a refusal with its code.

use std::sync::{Arc, Mutex, PoisonError};

use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis_agent::rig_core::providers::openai::OpenAIConfig;
use portcullis_agent::{Agent, InMemoryRunStore, Message, Prices, RigModel, RunStore, StepEvent};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Look up an invoice by its number.
#[tool(read_only)]
fn find_invoice(invoice_id: u64) -> Result<String, ToolError> {
    Ok(format!(
        "invoice {invoice_id}: Acme Corp, 125000 cents, due 2026-12-01"
    ))
}

/// Look up a customer by name.
#[tool(read_only)]
fn find_customer(name: String) -> Result<String, ToolError> {
    Ok(format!("{name} Corp: customer cus_7"))
}

const TWO_CALLS: &str = include_str!("recorded/openai-chat-two-calls.json");
const CORRECTED: &str = include_str!("recorded/openai-chat-corrected-call.json");
const ANSWER: &str = include_str!("recorded/openai-chat-answer.json");
const DUPLICATE_KEY: &str = include_str!("recorded/openai-chat-duplicate-key.json");
const INVALID_KEY: &str = include_str!("recorded/openai-invalid-api-key.json");

fn profile() -> Profile {
    Profile::OpenAiChat { strict: false }
}

fn registry() -> Registry {
    Registry::builder()
        .tool(FindInvoice)
        .tool(FindCustomer)
        .profile(profile())
        .build()
        .unwrap()
}

/// A request the server was sent.
#[derive(Debug, Clone)]
struct Seen {
    request_line: String,
    authorization: Option<String>,
    body: Value,
}

/// A local stand-in for api.openai.com: it answers each request with the next recorded
/// response, one connection a request, and keeps what it was sent.
struct Provider {
    base_url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Provider {
    async fn start(replies: Vec<(u16, &'static str)>) -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            for (status, body) in replies {
                let (stream, _) = listener.accept().await.unwrap();
                answer(stream, status, body, &log).await;
            }
        });
        Provider { base_url, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn model(&self, api_key: &str) -> RigModel {
        let chat = OpenAIConfig::new(api_key)
            .with_base_url(self.base_url.as_str())
            .client()
            .chat("gpt-4o-mini");
        RigModel::new(chat, profile())
    }
}

/// Reads one HTTP/1.1 request and answers it: with `body` and `status`, or with OpenAI's 400
/// when the messages break its tool-call protocol.
async fn answer(mut stream: TcpStream, status: u16, body: &str, log: &Mutex<Vec<Seen>>) {
    let mut read = Vec::new();
    let mut chunk = [0_u8; 8192];
    let head_end = loop {
        let count = stream.read(&mut chunk).await.unwrap();
        assert!(count > 0, "the client closed before its request's head");
        read.extend_from_slice(&chunk[..count]);
        if let Some(at) = read.windows(4).position(|window| window == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8(read[..head_end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap().to_owned();
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    let length: usize = header("content-length")
        .expect("the request has a Content-Length")
        .parse()
        .unwrap();
    while read.len() < head_end + length {
        let count = stream.read(&mut chunk).await.unwrap();
        assert!(count > 0, "the client closed before its request's body");
        read.extend_from_slice(&chunk[..count]);
    }
    let request: Value = serde_json::from_slice(&read[head_end..head_end + length]).unwrap();
    let (status, body) = match tool_protocol_error(&request) {
        Some(message) => (
            400,
            json!({"error": {"message": message, "type": "invalid_request_error", "param": "messages", "code": null}})
                .to_string(),
        ),
        None => (status, body.to_owned()),
    };
    log.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Seen {
            request_line,
            authorization: header("authorization"),
            body: request,
        });
    let reason = if status == 200 { "OK" } else { "Error" };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await.unwrap();
    stream.shutdown().await.unwrap();
}

/// What OpenAI refuses in a conversation's tool messages: an assistant's tool calls not
/// followed by one `tool` message for each (by `tool_call_id`), a `tool` message that answers
/// no call, or content that is not text.
fn tool_protocol_error(request: &Value) -> Option<String> {
    let messages = request["messages"].as_array()?;
    let mut waiting: Vec<&str> = Vec::new();
    for message in messages {
        match message["role"].as_str() {
            Some("tool") => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                let Some(at) = waiting.iter().position(|call| *call == id) else {
                    return Some(format!(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'; `{id}` answers none."
                    ));
                };
                waiting.remove(at);
                if !message["content"].is_string() {
                    return Some("a tool message's content must be a string".to_owned());
                }
            }
            _ if !waiting.is_empty() => {
                return Some(format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                    waiting.join(", ")
                ));
            }
            Some("assistant") => {
                waiting = message["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|call| call["id"].as_str())
                    .collect();
            }
            _ => {}
        }
    }
    None
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// The `tool` messages of a request: their call ids and contents.
fn tool_messages(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| {
            (
                message["tool_call_id"].as_str().unwrap().to_owned(),
                message["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The results the run sent the model, as its transcript holds them.
async fn results(store: &InMemoryRunStore, run_id: &str) -> Vec<(String, String, bool)> {
    let stored = store.get(run_id).await.unwrap().unwrap();
    stored
        .state
        .transcript
        .iter()
        .filter_map(|message| match message {
            Message::Tool(result) => Some((
                result.call_id.clone(),
                result.content.clone(),
                result.is_error,
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn a_run_through_rig_corrects_a_refused_call_over_http() {
    block_on(async {
        let provider =
            Provider::start(vec![(200, TWO_CALLS), (200, CORRECTED), (200, ANSWER)]).await;
        let model = provider
            .model("sk-test-key")
            .with_request(|request| request.preamble("You answer questions about invoices."))
            .with_prices(Prices {
                input_per_million: 150_000,
                output_per_million: 600_000,
            });
        let store = Arc::new(InMemoryRunStore::default());
        let agent = Agent::builder(registry(), model)
            .store(store.clone())
            .build()
            .unwrap();
        let run = agent
            .run(
                &CallContext::new("alice"),
                "Who owes invoice 42, and when is it due?",
            )
            .await
            .unwrap();

        assert_eq!(
            run.answer(),
            Some("Invoice 42 is Acme Corp's: $1,250.00, due on 1 December 2026.")
        );
        let seen = provider.seen();
        assert_eq!(seen.len(), 3, "{seen:#?}");
        for request in &seen {
            assert_eq!(request.request_line, "POST /v1/chat/completions HTTP/1.1");
            assert_eq!(request.authorization.as_deref(), Some("Bearer sk-test-key"));
            assert_eq!(request.body["model"], "gpt-4o-mini");
        }

        // The first request: the preamble, the user's message, and our tools as exported.
        let first = &seen[0].body;
        assert_eq!(first["messages"][0]["role"], "system");
        assert_eq!(
            first["messages"][1],
            json!({"role": "user", "content": "Who owes invoice 42, and when is it due?"})
        );
        let exported = agent
            .registry()
            .export(&CallContext::new("alice"), profile())
            .unwrap();
        let sent_tools: Vec<Value> = first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| {
                json!({
                    "name": tool["function"]["name"],
                    "description": tool["function"]["description"],
                    "parameters": tool["function"]["parameters"],
                })
            })
            .collect();
        let our_tools: Vec<Value> = exported
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| {
                json!({
                    "name": tool["function"]["name"],
                    "description": tool["function"]["description"],
                    "parameters": tool["function"]["parameters"],
                })
            })
            .collect();
        assert_eq!(sent_tools, our_tools);
        assert_eq!(first["tool_choice"], "auto");

        // The second: the assistant's two calls, then a `tool` message for each, in order, with
        // its id: the wrong type refused with its code, the other call's output.
        let second = &seen[1].body;
        let assistant = second["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|message| message["role"] == "assistant")
            .unwrap();
        let call_ids: Vec<&str> = assistant["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|call| call["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            call_ids,
            [
                "call_3QbTgMx1n9Kd0h7VnJ2sYp4L",
                "call_8RcWfLz6p2Hs5j0TqN4vXb1M"
            ]
        );
        let answered = tool_messages(second);
        assert_eq!(answered.len(), 2, "{answered:?}");
        assert_eq!(answered[0].0, "call_3QbTgMx1n9Kd0h7VnJ2sYp4L");
        let refusal: Value = serde_json::from_str(&answered[0].1).unwrap();
        assert_eq!(refusal["error"], "invalid_type", "{refusal}");
        assert_eq!(
            answered[1],
            (
                "call_8RcWfLz6p2Hs5j0TqN4vXb1M".to_owned(),
                "Acme Corp: customer cus_7".to_owned()
            )
        );

        // The third: the corrected call's output after the earlier results.
        let third = tool_messages(&seen[2].body);
        assert_eq!(third.len(), 3, "{third:?}");
        assert_eq!(third[..2], answered[..]);
        assert_eq!(
            third[2],
            (
                "call_Vt7nKq2Zs0Xw4Lb9Pj6mRc3D".to_owned(),
                "invoice 42: Acme Corp, 125000 cents, due 2026-12-01".to_owned()
            )
        );

        // What went over the wire is what the run's transcript holds, word for word.
        let transcript = results(&store, &run.id).await;
        let kept: Vec<(String, String)> = transcript
            .iter()
            .map(|(id, content, _)| (id.clone(), content.clone()))
            .collect();
        assert_eq!(kept, third);
        let refused: Vec<bool> = transcript.iter().map(|(_, _, refused)| *refused).collect();
        assert_eq!(refused, [true, false, false]);
        let codes: Vec<(String, RejectionCode)> = run
            .steps
            .iter()
            .filter_map(|step| match &step.event {
                StepEvent::ToolCall {
                    tool,
                    code: Some(code),
                    ..
                } => Some((tool.clone(), *code)),
                _ => None,
            })
            .collect();
        assert_eq!(
            codes,
            [("find_invoice".to_owned(), RejectionCode::InvalidType)]
        );

        // Usage as OpenAI reported it, priced.
        assert_eq!(run.usage.input_tokens, 212 + 389 + 451);
        assert_eq!(run.usage.output_tokens, 51 + 17 + 24);
        let prices = Prices {
            input_per_million: 150_000,
            output_per_million: 600_000,
        };
        let cost = prices.cost(212, 51) + prices.cost(389, 17) + prices.cost(451, 24);
        assert_eq!(run.usage.cost, cost);
    });
}

#[test]
fn a_duplicate_key_the_model_sent_reaches_the_gates_and_is_refused() {
    block_on(async {
        // rig parses `{"invoice_id":42,"invoice_id":43}` into a map that keeps one of them; the
        // gates read the text the model sent, and refuse it.
        let provider = Provider::start(vec![(200, DUPLICATE_KEY), (200, ANSWER)]).await;
        let agent = Agent::builder(registry(), provider.model("sk-test-key"))
            .build()
            .unwrap();
        let run = agent
            .run(&CallContext::new("alice"), "Who owes invoice 42?")
            .await
            .unwrap();
        assert!(run.answer().is_some(), "{run:?}");
        let seen = provider.seen();
        let answered = tool_messages(&seen[1].body);
        assert_eq!(answered.len(), 1, "{answered:?}");
        assert_eq!(answered[0].0, "call_Hq4sDn8Yw1Ve6Kt3Zm0pBa7J");
        let refusal: Value = serde_json::from_str(&answered[0].1).unwrap();
        assert_eq!(refusal["error"], "duplicate_key", "{refusal}");
    });
}

#[test]
fn a_provider_error_stops_the_run_with_the_provider_s_words() {
    block_on(async {
        let provider = Provider::start(vec![(401, INVALID_KEY)]).await;
        let agent = Agent::builder(registry(), provider.model("sk-test-bad-key"))
            .build()
            .unwrap();
        let run = agent
            .run(&CallContext::new("alice"), "Who owes invoice 42?")
            .await
            .unwrap();
        let reason = run.stop_reason().expect("the run stopped");
        assert_eq!(reason.code(), "model_failed");
        let message = reason.to_string();
        assert!(message.contains("gpt-4o-mini"), "{message}");
        assert!(message.contains("Incorrect API key provided"), "{message}");
        assert_eq!(provider.seen().len(), 1);
    });
}

#[test]
fn a_provider_out_of_reach_stops_the_run_with_the_cause() {
    block_on(async {
        // A port nothing listens on any more.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        drop(listener);
        let chat = OpenAIConfig::new("sk-test-key")
            .with_base_url(base_url)
            .client()
            .chat("gpt-4o-mini");
        let agent = Agent::builder(registry(), RigModel::new(chat, profile()))
            .build()
            .unwrap();
        let run = agent
            .run(&CallContext::new("alice"), "Who owes invoice 42?")
            .await
            .unwrap();
        let reason = run.stop_reason().expect("the run stopped");
        assert_eq!(reason.code(), "model_failed");
        let message = reason.to_string();
        assert!(message.contains("onnection refused"), "{message}");
    });
}
