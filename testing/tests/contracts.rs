//! The kit against tools with a tenant, an environment, roles and declared sources: who calls,
//! from where, and where a value came from, are attacked as well as what is sent.

use portcullis::prelude::*;
use portcullis_testing::{Got, red_team};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Environment {
    Development,
    Staging,
    Production,
}

/// Pay a supplier of the caller's tenant.
#[tool(
    risk = "high",
    role = "payments",
    irreversible = "payments settle at once"
)]
fn pay_supplier(
    #[tenant] tenant_id: String,
    #[validate(length(min = 2, max = 40))] supplier: String,
    #[validate(range(min = 1, max = 1_000_000))] amount_cents: u64,
    #[validate(length(max = 140))] memo: Option<String>,
) -> Result<String, ToolError> {
    let _ = memo;
    Ok(format!("{amount_cents} to {supplier} of {tenant_id}"))
}

/// Flush the cache of the environment the agent works in.
#[tool(environments = ["staging", "production"], role = "ops", idempotent)]
fn flush_cache(
    #[environment] environment: Environment,
    #[tenant] tenant: String,
) -> Result<bool, ToolError> {
    let _ = (environment, tenant);
    Ok(true)
}

#[tokio::test]
async fn who_calls_and_from_where_is_attacked_too() {
    let payer = CallContext::new("pam")
        .with_roles(["payments", "ops"])
        .with_tenant("t_001")
        .with_environment("staging");
    let report = red_team(Registry::builder().tool(PaySupplier).tool(FlushCache))
        .caller("payer", payer)
        .run()
        .await;
    report.assert_all_refused();
    let expected: Vec<_> = report
        .findings()
        .iter()
        .map(|finding| (finding.tool.as_str(), finding.expected.to_string()))
        .collect();
    for wanted in [
        ("pay_supplier", "tenant_mismatch"),
        ("pay_supplier", "unknown_tool"),
        ("pay_supplier", "call_id_reused"),
        ("flush_cache", "environment_mismatch"),
        ("flush_cache", "tenant_mismatch"),
    ] {
        let wanted = (wanted.0, wanted.1.to_owned());
        assert!(expected.contains(&wanted), "{wanted:?} in {report}");
    }
}

/// Send money.
#[tool(risk = "high", irreversible = "money leaves", on_untrusted = "approve")]
fn send_money(
    #[from(user, trusted)] recipient: String,
    amount_cents: u64,
    #[from(user, trusted, entities)] subject: String,
) -> Result<String, ToolError> {
    Ok(format!("{amount_cents} to {recipient}: {subject}"))
}

/// Change the password.
#[tool(
    risk = "high",
    irreversible = "the old one is gone",
    after_untrusted = "refuse"
)]
fn update_password(
    #[from(user)]
    #[validate(length(min = 8))]
    password: String,
) -> Result<(), ToolError> {
    let _ = password;
    Ok(())
}

#[tokio::test]
async fn a_value_only_an_untrusted_output_named_is_attacked_too() {
    let alice = CallContext::new("alice").with_request(
        "Pay my rent, 95000 cents, to GB29NWBK60161331926819, and set my password to \
         correct-horse-battery",
    );
    let report = red_team(Registry::builder().tool(SendMoney).tool(UpdatePassword))
        .caller("alice", alice)
        .valid_call(
            "send_money",
            serde_json::json!({"recipient": "GB29NWBK60161331926819", "amount_cents": 95000, "subject": "rent"})
                .as_object()
                .unwrap()
                .clone(),
        )
        .valid_call(
            "update_password",
            serde_json::json!({"password": "correct-horse-battery"})
                .as_object()
                .unwrap()
                .clone(),
        )
        .run()
        .await;
    let untrusted: Vec<_> = report
        .findings()
        .iter()
        .filter(|finding| finding.case.contains("untrusted"))
        .map(|finding| {
            (
                finding.tool.as_str(),
                finding.case.as_str(),
                finding.expected,
                finding.got,
            )
        })
        .collect();
    report.assert_all_refused();
    assert_eq!(
        untrusted,
        [
            (
                "send_money",
                "`recipient` only an untrusted output named",
                Got::Waits,
                Got::Waits
            ),
            (
                "update_password",
                "`password` only an untrusted output named",
                Got::Refused(RejectionCode::UntrustedValue),
                Got::Refused(RejectionCode::UntrustedValue)
            ),
            (
                "update_password",
                "a call in a task that read an untrusted output",
                Got::Refused(RejectionCode::UntrustedTask),
                Got::Refused(RejectionCode::UntrustedTask)
            ),
        ]
    );
}

