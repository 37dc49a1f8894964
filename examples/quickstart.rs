//! Declare tools with `#[tool]`, build a registry, and send it the calls a model might make: one
//! good call and several bad ones. Run with `cargo run -p portcullis-examples --example quickstart`.

use std::sync::LazyLock;

use portcullis::prelude::*;
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
    Test,
    Production,
}

#[derive(Serialize, Deserialize, JsonSchema)]
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
    let _ = (environment, confirm_force, admin_note);
    Ok(Deleted {
        table: table_name,
        record_id,
    })
}

/// Puts a deleted record back (the compensation the contract declares).
async fn restore_record(
    _ctx: &CallContext,
    _args: &DeleteDatabaseRecordArgs,
    _deleted: &Deleted,
) -> Result<(), ToolError> {
    Ok(())
}

/// List the tables of the database.
#[tool(read_only, idempotent)]
fn list_tables(ctx: &CallContext) -> Result<Vec<String>, ToolError> {
    println!("    (list_tables runs for {})", ctx.actor());
    Ok(vec!["users".into(), "orders".into()])
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let registry = Registry::builder()
        .tool(DeleteDatabaseRecord)
        .tool(ListTables)
        .build()?;
    let ctx = CallContext::new("alice").with_roles(["admin"]);

    let tools = registry.export_json_schema(&ctx);
    println!(
        "An admin's model is shown {} tools:",
        tools.as_array().map_or(0, Vec::len)
    );
    for contract in registry.contracts() {
        println!(
            "  {} (risk {}): {}",
            contract.name(),
            contract.risk(),
            contract.description()
        );
    }
    let viewer = CallContext::new("victor").with_roles(["viewer"]);
    let shown: Vec<String> = registry
        .export_json_schema(&viewer)
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect();
    println!("A viewer's model is shown only: {}", shown.join(", "));
    println!();

    let calls = [
        ("a good call", "delete_database_record",
         json!({"table_name": "users", "record_id": 123, "environment": "development", "confirm_force": true}).to_string()),
        ("a read-only call", "list_tables", "{}".to_string()),
        ("a negative id", "delete_database_record",
         json!({"table_name": "orders", "record_id": -5, "environment": "production"}).to_string()),
        ("an id sent as text", "delete_database_record",
         json!({"table_name": "system_config", "record_id": "abc", "environment": "staging"}).to_string()),
        ("a missing argument", "delete_database_record",
         json!({"table_name": "users", "record_id": 456}).to_string()),
        ("a table name the pattern forbids", "delete_database_record",
         json!({"table_name": "user-profiles", "record_id": 101, "environment": "test"}).to_string()),
        ("the same key twice", "delete_database_record",
         r#"{"table_name":"users","record_id":1,"record_id":99999999,"environment":"test"}"#.to_string()),
        ("a privilege claim in the arguments", "delete_database_record",
         json!({"table_name": "users", "record_id": 1, "environment": "test", "role": "admin"}).to_string()),
        ("an invented tool", "drop_database", "{}".to_string()),
    ];

    for (index, (what, tool, arguments)) in calls.into_iter().enumerate() {
        println!("{}. {what}: {tool} {arguments}", index + 1);
        let outcome = registry
            .dispatch(
                &ctx,
                &ToolCall::new(format!("call_{index}"), tool, arguments),
            )
            .await;
        match outcome {
            Outcome::Completed(output) => println!("   completed -> {output}"),
            Outcome::Rejected(rejection) => {
                println!("   refused   -> {rejection}");
                println!("   the model reads: {}", rejection.to_model_message());
            }
            Outcome::Pending(ticket) => println!("   waiting   -> {}", ticket.description),
            _ => println!("   {outcome:?}"),
        }
        println!();
    }

    println!("10. the viewer's model asks for the delete anyway:");
    let call = ToolCall::new(
        "call_10",
        "delete_database_record",
        json!({"table_name": "users", "record_id": 7, "environment": "test"}).to_string(),
    );
    let outcome = registry.dispatch(&viewer, &call).await;
    if let Some(rejection) = outcome.rejection() {
        println!("   refused   -> {rejection}");
    }
    Ok(())
}
