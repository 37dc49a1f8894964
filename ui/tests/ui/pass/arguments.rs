//! Per-argument attributes: doc comments, `#[serde(default)]`, `#[serde(rename)]`,
//! `#[sensitive]` and every kind of validate rule, and a raw identifier.

use std::sync::LazyLock;

use portcullis::prelude::*;
use regex::Regex;
use serde_json::json;
use validator::{Validate, ValidationError};

static TABLE_NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new("^[a-z_]+$").unwrap());

fn no_test_reference(reference: &str) -> Result<(), ValidationError> {
    if reference.to_ascii_lowercase().contains("test") {
        return Err(ValidationError::new("no_test_reference"));
    }
    Ok(())
}

/// Move money between two accounts.
#[tool(risk = "critical", irreversible = "the bank settles at once")]
fn transfer_funds(
    /// Amount in cents.
    #[validate(range(min = 1, max = 5_000_000))]
    amount_cents: u32,
    /// Fee as a fraction of the amount.
    #[validate(range(exclusive_min = 0.0, exclusive_max = 1.0))]
    fee_rate: f64,
    /// Who receives the money.
    #[validate(email)]
    beneficiary_email: String,
    /// Where the receipt is posted.
    #[validate(url)]
    callback_url: Option<String>,
    /// The table to record the transfer in.
    #[validate(length(min = 3, max = 50), regex(path = *TABLE_NAME))]
    ledger_table: String,
    /// The payer's own reference.
    #[validate(length(min = 1, max = 35), custom(function = "no_test_reference"))]
    reference: String,
    /// A note for the beneficiary.
    #[serde(rename = "memoText", default)]
    #[validate(length(max = 140))]
    memo: String,
    /// Retries allowed.
    #[serde(default)]
    retries: u8,
    /// The payer's PIN.
    #[sensitive]
    #[serde(rename = "pinCode")]
    #[validate(length(equal = 6))]
    pin: String,
    /// The kind of transfer.
    r#type: String,
) -> Result<String, ToolError> {
    let _ = (fee_rate, beneficiary_email, callback_url, ledger_table, reference, retries, pin);
    Ok(format!("{amount_cents} {} {memo}", r#type))
}

fn valid() -> serde_json::Value {
    json!({
        "amount_cents": 1000,
        "fee_rate": 0.01,
        "beneficiary_email": "bob@example.com",
        "callback_url": "https://example.com/receipt",
        "ledger_table": "transfers",
        "reference": "invoice 42",
        "pinCode": "123456",
        "type": "sepa",
    })
}

fn with(key: &str, value: serde_json::Value) -> serde_json::Value {
    let mut arguments = valid();
    arguments[key] = value;
    arguments
}

fn main() {
    let contract = TransferFunds.contract();
    let schema = contract.input_schema();
    let properties = &schema["properties"];

    // Doc comments describe arguments; renames and raw identifiers give the wire names.
    assert_eq!(properties["amount_cents"]["description"], "Amount in cents.");
    assert!(properties.get("memoText").is_some());
    assert!(properties.get("memo").is_none());
    assert!(properties.get("pinCode").is_some());
    assert!(properties.get("type").is_some());

    // Defaulted arguments are optional, the others required.
    let required: Vec<&str> = schema["required"].as_array().unwrap().iter().map(|name| name.as_str().unwrap()).collect();
    assert!(required.contains(&"amount_cents"));
    assert!(required.contains(&"pinCode"));
    assert!(required.contains(&"type"));
    assert!(!required.contains(&"memoText"));
    assert!(!required.contains(&"retries"));
    assert!(!required.contains(&"callback_url"));

    // The schema states what validator enforces.
    assert_eq!(properties["amount_cents"]["minimum"], json!(1));
    assert_eq!(properties["amount_cents"]["maximum"], json!(5_000_000));
    assert_eq!(properties["fee_rate"]["exclusiveMinimum"], json!(0.0));
    assert_eq!(properties["fee_rate"]["exclusiveMaximum"], json!(1.0));
    assert_eq!(properties["ledger_table"]["pattern"], "^[a-z_]+$");
    assert_eq!(properties["pinCode"]["minLength"], json!(6));
    assert_eq!(properties["pinCode"]["maxLength"], json!(6));
    let reference = properties["reference"]["description"].as_str().unwrap();
    assert!(reference.starts_with("The payer's own reference."), "{reference}");
    assert!(reference.contains("no_test_reference"), "{reference}");

    // `#[sensitive]` names the wire name and redacts `Debug`.
    assert_eq!(contract.sensitive(), ["/pinCode"]);
    let args: TransferFundsArgs = serde_json::from_value(valid()).unwrap();
    let debug = format!("{args:?}");
    assert!(!debug.contains("123456"), "{debug}");
    assert!(debug.contains("[redacted]"), "{debug}");
    assert!(debug.contains("invoice 42"), "{debug}");
    assert_eq!(args.memo, "");
    assert_eq!(args.retries, 0);
    assert_eq!(args.r#type, "sepa");

    // Every rule is enforced.
    args.validate().unwrap();
    let invalid = |arguments: serde_json::Value| {
        let args: TransferFundsArgs = serde_json::from_value(arguments).unwrap();
        args.validate().is_err()
    };
    assert!(invalid(with("amount_cents", json!(0))));
    assert!(invalid(with("fee_rate", json!(0.0))));
    assert!(invalid(with("fee_rate", json!(1.0))));
    assert!(invalid(with("beneficiary_email", json!("bob"))));
    assert!(invalid(with("callback_url", json!("not a url"))));
    assert!(invalid(with("ledger_table", json!("Transfers"))));
    assert!(invalid(with("ledger_table", json!("tx"))));
    assert!(invalid(with("reference", json!("a test transfer"))));
    assert!(invalid(with("memoText", json!("x".repeat(141)))));
    assert!(invalid(with("pinCode", json!("12345"))));
    assert!(serde_json::from_value::<TransferFundsArgs>(with("memo", json!("hi"))).is_err());

    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    // A critical tool waits for a human; this test's human approves at once.
    let registry = Registry::builder()
        .tool(TransferFunds)
        .approver(portcullis::AutoApprove)
        .build()
        .unwrap();
    let outcome = runtime.block_on(registry.dispatch(
        &CallContext::new("alice"),
        &ToolCall::new("call-1", "transfer_funds", with("memoText", json!("rent"))),
    ));
    assert_eq!(outcome.output(), Some(&json!("1000 sepa rent")));
}
