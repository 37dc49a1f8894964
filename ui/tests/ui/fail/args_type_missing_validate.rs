use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Order {
    sku: String,
}

/// Place an order.
#[tool]
fn place_order(#[args] order: Order) -> Result<String, ToolError> {
    Ok(order.sku)
}

fn main() {}
