//! Provider profiles: the exported tool lists (as reviewed snapshots), the refusals at
//! registry build, least privilege, and `null` for an absent argument under strict mode.

mod common;
#[path = "../examples/shop/mod.rs"]
mod shop;

use portcullis::export::{ExportError, Profile};
use portcullis::prelude::*;
use portcullis::{BuildError, ToolCall};
use serde_json::{Value, json};

fn shop_registry() -> Registry {
    Profile::ALL
        .into_iter()
        .fold(shop::shop_tools(), |builder, profile| {
            builder.profile(profile)
        })
        .build()
        .expect("the shop's tools fit every profile")
}

#[test]
fn every_profile_exports_the_shop_as_its_snapshot_says() {
    let registry = shop_registry();
    for profile in Profile::ALL {
        let tools = registry.export(&shop::shop_admin(), profile).unwrap();
        // Members in key order whatever map serde_json keeps: a crate of the build (Cedar's)
        // turns on `preserve_order`, which keeps them in the order they were written.
        insta::with_settings!({sort_maps => true}, {
            insta::assert_json_snapshot!(profile.name(), tools);
        });
    }
}

#[test]
fn a_tool_a_declared_profile_cannot_take_refuses_the_build_naming_tool_and_reason() {
    let error = Registry::builder()
        .tool(common::PlaceOrder)
        .profile(Profile::OpenAiChat { strict: true })
        .build()
        .unwrap_err();
    let BuildError::Profile(error) = error else {
        panic!("expected a profile error, got {error:?}");
    };
    assert_eq!(error.profile, Profile::OpenAiChat { strict: true });
    assert_eq!(error.tool, "place_order");
    assert!(error.reason.contains("map with free-form keys"), "{error}");
    assert!(
        error
            .to_string()
            .starts_with("profile `openai-chat-strict` cannot take tool `place_order`: ")
    );
    // The same tool is fine where maps are.
    Registry::builder()
        .tool(common::PlaceOrder)
        .profile(Profile::OpenAiChat { strict: false })
        .profile(Profile::Gemini)
        .profile(Profile::Mcp)
        .build()
        .unwrap();
}

#[test]
fn check_profile_lists_every_misfit_for_a_test_to_assert() {
    let registry = Registry::builder()
        .tool(common::PlaceOrder)
        .tool(common::ListTables)
        .build()
        .unwrap();
    assert!(registry.check_profile(Profile::Mcp).is_ok());
    let misfits = registry
        .check_profile(Profile::Anthropic { strict: true })
        .unwrap_err();
    let tools: Vec<&str> = misfits.iter().map(|error| error.tool.as_str()).collect();
    assert_eq!(tools, ["place_order"]);
}

/// A tool with `optional` arguments, to count against Anthropic's limits per request.
macro_rules! optional_tool {
    ($name:ident) => {
        /// Takes three optional arguments.
        #[tool]
        fn $name(a: Option<u8>, b: Option<u8>, c: Option<u8>) -> Result<u8, ToolError> {
            Ok(a.or(b).or(c).unwrap_or(0))
        }
    };
}
optional_tool!(optional_1);
optional_tool!(optional_2);
optional_tool!(optional_3);
optional_tool!(optional_4);
optional_tool!(optional_5);
optional_tool!(optional_6);

#[test]
fn anthropic_strict_counts_its_limits_over_every_tool_of_a_request() {
    let five = Registry::builder()
        .tool(Optional1)
        .tool(Optional2)
        .tool(Optional3)
        .tool(Optional4)
        .tool(Optional5);
    // Five tools with three `Option`s each: 15 union-typed parameters, within the 16 allowed.
    let error = five
        .tool(Optional6)
        .profile(Profile::Anthropic { strict: true })
        .build()
        .unwrap_err();
    let BuildError::Profile(error) = error else {
        panic!("expected a profile error, got {error:?}");
    };
    assert_eq!(error.tool, "optional_6");
    assert!(
        error.reason.contains("18 parameters of a union type"),
        "{error}"
    );
    Registry::builder()
        .tool(Optional1)
        .tool(Optional2)
        .tool(Optional3)
        .tool(Optional4)
        .tool(Optional5)
        .profile(Profile::Anthropic { strict: true })
        .build()
        .unwrap();
}

#[test]
fn only_declared_profiles_export() {
    let registry = Registry::builder()
        .tool(common::ListTables)
        .profile(Profile::Mcp)
        .build()
        .unwrap();
    let error = registry
        .export(&common::admin(), Profile::Gemini)
        .unwrap_err();
    assert_eq!(error, ExportError::UndeclaredProfile(Profile::Gemini));
    assert!(error.to_string().contains(".profile(Profile::...)"));
    assert!(registry.serves(Profile::Mcp));
}

#[test]
fn an_export_shows_only_the_tools_the_caller_may_use() {
    let registry = shop_registry();
    let support = CallContext::new("sam").with_roles(["support"]);
    for profile in Profile::ALL {
        let exported = registry.export(&support, profile).unwrap().to_string();
        assert!(exported.contains("update_shipping_address"), "{profile}");
        assert!(exported.contains("search_products"), "{profile}");
        assert!(!exported.contains("refund_payment"), "{profile}");
        assert!(!exported.contains("schedule_payout"), "{profile}");
    }
    // Without roles, only the tool open to everyone.
    let nobody = CallContext::new("nobody");
    let declarations =
        &registry.export(&nobody, Profile::Gemini).unwrap()[0]["functionDeclarations"];
    let names: Vec<&Value> = declarations
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| &tool["name"])
        .collect();
    assert_eq!(names, [&json!("search_products")]);
}

