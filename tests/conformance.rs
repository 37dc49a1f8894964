//! The providers' own SDK code referees every export: each profile's definition of every tool
//! in the tests and the examples is checked by `tests/conformance/referee.py`, which runs
//! OpenAI's `ensure_strict_json_schema` (the strict export must be its fixed point),
//! `anthropic.transform_schema` (must leave the strict export unchanged), Gemini's
//! `Schema.from_json_schema(raise_error_on_unsupported_field=True)` and the SDKs' own types.
//!
//! `bash .ci/run` installs the pinned SDKs and sets `PORTCULLIS_REFEREE_PYTHON` to their
//! interpreter. Without it this test checks only which tools each profile refuses.

mod common;
#[path = "../examples/shop/mod.rs"]
mod shop;

use std::collections::{BTreeMap, HashMap};
use std::process::Command;

use portcullis::export::Profile;
use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use validator::Validate;

/// Shapes the other tools do not have, among them the ones some profile cannot take.
mod shapes {
    use super::*;

    #[derive(Debug, Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Category {
        pub name: String,
        /// Sub-categories: a type that contains itself.
        pub children: Vec<Category>,
    }

    /// Save a category tree.
    #[tool(risk = "medium")]
    pub fn save_tree(root: Category) -> Result<usize, ToolError> {
        Ok(root.children.len())
    }

    /// Attach labels to a ticket.
    #[tool]
    pub fn label_ticket(ticket: u32, labels: HashMap<String, String>) -> Result<usize, ToolError> {
        let _ = ticket;
        Ok(labels.len())
    }

    /// Store any JSON document.
    #[tool]
    pub fn store_document(document: Value) -> Result<bool, ToolError> {
        Ok(document.is_object())
    }

    /// Reset a user's second factor.
    #[tool(name = "2fa_reset", risk = "medium")]
    pub fn reset_second_factor(user_id: u64) -> Result<u64, ToolError> {
        Ok(user_id)
    }

    #[derive(Debug, Deserialize, Serialize, JsonSchema)]
    #[serde(untagged)]
    pub enum Target {
        Id(u64),
        Email(String),
    }

    #[derive(Debug, Deserialize, Serialize, JsonSchema)]
    #[serde(rename_all = "snake_case", deny_unknown_fields)]
    pub enum Channel {
        Email {
            address: String,
        },
        Sms {
            number: String,
            country: Option<String>,
        },
        Push,
    }

    #[derive(Debug, Deserialize, Serialize, JsonSchema, Validate)]
    #[serde(deny_unknown_fields)]
    pub struct Quiet {
        #[validate(range(max = 23))]
        pub from_hour: u8,
        #[validate(range(max = 23))]
        pub to_hour: u8,
    }

    /// Notify a user.
    #[tool(risk = "low")]
    pub fn notify(
        target: Target,
        channels: Vec<Channel>,
        #[validate(nested)] quiet_hours: Option<Quiet>,
        #[validate(range(min = 0.0, max = 1.0))] urgency: f32,
        #[serde(default)] dry_run: bool,
    ) -> Result<usize, ToolError> {
        let _ = (target, quiet_hours, urgency, dry_run);
        Ok(channels.len())
    }

    #[derive(Debug, Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct L1 {
        pub l2: L2,
    }
    #[derive(Debug, Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct L2 {
        pub l3: L3,
    }
    #[derive(Debug, Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct L3 {
        pub l4: L4,
    }
    #[derive(Debug, Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct L4 {
        pub l5: L5,
    }
    #[derive(Debug, Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct L5 {
        pub l6: L6,
    }
    #[derive(Debug, Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct L6 {
        pub l7: L7,
    }
    #[derive(Debug, Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct L7 {
        pub l8: L8,
    }
    #[derive(Debug, Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct L8 {
        pub l9: L9,
    }
    #[derive(Debug, Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct L9 {
        pub l10: Vec<String>,
    }

    /// Store a deeply nested setting.
    #[tool]
    pub fn store_nested(level: L1) -> Result<bool, ToolError> {
        let _ = level;
        Ok(true)
    }

    #[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum Carrier {
        /// The postal service.
        Post,
        /// A courier, the same day.
        Courier,
        /// A drone, where the law allows.
        Drone,
    }

    pub fn carriers_today(_ctx: &CallContext) -> Vec<Carrier> {
        vec![Carrier::Post, Carrier::Courier]
    }

    /// Ship a parcel by one of today's carriers: dynamic values of a Rust enum type.
    #[tool]
    pub fn ship_parcel(
        #[one_of(carriers_today)] carrier: Carrier,
        #[one_of(carriers_today)] fallback: Option<Carrier>,
        #[one_of(carriers_today)]
        #[serde(default)]
        avoid: Vec<Carrier>,
    ) -> Result<usize, ToolError> {
        let _ = (carrier, fallback);
        Ok(avoid.len())
    }

    pub fn tools(builder: portcullis::RegistryBuilder) -> portcullis::RegistryBuilder {
        builder
            .tool(ShipParcel)
            .tool(SaveTree)
            .tool(LabelTicket)
            .tool(StoreDocument)
            .tool(ResetSecondFactor)
            .tool(Notify)
            .tool(StoreNested)
    }
}

