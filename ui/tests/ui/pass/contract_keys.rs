//! Every contract key, spread over tools whose contracts are consistent, and what each key
//! puts in the contract.

use std::time::Duration;

use portcullis::Approval;
use portcullis::prelude::*;
use serde::Serialize;
use serde_json::json;

#[derive(Serialize, serde::Deserialize)]
struct Deleted {
    record_id: u64,
}

/// This doc comment is replaced by `description`.
#[tool(
    name = "remove-record",
    description = "Remove one record from a table.",
    risk = "critical",
    role = "admin",
    rollback = compensation::restore_record,
    approval = needs_approval,
    idempotent,
    cost = 7,
    timeout_ms = 1500,
)]
async fn delete_record(ctx: &CallContext, record_id: u64) -> Result<Deleted, ToolError> {
    let _ = ctx;
    Ok(Deleted { record_id })
}

mod compensation {
    use super::{DeleteRecordArgs, Deleted};
    use portcullis::prelude::*;

    /// Puts the record back.
    pub async fn restore_record(
        ctx: &CallContext,
        args: &DeleteRecordArgs,
        output: &Deleted,
    ) -> Result<(), ToolError> {
        assert_eq!(args.record_id, output.record_id);
        if ctx.actor() == "mallory" {
            return Err(ToolError::new("restore_refused", "not for mallory"));
        }
        Ok(())
    }
}

/// Approval in production, or for the first records.
fn needs_approval(ctx: &CallContext, args: &DeleteRecordArgs) -> bool {
    ctx.environment() == Some("production") || args.record_id < 10
}

/// Send an e-mail.
#[tool(
    risk = "high",
    roles = ["support", "admin"],
    irreversible = "the e-mail has been sent",
    approval = "required",
    cost = 2
)]
fn send_email(to: String, body: String) -> Result<usize, ToolError> {
    Ok(to.len() + body.len())
}

/// List the tables.
#[tool(risk = "low", read_only, idempotent, approval = "never", open_world = false)]
fn list_tables() -> Result<Vec<String>, ToolError> {
    Ok(vec!["users".to_owned()])
}

/// Read customers' personal data: high risk, but nothing to undo.
#[tool(risk = "high", read_only, role = "privacy_officer")]
fn read_customer_pii(customer_id: u64) -> Result<String, ToolError> {
    Ok(format!("customer {customer_id}"))
}

/// Rename a table.
#[tool(risk = "medium", open_world = true)]
fn rename_table(from: String, to: String) -> Result<String, ToolError> {
    Ok(format!("{from} -> {to}"))
}

/// Undo the last change, with a sync tool and an async compensation.
#[tool(risk = "high", rollback = redo_change)]
fn undo_change(change_id: u64) -> Result<u64, ToolError> {
    Ok(change_id)
}

async fn redo_change(_ctx: &CallContext, _args: &UndoChangeArgs, _output: &u64) -> Result<(), ToolError> {
    Ok(())
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();

    let pii = ReadCustomerPii.contract();
    assert_eq!(pii.risk(), Risk::High);
    assert!(pii.read_only() && !pii.has_rollback() && pii.irreversible().is_none());

    let contract = DeleteRecord.contract();
    assert_eq!(contract.name(), "remove-record");
    assert_eq!(contract.description(), "Remove one record from a table.");
    assert_eq!(contract.risk(), Risk::Critical);
    assert_eq!(contract.roles(), ["admin"]);
    assert_eq!(contract.rollback(), Some("compensation::restore_record"));
    assert!(contract.has_rollback());
    assert_eq!(contract.irreversible(), None);
    assert_eq!(contract.approval(), &Approval::Conditional("needs_approval".to_owned()));
    assert!(contract.idempotent());
    assert!(!contract.read_only());
    assert_eq!(contract.cost(), 7);
    assert_eq!(contract.timeout(), Some(Duration::from_millis(1500)));
    assert!(contract.sensitive().is_empty());

    // The predicate decides approval.
    let development = CallContext::new("alice").with_environment("development");
    let production = CallContext::new("alice").with_environment("production");
    assert!(!DeleteRecord.approval_required(&development, &DeleteRecordArgs { record_id: 42 }));
    assert!(DeleteRecord.approval_required(&production, &DeleteRecordArgs { record_id: 42 }));
    assert!(DeleteRecord.approval_required(&development, &DeleteRecordArgs { record_id: 3 }));

    // The rollback is the compensating function.
    let args = DeleteRecordArgs { record_id: 42 };
    let output = Deleted { record_id: 42 };
    let compensation = DeleteRecord.compensate(&development, &args, &output).expect("a rollback");
    assert_eq!(runtime.block_on(compensation), Ok(()));
    let mallory = CallContext::new("mallory");
    let compensation = DeleteRecord.compensate(&mallory, &args, &output).expect("a rollback");
    assert_eq!(runtime.block_on(compensation).unwrap_err().code(), "restore_refused");

    let contract = SendEmail.contract();
    assert_eq!(contract.name(), "send_email");
    assert_eq!(contract.risk(), Risk::High);
    assert_eq!(contract.roles(), ["support", "admin"]);
    assert_eq!(contract.irreversible(), Some("the e-mail has been sent"));
    assert_eq!(contract.rollback(), None);
    assert_eq!(contract.approval(), &Approval::Required);
    assert_eq!(contract.cost(), 2);
    assert_eq!(contract.timeout(), None);
    assert!(!contract.idempotent());
    assert!(contract.open_world());
    let args = SendEmailArgs { to: "a@b.c".into(), body: "hi".into() };
    assert!(SendEmail.approval_required(&development, &args));
    assert!(SendEmail.compensate(&development, &args, &7).is_none());

    let contract = ListTables.contract();
    assert_eq!(contract.risk(), Risk::Low);
    assert!(contract.read_only());
    assert!(contract.idempotent());
    assert!(!contract.open_world());
    assert_eq!(contract.approval(), &Approval::Never);
    assert!(contract.roles().is_empty());
    assert!(!ListTables.approval_required(&production, &ListTablesArgs {}));

    let contract = RenameTable.contract();
    assert_eq!(contract.risk(), Risk::Medium);
    assert_eq!(contract.approval(), &Approval::Default);
    assert_eq!(contract.cost(), 0);
    assert!(contract.open_world());

    assert_eq!(UndoChange.contract().rollback(), Some("redo_change"));
    let compensation = UndoChange.compensate(&development, &UndoChangeArgs { change_id: 1 }, &1);
    assert_eq!(runtime.block_on(compensation.expect("a rollback")), Ok(()));

    // The registry accepts every contract.
    let registry = Registry::builder()
        .tool(DeleteRecord)
        .tool(SendEmail)
        .tool(ListTables)
        .tool(RenameTable)
        .tool(UndoChange)
        .build()
        .unwrap();
    assert!(registry.contract("remove-record").is_some());
    assert!(registry.contract("delete_record").is_none());
    let exported = serde_json::to_value(registry.contract("send_email").unwrap()).unwrap();
    assert_eq!(exported["irreversible"], json!("the e-mail has been sent"));
}
