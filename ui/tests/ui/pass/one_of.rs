//! `#[one_of(function)]`: a path to a function of the context, on plain, optional and list
//! arguments, also through a renamed crate path.

use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use portcullis as gates;

mod catalogue {
    use portcullis::prelude::*;

    /// The products the caller's tenant sells today.
    pub fn active_products(ctx: &CallContext) -> Vec<&'static str> {
        match ctx.tenant() {
            Some("acme") => vec!["p-anvil", "p-rocket"],
            _ => Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Plan {
    Basic,
    Pro,
}

fn offered_plans(_ctx: &CallContext) -> Vec<Plan> {
    vec![Plan::Basic]
}

/// Order products.
#[tool(crate = "gates")]
fn order_products(
    ctx: &CallContext,
    #[one_of(catalogue::active_products)] product_id: String,
    #[one_of(catalogue::active_products)]
    #[serde(rename = "alsoBuy", default)]
    also_buy: Vec<String>,
    #[one_of(offered_plans)] plan: Option<Plan>,
) -> Result<usize, ToolError> {
    let _ = (ctx, product_id, plan);
    Ok(also_buy.len() + 1)
}

fn main() {
    let contract = OrderProducts.contract();
    assert_eq!(
        contract.dynamic_arguments().collect::<Vec<_>>(),
        ["product_id", "alsoBuy", "plan"]
    );
    assert!(contract.check().is_ok());
    let schema = contract
        .input_schema_for(&CallContext::new("alice").with_tenant("acme"))
        .expect("acme has products");
    let properties = &schema["properties"];
    assert_eq!(properties["product_id"]["enum"], json!(["p-anvil", "p-rocket"]));
    assert_eq!(properties["alsoBuy"]["items"]["enum"], json!(["p-anvil", "p-rocket"]));
    assert_eq!(properties["plan"]["enum"], json!(["basic", null]));

    let args = OrderProductsArgs {
        product_id: "p-anvil".into(),
        also_buy: vec!["p-rocket".into()],
        plan: Some(Plan::Pro),
    };
    // The canonical arguments the gates compare: the names on the wire, the serde forms.
    let canonical = serde_json::to_value(&args).unwrap();
    assert_eq!(canonical["alsoBuy"], json!(["p-rocket"]));
    assert_eq!(canonical["plan"], json!("pro"));
    assert!(canonical.get("also_buy").is_none());
}
