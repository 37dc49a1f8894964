use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use validator::Validate;

#[derive(Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Order {
    sku: String,
}

#[derive(Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Address {
    street: String,
}

/// Place an order.
#[tool]
fn place_order(#[args] order: Order, #[args] address: Address) -> Result<String, ToolError> {
    Ok(format!("{} to {}", order.sku, address.street))
}

fn main() {}
