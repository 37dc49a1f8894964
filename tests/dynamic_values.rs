//! `#[one_of(function)]`: arguments whose allowed values come from a function of the call's
//! context. The export shows the values the caller may use now, and a call with any other value
//! is refused with `invalid_value`, on every path a call takes.

use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis::{ApprovalDecision, Invocation};
use serde_json::{Value, json};

/// Each tenant sells its own products, and a tenant unknown here sells none.
fn active_products(ctx: &CallContext) -> Vec<&'static str> {
    match ctx.tenant() {
        Some("acme") => vec!["p-anvil", "p-rocket"],
        Some("globex") => vec!["p-laser"],
        _ => Vec::new(),
    }
}

fn coupons(_ctx: &CallContext) -> Vec<String> {
    vec!["SPRING".to_owned(), "WELCOME".to_owned()]
}

fn pack_sizes(_ctx: &CallContext) -> Vec<u32> {
    vec![6, 12]
}

/// Order one of the tenant's active products.
#[tool(risk = "medium")]
fn order_product(
    #[one_of(active_products)] product_id: String,
    quantity: u32,
) -> Result<String, ToolError> {
    Ok(format!("{quantity} x {product_id}"))
}

/// Put several products on sale, with an optional coupon, in packs of a known size.
#[tool(risk = "medium")]
fn start_sale(
    #[one_of(active_products)]
    #[serde(rename = "productIds")]
    product_ids: Vec<String>,
    #[one_of(coupons)] coupon: Option<String>,
    #[one_of(pack_sizes)] pack_size: u32,
) -> Result<usize, ToolError> {
    let _ = (coupon, pack_size);
    Ok(product_ids.len())
}

/// Discontinue a product: a human approves first.
#[tool(
    risk = "high",
    irreversible = "the catalogue is republished",
    approval = "required"
)]
fn discontinue_product(#[one_of(active_products)] product_id: String) -> Result<String, ToolError> {
    Ok(product_id)
}

fn registry() -> Registry {
    Registry::builder()
        .tool(OrderProduct)
        .tool(StartSale)
        .tool(DiscontinueProduct)
        .build()
        .expect("valid contracts")
}

fn tenant(name: &str) -> CallContext {
    CallContext::new("alice").with_tenant(name)
}

async fn dispatch(ctx: &CallContext, tool: &str, arguments: Value) -> Outcome {
    registry()
        .dispatch(ctx, &ToolCall::new("call_1", tool, arguments.to_string()))
        .await
}

fn input_schema(ctx: &CallContext, tool: &str) -> Value {
    let exported = registry().export_json_schema(ctx);
    exported
        .as_array()
        .and_then(|tools| tools.iter().find(|listed| listed["name"] == tool))
        .map(|listed| listed["input_schema"].clone())
        .unwrap_or_else(|| panic!("`{tool}` is not exported: {exported}"))
}

/// Asserts that the outcome is an `invalid_value` refusal at `path`, and returns it.
fn invalid_value(outcome: &Outcome, path: &str) -> Rejection {
    let rejection = outcome
        .rejection()
        .unwrap_or_else(|| panic!("expected invalid_value, got {outcome:?}"))
        .clone();
    assert_eq!(
        (rejection.code(), rejection.path()),
        (RejectionCode::InvalidValue, Some(path)),
        "{rejection}"
    );
    rejection
}

#[test]
fn the_export_shows_each_tenant_its_own_values() {
    let acme = input_schema(&tenant("acme"), "order_product");
    assert_eq!(
        acme["properties"]["product_id"],
        json!({"type": "string", "enum": ["p-anvil", "p-rocket"]})
    );
    let globex = input_schema(&tenant("globex"), "order_product");
    assert_eq!(
        globex["properties"]["product_id"]["enum"],
        json!(["p-laser"])
    );
    assert!(
        globex["properties"]["quantity"].get("enum").is_none(),
        "only the marked argument is restricted"
    );
    // The contract keeps the static schema; only the export for a context has the values.
    let contract = OrderProduct.contract();
    assert!(
        contract.input_schema()["properties"]["product_id"]
            .get("enum")
            .is_none()
    );
    assert_eq!(
        contract.dynamic_arguments().collect::<Vec<_>>(),
        ["product_id"]
    );
}

