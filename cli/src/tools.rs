//! `portcullis tools export`: the tool list one provider is shown, as the application exported
//! it; `portcullis tools cedar-schema`: the Cedar schema a policy team writes its policies
//! against, generated from the MCP export.
//!
//! The command line has no tools: a provider's tool list is rendered by the registry that
//! holds them (`Registry::export`, which also wraps the list as the provider's request takes it
//! and applies the request-wide limits), and a contract cannot be read back from a manifest,
//! which holds schema hashes only. So the application writes its exports to a file, and this
//! command reads it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use clap::Subcommand;
use portcullis_core::export::Profile;
use serde_json::Value;

use crate::error::CliError;
use crate::table::write_json;

/// The name under which an application writes `Registry::export_json_schema`, beside the
/// provider profiles.
const JSON_SCHEMA: &str = "json-schema";

const WORKFLOW: &str = "\
The application writes its exports to a JSON file, one member per profile it serves (each
declared with `.profile(...)` on its registry builder), named as `Profile::name()` names it, and
`json-schema` for the plain JSON Schema list; for instance in a test next to its contract lock
file:

    use portcullis::export::Profile;

    let ctx = CallContext::new(\"export\").with_roles([\"admin\", \"finance\"]);
    let mut exports = serde_json::Map::new();
    for profile in [Profile::OpenAiChat { strict: true }, Profile::Mcp] {
        exports.insert(profile.name().into(), registry.export(&ctx, profile)?);
    }
    exports.insert(\"json-schema\".into(), registry.export_json_schema(&ctx));
    std::fs::write(\"tools.json\", serde_json::to_vec_pretty(&exports)?)?;

Choose the context's roles on purpose: an export lists only the tools those roles may use.
Then:

    portcullis tools export --exports tools.json --profile openai-chat-strict";

/// The tool export commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the tool list of one profile (the value of the provider request's `tools`
    /// field) from the exports file the application wrote.
    #[command(after_long_help = WORKFLOW)]
    Export {
        /// The exports file the application wrote (see below).
        #[arg(long, value_name = "FILE")]
        exports: PathBuf,
        /// The profile: openai-chat, openai-chat-strict, openai-responses,
        /// openai-responses-strict, anthropic, anthropic-strict, gemini, gemini-json-schema,
        /// mcp, or json-schema.
        #[arg(long, value_parser = profile_name)]
        profile: String,
    },
    /// Print the Cedar schema of the tools (`.cedarschema`), generated from the `mcp` export
    /// of the exports file as the registry generates it when a `Cedar` policy is added: validate
    /// policies against it (`cedar validate --schema ...`) before they go live.
    #[command(after_long_help = WORKFLOW)]
    CedarSchema {
        /// The exports file the application wrote, holding the `mcp` profile (see below).
        /// Export it with roles that see every tool: a tool the export leaves out is not in
        /// the schema. An argument whose values a function gives (`#[one_of]`) is exported
        /// with the exporting caller's values, an enumeration here, and is a string in the
        /// schema the registry builds: compare such an argument as a string.
        #[arg(long, value_name = "FILE")]
        exports: PathBuf,
    },
}

/// Runs one tools command.
pub fn run(command: Command, out: &mut dyn Write) -> Result<(), CliError> {
    match command {
        Command::Export { exports, profile } => {
            let tools = exported(&exports, &profile)?;
            write_json(out, &tools)
        }
        Command::CedarSchema { exports } => {
            let tools = exported(&exports, Profile::Mcp.name())?;
            let bad = |why: String| CliError::BadFile(exports.clone(), why);
            let tools = tools
                .as_array()
                .ok_or_else(|| bad("its `mcp` export is not a list of tools".to_owned()))?;
            let schema = portcullis_cedar::schema_for_mcp_tools(tools)
                .map_err(|error| bad(error.to_string()))?;
            Ok(out.write_all(schema.as_bytes())?)
        }
    }
}

/// The export of `profile` in the exports file `exports`.
pub fn exported(exports: &Path, profile: &str) -> Result<Value, CliError> {
    let bad = |why: String| CliError::BadFile(exports.to_owned(), why);
    let text = std::fs::read_to_string(exports)
        .map_err(|error| CliError::ReadFile(exports.to_owned(), error))?;
    let exports: Value = serde_json::from_str(&text).map_err(|error| {
        bad(format!(
            "not JSON ({error}); see `portcullis tools export --help`"
        ))
    })?;
    let exports = exports.as_object().ok_or_else(|| {
        bad(
            "expected an object of exports by profile name; see `portcullis tools export --help`"
                .to_owned(),
        )
    })?;
    let tools = exports.get(profile).ok_or_else(|| {
        let held: Vec<&str> = exports.keys().map(String::as_str).collect();
        bad(format!(
            "holds no export for `{profile}` (it holds: {}); have the application export that \
             profile too",
            if held.is_empty() {
                "none".to_owned()
            } else {
                held.join(", ")
            }
        ))
    })?;
    Ok(tools.clone())
}

/// A profile name core knows, or `json-schema`.
fn profile_name(name: &str) -> Result<String, String> {
    if name == JSON_SCHEMA {
        return Ok(name.to_owned());
    }
    Profile::from_str(name)
        .map(|profile| profile.name().to_owned())
        .map_err(|unknown| format!("{unknown}, or {JSON_SCHEMA}"))
}
