use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use validator::Validate;

fn active_products(_ctx: &CallContext) -> Vec<String> {
    vec!["p-anvil".to_owned()]
}

#[derive(Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Order {
    product_id: String,
}

/// Order a product.
#[tool]
fn order_product(#[args] #[one_of(active_products)] order: Order) -> Result<String, ToolError> {
    Ok(order.product_id)
}

/// Order a product, restricted twice.
#[tool]
fn order_twice(
    #[one_of(active_products)]
    #[one_of(active_products)]
    product_id: String,
) -> Result<String, ToolError> {
    Ok(product_id)
}

fn main() {}