#[test]
fn lists_carry_the_values_on_their_items_and_options_allow_null() {
    let schema = input_schema(&tenant("acme"), "start_sale");
    let properties = &schema["properties"];
    assert_eq!(properties["productIds"]["type"], "array");
    assert_eq!(
        properties["productIds"]["items"],
        json!({"type": "string", "enum": ["p-anvil", "p-rocket"]})
    );
    assert_eq!(properties["coupon"]["type"], json!(["string", "null"]));
    assert_eq!(
        properties["coupon"]["enum"],
        json!(["SPRING", "WELCOME", null])
    );
    assert_eq!(properties["pack_size"]["enum"], json!([6, 12]));
}

#[tokio::test]
async fn a_value_outside_the_tenants_values_is_refused() {
    let acme = tenant("acme");
    let outcome = dispatch(
        &acme,
        "order_product",
        json!({"product_id": "p-laser", "quantity": 1}),
    )
    .await;
    let rejection = invalid_value(&outcome, "/product_id");
    assert_eq!(
        rejection.message(),
        "`p-laser` is not one of the allowed values"
    );
    assert_eq!(
        rejection.hint(),
        Some("the allowed values are `p-anvil`, `p-rocket`")
    );
    assert!(rejection.retryable());

    // The same product is the other tenant's to order.
    let globex = tenant("globex");
    let outcome = dispatch(
        &globex,
        "order_product",
        json!({"product_id": "p-laser", "quantity": 2}),
    )
    .await;
    assert_eq!(outcome.output(), Some(&json!("2 x p-laser")));
}

#[tokio::test]
async fn a_caller_with_no_allowed_value_is_told_so() {
    let outcome = dispatch(
        &tenant("initech"),
        "order_product",
        json!({"product_id": "p-anvil", "quantity": 1}),
    )
    .await;
    let rejection = invalid_value(&outcome, "/product_id");
    assert!(!rejection.retryable(), "no other value would do");
    assert!(
        rejection
            .hint()
            .is_some_and(|hint| hint.contains("no allowed value")),
        "{rejection}"
    );
}

#[tokio::test]
async fn a_value_inside_completes() {
    let outcome = dispatch(
        &tenant("acme"),
        "order_product",
        json!({"product_id": "p-rocket", "quantity": 3}),
    )
    .await;
    assert_eq!(outcome.output(), Some(&json!("3 x p-rocket")));
}

#[tokio::test]
async fn an_absent_or_null_option_is_not_checked() {
    let acme = tenant("acme");
    for arguments in [
        json!({"productIds": ["p-anvil"], "pack_size": 6}),
        json!({"productIds": ["p-anvil"], "coupon": null, "pack_size": 6}),
        json!({"productIds": ["p-anvil"], "coupon": "SPRING", "pack_size": 6}),
    ] {
        let outcome = dispatch(&acme, "start_sale", arguments.clone()).await;
        assert_eq!(outcome.output(), Some(&json!(1)), "{arguments}");
    }
    let outcome = dispatch(
        &acme,
        "start_sale",
        json!({"productIds": ["p-anvil"], "coupon": "FREE", "pack_size": 6}),
    )
    .await;
    invalid_value(&outcome, "/coupon");
}

#[tokio::test]
async fn every_element_of_a_list_is_checked() {
    let acme = tenant("acme");
    let outcome = dispatch(
        &acme,
        "start_sale",
        json!({"productIds": ["p-anvil", "p-rocket"], "pack_size": 12}),
    )
    .await;
    assert_eq!(outcome.output(), Some(&json!(2)));
    let outcome = dispatch(
        &acme,
        "start_sale",
        json!({"productIds": ["p-anvil", "p-laser", "p-rocket"], "pack_size": 12}),
    )
    .await;
    let rejection = invalid_value(&outcome, "/productIds/1");
    assert_eq!(
        rejection.message(),
        "`p-laser` is not one of the allowed values"
    );
    let outcome = dispatch(
        &acme,
        "start_sale",
        json!({"productIds": [], "pack_size": 6}),
    )
    .await;
    assert_eq!(
        outcome.output(),
        Some(&json!(0)),
        "an empty list holds no wrong value"
    );
}

#[tokio::test]
async fn the_decoded_value_is_compared_not_the_text() {
    let acme = tenant("acme");
    let call = ToolCall::new(
        "call_1",
        "start_sale",
        r#"{"productIds": ["p-anvil"], "pack_size": 12.0}"#,
    );
    let outcome = registry().dispatch(&acme, &call).await;
    assert_eq!(outcome.output(), Some(&json!(1)), "12.0 is the integer 12");
    let outcome = dispatch(
        &acme,
        "start_sale",
        json!({"productIds": [], "pack_size": 7}),
    )
    .await;
    let rejection = invalid_value(&outcome, "/pack_size");
    assert_eq!(rejection.hint(), Some("the allowed values are `6`, `12`"));
}

