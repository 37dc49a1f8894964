//! Renames to keywords and to another parameter's name, `rename(deserialize = ...)`, and
//! suffixed integer literals in the attribute.

use portcullis::prelude::*;
use serde_json::json;

/// Book a transfer of stock.
#[tool(cost = 5u8, timeout_ms = 500u32)]
async fn book_transfer(
    /// The kind of transfer, sent as `type`.
    #[serde(rename = "type")]
    #[validate(length(min = 2))]
    kind: String,
    /// Sent as `source`, a name that is also another parameter's.
    #[serde(rename = "source")]
    #[validate(length(max = 3))]
    target: String,
    /// Sent as `origin`.
    #[serde(rename = "origin")]
    source: String,
    /// Sent as `qty`; only deserialization is renamed.
    #[serde(rename(deserialize = "qty"))]
    #[validate(range(min = 1))]
    quantity: u32,
) -> Result<String, ToolError> {
    Ok(format!("{kind} {quantity} from {source} to {target}"))
}

fn main() {
    let contract = BookTransfer.contract();
    assert_eq!(contract.cost(), 5);
    assert_eq!(contract.timeout(), Some(std::time::Duration::from_millis(500)));
    let properties = contract.input_schema()["properties"].as_object().unwrap();
    let mut names: Vec<&str> = properties.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["origin", "qty", "source", "type"]);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = Registry::builder().tool(BookTransfer).build().unwrap();
    let ctx = CallContext::new("alice");
    let call = ToolCall::new(
        "1",
        "book_transfer",
        json!({"type": "move", "source": "B2", "origin": "A1", "qty": 4}),
    );
    let outcome = runtime.block_on(registry.dispatch(&ctx, &call));
    assert_eq!(outcome.output(), Some(&json!("move 4 from A1 to B2")));

    // Violations name the arguments as the model sent them.
    let call = ToolCall::new(
        "2",
        "book_transfer",
        json!({"type": "m", "source": "B2-long", "origin": "A1", "qty": 0}),
    );
    let outcome = runtime.block_on(registry.dispatch(&ctx, &call));
    let paths: Vec<&str> = outcome
        .rejection()
        .unwrap()
        .violations()
        .iter()
        .map(|violation| violation.path.as_str())
        .collect();
    assert_eq!(paths, ["/qty", "/source", "/type"]);
}
