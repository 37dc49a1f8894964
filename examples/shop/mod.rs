//! The tools of a small online shop, shared by the examples and by the export tests: money,
//! addresses, enums, optional fields, lists and defaults, as real tools have them.
// Each example and test that includes this module uses only some of it.
#![allow(dead_code)]

use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use validator::Validate;

/// Why a payment is refunded.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RefundReason {
    Duplicate,
    Fraudulent,
    RequestedByCustomer,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Refund {
    pub refund_id: String,
    pub amount_cents: u64,
}

/// Refund part or all of a captured payment to the customer's card.
#[tool(
    risk = "high",
    role = "billing_admin",
    irreversible = "the card network settles refunds within hours",
    cost = 5
)]
pub fn refund_payment(
    /// The payment to refund, e.g. `pay_3MtwBw`.
    #[validate(length(min = 5, max = 40))]
    payment_id: String,
    /// How much to refund, in cents.
    #[validate(range(min = 1, max = 500_000))]
    amount_cents: u64,
    reason: RefundReason,
    /// A note for the customer's statement.
    #[validate(length(max = 200))]
    note: Option<String>,
) -> Result<Refund, ToolError> {
    let _ = (reason, note);
    Ok(Refund {
        refund_id: format!("re_{payment_id}"),
        amount_cents,
    })
}

/// How search results are ordered.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortOrder {
    #[default]
    Relevance,
    PriceLowToHigh,
    Newest,
}

fn ten() -> u8 {
    10
}

/// The categories the caller's shop sells today: a dynamic enum, asked again at every export
/// and every call.
pub fn active_categories(ctx: &CallContext) -> Vec<&'static str> {
    match ctx.tenant() {
        Some("outdoor") => vec!["tents", "boots"],
        _ => vec!["lamps", "chairs", "tables"],
    }
}

/// Search the product catalogue.
#[tool(read_only, idempotent, open_world = false)]
pub fn search_products(
    /// Words to look for in product names and descriptions.
    #[validate(length(min = 1, max = 100))]
    query: String,
    /// Only products of this category.
    #[one_of(active_categories)]
    category: Option<String>,
    /// How many products to return.
    #[validate(range(min = 1, max = 50))]
    #[serde(default = "ten")]
    max_results: u8,
    #[serde(default)] sort: SortOrder,
    /// Only products with every one of these tags.
    #[validate(length(max = 5))]
    #[serde(default)]
    tags: Vec<String>,
) -> Result<Vec<String>, ToolError> {
    let _ = (category, sort, tags);
    Ok(vec![format!("{max_results} results for {query}")])
}

/// A postal address.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct Address {
    #[validate(length(min = 1, max = 100))]
    pub street: String,
    #[validate(length(min = 1, max = 60))]
    pub city: String,
    pub postcode: Option<String>,
    /// ISO 3166 alpha-2, e.g. `DE`.
    #[validate(length(equal = 2))]
    pub country: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct AddressChange {
    pub order_id: u64,
    pub previous: Address,
}

/// Change where an order that has not shipped yet is delivered.
#[tool(risk = "medium", roles = ["support", "billing_admin"], rollback = restore_address)]
pub fn update_shipping_address(
    order_id: u64,
    /// The new delivery address.
    #[validate(nested)]
    address: Address,
) -> Result<AddressChange, ToolError> {
    let _ = address;
    Ok(AddressChange {
        order_id,
        previous: Address {
            street: "1 Old Road".into(),
            city: "Berlin".into(),
            postcode: None,
            country: "DE".into(),
        },
    })
}

/// Puts the previous address back.
pub async fn restore_address(
    _ctx: &CallContext,
    _args: &UpdateShippingAddressArgs,
    _change: &AddressChange,
) -> Result<(), ToolError> {
    Ok(())
}

/// The currencies the shop takes.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
pub enum Currency {
    #[serde(rename = "EUR")]
    Euro,
    #[serde(rename = "USD")]
    Dollar,
}

/// An amount of money.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct Money {
    #[validate(range(min = 1))]
    pub cents: u64,
    pub currency: Currency,
}

/// When a payout is sent.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case", tag = "when", deny_unknown_fields)]
pub enum Timing {
    Now,
    NextBusinessDay,
    On {
        /// The day, as `YYYY-MM-DD`.
        date: String,
    },
}

