//! Every refusal code of the resolve, decode, validate and execute gates, each asserted with its
//! exact code and path, and the calls that must pass.

mod common;

use common::{admin, registry};
use portcullis::prelude::*;
use portcullis::{Gate, Outcome};
use serde_json::{Value, json};

async fn dispatch(name: &str, arguments: impl Into<portcullis::Arguments>) -> Outcome {
    registry()
        .dispatch(&admin(), &ToolCall::new("call_1", name, arguments))
        .await
}

/// Asserts a refusal's code and path, and returns it for further checks.
async fn refused(
    name: &str,
    arguments: impl Into<portcullis::Arguments>,
    code: RejectionCode,
    path: Option<&str>,
) -> Rejection {
    let outcome = dispatch(name, arguments).await;
    let rejection = outcome
        .rejection()
        .unwrap_or_else(|| panic!("expected {code}, the call completed: {outcome:?}"))
        .clone();
    assert_eq!(
        (rejection.code(), rejection.path()),
        (code, path),
        "{rejection}"
    );
    rejection
}

fn delete(arguments: Value) -> String {
    arguments.to_string()
}

// ---- the reference calls of the design ----------------------------------------------------

#[tokio::test]
async fn reference_call_1_passes() {
    let outcome = dispatch(
        "delete_database_record",
        delete(json!({"table_name": "users", "record_id": 123, "environment": "development", "confirm_force": true})),
    )
    .await;
    assert_eq!(
        outcome.output(),
        Some(&json!({"table": "users", "record_id": 123}))
    );
}

#[tokio::test]
async fn reference_call_2_negative_id_is_refused() {
    let rejection = refused(
        "delete_database_record",
        delete(json!({"table_name": "orders", "record_id": -5, "environment": "production"})),
        RejectionCode::InvalidValue,
        Some("/record_id"),
    )
    .await;
    assert_eq!(rejection.gate(), Gate::Decode);
}

#[tokio::test]
async fn reference_call_3_string_id_is_refused() {
    let rejection = refused(
        "delete_database_record",
        delete(
            json!({"table_name": "system_config", "record_id": "abc", "environment": "staging"}),
        ),
        RejectionCode::InvalidType,
        Some("/record_id"),
    )
    .await;
    assert_eq!(
        rejection.message(),
        "expected an integer from 0 to 18446744073709551615, found a string"
    );
}

#[tokio::test]
async fn reference_call_4_missing_environment_is_refused() {
    refused(
        "delete_database_record",
        delete(json!({"table_name": "users", "record_id": 456})),
        RejectionCode::MissingArgument,
        Some("/environment"),
    )
    .await;
}

#[tokio::test]
async fn reference_call_5_passes_with_a_note() {
    let note: String = "Duplicate customer row left by the 2026-11 migration, ticket OPS-4821. "
        .chars()
        .cycle()
        .take(80)
        .collect();
    assert_eq!(note.chars().count(), 80);
    let outcome = dispatch(
        "delete_database_record",
        delete(json!({
            "table_name": "users_data", "record_id": 789, "environment": "production",
            "confirm_force": true, "admin_note": note
        })),
    )
    .await;
    assert!(outcome.is_completed(), "{outcome:?}");
}

#[tokio::test]
async fn reference_call_6_table_name_pattern_is_enforced() {
    let rejection = refused(
        "delete_database_record",
        delete(json!({"table_name": "user-profiles", "record_id": 101, "environment": "test"})),
        RejectionCode::ConstraintViolation,
        Some("/table_name"),
    )
    .await;
    assert_eq!(rejection.gate(), Gate::Validate);
    let violation = &rejection.violations()[0];
    assert_eq!(violation.rule, "pattern");
    assert_eq!(violation.params["pattern"], "^[a-z_]+$");
}

// ---- resolve -------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_tool_hints_the_closest_names() {
    let rejection = refused(
        "delete_databse_record",
        "{}",
        RejectionCode::UnknownTool,
        None,
    )
    .await;
    assert_eq!(rejection.gate(), Gate::Resolve);
    assert_eq!(
        rejection.hint(),
        Some("did you mean `delete_database_record`?")
    );
}

#[tokio::test]
async fn look_alike_and_invisible_tool_names_are_unknown() {
    for name in [
        "delete_database_rec\u{043e}rd",  // Cyrillic о
        "delete_database\u{200b}_record", // zero-width space
        "DELETE_DATABASE_RECORD",
        " delete_database_record",
    ] {
        let rejection = refused(name, "{}", RejectionCode::UnknownTool, None).await;
        assert!(rejection.message().contains("no tool named"), "{rejection}");
    }
}

