use portcullis::prelude::*;

/// Returns one product instead of the list of them.
fn active_product(_ctx: &CallContext) -> String {
    "p-anvil".to_owned()
}

/// Order a product.
#[tool]
fn order_product(#[one_of(active_product)] product_id: String) -> Result<String, ToolError> {
    Ok(product_id)
}

fn main() {}
