//! Sync and async tools, with parameters and with none, called directly and through a registry.

use portcullis::Invocation;
use portcullis::prelude::*;
use serde_json::json;

/// Add two numbers.
#[tool]
fn add(a: u32, b: u32) -> Result<u32, ToolError> {
    Ok(a + b)
}

/// Add two numbers, later.
#[tool]
async fn add_later(a: u32, b: u32) -> Result<u32, ToolError> {
    Ok(a + b)
}

/// Answer a ping.
#[tool]
fn ping() -> Result<String, ToolError> {
    Ok("pong".to_owned())
}

/// Answer a ping, later.
#[tool]
async fn ping_later() -> Result<String, ToolError> {
    Ok("pong".to_owned())
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let ctx = CallContext::new("alice");

    // The function stays callable as written.
    assert_eq!(add(2, 3), Ok(5));
    assert_eq!(runtime.block_on(add_later(2, 3)), Ok(5));

    // Generated names and doc-comment descriptions.
    assert_eq!(Add.contract().name(), "add");
    assert_eq!(Add.contract().description(), "Add two numbers.");
    assert_eq!(AddLater.contract().name(), "add_later");
    assert_eq!(PingLater.contract().name(), "ping_later");

    // A sync tool runs at once, an async one when polled.
    match Add.call(&ctx, AddArgs { a: 2, b: 3 }) {
        Invocation::Ready(result) => assert_eq!(result, Ok(5)),
        Invocation::Pending(_) => panic!("a sync tool must run at once"),
    }
    match AddLater.call(&ctx, AddLaterArgs { a: 2, b: 3 }) {
        Invocation::Pending(future) => assert_eq!(runtime.block_on(future), Ok(5)),
        Invocation::Ready(_) => panic!("an async tool must run when polled"),
    }

    // The arguments struct: strict, with every parameter required.
    let schema = Add.contract().input_schema();
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["required"], json!(["a", "b"]));
    assert!(serde_json::from_value::<AddArgs>(json!({"a": 1, "b": 2, "c": 3})).is_err());

    // Zero parameters: an empty object, and nothing else.
    let schema = Ping.contract().input_schema();
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["additionalProperties"], false);
    let _: PingArgs = serde_json::from_value(json!({})).unwrap();
    assert!(serde_json::from_value::<PingArgs>(json!({"extra": 1})).is_err());
    assert_eq!(format!("{:?}", PingLaterArgs {}), "PingLaterArgs");

    let registry = Registry::builder()
        .tool(Add)
        .tool(AddLater)
        .tool(Ping)
        .tool(PingLater)
        .build()
        .unwrap();
    let call = |name: &str, arguments: &str| {
        runtime.block_on(registry.dispatch(&ctx, &ToolCall::new("call-1", name, arguments)))
    };
    assert_eq!(call("add", r#"{"a": 1, "b": 2}"#).output(), Some(&json!(3)));
    assert_eq!(call("add_later", r#"{"a": 1, "b": 2}"#).output(), Some(&json!(3)));
    assert_eq!(call("ping", "{}").output(), Some(&json!("pong")));
    assert_eq!(call("ping_later", "{}").output(), Some(&json!("pong")));
}