// ---- decode --------------------------------------------------------------------------------

#[tokio::test]
async fn malformed_json_is_refused() {
    for text in [
        "",
        "{",
        r#"{"table_name": "users",}"#,
        "{'table_name': 'users'}",
        r#"{"a": 1} trailing"#,
        "NaN",
    ] {
        refused(
            "delete_database_record",
            text,
            RejectionCode::MalformedJson,
            None,
        )
        .await;
    }
}

#[tokio::test]
async fn duplicate_keys_never_pass_at_any_depth() {
    refused(
        "delete_database_record",
        r#"{"table_name":"users","record_id":1,"record_id":99999999,"environment":"test"}"#,
        RejectionCode::DuplicateKey,
        Some("/record_id"),
    )
    .await;
    let nested = r#"{"customer_email":"a@example.com","address":{"street":"x","country":"CN"},
        "shipping":"standard",
        "lines":[{"skuCode":"A","quantity":1,"unitPrice":1.0},{"skuCode":"B","quantity":1,"quantity":100,"unitPrice":1.0}]}"#;
    refused(
        "place_order",
        nested,
        RejectionCode::DuplicateKey,
        Some("/lines/1/quantity"),
    )
    .await;
    let escaped = r#"{"amount_cents":1,"amount_cent\u0073":5000000}"#;
    refused(
        "transfer-funds",
        escaped,
        RejectionCode::DuplicateKey,
        Some("/amount_cents"),
    )
    .await;
}

#[tokio::test]
async fn oversized_and_overdeep_arguments_are_refused() {
    let huge =
        json!({"table_name": "x".repeat(2 * 1024 * 1024), "record_id": 1, "environment": "test"});
    refused(
        "delete_database_record",
        huge.to_string(),
        RejectionCode::ArgumentsTooLarge,
        None,
    )
    .await;
    refused(
        "delete_database_record",
        huge,
        RejectionCode::ArgumentsTooLarge,
        None,
    )
    .await;

    let mut deep = json!(1);
    for _ in 0..40 {
        deep = json!([deep]);
    }
    let rejection = refused(
        "place_order",
        json!({"metadata": deep}),
        RejectionCode::ArgumentsTooDeep,
        Some(&format!("/metadata{}", "/0".repeat(31))),
    )
    .await;
    assert_eq!(rejection.gate(), Gate::Decode);

    // A value built deeper than any parser would allow is measured only down to the limit.
    let mut very_deep = json!({});
    for _ in 0..1_000 {
        very_deep = json!({"a": very_deep});
    }
    refused(
        "place_order",
        very_deep,
        RejectionCode::ArgumentsTooDeep,
        Some(&"/a".repeat(32)),
    )
    .await;
}

#[tokio::test]
async fn limits_are_configurable() {
    let registry = Registry::builder()
        .tool(common::DeleteDatabaseRecord)
        .max_argument_bytes(64)
        .max_argument_depth(1)
        .build()
        .unwrap();
    let ctx = admin();
    let long = json!({"table_name": "users", "record_id": 1, "environment": "test", "admin_note": "x".repeat(64)});
    let outcome = registry
        .dispatch(&ctx, &ToolCall::new("1", "delete_database_record", long))
        .await;
    assert_eq!(outcome.code(), Some(RejectionCode::ArgumentsTooLarge));
    let nested = json!({"table_name": {"a": 1}});
    let outcome = registry
        .dispatch(&ctx, &ToolCall::new("2", "delete_database_record", nested))
        .await;
    assert_eq!(outcome.code(), Some(RejectionCode::ArgumentsTooDeep));

    let error = Registry::builder()
        .max_argument_depth(500)
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("max_argument_depth"), "{error}");
}

#[tokio::test]
async fn arguments_must_be_an_object() {
    for text in ["[]", "null", "42", r#""users""#, "true"] {
        refused(
            "delete_database_record",
            text,
            RejectionCode::NotAnObject,
            None,
        )
        .await;
    }
    refused(
        "delete_database_record",
        json!(["users", 1, "test"]),
        RejectionCode::NotAnObject,
        None,
    )
    .await;
}

