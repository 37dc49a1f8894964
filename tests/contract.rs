//! What `#[tool]` records in the contract, the schema it exports, and the registry's checks at
//! build time.

mod common;

use common::*;
use portcullis::prelude::*;
use portcullis::{Approval, BuildError, Invocation};
use serde_json::{Value, json};

#[test]
fn the_attribute_records_every_contract_key() {
    let delete = DeleteDatabaseRecord.contract();
    assert_eq!(delete.name(), "delete_database_record");
    assert_eq!(
        delete.description(),
        "Delete one record from a database table."
    );
    assert_eq!(delete.risk(), Risk::High);
    assert_eq!(delete.roles(), ["admin"]);
    assert_eq!(delete.rollback(), Some("restore_database_record"));
    assert_eq!(delete.irreversible(), None);
    assert_eq!(delete.approval(), &Approval::Default);
    assert_eq!(delete.sensitive(), ["/admin_note"]);

    let transfer = TransferFunds.contract();
    assert_eq!(transfer.name(), "transfer-funds");
    assert_eq!(transfer.risk(), Risk::Critical);
    assert_eq!(
        transfer.irreversible(),
        Some("the bank settles transfers at once")
    );
    assert_eq!(transfer.approval(), &Approval::Required);
    assert_eq!(
        transfer.timeout(),
        Some(std::time::Duration::from_millis(2000))
    );
    assert!(!transfer.has_rollback());

    let order = PlaceOrder.contract();
    assert_eq!(order.roles(), ["sales", "admin"]);
    assert_eq!(order.cost(), 3);

    let list = ListTables.contract();
    assert!(list.read_only() && list.idempotent());
    assert_eq!(list.risk(), Risk::Low);

    let report = SlowReport.contract();
    assert_eq!(
        report.approval(),
        &Approval::Conditional("approval_in_production".into())
    );
    assert_eq!(ChargeCard.contract().description(), "Charge a card.");
}

/// Count the rows of one of our own tables.
#[tool(read_only, open_world = false)]
fn count_rows(table_name: String) -> Result<usize, ToolError> {
    Ok(table_name.len())
}

#[test]
fn open_world_is_the_default_and_can_be_closed() {
    assert!(DeleteDatabaseRecord.contract().open_world());
    assert!(ListTables.contract().open_world());
    let closed = CountRows.contract();
    assert!(!closed.open_world());
    assert_eq!(
        serde_json::to_value(closed).unwrap()["open_world"],
        json!(false)
    );
}

#[test]
fn the_contract_is_built_once() {
    assert!(std::ptr::eq(
        DeleteDatabaseRecord.contract(),
        DeleteDatabaseRecord.contract()
    ));
}

#[test]
fn the_schema_states_what_the_gates_enforce() {
    let schema = TransferFunds.contract().input_schema().clone();
    let properties = &schema["properties"];
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(properties["retries"]["maximum"], 255, "u8's own range");
    assert_eq!(properties["adjustment"]["minimum"], -128, "i8's own range");
    assert_eq!(properties["amount_cents"]["minimum"], 1);
    assert_eq!(properties["amount_cents"]["maximum"], 5_000_000);
    assert_eq!(properties["fee_rate"]["exclusiveMinimum"], 0.0);
    assert_eq!(properties["fee_rate"]["exclusiveMaximum"], 1.0);
    assert_eq!(properties["beneficiary_email"]["format"], "email");
    assert_eq!(properties["memoText"]["default"], "");
    assert!(
        properties.get("memo").is_none(),
        "the Rust name is not shown"
    );
    assert_eq!(
        properties["reference"]["description"],
        "The payer's own reference.\n\nAlso checked by the server: the custom check `no_test_reference`."
    );
    let mut required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap())
        .collect();
    required.sort_unstable();
    assert_eq!(
        required,
        [
            "amount_cents",
            "beneficiary_email",
            "currency",
            "fee_rate",
            "pin",
            "reference"
        ]
    );
    assert!(schema.get("title").is_none() && schema.get("description").is_none());

    let delete = DeleteDatabaseRecord.contract().input_schema();
    assert_eq!(delete["properties"]["table_name"]["pattern"], "^[a-z_]+$");
    assert_eq!(
        delete["properties"]["table_name"]["description"],
        "The table to delete from."
    );
    assert_eq!(delete["properties"]["confirm_force"]["default"], false);
    assert_eq!(
        delete["$defs"]["Environment"]["enum"],
        json!(["development", "staging", "test", "production"])
    );
}

#[test]
fn output_schemas_where_the_output_has_one() {
    let output = DeleteDatabaseRecord.contract().output_schema().unwrap();
    assert_eq!(output["properties"]["record_id"]["type"], "integer");
    assert!(
        TransferFunds.contract().output_schema().is_none(),
        "Transferred does not implement JsonSchema"
    );
}

