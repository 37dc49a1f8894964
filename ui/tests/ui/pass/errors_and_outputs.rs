//! A tool's own error type (converted into `ToolError`), and outputs with and without a
//! JSON Schema.

use portcullis::Invocation;
use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug)]
enum StoreError {
    NotFound(u64),
}

impl From<StoreError> for ToolError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(id) => ToolError::new("not_found", format!("no record {id}")),
        }
    }
}

/// An output without `JsonSchema`.
#[derive(Serialize)]
struct Plain {
    value: u64,
}

/// An output with `JsonSchema`.
#[derive(Serialize, JsonSchema)]
struct Described {
    value: u64,
}

/// Fetch a record.
#[tool]
fn fetch_record(record_id: u64) -> Result<Plain, StoreError> {
    if record_id == 0 {
        return Err(StoreError::NotFound(record_id));
    }
    Ok(Plain { value: record_id })
}

/// Fetch a record, later.
#[tool]
async fn fetch_record_later(record_id: u64) -> Result<Described, StoreError> {
    if record_id == 0 {
        return Err(StoreError::NotFound(record_id));
    }
    Ok(Described { value: record_id })
}

/// Count the records, with `std::result::Result` written out.
#[tool]
fn count_records() -> std::result::Result<u64, ToolError> {
    Ok(3)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let ctx = CallContext::new("alice");

    assert!(FetchRecord.contract().output_schema().is_none());
    let schema = FetchRecordLater.contract().output_schema().expect("`Described` has a schema");
    assert!(schema["properties"].get("value").is_some());
    assert!(CountRecords.contract().output_schema().is_some());

    match FetchRecord.call(&ctx, FetchRecordArgs { record_id: 0 }) {
        Invocation::Ready(Err(error)) => assert_eq!(error.code(), "not_found"),
        _ => panic!("the error must be converted"),
    }
    match FetchRecord.call(&ctx, FetchRecordArgs { record_id: 4 }) {
        Invocation::Ready(Ok(plain)) => assert_eq!(plain.value, 4),
        _ => panic!("the call must succeed"),
    }
    match FetchRecordLater.call(&ctx, FetchRecordLaterArgs { record_id: 0 }) {
        Invocation::Pending(future) => {
            let error = runtime.block_on(future).err().expect("the error must be converted");
            assert_eq!(error.code(), "not_found");
            assert_eq!(error.message(), "no record 0");
        }
        Invocation::Ready(_) => panic!("an async tool must run when polled"),
    }
}