#[tokio::test]
async fn unknown_arguments_are_refused_with_the_closest_name() {
    let rejection = refused(
        "delete_database_record",
        delete(json!({"table_name": "users", "recordid": 1, "environment": "test"})),
        RejectionCode::UnknownArgument,
        Some("/recordid"),
    )
    .await;
    assert_eq!(rejection.hint(), Some("did you mean `record_id`?"));

    // A privilege claim smuggled in as an argument.
    refused(
        "delete_database_record",
        delete(
            json!({"table_name": "users", "record_id": 1, "environment": "test", "role": "admin"}),
        ),
        RejectionCode::UnknownArgument,
        Some("/role"),
    )
    .await;

    // The Rust name of a renamed argument is not accepted: only the name the schema shows.
    refused(
        "transfer-funds",
        json!({"amount_cents": 1, "currency": "USD", "fee_rate": 0.1, "beneficiary_email": "a@example.com",
               "reference": "INV-1", "pin": "123456", "memo": "x"}),
        RejectionCode::UnknownArgument,
        Some("/memo"),
    )
    .await;

    // Nested objects refuse unknown fields too.
    refused(
        "place_order",
        json!({"customer_email": "a@example.com", "shipping": "express",
               "address": {"street": "1 Main St", "country": "US", "city": "x"},
               "lines": [{"skuCode": "A", "quantity": 1, "unitPrice": 2.0}]}),
        RejectionCode::UnknownArgument,
        Some("/address/city"),
    )
    .await;
}

#[tokio::test]
async fn missing_nested_field_points_inside() {
    refused(
        "place_order",
        json!({"customer_email": "a@example.com", "shipping": "express",
               "address": {"street": "1 Main St", "country": "US"},
               "lines": [{"skuCode": "A", "unitPrice": 2.0}]}),
        RejectionCode::MissingArgument,
        Some("/lines/0/quantity"),
    )
    .await;
}

#[tokio::test]
async fn numbers_follow_json_schema() {
    let base = |record_id: Value| {
        json!({"table_name": "users", "record_id": record_id, "environment": "test"}).to_string()
    };
    // 5.0 is an integer.
    let outcome = dispatch("delete_database_record", base(json!(5.0))).await;
    assert_eq!(outcome.output().unwrap()["record_id"], 5);
    let outcome = dispatch(
        "delete_database_record",
        "{\"table_name\":\"users\",\"record_id\":1e2,\"environment\":\"test\"}",
    )
    .await;
    assert_eq!(outcome.output().unwrap()["record_id"], 100);
    // 5.5 is not; "123" is not a number.
    refused(
        "delete_database_record",
        base(json!(5.5)),
        RejectionCode::InvalidType,
        Some("/record_id"),
    )
    .await;
    refused(
        "delete_database_record",
        base(json!("123")),
        RejectionCode::InvalidType,
        Some("/record_id"),
    )
    .await;
    // Out of the type's range: refused, never wrapped or saturated.
    refused(
        "delete_database_record",
        "{\"table_name\":\"users\",\"record_id\":18446744073709551616,\"environment\":\"test\"}",
        RejectionCode::InvalidValue,
        Some("/record_id"),
    )
    .await;
    let transfer = |retries: Value| {
        json!({"amount_cents": 1, "currency": "USD", "fee_rate": 0.1, "beneficiary_email": "a@example.com",
               "reference": "INV-1", "pin": "123456", "retries": retries})
    };
    let rejection = refused(
        "transfer-funds",
        transfer(json!(256)),
        RejectionCode::InvalidValue,
        Some("/retries"),
    )
    .await;
    assert_eq!(
        rejection.message(),
        "expected an integer from 0 to 255, found the integer 256"
    );
    refused(
        "transfer-funds",
        transfer(json!(-1)),
        RejectionCode::InvalidValue,
        Some("/retries"),
    )
    .await;
    refused(
        "transfer-funds",
        transfer(json!(true)),
        RejectionCode::InvalidType,
        Some("/retries"),
    )
    .await;
}

#[tokio::test]
async fn values_outside_an_enum_list_the_allowed_values() {
    let rejection = refused(
        "delete_database_record",
        delete(json!({"table_name": "users", "record_id": 1, "environment": "prod"})),
        RejectionCode::InvalidValue,
        Some("/environment"),
    )
    .await;
    assert_eq!(
        rejection.hint(),
        Some("the allowed values are `development`, `staging`, `test`, `production`")
    );
    refused(
        "place_order",
        json!({"customer_email": "a@example.com", "shipping": {"drone": {}},
               "address": {"street": "1 Main St", "country": "US"},
               "lines": [{"skuCode": "A", "quantity": 1, "unitPrice": 2.0}]}),
        RejectionCode::InvalidValue,
        Some("/shipping"),
    )
    .await;
}