#[test]
fn export_lists_every_tool_sorted() {
    let export = registry().export_json_schema(&admin());
    let names: Vec<&str> = export
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "buggy_async_tool",
            "buggy_tool",
            "charge_card",
            "delete_database_record",
            "list_tables",
            "place_order",
            "schedule_delivery",
            "slow_report",
            "transfer-funds"
        ]
    );
    let admin_only = CallContext::new("alice").with_roles(["admin"]);
    let shown = registry().export_json_schema(&admin_only);
    assert!(
        shown
            .as_array()
            .unwrap()
            .iter()
            .all(|tool| tool["name"] != "transfer-funds"),
        "transfer-funds needs billing_admin"
    );
    let delete = &export[3];
    assert_eq!(
        delete["description"],
        "Delete one record from a database table."
    );
    assert_eq!(
        &delete["input_schema"],
        DeleteDatabaseRecord.contract().input_schema()
    );
}

#[test]
fn sensitive_arguments_are_redacted_in_debug() {
    let args = DeleteDatabaseRecordArgs {
        table_name: "users".into(),
        record_id: 7,
        environment: Environment::Test,
        confirm_force: false,
        admin_note: Some("the password is hunter2".into()),
    };
    let shown = format!("{args:?}");
    assert!(shown.contains("record_id: 7"), "{shown}");
    assert!(
        shown.contains("[redacted]") && !shown.contains("hunter2"),
        "{shown}"
    );
}

#[test]
fn the_function_stays_callable_as_written() {
    let deleted =
        delete_database_record(&admin(), "users".into(), 7, Environment::Test, false, None)
            .unwrap();
    assert_eq!(deleted.record_id, 7);
}

#[tokio::test]
async fn hooks_are_generated_from_the_contract() {
    let production = CallContext::new("ops").with_environment("production");
    let args = SlowReportArgs { delay_ms: 1 };
    assert!(SlowReport.approval_required(&production, &args));
    assert!(!SlowReport.approval_required(&admin(), &args));

    let args = DeleteDatabaseRecordArgs {
        table_name: "users".into(),
        record_id: 7,
        environment: Environment::Test,
        confirm_force: false,
        admin_note: None,
    };
    let output = Deleted {
        table: "users".into(),
        record_id: 7,
    };
    let ctx = admin();
    let compensation = DeleteDatabaseRecord
        .compensate(&ctx, &args, &output)
        .expect("a rollback is declared");
    assert_eq!(compensation.await, Ok(()));
    let transfer_args = serde_json::from_value::<TransferFundsArgs>(json!({
        "amount_cents": 1, "currency": "USD", "fee_rate": 0.1, "beneficiary_email": "a@example.com",
        "reference": "x", "pin": "123456"
    }))
    .unwrap();
    let transferred = Transferred { amount_cents: 1 };
    assert!(
        TransferFunds
            .compensate(&ctx, &transfer_args, &transferred)
            .is_none()
    );
}

#[test]
fn a_duplicate_name_fails_the_build() {
    let error = Registry::builder()
        .tool(ListTables)
        .tool(ListTables)
        .build()
        .unwrap_err();
    assert_eq!(error, BuildError::DuplicateTool("list_tables".into()));
    assert!(error.to_string().contains("rename one"), "{error}");
}

/// A hand-written tool whose contract breaks the rules the attribute enforces at compile time.
struct Unchecked(ToolContract);

impl Tool for Unchecked {
    type Args = ListTablesArgs;
    type Output = ();

    fn contract(&self) -> &ToolContract {
        &self.0
    }

    fn call<'a>(&'a self, _: &'a CallContext, _: ListTablesArgs) -> Invocation<'a, ()> {
        Invocation::Ready(Ok(()))
    }
}

#[test]
fn hand_written_contracts_are_checked_at_build() {
    let schema = json!({"type": "object", "additionalProperties": false});
    let cases = [
        (
            ToolContract::builder("drop database", "Drops.", schema.clone()).build(),
            "ASCII letters",
        ),
        (
            ToolContract::builder("drop_database", "Drops.", schema.clone())
                .risk(Risk::Critical)
                .build(),
            "rollback",
        ),
        (
            ToolContract::builder("drop_database", " ", schema.clone()).build(),
            "description",
        ),
        (
            ToolContract::builder("drop_database", "Drops.", json!({"type": "object"})).build(),
            "deny_unknown_fields",
        ),
    ];
    for (contract, expected) in cases {
        let error = Registry::builder()
            .tool(Unchecked(contract))
            .build()
            .unwrap_err();
        let BuildError::InvalidContract(error) = error else {
            panic!("expected an invalid contract, got {error}");
        };
        assert!(error.reason.contains(expected), "{error}");
    }
}

#[test]
fn contracts_serialize_for_review() {
    let contract: Value = serde_json::to_value(TransferFunds.contract()).unwrap();
    assert_eq!(contract["risk"], "critical");
    assert_eq!(contract["approval"], json!({"when": "required"}));
    assert_eq!(contract["timeout"], 2000);
    assert_eq!(contract["sensitive"], json!(["/pin"]));
}

#[test]
fn registries_and_dispatch_futures_cross_threads() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    fn assert_send<T: Send>(_: T) {}
    let registry = registry();
    assert_send_sync(&registry);
    let ctx = admin();
    assert_send(registry.dispatch(&ctx, &ToolCall::new("1", "list_tables", "{}")));
}
