use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use validator::Validate;

#[derive(Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Order {
    sku: String,
}

/// Place an order.
#[tool]
fn place_order(#[args] order: Order, quantity: u32) -> Result<String, ToolError> {
    Ok(format!("{quantity} x {}", order.sku))
}

fn main() {}