#[tokio::test]
async fn edited_arguments_are_checked_again() {
    let registry = registry();
    let acme = tenant("acme");
    let call = ToolCall::new(
        "call_1",
        "discontinue_product",
        json!({"product_id": "p-anvil"}),
    );
    let outcome = registry.dispatch(&acme, &call).await;
    let ticket = outcome.ticket().expect("a human approves first").clone();
    let edit = ApprovalDecision::Edit {
        reviewer: "rita".into(),
        arguments: json!({"product_id": "p-laser"}),
    };
    let outcome = registry.resume(&ticket.id, edit).await;
    invalid_value(&outcome, "/product_id");
}

#[tokio::test]
async fn transactions_check_the_values_too() {
    let registry = registry();
    let acme = tenant("acme");
    let mut transaction = registry.transaction(&acme);
    let outcome = transaction
        .dispatch(&ToolCall::new(
            "call_1",
            "order_product",
            json!({"product_id": "p-laser", "quantity": 1}),
        ))
        .await;
    invalid_value(&outcome, "/product_id");
    transaction.commit().await;
}

/// Arguments whose `Serialize` leaves the restricted argument out of the canonical arguments.
#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
struct UnreadableArgs {
    #[serde(skip_serializing)]
    product_id: String,
    quantity: u32,
}

/// A hand-written tool that restricts an argument in its contract but does not write it.
struct Unreadable(ToolContract);

impl Tool for Unreadable {
    type Args = UnreadableArgs;
    type Output = ();

    fn contract(&self) -> &ToolContract {
        &self.0
    }

    fn call<'a>(&'a self, _: &'a CallContext, args: UnreadableArgs) -> Invocation<'a, ()> {
        let _ = (args.product_id, args.quantity);
        Invocation::Ready(Ok(()))
    }
}

#[tokio::test]
async fn a_value_the_tool_cannot_show_is_refused() {
    fn every_product(_: &CallContext) -> Vec<Value> {
        vec![json!("p-anvil")]
    }
    let contract = ToolContract::builder(
        "order_unread",
        "Orders without showing its arguments.",
        OrderProduct.contract().input_schema().clone(),
    )
    .one_of("product_id", every_product)
    .build();
    let registry = Registry::builder()
        .tool(Unreadable(contract))
        .build()
        .unwrap();
    let call = ToolCall::new(
        "call_1",
        "order_unread",
        json!({"product_id": "p-anvil", "quantity": 1}),
    );
    let outcome = registry.dispatch(&tenant("acme"), &call).await;
    let rejection = invalid_value(&outcome, "/product_id");
    assert!(!rejection.retryable());
}

fn house_brand() -> String {
    "p-house".to_owned()
}

/// Arguments whose `Deserialize` reads a key the schema does not list.
#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
struct AliasedArgs {
    #[serde(alias = "sku", default = "house_brand")]
    product_id: String,
}

struct Aliased(ToolContract);

impl Tool for Aliased {
    type Args = AliasedArgs;
    type Output = String;

    fn contract(&self) -> &ToolContract {
        &self.0
    }

    fn call<'a>(&'a self, _: &'a CallContext, args: AliasedArgs) -> Invocation<'a, String> {
        Invocation::Ready(Ok(args.product_id))
    }
}

/// A value sent under a key the schema does not list (a serde alias) is refused: the schema
/// shown to the model does not have it. Were it accepted, it would be the model's choice,
/// not a default.
#[tokio::test]
async fn a_value_sent_under_an_alias_is_not_taken_for_a_default() {
    let contract = ToolContract::builder(
        "order_aliased",
        "Orders a product, the house brand unless told otherwise.",
        json!({"type": "object", "additionalProperties": false,
               "properties": {"product_id": {"type": "string", "default": "p-house"}}}),
    )
    .one_of("product_id", |ctx| {
        active_products(ctx).into_iter().map(Value::from).collect()
    })
    .build();
    let registry = Registry::builder().tool(Aliased(contract)).build().unwrap();
    let acme = tenant("acme");
    let aliased = ToolCall::new("call_1", "order_aliased", json!({"sku": "p-laser"}));
    let outcome = registry.dispatch(&acme, &aliased).await;
    let rejection = outcome.rejection().expect("refused");
    assert_eq!(
        (rejection.code(), rejection.path()),
        (RejectionCode::UnknownArgument, Some("/sku"))
    );
    let defaulted = ToolCall::new("call_2", "order_aliased", json!({}));
    let outcome = registry.dispatch(&acme, &defaulted).await;
    assert_eq!(outcome.output(), Some(&json!("p-house")));
}