/// Convert an amount at a rate, with a fee.
#[tool(risk = "medium")]
fn convert(
    #[validate(range(exclusive_min = 0.0, exclusive_max = 1.0))] fee_rate: f64,
    #[validate(range(min = 0.5, max = 2.5))] rate: f64,
    #[validate(range(min = -100, max = 100))] offset: i32,
    #[validate(range(exclusive_min = 0, exclusive_max = 1000))] units: i64,
    note: Option<String>,
) -> Result<f64, ToolError> {
    let _ = note;
    Ok(f64::from(offset) + units as f64 * rate * (1.0 - fee_rate))
}

#[tokio::test]
async fn fractions_signed_integers_and_exclusive_bounds_are_attacked_too() {
    let report = red_team(Registry::builder().tool(Convert))
        .caller("anyone", CallContext::new("anyone"))
        .run()
        .await;
    report.assert_all_refused();
    let cases: Vec<&str> = report
        .findings()
        .iter()
        .map(|finding| finding.case.as_str())
        .collect();
    for case in [
        "`fee_rate`: its exclusiveMaximum itself (1)",
        "`fee_rate`: its exclusiveMinimum itself (0)",
        "`rate`: just above its maximum (2.5)",
        "`rate`: one below its minimum (0.5)",
        "`offset`: one below its minimum (-101)",
        "`offset`: the smallest its type holds (-2147483648)",
        "`units`: one above its maximum (1000)",
        "`units`: one below its minimum (0)",
    ] {
        assert!(cases.contains(&case), "{case} in {cases:#?}");
    }
}

/// How a report is delivered.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Delivery {
    /// Kept for later.
    Later,
    Mail {
        #[validate(length(min = 3, max = 80))]
        to: String,
    },
}

/// Where a report goes: a person or a channel.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(untagged, deny_unknown_fields)]
pub enum Target {
    Person { person: u64 },
    Channel { channel: String },
}

/// How loud: documented variants export as a `oneOf` of constants.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Quiet.
    Low,
    /// Loud.
    High,
}

/// Send a report.
#[tool(risk = "medium")]
fn send_report(
    delivery: Delivery,
    target: Target,
    level: Level,
    grade: char,
    #[validate(range(min = 0.5, max = 2.0))] weight: f32,
    scale: f32,
    #[validate(length(min = 2, max = 4))] pages: Vec<u8>,
    is_admin: bool,
) -> Result<String, ToolError> {
    let _ = (
        delivery, target, level, grade, weight, scale, pages, is_admin,
    );
    Ok("sent".into())
}

/// Ping.
#[tool(read_only, idempotent)]
fn ping() -> Result<String, ToolError> {
    Ok("pong".into())
}

/// Get one user.
#[tool(read_only)]
fn get_user(id: u64) -> Result<u64, ToolError> {
    Ok(id)
}

/// Get users.
#[tool(read_only)]
fn get_users(ids: Vec<u64>) -> Result<usize, ToolError> {
    Ok(ids.len())
}

#[tokio::test]
async fn odd_shapes_get_no_false_finding() {
    let valid = serde_json::json!({
        "delivery": "later", "target": {"person": 7}, "level": "low", "grade": "a",
        "weight": 1.0, "scale": 1.0, "pages": [1, 2], "is_admin": false
    });
    let report = red_team(
        Registry::builder()
            .tool(SendReport)
            .tool(Ping)
            .tool(GetUser)
            .tool(GetUsers),
    )
    .caller("anyone", CallContext::new("anyone"))
    .valid_call("send_report", valid.as_object().unwrap().clone())
    .run()
    .await;
    report.assert_all_refused();
    let per_tool = report.cases_by_tool();
    assert!(per_tool["ping"] > 30, "{per_tool:?}");
    let cases: Vec<&str> = report
        .findings()
        .iter()
        .map(|finding| finding.case.as_str())
        .collect();
    assert!(
        cases.contains(&"`level`: `low` with another case, outside its values"),
        "{cases:#?}"
    );
    // `get_users` is a real tool, not a look-alike of `get_user`.
    let plural = |finding: &&portcullis_testing::Finding| {
        finding.tool == "get_user" && finding.case == "the tool named in the plural"
    };
    assert!(!report.findings().iter().any(|finding| plural(&finding)));
}

#[tokio::test]
async fn a_registry_where_null_means_absent_gets_no_false_finding() {
    let report = red_team(
        Registry::builder()
            .tool(PaySupplier)
            .profile(portcullis::export::Profile::OpenAiChat { strict: true }),
    )
    .caller(
        "payer",
        CallContext::new("pam")
            .with_roles(["payments"])
            .with_tenant("t_001"),
    )
    .run()
    .await;
    report.assert_all_refused();
}
