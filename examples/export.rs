//! Print the shop's tool list in one provider's format:
//!
//! ```text
//! cargo run -p portcullis-examples --example export -- openai-chat-strict
//! ```
//!
//! Profiles: openai-chat, openai-chat-strict, openai-responses, openai-responses-strict,
//! anthropic, anthropic-strict, gemini, gemini-json-schema, mcp.

#[path = "shop/mod.rs"]
mod shop;

use std::process::ExitCode;

use portcullis::export::Profile;

fn main() -> ExitCode {
    let Some(name) = std::env::args().nth(1) else {
        let names: Vec<&str> = Profile::ALL.iter().map(|profile| profile.name()).collect();
        eprintln!("usage: cargo run -p portcullis-examples --example export -- <profile>");
        eprintln!("profiles: {}", names.join(", "));
        return ExitCode::FAILURE;
    };
    let profile: Profile = match name.parse() {
        Ok(profile) => profile,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let registry = match shop::shop_tools().profile(profile).build() {
        Ok(registry) => registry,
        Err(error) => {
            eprintln!("the shop's tools do not fit {profile}: {error}");
            return ExitCode::FAILURE;
        }
    };
    match registry.export(&shop::shop_admin(), profile) {
        Ok(tools) => {
            let place = match profile {
                Profile::Mcp => "the `tools` of a `tools/list` result",
                _ => "the request's `tools` field",
            };
            println!("// {profile}: {place}, for a caller who may use every tool");
            println!(
                "{}",
                serde_json::to_string_pretty(&tools).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}
