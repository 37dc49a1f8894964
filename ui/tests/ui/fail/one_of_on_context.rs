use portcullis::prelude::*;

fn active_products(_ctx: &CallContext) -> Vec<String> {
    vec!["p-anvil".to_owned()]
}

/// Order a product.
#[tool]
fn order_product(#[one_of(active_products)] ctx: &CallContext, product_id: String) -> Result<String, ToolError> {
    let _ = ctx;
    Ok(product_id)
}

fn main() {}