#[test]
fn mcp_annotations_come_from_the_contract() {
    let registry = shop_registry();
    let tools = registry.export(&shop::shop_admin(), Profile::Mcp).unwrap();
    let annotations = |name: &str| -> Value {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|tool| tool["name"] == name)
            .unwrap()["annotations"]
            .clone()
    };
    assert_eq!(
        annotations("search_products"),
        json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true,
            "openWorldHint": false})
    );
    assert_eq!(
        annotations("refund_payment"),
        json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false,
            "openWorldHint": true})
    );
    assert_eq!(
        annotations("update_shipping_address")["destructiveHint"],
        json!(false)
    );
}

async fn search(registry: &Registry, arguments: &str) -> Outcome {
    let call = ToolCall::new("call_1", "search_products", arguments);
    registry.dispatch(&shop::shop_admin(), &call).await
}

#[tokio::test]
async fn under_strict_openai_a_null_argument_is_absent_and_its_default_applies() {
    let strict = shop_registry();
    let outcome = search(
        &strict,
        r#"{"query": "lamp", "max_results": null, "sort": null, "tags": null}"#,
    )
    .await;
    assert_eq!(outcome.output(), Some(&json!(["10 results for lamp"])));
    // A required argument sent as null is still missing.
    let outcome = search(&strict, r#"{"query": null}"#).await;
    assert_eq!(outcome.code(), Some(RejectionCode::MissingArgument));

    // A registry that serves no strict profile keeps JSON Schema's reading: null is a value,
    // and not one a `u8` takes.
    let lenient = shop::shop_tools()
        .profile(Profile::Anthropic { strict: false })
        .build()
        .unwrap();
    let outcome = search(&lenient, r#"{"query": "lamp", "max_results": null}"#).await;
    assert_eq!(outcome.code(), Some(RejectionCode::InvalidType));
}

#[test]
fn the_contracts_match_their_lock_file() {
    portcullis::manifest::assert_matches_lock(
        &shop_registry(),
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/shop.lock.json"),
    );
}

#[test]
fn a_changed_contract_fails_the_lock_with_a_readable_diff() {
    if std::env::var(portcullis::manifest::UPDATE_VARIABLE).is_ok() {
        // This run writes lock files instead of comparing them.
        return;
    }
    let directory = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let lock = directory.join("changed.lock.json");
    let before = Registry::builder()
        .tool(common::ListTables)
        .build()
        .unwrap();
    std::fs::write(
        &lock,
        serde_json::to_string_pretty(&before.manifest()).unwrap() + "\n",
    )
    .unwrap();
    portcullis::manifest::compare_with_lock(&before, &lock).unwrap();

    let after = Registry::builder()
        .tool(common::ListTables)
        .tool(common::ChargeCard)
        .build()
        .unwrap();
    let mismatch = portcullis::manifest::compare_with_lock(&after, &lock).unwrap_err();
    let text = mismatch.to_string();
    let added = |needle: &str| {
        text.lines()
            .any(|line| line.starts_with('+') && line.contains(needle))
    };
    assert!(added(r#""name": "charge_card","#), "{text}");
    assert!(added(r#""risk": "medium","#), "{text}");
    assert!(text.contains("PORTCULLIS_UPDATE_LOCK=1"), "{text}");

    let missing = directory.join("missing.lock.json");
    let mismatch = portcullis::manifest::compare_with_lock(&after, &missing).unwrap_err();
    assert!(matches!(
        mismatch,
        portcullis::manifest::LockMismatch::Missing(_)
    ));
}

#[tokio::test]
async fn what_a_profile_drops_from_the_schema_is_still_enforced() {
    let registry = shop_registry();
    let strict = Profile::OpenAiChat { strict: true };
    let exported = registry.export(&shop::shop_admin(), strict).unwrap();
    let refund = &exported[0]["function"]["parameters"]["properties"];
    assert_eq!(
        refund["note"],
        json!({"description": "A note for the customer's statement.",
        "type": ["string", "null"]})
    );

    let long_note = json!({"payment_id": "pay_12345", "amount_cents": 100,
        "reason": "duplicate", "note": "x".repeat(201)});
    let call = ToolCall::new("call_note", "refund_payment", long_note.to_string());
    let outcome = registry.dispatch(&shop::shop_admin(), &call).await;
    assert_eq!(outcome.code(), Some(RejectionCode::ConstraintViolation));
    assert_eq!(outcome.rejection().unwrap().violations()[0].path, "/note");
}

#[tokio::test]
async fn a_dynamic_enum_shows_the_callers_values_in_every_profile_and_holds_calls_to_them() {
    let registry = shop_registry();
    let outdoor = shop::shop_admin().with_tenant("outdoor");
    let openai = registry
        .export(&outdoor, Profile::OpenAiChat { strict: true })
        .unwrap();
    let search = openai
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["function"]["name"] == "search_products")
        .unwrap();
    assert_eq!(
        search["function"]["parameters"]["properties"]["category"]["enum"],
        json!(["tents", "boots", null])
    );
    let gemini = registry
        .export(&outdoor, Profile::Gemini)
        .unwrap()
        .to_string();
    assert!(gemini.contains(r#""enum":["tents","boots"]"#), "{gemini}");

    let call = ToolCall::new(
        "c1",
        "search_products",
        r#"{"query": "x", "category": "lamps"}"#,
    );
    let outcome = registry.dispatch(&outdoor, &call).await;
    assert_eq!(outcome.code(), Some(RejectionCode::InvalidValue));
    let call = ToolCall::new(
        "c2",
        "search_products",
        r#"{"query": "x", "category": "tents"}"#,
    );
    assert!(registry.dispatch(&outdoor, &call).await.is_completed());
}
