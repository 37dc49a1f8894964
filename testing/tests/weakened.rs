//! A deliberately weakened shop: the kit reports exactly the cases the weakening lets through.

#[path = "../../examples/shop/mod.rs"]
mod shop;

use portcullis::prelude::*;
use portcullis::{Decision, Invocation, PolicyError, PolicyRequest, ToolContract};
use portcullis_testing::{Got, red_team};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use validator::Validate;

/// A policy that allows everything, where the shop's refuses embargoed countries.
fn allow_everything(_: &PolicyRequest<'_>) -> Result<Decision, PolicyError> {
    Ok(Decision::Allow)
}

#[tokio::test]
async fn a_policy_that_allows_everything_lets_exactly_the_embargo_cases_through() {
    let report = red_team(shop::shop_tools().policy(allow_everything))
        .caller("admin", shop::shop_admin())
        .corpus(include_str!("shop_corpus.jsonl"))
        .run()
        .await;
    let through: Vec<_> = report
        .failures()
        .map(|finding| (finding.tool.as_str(), finding.case.as_str(), finding.got))
        .collect();
    let passed = Got::Refused(RejectionCode::DryRun);
    assert_eq!(
        through,
        [
            (
                "update_shipping_address",
                "a delivery to an embargoed country",
                passed
            ),
            (
                "update_shipping_address",
                "an embargoed country in lower case",
                passed
            ),
        ],
        "{report}"
    );
    let table = report.to_string();
    assert!(table.starts_with("2 of "), "{table}");
    assert!(
        table.contains("| update_shipping_address | admin | a delivery to an embargoed country | policy_denied | passed every gate | authorize |"),
        "{table}"
    );
}

/// A refund's arguments with no validation at all: the bound the schema below declares is in
/// no `#[validate]`.
#[derive(Debug, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct LooseRefund {
    payment_id: String,
    amount_cents: u64,
}

/// A hand-written refund tool whose contract shows the model a bound its arguments' type does
/// not check.
struct HandWrittenRefund(ToolContract);

impl Tool for HandWrittenRefund {
    type Args = LooseRefund;
    type Output = String;

    fn contract(&self) -> &ToolContract {
        &self.0
    }

    fn call<'a>(&'a self, _: &'a CallContext, args: LooseRefund) -> Invocation<'a, String> {
        Invocation::Ready(Ok(format!("refunded {}", args.amount_cents)))
    }
}

#[tokio::test]
async fn a_bound_missing_from_validation_but_left_in_the_schema_still_holds() {
    let schema = json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "payment_id": {"type": "string", "minLength": 5, "maxLength": 40},
            "amount_cents": {"type": "integer", "format": "uint64", "minimum": 1, "maximum": 500000}
        },
        "required": ["payment_id", "amount_cents"]
    });
    let contract = ToolContract::builder("refund", "Refund a payment.", schema)
        .risk(Risk::High)
        .roles(["billing"])
        .irreversible("refunds settle at once")
        .build();
    let report = red_team(Registry::builder().tool(HandWrittenRefund(contract)))
        .caller("billing", CallContext::new("bo").with_roles(["billing"]))
        .run()
        .await;
    // The gates hold a call to the schema the model was shown, not only to the type's own
    // checks: the weakened validation leaves no hole, and the kit finds none.
    report.assert_all_refused();
    let bounds: Vec<_> = report
        .findings()
        .iter()
        .filter(|finding| finding.case == "`amount_cents`: one above its maximum (500001)")
        .map(|finding| finding.got)
        .collect();
    assert_eq!(
        bounds,
        [Got::Refused(RejectionCode::ConstraintViolation)],
        "{report}"
    );
}