#[test]
fn a_hand_written_contract_names_an_existing_argument() {
    fn nothing(_: &CallContext) -> Vec<Value> {
        Vec::new()
    }
    let contract = ToolContract::builder(
        "order_unread",
        "Orders.",
        OrderProduct.contract().input_schema().clone(),
    )
    .one_of("productId", nothing)
    .build();
    let error = contract.check().unwrap_err();
    assert!(error.reason.contains("`productId`"), "{error}");
}

/// What the exported schema of a caller accepts, the gates accept for that caller, and what it
/// refuses, they refuse (the parity test of `tests/parity.rs`, for the schema of a context).
#[tokio::test]
async fn the_export_for_a_context_and_the_gates_agree() {
    let cases = [
        json!({"productIds": ["p-anvil"], "pack_size": 6}),
        json!({"productIds": ["p-anvil", "p-rocket"], "coupon": "SPRING", "pack_size": 12}),
        json!({"productIds": ["p-laser"], "pack_size": 6}),
        json!({"productIds": ["p-anvil", "p-anvil"], "coupon": null, "pack_size": 12.0}),
        json!({"productIds": [], "coupon": "FREE", "pack_size": 6}),
        json!({"productIds": [], "pack_size": 7}),
        json!({"productIds": [null], "pack_size": 6}),
        json!({"productIds": ["p-anvil"], "coupon": "SPRING", "pack_size": "6"}),
    ];
    let registry = registry();
    for name in ["acme", "globex"] {
        let ctx = tenant(name);
        let schema = input_schema(&ctx, "start_sale");
        let validator = jsonschema::draft202012::new(&schema).expect("the schema compiles");
        for (index, arguments) in cases.iter().enumerate() {
            // One id per call: a repeated id would get the first call's outcome back.
            let call = ToolCall::new(format!("{name}_{index}"), "start_sale", arguments.clone());
            let outcome = registry.dispatch(&ctx, &call).await;
            assert_eq!(
                outcome.output().is_some(),
                validator.is_valid(arguments),
                "tenant {name}, {arguments}: {outcome:?}"
            );
        }
    }
}

/// A `#[one_of]` function that panics (its catalogue is unreachable, say) takes only its own
/// tool down: the export leaves that tool out and lists the others, and a call to it is
/// refused with `tool_panicked` rather than unwinding through the agent.
#[tokio::test]
async fn a_panicking_values_function_takes_only_its_own_tool_down() {
    fn unreachable_catalogue(_: &CallContext) -> Vec<String> {
        panic!("the catalogue service is unreachable")
    }

    /// Restock a product of the catalogue.
    #[tool(risk = "medium")]
    fn restock(#[one_of(unreachable_catalogue)] product_id: String) -> Result<String, ToolError> {
        Ok(product_id)
    }

    let registry = Registry::builder()
        .tool(Restock)
        .tool(OrderProduct)
        .profile(Profile::Anthropic { strict: false })
        .build()
        .expect("the functions are not called at build");
    let ctx = tenant("acme");

    let exported = registry
        .export(&ctx, Profile::Anthropic { strict: false })
        .expect("the other tools still export");
    assert_eq!(names(&exported), ["order_product"]);
    assert_eq!(names(&registry.export_json_schema(&ctx)), ["order_product"]);

    let call = ToolCall::new("call_1", "restock", json!({"product_id": "p-anvil"}));
    let outcome = registry.dispatch(&ctx, &call).await;
    assert_eq!(outcome.code(), Some(RejectionCode::ToolPanicked));
}

/// The names of the tools of an export, in the plain or OpenAI Chat format.
fn names(tools: &Value) -> Vec<&str> {
    tools
        .as_array()
        .expect("a list")
        .iter()
        .map(|tool| {
            tool.get("function").unwrap_or(tool)["name"]
                .as_str()
                .expect("a name")
        })
        .collect()
}

/// A caller with no allowed value for a dynamic argument could not make one call pass: the
/// export leaves the tool out rather than show an empty `enum`, which providers refuse.
#[test]
fn a_tool_with_no_allowed_value_is_left_out_of_the_export() {
    let registry = Registry::builder()
        .tool(OrderProduct)
        .tool(StartSale)
        .profile(Profile::OpenAiChat { strict: true })
        .build()
        .expect("valid contracts");
    let initech = tenant("initech");
    assert!(names(&registry.export_json_schema(&initech)).is_empty());
    let exported = registry
        .export(&initech, Profile::OpenAiChat { strict: true })
        .expect("a declared profile");
    assert_eq!(exported, json!([]));
    let acme = registry
        .export(&tenant("acme"), Profile::OpenAiChat { strict: true })
        .expect("a declared profile");
    assert_eq!(names(&acme), ["order_product", "start_sale"]);
}