#[tokio::test]
async fn null_is_absent_only_for_optional_arguments() {
    let outcome = dispatch(
        "delete_database_record",
        json!({"table_name": "users", "record_id": 1, "environment": "test", "admin_note": null}),
    )
    .await;
    assert!(outcome.is_completed(), "{outcome:?}");
    refused(
        "delete_database_record",
        json!({"table_name": "users", "record_id": null, "environment": "test"}),
        RejectionCode::InvalidType,
        Some("/record_id"),
    )
    .await;
}

// ---- validate ------------------------------------------------------------------------------

#[tokio::test]
async fn every_violation_is_reported_at_once() {
    let rejection = refused(
        "transfer-funds",
        json!({"amount_cents": 0, "currency": "USD", "fee_rate": 1.0, "beneficiary_email": "not-an-email",
               "callback_url": "not a url", "reference": "", "pin": "12", "memoText": "m".repeat(141)}),
        RejectionCode::ConstraintViolation,
        Some("/amount_cents"),
    )
    .await;
    let found: Vec<(&str, &str)> = rejection
        .violations()
        .iter()
        .map(|violation| (violation.path.as_str(), violation.rule.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            ("/amount_cents", "range"),
            ("/beneficiary_email", "email"),
            ("/callback_url", "url"),
            ("/fee_rate", "range"),
            ("/memoText", "length"),
            ("/pin", "length"),
            ("/reference", "length"),
        ]
    );
    let fee = &rejection.violations()[3];
    assert_eq!(fee.params["exclusive_max"], 1.0);
    assert_eq!(fee.message, "must be greater than 0.0 and less than 1.0");
    assert_eq!(
        rejection.violations()[0].message,
        "must be at least 1 and at most 5000000"
    );
    let message: Value = serde_json::from_str(&rejection.to_model_message()).unwrap();
    assert_eq!(message["error"], "constraint_violation");
    assert_eq!(message["violations"].as_array().unwrap().len(), 7);
}

#[tokio::test]
async fn lengths_count_characters_not_bytes() {
    // Six code points, eighteen bytes.
    let outcome = dispatch(
        "transfer-funds",
        json!({"amount_cents": 1, "currency": "CNY", "fee_rate": 0.01, "beneficiary_email": "a@example.com",
               "reference": "发票-1", "pin": "一二三四五六"}),
    )
    .await;
    assert!(outcome.is_completed(), "{outcome:?}");
}

#[tokio::test]
async fn custom_validators_refuse_with_their_code() {
    let rejection = refused(
        "transfer-funds",
        json!({"amount_cents": 1, "currency": "USD", "fee_rate": 0.1, "beneficiary_email": "a@example.com",
               "reference": "TEST-1", "pin": "123456"}),
        RejectionCode::ConstraintViolation,
        Some("/reference"),
    )
    .await;
    assert_eq!(rejection.violations()[0].rule, "no_test_reference");
}

#[tokio::test]
async fn nested_violations_use_schema_names() {
    let rejection = refused(
        "place_order",
        json!({"customer_email": "a@example.com", "shipping": {"pickup": {"store_id": 7}},
               "address": {"street": "1 Main St", "country": "USA"},
               "lines": [{"skuCode": "A", "quantity": 1, "unitPrice": 2.0},
                         {"skuCode": "", "quantity": 101, "unitPrice": 0.0}]}),
        RejectionCode::ConstraintViolation,
        Some("/address/country"),
    )
    .await;
    let paths: Vec<&str> = rejection
        .violations()
        .iter()
        .map(|violation| violation.path.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            "/address/country",
            "/lines/1/quantity",
            "/lines/1/skuCode",
            "/lines/1/unitPrice"
        ]
    );
}

// ---- execute -------------------------------------------------------------------------------

#[tokio::test]
async fn async_tools_with_nested_arguments_complete() {
    let outcome = dispatch(
        "place_order",
        json!({"customer_email": "a@example.com", "shipping": {"pickup": {"store_id": 7}},
               "address": {"street": "1 Main St", "country": "US"}, "tags": ["vip"],
               "lines": [{"skuCode": "A", "quantity": 2, "unitPrice": 2.5}]}),
    )
    .await;
    assert_eq!(
        outcome.output(),
        Some(&json!({"lines": 1, "total_cents": 500}))
    );
}

