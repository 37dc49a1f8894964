//! `&CallContext` in every position (first, middle, last, by full path), in sync and async
//! tools; the model never sees it.

use portcullis::Invocation;
use portcullis::prelude::*;
use serde_json::json;

/// Greet the caller.
#[tool]
fn greet_first(ctx: &CallContext, greeting: String) -> Result<String, ToolError> {
    Ok(format!("{greeting}, {}", ctx.actor()))
}

/// Greet the caller.
#[tool]
fn greet_middle(greeting: String, ctx: &CallContext, punctuation: String) -> Result<String, ToolError> {
    Ok(format!("{greeting}, {}{punctuation}", ctx.actor()))
}

/// Greet the caller.
#[tool]
async fn greet_last(greeting: String, ctx: &portcullis::CallContext) -> Result<String, ToolError> {
    Ok(format!("{greeting}, {}", ctx.actor()))
}

/// Name the caller.
#[tool]
async fn who_am_i(ctx: &CallContext) -> Result<String, ToolError> {
    Ok(ctx.actor().to_owned())
}

fn ready<T: std::fmt::Debug>(invocation: Invocation<'_, T>) -> Result<T, ToolError> {
    match invocation {
        Invocation::Ready(result) => result,
        Invocation::Pending(_) => panic!("a sync tool must run at once"),
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let pending = |invocation: Invocation<'_, String>| match invocation {
        Invocation::Pending(future) => runtime.block_on(future),
        Invocation::Ready(_) => panic!("an async tool must run when polled"),
    };
    let ctx = CallContext::new("alice");

    let args = GreetFirstArgs { greeting: "hello".into() };
    assert_eq!(ready(GreetFirst.call(&ctx, args)).unwrap(), "hello, alice");
    let args = GreetMiddleArgs { greeting: "hello".into(), punctuation: "!".into() };
    assert_eq!(ready(GreetMiddle.call(&ctx, args)).unwrap(), "hello, alice!");
    let args = GreetLastArgs { greeting: "hello".into() };
    assert_eq!(pending(GreetLast.call(&ctx, args)).unwrap(), "hello, alice");
    assert_eq!(pending(WhoAmI.call(&ctx, WhoAmIArgs {})).unwrap(), "alice");

    // The context is injected, not an argument.
    let properties = |contract: &ToolContract| {
        let mut names: Vec<String> = contract.input_schema()["properties"]
            .as_object()
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default();
        names.sort();
        names
    };
    assert_eq!(properties(GreetFirst.contract()), ["greeting"]);
    assert_eq!(properties(GreetMiddle.contract()), ["greeting", "punctuation"]);
    assert_eq!(properties(GreetLast.contract()), ["greeting"]);
    assert!(properties(WhoAmI.contract()).is_empty());
    assert!(serde_json::from_value::<GreetFirstArgs>(json!({"greeting": "hi", "ctx": {}})).is_err());
}
