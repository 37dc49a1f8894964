//! The Cedar schema of a registry's tools: generated from their MCP descriptions by the Cedar
//! project's generator, over portcullis' stub of the principal, the resource and the call.

use cedar_policy_core::entities::Entities;
use cedar_policy_core::extensions::Extensions;
use cedar_policy_core::validator::ValidatorSchema;
use cedar_policy_mcp_schema_generator::{RequestGenerator, SchemaGenerator, SchemaGeneratorConfig};
use mcp_tools_sdk::description::ServerDescription;
use portcullis_core::ToolContract;
use portcullis_core::export::Profile;
use serde_json::{Value, json};

use crate::error::CedarError;

/// What portcullis tells Cedar of every call beside its arguments: who calls (an `Actor`, a
/// member of each of its roles, with its tenant), what is called (the registry), and the call
/// itself (the environment it runs in, the tool's risk, what its task spent, where its values
/// came from).
pub(crate) const STUB: &str = r#"namespace Portcullis {
  // A role the caller holds: `principal in Portcullis::Role::"finance"`.
  entity Role;

  // Who calls, by its actor id; a member of each of its roles.
  @mcp_principal("Actor")
  entity Actor in [Role] {
    "tenant"?: String,
  };

  // The registry the tools are called through.
  @mcp_resource("Registry")
  entity Registry;

  // The environment the call runs in (`production`), "" for none.
  @mcp_context("environment")
  type Environment = String;

  // The tool's risk: "low", "medium", "high" or "critical".
  @mcp_context("risk")
  type Risk = String;

  // What the call's task spent before it, as the budget gate counts it.
  @mcp_context("budget")
  type Budget = {
    "calls": Long,
    "cost": Long,
  };

  // Where the values the contract declares `#[from(...)]` were found, as JSON pointers into the
  // arguments (`/recipient`): in the user's messages (or a reviewer's edit), in a trusted tool's
  // output, only in an untrusted one, nowhere. `judged` is false where the provenance gate did
  // not judge the call.
  @mcp_context("provenance")
  type Provenance = {
    "judged": Bool,
    "user": Set<String>,
    "trusted": Set<String>,
    "untrusted": Set<String>,
    "nowhere": Set<String>,
  };

  // Every tool's action is one of these.
  @mcp_action("call_tool")
  action call_tool;
}
"#;

/// The generator's settings: closed objects are records (`context.input.address.country`), not
/// entities of their own.
fn config() -> SchemaGeneratorConfig {
    SchemaGeneratorConfig::default().objects_as_records(true)
}

/// The Cedar schema of a set of tools, with what turns their calls into Cedar requests.
pub(crate) struct Generated {
    /// The schema, as `.cedarschema` text.
    pub(crate) text: String,
    /// The tools' names.
    pub(crate) names: Vec<String>,
    /// The schema, for validation and requests.
    pub(crate) schema: cedar_policy::Schema,
    /// Turns a tool's arguments into the request's `context.input`.
    pub(crate) requests: RequestGenerator,
    /// The actions, each a member of `call_tool`: every request's entities hold them, so that
    /// `action in Portcullis::Action::"call_tool"` holds.
    pub(crate) actions: Entities,
}

