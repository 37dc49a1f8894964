//! The kit's own test: with one gate's check switched off, the kit must report cases of that
//! gate. A kit that passes over a registry missing a gate is a bug.

#[path = "../../examples/shop/mod.rs"]
mod shop;

use portcullis::Gate;
use portcullis_testing::{Report, red_team};

async fn attack(gate: Option<Gate>) -> Report {
    let mut builder = shop::shop_tools().policy(shop::embargo);
    if let Some(gate) = gate {
        builder = builder.switch_off(gate);
    }
    red_team(builder)
        .caller("admin", shop::shop_admin())
        .corpus(include_str!("shop_corpus.jsonl"))
        .run()
        .await
}

#[tokio::test]
async fn each_gate_switched_off_is_reported_by_its_own_cases() {
    attack(None).await.assert_all_refused();
    // Every gate a dry run reaches: audit and execute come after the dry run's refusal.
    let gates = Gate::PIPELINE
        .into_iter()
        .filter(|gate| !matches!(gate, Gate::Audit | Gate::Execute));
    for gate in gates {
        let report = attack(Some(gate)).await;
        let failures: Vec<_> = report.failures().collect();
        assert!(
            failures.iter().any(|failure| failure.gate == gate),
            "{gate:?} switched off, and the kit reported none of its cases: {report}"
        );
        println!(
            "{gate:?} switched off: {} cases got through",
            failures.len()
        );
    }
}
