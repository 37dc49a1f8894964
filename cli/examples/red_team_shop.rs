//! The example shop's red-team entry point, as an application writes one for
//! `portcullis check`: it runs the kit over the shop's registry builder and writes the report
//! as JSON Lines. `-- --weakened` swaps the shop's embargo for a policy that allows
//! everything, so that two cases get through.
//!
//! ```text
//! cargo build -p portcullis-cli --example red_team_shop
//! portcullis check --entry target/debug/examples/red_team_shop
//! ```

#[path = "../../examples/shop/mod.rs"]
mod shop;

use portcullis::{Decision, PolicyError, PolicyRequest};

fn allow_everything(_: &PolicyRequest<'_>) -> Result<Decision, PolicyError> {
    Ok(Decision::Allow)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let weakened = std::env::args().any(|argument| argument == "--weakened");
    let tools = match weakened {
        true => shop::shop_tools().policy(allow_everything),
        false => shop::shop_tools().policy(shop::embargo),
    };
    let report = portcullis::testing::red_team(tools)
        .caller("admin", shop::shop_admin())
        .corpus(include_str!("../../testing/tests/shop_corpus.jsonl"))
        .run()
        .await;
    report.write_json_lines(&mut std::io::stdout().lock())
}