impl Generated {
    /// The schema of `tools`, described as MCP describes them.
    pub(crate) fn for_contracts(tools: &[&ToolContract]) -> Result<Self, CedarError> {
        let descriptions = tools
            .iter()
            .map(|contract| {
                Profile::Mcp
                    .definition(contract)
                    .map_err(|error| CedarError::Schema(error.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::for_mcp_tools(&descriptions)
    }

    /// The schema of tools as an MCP `tools/list` result lists them.
    pub(crate) fn for_mcp_tools(tools: &[Value]) -> Result<Self, CedarError> {
        let mut listed = json!({"result": {"tools": tools}});
        told_apart(&mut listed);
        let listed = listed.to_string();
        let description = ServerDescription::from_json_str(&listed)
            .map_err(|error| CedarError::Schema(error.to_string()))?;
        let mut generator = SchemaGenerator::from_cedarschema_str_with_config(STUB, config())
            .map_err(|error| CedarError::Schema(error.to_string()))?;
        generator
            .add_actions_from_server_description(&description)
            .map_err(|error| CedarError::Schema(error.to_string()))?;
        let text = generator.get_schema_as_str();
        let requests = generator
            .new_request_generator()
            .map_err(|error| CedarError::Schema(error.to_string()))?;
        let (schema, _warnings) =
            ValidatorSchema::from_cedarschema_str(&text, Extensions::all_available())
                .map_err(|error| CedarError::Schema(error.to_string()))?;
        let actions = schema
            .action_entities()
            .map_err(|error| CedarError::Schema(error.to_string()))?;
        let names = description
            .tool_descriptions()
            .map(|tool| tool.name().to_owned())
            .collect();
        Ok(Generated {
            text,
            names,
            schema: schema.into(),
            requests,
            actions,
        })
    }
}

/// Rewrites the schemas so that the generator tells the branches of a union apart as the tool
/// does. It checks an `enum` and ignores `const`, and reads a value by the first branch that
/// takes it: schemars writes a string `const` for each documented variant of an enum and for
/// the tag of each variant of an internally tagged one, and every such variant would be read as
/// the first. A string `const` becomes a one-value `enum`; a union of one-value string enums
/// (an enum whose variants are documented) becomes one enum, as an undocumented one is.
fn told_apart(schema: &mut Value) {
    match schema {
        Value::Object(members) => {
            for member in members.values_mut() {
                told_apart(member);
            }
            if let Some(Value::String(constant)) = members.get("const").cloned() {
                members.remove("const");
                members.insert("type".into(), json!("string"));
                members.insert("enum".into(), json!([constant]));
            }
            for union in ["oneOf", "anyOf"] {
                let variants: Option<Vec<Value>> = match members.get(union) {
                    Some(Value::Array(branches)) if !branches.is_empty() => {
                        branches.iter().map(one_string).collect()
                    }
                    _ => None,
                };
                if let Some(variants) = variants {
                    members.remove(union);
                    members.insert("type".into(), json!("string"));
                    members.insert("enum".into(), Value::Array(variants));
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(told_apart),
        _ => {}
    }
}

/// The value of a one-value string enum.
fn one_string(branch: &Value) -> Option<Value> {
    match branch.get("enum")?.as_array()?.as_slice() {
        [value @ Value::String(_)] if branch.get("type")? == "string" => Some(value.clone()),
        _ => None,
    }
}

/// The Cedar schema of `tools`, as `.cedarschema` text: what a policy team validates its
/// policies against, and what [`Cedar`](crate::Cedar) validates them against when the registry
/// is built.
///
/// Each tool is an action `Portcullis::Action::"<tool>"` in `Portcullis::Action::"call_tool"`,
/// its arguments the record `context.input`; the caller is a `Portcullis::Actor`, a member of
/// each of its roles (`Portcullis::Role::"finance"`), with an optional `tenant`; the resource
/// the `Portcullis::Registry`; and the context also holds `environment`, `risk`, `budget` and
/// `provenance`. Enumerations of strings are Cedar enumerated entity types
/// (`Portcullis::refund_payment::Input::RefundReason::"fraudulent"`), as the generator makes
/// them; an argument that may be `null` is a record of the choices (`typeChoice0` for the
/// value).
pub fn schema_for_contracts(tools: &[&ToolContract]) -> Result<String, CedarError> {
    Generated::for_contracts(tools).map(|generated| generated.text)
}

/// The Cedar schema of the tools an MCP `tools/list` result lists, as
/// [`schema_for_contracts`] writes it: for `portcullis tools cedar-schema`, which reads the
/// application's MCP export.
pub fn schema_for_mcp_tools(tools: &[Value]) -> Result<String, CedarError> {
    Generated::for_mcp_tools(tools).map(|generated| generated.text)
}