#[tokio::test]
async fn tool_errors_carry_their_own_code() {
    let rejection = refused(
        "charge_card",
        json!({"amount_cents": 100}),
        RejectionCode::ToolFailed,
        None,
    )
    .await;
    assert_eq!(rejection.gate(), Gate::Execute);
    assert_eq!(rejection.reason(), Some("account_frozen"));
    assert!(rejection.retryable());
    assert!(rejection.message().contains("frozen"));
}

#[tokio::test]
async fn panics_are_contained() {
    let registry = registry();
    let ctx = admin();
    for name in ["buggy_tool", "buggy_async_tool"] {
        let outcome = registry
            .dispatch(&ctx, &ToolCall::new("1", name, json!({"input": "x"})))
            .await;
        let rejection = outcome.rejection().expect("refused");
        assert_eq!(rejection.code(), RejectionCode::ToolPanicked);
        assert!(!rejection.retryable());
    }
    // A panic in the tool author's argument checks is contained too, with nothing of its
    // message sent to the model.
    let fragile = Registry::builder()
        .tool(common::FindInvoice)
        .build()
        .unwrap();
    let outcome = fragile
        .dispatch(
            &ctx,
            &ToolCall::new("1", "find_invoice", json!({"code": "ab"})),
        )
        .await;
    let rejection = outcome.rejection().expect("refused");
    assert_eq!(rejection.code(), RejectionCode::ToolPanicked);
    assert!(
        !rejection.to_model_message().contains("byte index"),
        "{rejection}"
    );
    let outcome = fragile
        .dispatch(
            &ctx,
            &ToolCall::new("2", "find_invoice", json!({"code": "INV-7"})),
        )
        .await;
    assert_eq!(outcome.output(), Some(&json!("INV-7")));

    // The registry keeps working after a panic.
    let outcome = registry
        .dispatch(&ctx, &ToolCall::new("2", "list_tables", "{}"))
        .await;
    assert_eq!(outcome.output(), Some(&json!(["users", "orders"])));
}

#[tokio::test]
async fn slow_tools_time_out() {
    let rejection = refused(
        "slow_report",
        json!({"delay_ms": 5_000}),
        RejectionCode::ToolTimeout,
        None,
    )
    .await;
    assert!(rejection.message().contains("50 ms"), "{rejection}");
    assert!(
        !rejection.retryable(),
        "the report may have taken effect, and the tool is not idempotent"
    );
    let outcome = dispatch("slow_report", json!({"delay_ms": 1})).await;
    assert_eq!(outcome.output(), Some(&json!("report after 1 ms")));
}

#[tokio::test]
async fn model_messages_are_compact_json() {
    let outcome = dispatch(
        "delete_database_record",
        delete(json!({"table_name": "users", "recordid": 1, "environment": "test"})),
    )
    .await;
    let text = outcome.rejection().unwrap().to_model_message();
    assert!(!text.contains('\n'));
    let message: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        message,
        json!({
            "error": "unknown_argument",
            "gate": "decode",
            "message": "`recordid` is not an accepted argument",
            "path": "/recordid",
            "hint": "did you mean `record_id`?",
            "retryable": true
        })
    );
}

#[tokio::test]
async fn nested_argument_types_are_validated_without_being_asked() {
    let registry = registry();
    let call = |arguments: Value| ToolCall::new("1", "schedule_delivery", arguments);
    let valid = json!({
        "address": {"street": "1 Main St", "country": "US"},
        "window": {"from_hour": 9, "to_hour": 17},
        "lines": [{"skuCode": "A", "quantity": 1, "unitPrice": 1.0}],
        "backup_address": null
    });
    let outcome = registry.dispatch(&admin(), &call(valid)).await;
    assert_eq!(outcome.output(), Some(&json!(1)));

    let invalid = json!({
        "address": {"street": "", "country": "US"},
        "window": {"from_hour": 9, "to_hour": 24},
        "lines": [{"skuCode": "A", "quantity": 0, "unitPrice": 1.0}],
        "backup_address": {"street": "2 Side St", "country": "USA"}
    });
    let outcome = registry.dispatch(&admin(), &call(invalid)).await;
    let rejection = outcome.rejection().expect("refused");
    assert_eq!(rejection.code(), RejectionCode::ConstraintViolation);
    let paths: Vec<&str> = rejection
        .violations()
        .iter()
        .map(|violation| violation.path.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            "/address/street",
            "/backup_address/country",
            "/lines/0/quantity",
            "/window/to_hour"
        ]
    );
}