/// Pay a seller's balance out to their bank account.
#[tool(
    risk = "critical",
    role = "finance",
    irreversible = "bank transfers cannot be recalled",
    max_calls_per_task = 1
)]
pub fn schedule_payout(
    #[validate(length(min = 3, max = 40))] seller_id: String,
    #[validate(nested)] amount: Money,
    timing: Timing,
) -> Result<String, ToolError> {
    let _ = (amount, timing);
    Ok(format!("payout scheduled for {seller_id}"))
}

/// Cancel an order that has not shipped yet. The person at the client confirms each call
/// (over MCP, through elicitation); an operator may decide it too.
#[tool(risk = "medium", roles = ["support"], caller_confirms)]
pub fn cancel_order(order_id: u64) -> Result<String, ToolError> {
    Ok(format!("order {order_id} cancelled"))
}

/// The shop's policy: no deliveries to embargoed countries.
pub fn embargo(
    request: &portcullis::PolicyRequest<'_>,
) -> Result<portcullis::Decision, portcullis::PolicyError> {
    let country = request.arguments["address"]["country"].as_str();
    if country.is_some_and(|country| country.eq_ignore_ascii_case("KP")) {
        return Ok(portcullis::Decision::deny(
            "embargo",
            "the shop does not deliver to embargoed countries",
        ));
    }
    Ok(portcullis::Decision::Allow)
}

/// The shop's other rules, as Rust policies; `policies/shop.cedar` writes every rule of the
/// shop, the embargo included, in Cedar. Refunds above 1,000.00 need a finance officer.
pub fn large_refunds(
    request: &portcullis::PolicyRequest<'_>,
) -> Result<portcullis::Decision, portcullis::PolicyError> {
    let cents = request.arguments["amount_cents"].as_u64().unwrap_or(0);
    let finance = request.ctx.roles().iter().any(|role| role == "finance");
    if request.contract.name() == "refund_payment" && cents > 100_000 && !finance {
        return Ok(portcullis::Decision::deny(
            "large_refunds",
            "refunds above 1,000.00 need a finance officer",
        ));
    }
    Ok(portcullis::Decision::Allow)
}

/// Payouts in production are paid in euros.
pub fn euro_payouts_in_production(
    request: &portcullis::PolicyRequest<'_>,
) -> Result<portcullis::Decision, portcullis::PolicyError> {
    let dollars = request.arguments["amount"]["currency"] == "USD";
    if request.contract.name() == "schedule_payout"
        && request.ctx.environment() == Some("production")
        && dollars
    {
        return Ok(portcullis::Decision::deny(
            "euro_payouts_in_production",
            "payouts in production are paid in euros",
        ));
    }
    Ok(portcullis::Decision::Allow)
}

/// The outlet's sales are final: no refund because the customer asked.
pub fn outlet_sales_are_final(
    request: &portcullis::PolicyRequest<'_>,
) -> Result<portcullis::Decision, portcullis::PolicyError> {
    if request.contract.name() == "refund_payment"
        && request.ctx.tenant() == Some("outlet")
        && request.arguments["reason"] == "requested_by_customer"
    {
        return Ok(portcullis::Decision::deny(
            "outlet_sales_are_final",
            "the outlet's sales are final",
        ));
    }
    Ok(portcullis::Decision::Allow)
}

/// Orders below 1000 come from the old shop, whose addresses production does not change.
pub fn old_orders_in_production(
    request: &portcullis::PolicyRequest<'_>,
) -> Result<portcullis::Decision, portcullis::PolicyError> {
    let order = request.arguments["order_id"].as_u64();
    if request.contract.name() == "update_shipping_address"
        && request.ctx.environment() == Some("production")
        && order.is_some_and(|order| order < 1000)
    {
        return Ok(portcullis::Decision::deny(
            "old_orders_in_production",
            "the old shop's orders keep their addresses",
        ));
    }
    Ok(portcullis::Decision::Allow)
}

/// The shop's rules as Cedar, the same as [`embargo`] and the Rust rules above.
pub const SHOP_CEDAR: &str = include_str!("policies/shop.cedar");

/// Every shop tool in one registry builder, for a test or an example to add settings to.
pub fn shop_tools() -> portcullis::RegistryBuilder {
    Registry::builder()
        .tool(RefundPayment)
        .tool(SearchProducts)
        .tool(UpdateShippingAddress)
        .tool(SchedulePayout)
}

/// Someone who may use every shop tool.
pub fn shop_admin() -> CallContext {
    CallContext::new("shop-admin").with_roles(["billing_admin", "support", "finance"])
}