/// Every tool of the tests and the examples, in one registry without profiles.
fn every_tool() -> Registry {
    let builder = shop::shop_tools()
        .tool(common::DeleteDatabaseRecord)
        .tool(common::PlaceOrder)
        .tool(common::TransferFunds)
        .tool(common::ListTables)
        .tool(common::SlowReport)
        .tool(common::BuggyTool)
        .tool(common::BuggyAsyncTool)
        .tool(common::ChargeCard)
        .tool(common::ScheduleDelivery)
        .tool(common::FindInvoice);
    shapes::tools(builder)
        .build()
        .expect("every tool is a valid contract")
}

/// The tools each profile refuses, with a word of the reason.
fn expected_refusals(profile: Profile) -> BTreeMap<&'static str, &'static str> {
    let strict_openai = [
        ("place_order", "map with free-form keys"),
        ("label_ticket", "map with free-form keys"),
        ("store_document", "any type"),
        ("store_nested", "nest 11 levels"),
    ];
    let strict_anthropic = [
        ("place_order", "map with free-form keys"),
        ("label_ticket", "map with free-form keys"),
        ("store_document", "any type"),
    ];
    let gemini = [
        ("save_tree", "recursion"),
        ("2fa_reset", "start with a letter"),
    ];
    let refused: &[(&str, &str)] = match profile {
        Profile::OpenAiChat { strict: true } | Profile::OpenAiResponses { strict: true } => {
            &strict_openai
        }
        Profile::Anthropic { strict: true } => &strict_anthropic,
        Profile::Gemini => &gemini,
        Profile::GeminiJsonSchema => &gemini[1..],
        _ => &[],
    };
    refused.iter().copied().collect()
}

#[test]
fn each_profile_refuses_exactly_the_shapes_its_provider_cannot_take() {
    let registry = every_tool();
    for profile in Profile::ALL {
        let refused: BTreeMap<String, String> = registry
            .contracts()
            .filter_map(|contract| profile.definition(contract).err())
            .map(|error| {
                assert_eq!(error.profile, profile);
                (error.tool, error.reason)
            })
            .collect();
        let expected = expected_refusals(profile);
        let names: Vec<&String> = refused.keys().collect();
        assert_eq!(
            names,
            expected.keys().collect::<Vec<_>>(),
            "{profile}: {refused:#?}"
        );
        for (tool, word) in expected {
            assert!(
                refused[tool].contains(word),
                "{profile} refuses {tool} for `{}`, not for {word:?}",
                refused[tool]
            );
        }
    }
}

