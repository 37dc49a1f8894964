use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Environment { Development, Staging, Test, Production }

#[derive(Serialize, JsonSchema)]
pub struct Deleted { table: String, record_id: u64 }

/// Delete one record from a table.
#[tool(risk = "high", role = "admin", irreversible = "no backup")]
pub fn delete_database_record(
    ctx: &CallContext,
    /// The table.
    #[validate(length(min = 3, max = 50))]
    table_name: String,
    #[validate(range(min = 1))]
    record_id: u64,
    environment: Environment,
    #[serde(default)]
    confirm_force: bool,
    #[validate(length(max = 200))]
    #[sensitive]
    admin_note: Option<String>,
) -> Result<Deleted, ToolError> {
    let _ = (ctx, environment, confirm_force, admin_note);
    Ok(Deleted { table: table_name, record_id })
}

fn main() {
    let c = DeleteDatabaseRecord.contract();
    println!("{}", serde_json::to_string_pretty(c).unwrap());
}
