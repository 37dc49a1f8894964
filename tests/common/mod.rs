//! Tools shared by the integration tests: the reference tool of the design, and tools that
//! exercise every supported form of `#[tool]`.
#![allow(dead_code)]

pub mod generated;

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use portcullis::prelude::*;
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use validator::{Validate, ValidationError};

pub static TABLE_NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new("^[a-z_]+$").unwrap());

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Environment {
    Development,
    Staging,
    Test,
    Production,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Deleted {
    pub table: String,
    pub record_id: u64,
}

/// Delete one record from a database table.
#[tool(risk = "high", role = "admin", rollback = restore_database_record)]
pub fn delete_database_record(
    ctx: &CallContext,
    /// The table to delete from.
    #[validate(length(min = 3, max = 50), regex(path = *TABLE_NAME))]
    table_name: String,
    /// The id of the record.
    #[validate(range(min = 1))]
    record_id: u64,
    /// Where the database lives.
    environment: Environment,
    /// Delete even when other records refer to this one.
    #[serde(default)]
    confirm_force: bool,
    /// Why an administrator forces the deletion.
    #[validate(length(max = 200))]
    #[sensitive]
    admin_note: Option<String>,
) -> Result<Deleted, ToolError> {
    let _ = (ctx, environment, confirm_force, admin_note);
    Ok(Deleted {
        table: table_name,
        record_id,
    })
}

/// Puts a deleted record back.
pub async fn restore_database_record(
    _ctx: &CallContext,
    _args: &DeleteDatabaseRecordArgs,
    _output: &Deleted,
) -> Result<(), ToolError> {
    Ok(())
}

#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct Order {
    /// Who buys.
    #[validate(email)]
    pub customer_email: String,
    /// What they buy.
    #[validate(length(min = 1, max = 20), nested)]
    pub lines: Vec<LineItem>,
    #[validate(nested)]
    pub address: Address,
    pub shipping: Shipping,
    #[serde(default)]
    pub gift: bool,
    #[validate(length(max = 5))]
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    pub metadata: HashMap<String, String>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LineItem {
    #[validate(length(min = 1, max = 32))]
    pub sku_code: String,
    #[validate(range(min = 1, max = 100))]
    pub quantity: u16,
    #[validate(range(exclusive_min = 0.0, max = 10000.0))]
    #[schemars(extend("exclusiveMinimum" = 0.0))]
    pub unit_price: f64,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct Address {
    #[validate(length(min = 1, max = 100))]
    pub street: String,
    #[validate(length(equal = 2))]
    pub country: String,
    pub postcode: Option<String>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Shipping {
    Standard,
    Express,
    Pickup { store_id: u32 },
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Placed {
    pub lines: usize,
    pub total_cents: u64,
}

/// Place an order of line items, shipped to an address.
#[tool(risk = "medium", roles = ["sales", "admin"], cost = 3)]
pub async fn place_order(#[args] order: Order) -> Result<Placed, ToolError> {
    let total: f64 = order
        .lines
        .iter()
        .map(|line| line.unit_price * f64::from(line.quantity))
        .sum();
    Ok(Placed {
        lines: order.lines.len(),
        total_cents: (total * 100.0).round() as u64,
    })
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
pub enum Currency {
    #[serde(rename = "CNY")]
    Cny,
    #[serde(rename = "USD")]
    Usd,
}

pub fn no_test_reference(reference: &str) -> Result<(), ValidationError> {
    if reference.to_ascii_lowercase().contains("test") {
        return Err(ValidationError::new("no_test_reference"));
    }
    Ok(())
}

#[derive(Debug, Serialize)]
pub struct Transferred {
    pub amount_cents: u32,
}

/// Move money between two accounts.
#[tool(
    name = "transfer-funds",
    risk = "critical",
    role = "billing_admin",
    irreversible = "the bank settles transfers at once",
    approval = "required",
    timeout_ms = 2000
)]
pub async fn transfer_funds(
    /// Amount in cents.
    #[validate(range(min = 1, max = 5_000_000))]
    amount_cents: u32,
    currency: Currency,
    /// Fee as a fraction of the amount.
    #[validate(range(exclusive_min = 0.0, exclusive_max = 1.0))]
    fee_rate: f64,
    /// Who receives the money.
    #[validate(email)]
    beneficiary_email: String,
    /// Where the receipt is posted.
    #[validate(url)]
    callback_url: Option<String>,
    /// The payer's own reference.
    #[validate(length(min = 1, max = 35), custom(function = "no_test_reference"))]
    reference: String,
    #[serde(rename = "memoText", default)]
    #[validate(length(max = 140))]
    memo: String,
    /// Retries allowed.
    #[serde(default)]
    retries: u8,
    /// Adjustment in whole units.
    #[serde(default)]
    adjustment: i8,
    #[sensitive]
    #[validate(length(equal = 6))]
    pin: String,
) -> Result<Transferred, ToolError> {
    let _ = (
        currency,
        fee_rate,
        beneficiary_email,
        callback_url,
        reference,
        memo,
        retries,
        adjustment,
        pin,
    );
    Ok(Transferred { amount_cents })
}

/// List the tables of the database.
#[tool(read_only, idempotent)]
pub fn list_tables() -> Result<Vec<String>, ToolError> {
    Ok(vec!["users".into(), "orders".into()])
}

/// Whether a report needs approval: only in production.
pub fn approval_in_production(ctx: &CallContext, _args: &SlowReportArgs) -> bool {
    ctx.environment() == Some("production")
}

/// Build a report that takes `delay_ms` to compute.
#[tool(timeout_ms = 50, approval = approval_in_production, read_only)]
pub async fn slow_report(delay_ms: u64) -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    Ok(format!("report after {delay_ms} ms"))
}

/// Always panics (a bug in the tool).
#[tool]
pub fn buggy_tool(input: String) -> Result<String, ToolError> {
    panic!("index out of bounds while handling {input}");
}

/// Panics after an await point.
#[tool]
pub async fn buggy_async_tool(input: String) -> Result<String, ToolError> {
    tokio::task::yield_now().await;
    panic!("async failure while handling {input}");
}

/// Refuses every request: the account is frozen.
#[tool(description = "Charge a card.", risk = "medium")]
pub fn charge_card(#[validate(range(min = 1))] amount_cents: u64) -> Result<u64, ToolError> {
    Err(ToolError::new(
        "account_frozen",
        format!("cannot charge {amount_cents}: the account is frozen"),
    )
    .retryable(true))
}

/// Every tool above, in one registry.
pub fn registry() -> Registry {
    Registry::builder()
        .tool(DeleteDatabaseRecord)
        .tool(PlaceOrder)
        .tool(TransferFunds)
        .tool(ListTables)
        .tool(SlowReport)
        .tool(BuggyTool)
        .tool(BuggyAsyncTool)
        .tool(ChargeCard)
        .tool(ScheduleDelivery)
        // Approval has its own tests; here a reviewer approves every call at once.
        .approver(portcullis::AutoApprove)
        // The parity tests send thousands of refused calls as one caller.
        .refusal_limit(None)
        .build()
        .expect("the test tools form a valid registry")
}

/// A caller who may use every tool above.
pub fn admin() -> CallContext {
    CallContext::new("alice")
        .with_roles(["admin", "billing_admin"])
        .with_environment("development")
}

#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct Window {
    #[validate(range(max = 23))]
    pub from_hour: u8,
    #[validate(range(max = 23))]
    pub to_hour: u8,
}

/// Schedule a delivery: nested argument types are checked without `#[validate(nested)]`.
#[tool(risk = "medium")]
pub fn schedule_delivery(
    address: Address,
    window: Option<Window>,
    lines: Vec<LineItem>,
    #[validate(nested)] backup_address: Option<Address>,
) -> Result<usize, ToolError> {
    let _ = (address, window, backup_address);
    Ok(lines.len())
}

/// A custom check with a bug: it slices the first four bytes of whatever it gets.
pub fn prefix_is_known(code: &str) -> Result<(), ValidationError> {
    let prefix = &code[..4];
    if prefix == "INV-" {
        Ok(())
    } else {
        Err(ValidationError::new("unknown_prefix"))
    }
}

/// Look an invoice up by code (its custom check panics on codes shorter than four bytes).
#[tool(read_only)]
pub fn find_invoice(
    #[validate(custom(function = "prefix_is_known"))] code: String,
) -> Result<String, ToolError> {
    Ok(code)
}
