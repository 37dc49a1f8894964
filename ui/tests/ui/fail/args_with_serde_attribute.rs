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
fn place_order(#[args] #[serde(default)] order: Order) -> Result<String, ToolError> {
    Ok(order.sku)
}

fn main() {}