#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Carrier {
    /// The postal service.
    Post,
    /// A courier, the same day.
    Courier,
    /// A drone, where the law allows.
    Drone,
}

fn carriers_today(_ctx: &CallContext) -> Vec<Carrier> {
    vec![Carrier::Post, Carrier::Courier]
}

fn single() -> u32 {
    1
}

/// Ship a product by one of today's carriers, in packs of one unless a known size is asked.
#[tool(risk = "medium")]
fn ship(
    #[one_of(carriers_today)] carrier: Carrier,
    #[one_of(carriers_today)] fallback: Option<Carrier>,
    #[one_of(pack_sizes)]
    #[serde(default = "single")]
    pack_size: u32,
) -> Result<String, ToolError> {
    Ok(format!("{carrier:?} or {fallback:?}, packs of {pack_size}"))
}

/// A dynamic argument of a Rust enum type is a `$ref` in the static schema; the export shows
/// it as a schema of its own with today's values, which every profile takes.
#[test]
fn an_enum_argument_shows_its_current_values_in_every_profile() {
    let registry = Profile::ALL
        .into_iter()
        .fold(Registry::builder().tool(Ship), |builder, profile| {
            builder.profile(profile)
        })
        .build()
        .expect("every profile takes the tool");
    let ctx = tenant("acme");
    let schema = &registry.export_json_schema(&ctx)[0]["input_schema"];
    assert_eq!(
        schema["properties"]["carrier"],
        json!({"type": "string", "enum": ["post", "courier"]})
    );
    assert_eq!(
        schema["properties"]["fallback"],
        json!({"type": ["string", "null"], "enum": ["post", "courier", null]})
    );
    for profile in Profile::ALL {
        let exported = registry.export(&ctx, profile).expect("a declared profile");
        let text = exported.to_string();
        assert!(
            text.contains(r#"["post","courier"]"#) && !text.contains("drone"),
            "{profile}: {exported}"
        );
    }
}

/// A defaulted dynamic argument the model leaves out takes the default the tool's author
/// chose, even one the model may not choose; sent explicitly, the same value is refused.
#[tokio::test]
async fn a_default_is_the_authors_choice_not_the_models() {
    let registry = Registry::builder()
        .tool(Ship)
        .profile(Profile::OpenAiChat { strict: true })
        .build()
        .expect("valid contracts");
    let ctx = tenant("acme");
    for (id, arguments) in [
        json!({"carrier": "post"}),
        json!({"carrier": "post", "fallback": null, "pack_size": null}),
    ]
    .into_iter()
    .enumerate()
    {
        let call = ToolCall::new(format!("call_{id}"), "ship", arguments.clone());
        let outcome = registry.dispatch(&ctx, &call).await;
        assert_eq!(
            outcome.output(),
            Some(&json!("Post or None, packs of 1")),
            "{arguments}"
        );
    }
    let call = ToolCall::new("call_9", "ship", json!({"carrier": "post", "pack_size": 1}));
    invalid_value(&registry.dispatch(&ctx, &call).await, "/pack_size");
    let call = ToolCall::new("call_10", "ship", json!({"carrier": "drone"}));
    invalid_value(&registry.dispatch(&ctx, &call).await, "/carrier");
}

fn every_sku(_ctx: &CallContext) -> Vec<u32> {
    (0..1_001).collect()
}

/// Audit the stock of one SKU.
#[tool(read_only)]
fn audit_stock(#[one_of(every_sku)] sku: u32) -> Result<u32, ToolError> {
    Ok(sku)
}

/// Values beyond what a provider takes (strict OpenAI's 1,000 `enum` values) cost only their
/// own tool: the export leaves it out and lists the others.
#[test]
fn values_beyond_a_providers_limits_take_only_their_own_tool_out() {
    let strict = Profile::OpenAiChat { strict: true };
    let relaxed = Profile::OpenAiChat { strict: false };
    let registry = Registry::builder()
        .tool(AuditStock)
        .tool(OrderProduct)
        .profile(strict)
        .profile(relaxed)
        .build()
        .expect("the values are not asked for at build");
    let ctx = tenant("acme");
    let names_in = |profile| -> Vec<String> {
        let exported = registry.export(&ctx, profile).expect("a declared profile");
        names(&exported).into_iter().map(str::to_owned).collect()
    };
    assert_eq!(names_in(strict), ["order_product"]);
    assert_eq!(names_in(relaxed), ["audit_stock", "order_product"]);
}
