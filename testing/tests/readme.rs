//! The kit against the README's tools, declared as the README declares them.

use std::sync::LazyLock;

use portcullis::prelude::*;
use portcullis_testing::red_team;
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

static TABLE_NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new("^[a-z_]+$").unwrap());

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Environment {
    Development,
    Staging,
    Production,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Deleted {
    table: String,
    record_id: u64,
}

/// Delete one record from a database table.
#[tool(risk = "high", role = "admin", rollback = restore_record)]
fn delete_database_record(
    /// The table to delete from.
    #[validate(length(min = 3, max = 50), regex(path = *TABLE_NAME))]
    table_name: String,
    /// The id of the record; ids start at 1.
    #[validate(range(min = 1))]
    record_id: u64,
    environment: Environment,
    #[serde(default)] confirm_force: bool,
    #[validate(length(max = 200))]
    #[sensitive]
    admin_note: Option<String>,
) -> Result<Deleted, ToolError> {
    let _ = (environment, confirm_force, admin_note);
    Ok(Deleted {
        table: table_name,
        record_id,
    })
}

async fn restore_record(
    _ctx: &CallContext,
    _args: &DeleteDatabaseRecordArgs,
    _deleted: &Deleted,
) -> Result<(), ToolError> {
    Ok(())
}

/// Pay an invoice.
#[tool(risk = "critical", irreversible = "a payout settles at once")]
fn pay_invoice(number: u32, amount_cents: u64) -> Result<String, ToolError> {
    Ok(format!("paid {amount_cents} cents for invoice {number}"))
}

#[tokio::test]
async fn every_hostile_case_against_the_readmes_tools_is_refused() {
    let valid = json!({"table_name": "users", "record_id": 1, "environment": "staging"});
    let report = red_team(
        Registry::builder()
            .tool(DeleteDatabaseRecord)
            .tool(PayInvoice),
    )
    .caller("alice", CallContext::new("alice").with_roles(["admin"]))
    .valid_call("delete_database_record", valid.as_object().unwrap().clone())
    .run()
    .await;
    let per_tool = report.cases_by_tool();
    println!("{per_tool:?}\n{report}");
    report.assert_all_refused();
    let breakers = report
        .findings()
        .iter()
        .filter(|finding| finding.case.contains("which its pattern does not take"))
        .count();
    assert!(breakers >= 10, "{breakers} pattern breakers");
    assert!(per_tool["delete_database_record"] >= 200, "{per_tool:?}");
    // Two integers without a bound can be wrong in fewer ways: their types, their ranges,
    // their spellings, the arguments' shape and names, and the probes.
    assert!(per_tool["pay_invoice"] >= 120, "{per_tool:?}");
}