#[test]
fn the_providers_sdks_accept_every_export() {
    let registry = every_tool();
    let cases: Vec<Value> = Profile::ALL
        .into_iter()
        .flat_map(|profile| {
            registry
                .contracts()
                .filter_map(move |contract| {
                    let definition = profile.definition(contract).ok()?;
                    Some(json!({"profile": profile.name(), "tool": contract.name(),
                        "definition": definition}))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    // The tools with dynamic enums as exported for a caller, with their current values.
    let shop = Profile::ALL
        .into_iter()
        .fold(
            shop::shop_tools().tool(shapes::ShipParcel),
            |builder, profile| builder.profile(profile),
        )
        .build()
        .unwrap();
    let caller = shop::shop_admin().with_tenant("outdoor");
    let mut cases = cases;
    for profile in Profile::ALL {
        let tools = shop.export(&caller, profile).unwrap();
        let definitions = match profile {
            Profile::Gemini | Profile::GeminiJsonSchema => tools[0]["functionDeclarations"].clone(),
            _ => tools,
        };
        let definitions = definitions.as_array().unwrap();
        assert_eq!(
            definitions.len(),
            shop.contracts().count(),
            "{profile} left a tool out for a caller who may use them all"
        );
        for definition in definitions {
            cases.push(
                json!({"profile": profile.name(), "tool": "export for a caller",
                "definition": definition}),
            );
        }
    }
    assert!(cases.len() > 100, "only {} cases", cases.len());

    let Ok(python) = std::env::var("PORTCULLIS_REFEREE_PYTHON") else {
        eprintln!(
            "PORTCULLIS_REFEREE_PYTHON is not set: the SDK referees did not run \
             (`bash .ci/run` installs them and sets it)"
        );
        return;
    };
    let directory = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exports = directory.join("conformance-exports.json");
    std::fs::write(&exports, serde_json::to_vec_pretty(&cases).unwrap()).unwrap();
    let referee = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/conformance/referee.py");
    let output = Command::new(&python)
        .arg(referee)
        .arg(&exports)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {python}: {error}"));
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the referees refused some exports:\n{report}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(&report).expect("the referee reports JSON");
    assert_eq!(report["checked"], json!(cases.len()));
}

#[test]
fn each_unsupported_shape_refuses_the_build_naming_tool_and_reason() {
    let strict_chat = Profile::OpenAiChat { strict: true };
    let strict_responses = Profile::OpenAiResponses { strict: true };
    let strict_anthropic = Profile::Anthropic { strict: true };
    let cases = [
        (
            Registry::builder().tool(shapes::LabelTicket),
            strict_chat,
            "label_ticket",
            "map with free-form keys",
        ),
        (
            Registry::builder().tool(shapes::StoreDocument),
            strict_responses,
            "store_document",
            "any type",
        ),
        (
            Registry::builder().tool(shapes::StoreNested),
            strict_chat,
            "store_nested",
            "nest 11 levels",
        ),
        (
            Registry::builder().tool(shapes::LabelTicket),
            strict_anthropic,
            "label_ticket",
            "map with free-form keys",
        ),
        (
            Registry::builder().tool(shapes::StoreDocument),
            strict_anthropic,
            "store_document",
            "any type",
        ),
        (
            Registry::builder().tool(shapes::SaveTree),
            Profile::Gemini,
            "save_tree",
            "recursion",
        ),
        (
            Registry::builder().tool(shapes::ResetSecondFactor),
            Profile::GeminiJsonSchema,
            "2fa_reset",
            "start with a letter",
        ),
    ];
    for (builder, profile, tool, word) in cases {
        let error = builder.profile(profile).build().unwrap_err();
        let message = error.to_string();
        let portcullis::BuildError::Profile(error) = error else {
            panic!("{profile} {tool}: expected a profile error, got {error:?}");
        };
        assert_eq!((error.profile, error.tool.as_str()), (profile, tool));
        assert!(error.reason.contains(word), "{message}");
        assert!(
            message.starts_with(&format!("profile `{profile}` cannot take tool `{tool}`: ")),
            "{message}"
        );
    }
}
