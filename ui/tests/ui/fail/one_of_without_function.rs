use portcullis::prelude::*;

/// Order a product.
#[tool]
fn order_product(#[one_of] product_id: String) -> Result<String, ToolError> {
    Ok(product_id)
}

/// Order a product, naming the function as a string.
#[tool]
fn order_by_name(#[one_of("active_products")] product_id: String) -> Result<String, ToolError> {
    Ok(product_id)
}

fn main() {}
