use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Paging {
    page: u32,
    per_page: u32,
}

/// List the records of a table.
#[tool]
fn list_records(table: String, #[serde(flatten)] paging: Paging) -> Result<String, ToolError> {
    Ok(format!("{table} {} {}", paging.page, paging.per_page))
}

fn main() {}
