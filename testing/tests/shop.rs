//! The kit against the example shop: every hostile case it writes gets its refusal.

#[path = "../../examples/shop/mod.rs"]
mod shop;

use portcullis_testing::red_team;

#[tokio::test]
async fn every_hostile_case_against_the_shop_is_refused() {
    let report = red_team(shop::shop_tools().policy(shop::embargo))
        .caller("admin", shop::shop_admin())
        .corpus(include_str!("shop_corpus.jsonl"))
        .run()
        .await;
    let per_tool = report.cases_by_tool();
    println!("{per_tool:?}\n{report}");
    report.assert_all_refused();
    assert_eq!(per_tool.len(), 4);
    for (tool, cases) in per_tool {
        assert!(cases >= 200, "{tool}: {cases} cases");
    }
}

#[tokio::test]
async fn a_run_that_attacks_nothing_is_no_pass() {
    let nobody = red_team(shop::shop_tools()).run().await;
    assert_eq!(nobody.cases(), 0);
    assert!(std::panic::catch_unwind(|| nobody.assert_all_refused()).is_err());
    let powerless = red_team(portcullis::Registry::builder().tool(shop::CancelOrder))
        .caller("guest", portcullis::CallContext::new("guest"))
        .run()
        .await;
    assert!(
        powerless.to_string().contains("not attacked"),
        "{powerless}"
    );
}
