//! Parse and reply: each provider's response document, written from its documented format,
//! goes through parse, dispatch and reply, and the reply is checked field by field.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{DeleteDatabaseRecord, ListTables, TransferFunds, admin, registry};
use portcullis::audit::MemoryAuditSink;
use portcullis::prelude::*;
use portcullis::wire::{ToolChoice, anthropic, gemini, mcp, openai};
use serde_json::{Value, json};

/// The tools of the round trips, with no reviewer: `transfer-funds` (critical) waits for one.
fn awaiting_reviewer() -> Registry {
    Registry::builder()
        .tool(ListTables)
        .tool(DeleteDatabaseRecord)
        .tool(TransferFunds)
        .build()
        .unwrap()
}

fn transfer_arguments() -> Value {
    json!({
        "amount_cents": 1200,
        "currency": "USD",
        "fee_rate": 0.01,
        "beneficiary_email": "ap@acme.example",
        "reference": "INV-2024-17",
        "pin": "482913",
    })
}

/// A text result that is JSON, parsed.
fn parsed(text: &Value) -> Value {
    serde_json::from_str(text.as_str().expect("a text result")).expect("JSON text")
}

#[tokio::test]
async fn openai_chat_round_trip() {
    let registry = awaiting_reviewer();
    let ctx = admin();
    let response = json!({
        "id": "chatcmpl-9", "object": "chat.completion", "model": "gpt-4.1",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "refusal": null,
            "tool_calls": [
                {"id": "call_good", "type": "function",
                 "function": {"name": "list_tables", "arguments": "{}"}},
                {"id": "call_typo", "type": "function",
                 "function": {"name": "delete_database_record",
                              "arguments": "{\"table_name\":\"users\",\"recordid\":7,\"environment\":\"development\"}"}},
                {"id": "call_money", "type": "function",
                 "function": {"name": "transfer-funds", "arguments": transfer_arguments().to_string()}},
            ],
        }}],
    });
    let calls = openai::parse_chat(&response).unwrap();
    let mut replies = Vec::new();
    let mut outcomes = Vec::new();
    for call in &calls {
        let outcome = registry.dispatch(&ctx, call).await;
        replies.push(openai::reply_chat(call, &outcome));
        outcomes.push(outcome);
    }

    assert_eq!(
        replies[0],
        json!({"role": "tool", "tool_call_id": "call_good", "content": r#"["users","orders"]"#})
    );

    assert_eq!(replies[1]["role"], "tool");
    assert_eq!(replies[1]["tool_call_id"], "call_typo");
    let refusal = parsed(&replies[1]["content"]);
    assert_eq!(refusal["error"], "unknown_argument");
    assert_eq!(refusal["path"], "/recordid");
    assert_eq!(refusal["retryable"], true);

    assert_eq!(replies[2]["tool_call_id"], "call_money");
    let pending = parsed(&replies[2]["content"]);
    let ticket = outcomes[2]
        .ticket()
        .expect("the transfer waits for a reviewer");
    assert_eq!(pending["status"], "awaiting_approval");
    assert_eq!(pending["ticket"], ticket.id.as_str());
    assert_eq!(pending["expires_ms"], ticket.expires_ms);
    assert!(
        !replies[2]["content"].as_str().unwrap().contains("482913"),
        "the arguments, the pin among them, do not travel back"
    );
}

#[tokio::test]
async fn openai_responses_round_trip() {
    let registry = registry();
    let ctx = admin();
    let response = json!({
        "id": "resp_1", "object": "response", "status": "completed",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "list_tables",
             "arguments": "{}", "status": "completed"},
            {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "delete_database_record",
             "arguments": "{\"table_name\":\"users\",\"record_id\":1,\"record_id\":999,\"environment\":\"development\"}",
             "status": "completed"},
            {"type": "function_call", "id": "fc_3", "call_id": "call_c", "name": "list_tables",
             "arguments": "{'oops': true}", "status": "completed"},
        ],
    });
    let calls = openai::parse_responses(&response).unwrap();
    assert_eq!(calls.len(), 3);
    let mut replies = Vec::new();
    for call in &calls {
        let outcome = registry.dispatch(&ctx, call).await;
        replies.push(openai::reply_responses(call, &outcome));
    }
    assert_eq!(
        replies[0],
        json!({"type": "function_call_output", "call_id": "call_a", "output": r#"["users","orders"]"#})
    );
    assert_eq!(replies[1]["call_id"], "call_b");
    assert_eq!(parsed(&replies[1]["output"])["error"], "duplicate_key");
    assert_eq!(replies[2]["call_id"], "call_c");
    assert_eq!(parsed(&replies[2]["output"])["error"], "malformed_json");
}

#[tokio::test]
async fn anthropic_round_trip() {
    let registry = registry();
    let viewer = CallContext::new("victor").with_roles(["viewer"]);
    let message = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "I'll list the tables, then delete the record."},
            {"type": "tool_use", "id": "toolu_list", "name": "list_tables", "input": {}},
            {"type": "tool_use", "id": "toolu_delete", "name": "delete_database_record",
             "input": {"table_name": "users", "record_id": 7, "environment": "development"}},
        ],
    });
    let calls = anthropic::parse(&message).unwrap();
    let mut results = Vec::new();
    for call in &calls {
        let outcome = registry.dispatch(&viewer, call).await;
        results.push(anthropic::reply(call, &outcome));
    }
    let user = anthropic::user_message(results);
    assert_eq!(user["role"], "user");
    let content = user["content"].as_array().unwrap();
    assert_eq!(content.len(), 2, "every result in one user message");

    assert_eq!(
        content[0],
        json!({"type": "tool_result", "tool_use_id": "toolu_list",
               "content": r#"["users","orders"]"#, "is_error": false})
    );
    assert_eq!(content[1]["type"], "tool_result");
    assert_eq!(content[1]["tool_use_id"], "toolu_delete");
    assert_eq!(content[1]["is_error"], true);
    let refusal = parsed(&content[1]["content"]);
    assert_eq!(refusal["error"], "unknown_tool");
    assert_eq!(refusal["gate"], "resolve");
}

#[tokio::test]
async fn gemini_round_trip() {
    let registry = awaiting_reviewer();
    let ctx = admin();
    let response = json!({
        "candidates": [{"index": 0, "finishReason": "STOP", "content": {"role": "model", "parts": [
            {"functionCall": {"name": "list_tables", "args": {}}, "thoughtSignature": "CiQB0e2Kb7s="},
            {"functionCall": {"id": "fc_delete", "name": "delete_database_record",
                              "args": {"table_name": "users", "record_id": 7, "environment": "moon"}}},
            {"functionCall": {"name": "transfer-funds", "args": transfer_arguments()}},
        ]}}],
        "usageMetadata": {"promptTokenCount": 120},
        "responseId": "resp-g1",
    });
    let calls = gemini::parse(&response).unwrap();
    assert_eq!(calls.len(), 3);

    // The signature is kept, and rebuilding the model's turn puts it back where it was.
    assert_eq!(calls[0].thought_signature.as_deref(), Some("CiQB0e2Kb7s="));
    assert_eq!(
        calls[0].call_part(),
        json!({"functionCall": {"name": "list_tables", "args": {}}, "thoughtSignature": "CiQB0e2Kb7s="})
    );
    // The calls without an id get distinct ones, which are not sent back.
    assert!(!calls[0].id_from_model && !calls[2].id_from_model);
    assert_ne!(calls[0].call.id, calls[2].call.id);
    assert!(calls[1].id_from_model);

    let mut parts = Vec::new();
    let mut outcomes = Vec::new();
    for call in &calls {
        let outcome = registry.dispatch(&ctx, &call.call).await;
        parts.push(gemini::reply(call, &outcome));
        outcomes.push(outcome);
    }
    let user = gemini::user_content(parts);
    assert_eq!(user["role"], "user");
    let parts = user["parts"].as_array().unwrap();

    assert_eq!(
        parts[0],
        json!({"functionResponse": {"name": "list_tables", "response": {"output": ["users", "orders"]}}})
    );

    let refused = &parts[1]["functionResponse"];
    assert_eq!(refused["id"], "fc_delete");
    assert_eq!(refused["name"], "delete_database_record");
    assert_eq!(refused["response"]["error"]["error"], "invalid_value");
    assert_eq!(refused["response"]["error"]["path"], "/environment");
    assert!(refused["response"].get("output").is_none());

    let waiting = &parts[2]["functionResponse"];
    assert!(waiting.get("id").is_none());
    assert_eq!(waiting["name"], "transfer-funds");
    assert_eq!(waiting["response"]["output"]["status"], "awaiting_approval");
    assert_eq!(
        waiting["response"]["output"]["ticket"],
        outcomes[2].ticket().unwrap().id.as_str()
    );
}

static SENT: AtomicUsize = AtomicUsize::new(0);

/// Send a message; returns how many were sent so far.
#[tool]
fn send_message(text: String) -> Result<usize, ToolError> {
    let _ = text;
    Ok(SENT.fetch_add(1, Ordering::SeqCst) + 1)
}

#[tokio::test]
async fn gemini_calls_without_ids_in_two_turns_both_run() {
    // Made-up ids from the name and position would be equal in both turns, and the registry
    // would answer the second call with the first outcome instead of running it.
    let registry = Registry::builder().tool(SendMessage).build().unwrap();
    let ctx = CallContext::new("alice").with_task_id("one-conversation");
    let turn = json!({"role": "model", "parts": [
        {"functionCall": {"name": "send_message", "args": {"text": "hello"}}}
    ]});
    let first = gemini::parse(&turn).unwrap();
    let second = gemini::parse(&turn).unwrap();
    let first = registry.dispatch(&ctx, &first[0].call).await;
    let second = registry.dispatch(&ctx, &second[0].call).await;
    let first = first.output().and_then(Value::as_u64).unwrap();
    assert_eq!(second.output().and_then(Value::as_u64), Some(first + 1));
}

#[tokio::test]
async fn mcp_round_trip() {
    let registry = awaiting_reviewer();
    let ctx = admin();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "list_tables"}}),
        json!({"jsonrpc": "2.0", "id": "two", "method": "tools/call",
               "params": {"name": "delete_database_record",
                          "arguments": {"table_name": "users", "record_id": 7, "environment": "development"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "delete_database_record", "arguments": {"table_name": "users"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
               "params": {"name": "drop_database", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "transfer-funds", "arguments": transfer_arguments()}}),
    ];
    let mut responses = Vec::new();
    for request in &requests {
        let call = mcp::parse(request).unwrap();
        let outcome = registry.dispatch(&ctx, &call.call).await;
        responses.push(mcp::reply(&call, &outcome));
    }

    assert_eq!(
        responses[0],
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": r#"["users","orders"]"#}],
            "isError": false,
        }})
    );

    let deleted = &responses[1];
    assert_eq!(deleted["id"], "two");
    assert_eq!(deleted["result"]["isError"], false);
    assert_eq!(
        deleted["result"]["structuredContent"],
        json!({"table": "users", "record_id": 7})
    );
    assert_eq!(
        parsed(&deleted["result"]["content"][0]["text"]),
        json!({"table": "users", "record_id": 7})
    );

    let invalid = &responses[2];
    assert_eq!(invalid["id"], 3);
    assert_eq!(invalid["result"]["isError"], true);
    assert_eq!(invalid["result"]["content"][0]["type"], "text");
    assert_eq!(
        parsed(&invalid["result"]["content"][0]["text"])["error"],
        "missing_argument"
    );

    let unknown = &responses[3];
    assert_eq!(unknown["jsonrpc"], "2.0");
    assert_eq!(unknown["id"], 4);
    assert!(unknown.get("result").is_none());
    assert_eq!(unknown["error"]["code"], -32602);
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("drop_database")
    );
    assert_eq!(unknown["error"]["data"]["error"], "unknown_tool");

    // Not a success: clients would check a `structuredContent` against the tool's output schema.
    let waiting = &responses[4];
    assert_eq!(waiting["id"], 5);
    assert_eq!(waiting["result"]["isError"], true);
    assert!(waiting["result"].get("structuredContent").is_none());
    assert_eq!(
        parsed(&waiting["result"]["content"][0]["text"])["status"],
        "awaiting_approval"
    );
}

