//! `#[args]`: the user's own struct is the whole arguments object, alone or beside
//! `&CallContext`.

use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use validator::Validate;

#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Order {
    /// Who buys.
    #[validate(email)]
    customer_email: String,
    /// How many.
    #[validate(range(min = 1, max = 100))]
    quantity: u16,
    #[serde(default)]
    gift: bool,
}

/// Place an order.
#[tool(risk = "medium", cost = 3)]
async fn place_order(ctx: &CallContext, #[args] order: Order) -> Result<String, ToolError> {
    Ok(format!("{} x{} for {} (gift: {})", ctx.actor(), order.quantity, order.customer_email, order.gift))
}

/// Check an order without placing it.
#[tool]
fn check_order(
    /// The order to check.
    #[args]
    order: Order,
) -> Result<u16, ToolError> {
    Ok(order.quantity)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();

    // `<Pascal>Args` is the user's type.
    let order: PlaceOrderArgs = Order { customer_email: "a@b.c".into(), quantity: 2, gift: false };
    let _: &CheckOrderArgs = &order;

    let schema = PlaceOrder.contract().input_schema();
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["properties"]["quantity"]["maximum"], json!(100));
    assert_eq!(schema["properties"]["customer_email"]["format"], "email");
    assert!(schema.get("description").is_none(), "the struct's doc is not the tool's description");
    assert_eq!(CheckOrder.contract().description(), "Check an order without placing it.");

    let registry = Registry::builder().tool(PlaceOrder).tool(CheckOrder).build().unwrap();
    let ctx = CallContext::new("alice");
    let next_id = std::cell::Cell::new(0);
    let call = |name: &str, arguments: serde_json::Value| {
        next_id.set(next_id.get() + 1);
        let call = ToolCall::new(format!("call-{}", next_id.get()), name, arguments);
        runtime.block_on(registry.dispatch(&ctx, &call))
    };
    let placed = call("place_order", json!({"customer_email": "bob@example.com", "quantity": 2}));
    assert_eq!(placed.output(), Some(&json!("alice x2 for bob@example.com (gift: false)")));
    assert_eq!(call("check_order", json!({"customer_email": "bob@example.com", "quantity": 5})).output(), Some(&json!(5)));
    assert!(!call("check_order", json!({"customer_email": "bob@example.com", "quantity": 0})).is_completed());
    assert!(!call("check_order", json!({"customer_email": "not an address", "quantity": 1})).is_completed());
    assert!(!call("check_order", json!({"customer_email": "bob@example.com", "quantity": 1, "extra": 1})).is_completed());
}