#[tokio::test]
async fn mcp_requests_that_cannot_be_read_get_protocol_errors() {
    let request = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                         "params": {"name": "list_tables", "arguments": "{}"}});
    let error = mcp::parse(&request).unwrap_err();
    assert_eq!(
        (error.code(), error.pointer()),
        ("wrong_type", "/params/arguments")
    );
    let response = mcp::reply_error(&request, &error);
    assert_eq!(response["id"], 9);
    assert_eq!(response["error"]["code"], -32602);
}

#[tokio::test]
async fn a_tool_choice_holds_the_step_to_its_tools() {
    let sink = MemoryAuditSink::default();
    let registry = Registry::builder()
        .tool(ListTables)
        .tool(DeleteDatabaseRecord)
        .audit(sink.clone())
        .build()
        .unwrap();
    let delete = ToolCall::new(
        "call_1",
        "delete_database_record",
        json!({"table_name": "users", "record_id": 7, "environment": "development"}),
    );
    let list = ToolCall::new("call_2", "list_tables", json!({}));

    let only_list = admin().with_tool_choice(ToolChoice::Tool("list_tables".into()));
    let outcome = registry.dispatch(&only_list, &delete).await;
    let rejection = outcome.rejection().expect("another tool is refused");
    assert_eq!(rejection.code(), RejectionCode::ToolNotAllowed);
    assert_eq!(rejection.gate(), portcullis::Gate::Resolve);
    assert!(rejection.message().contains("`list_tables`"));
    assert!(rejection.retryable());
    assert!(registry.dispatch(&only_list, &list).await.is_completed());

    let no_tools = admin().with_tool_choice(ToolChoice::None);
    let outcome = registry.dispatch(&no_tools, &list).await;
    assert_eq!(outcome.code(), Some(RejectionCode::ToolNotAllowed));
    assert!(!outcome.rejection().unwrap().retryable());

    for choice in [ToolChoice::Auto, ToolChoice::Required] {
        let ctx = admin().with_tool_choice(choice);
        assert!(registry.dispatch(&ctx, &list).await.is_completed());
    }

    let refusals: Vec<_> = sink
        .records()
        .into_iter()
        .filter(|record| record.code.as_deref() == Some("tool_not_allowed"))
        .map(|record| (record.tool, record.gate))
        .collect();
    assert_eq!(
        refusals,
        vec![
            (
                "delete_database_record".to_owned(),
                Some("resolve".to_owned())
            ),
            ("list_tables".to_owned(), Some("resolve".to_owned())),
        ]
    );
}
