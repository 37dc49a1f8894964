//! Provider profiles: the tool list in the exact format each provider accepts.
//!
//! Every tool has one description, its [`ToolContract`]; a [`Profile`] turns it into what one
//! provider takes. Profiles only ever change what the model is *shown*: whatever a profile
//! drops from a schema (a `maxLength` OpenAI's strict mode cannot take, a `$ref` Gemini cannot
//! follow), the decode and validate gates still enforce in full.
//!
//! A registry declares the profiles it serves with
//! [`RegistryBuilder::profile`](crate::RegistryBuilder::profile); a tool a declared profile
//! cannot take refuses the build, naming the tool and the reason, so that a misfit shows up
//! in the first test rather than in a provider's 400 at request time.
//!
//! ```
//! use portcullis_core::export::Profile;
//! use portcullis_core::{CallContext, Registry};
//!
//! let registry = Registry::builder()
//!     .profile(Profile::OpenAiChat { strict: true })
//!     .build()
//!     .unwrap();
//! let tools = registry
//!     .export(&CallContext::new("agent"), Profile::OpenAiChat { strict: true })
//!     .unwrap();
//! assert_eq!(tools, serde_json::json!([]));
//! ```

mod anthropic;
mod gemini;
mod mcp;
mod openai;

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::contract::ToolContract;

/// One provider's tool format.
///
/// The [`name`](Profile::name)s are stable and parse back with [`FromStr`]:
/// `openai-chat`, `openai-chat-strict`, `openai-responses`, `openai-responses-strict`,
/// `anthropic`, `anthropic-strict`, `gemini`, `gemini-json-schema`, `mcp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Profile {
    /// OpenAI Chat Completions: `{"type": "function", "function": {...}}`. Strict mode makes
    /// every property required (optional ones nullable) and closes every object.
    OpenAiChat {
        /// Whether the model's output is constrained to the schema (`"strict": true`).
        strict: bool,
    },
    /// OpenAI Responses: the flat `{"type": "function", "name", ...}` form.
    OpenAiResponses {
        /// Whether the model's output is constrained to the schema (`"strict": true`).
        strict: bool,
    },
    /// Anthropic Messages: `{"name", "description", "input_schema"}`. Strict tool use moves
    /// constraints the model cannot be held to into the description.
    Anthropic {
        /// Whether the tool is sent with `"strict": true`.
        strict: bool,
    },
    /// Gemini `functionDeclarations` with `parameters` in Gemini's OpenAPI subset: references
    /// inlined, `nullable` instead of type unions, string enums only.
    Gemini,
    /// Gemini `functionDeclarations` with `parametersJsonSchema`: the JSON Schema as it is.
    GeminiJsonSchema,
    /// MCP `tools/list` entries, with annotations derived from the contract.
    Mcp,
}

impl Profile {
    /// Every profile, in a stable order.
    pub const ALL: [Profile; 9] = [
        Profile::OpenAiChat { strict: false },
        Profile::OpenAiChat { strict: true },
        Profile::OpenAiResponses { strict: false },
        Profile::OpenAiResponses { strict: true },
        Profile::Anthropic { strict: false },
        Profile::Anthropic { strict: true },
        Profile::Gemini,
        Profile::GeminiJsonSchema,
        Profile::Mcp,
    ];

    /// The profile's stable name, e.g. `"openai-chat-strict"`.
    pub fn name(self) -> &'static str {
        match self {
            Profile::OpenAiChat { strict: false } => "openai-chat",
            Profile::OpenAiChat { strict: true } => "openai-chat-strict",
            Profile::OpenAiResponses { strict: false } => "openai-responses",
            Profile::OpenAiResponses { strict: true } => "openai-responses-strict",
            Profile::Anthropic { strict: false } => "anthropic",
            Profile::Anthropic { strict: true } => "anthropic-strict",
            Profile::Gemini => "gemini",
            Profile::GeminiJsonSchema => "gemini-json-schema",
            Profile::Mcp => "mcp",
        }
    }

    /// Whether the profile shows optional arguments as required and nullable, so that a model
    /// sends `null` where it means "absent". A registry serving such a profile reads a `null`
    /// for an optional argument as if it had not been sent.
    pub fn sends_null_for_absent(self) -> bool {
        matches!(
            self,
            Profile::OpenAiChat { strict: true } | Profile::OpenAiResponses { strict: true }
        )
    }

    /// Checks that the profile can take the tool: its name, and its schema's shape and size.
    pub fn check(self, contract: &ToolContract) -> Result<(), ProfileError> {
        self.definition(contract).map(drop)
    }

    /// The provider's definition of one tool, with the arguments' schema as declared (dynamic
    /// enums without their values: [`Registry::export`](crate::Registry::export) fills those in for a context).
    ///
    /// A registry reads a `null` sent for an optional argument as "absent" only when it
    /// declares a profile that [sends null for absent](Self::sends_null_for_absent): serve the
    /// strict OpenAI definitions from a registry that declares them.
    ///
    /// ```
    /// use portcullis_core::export::Profile;
    /// use portcullis_core::ToolContract;
    /// use serde_json::json;
    ///
    /// let schema = json!({"type": "object", "properties": {"q": {"type": "string"}},
    ///     "additionalProperties": false});
    /// let contract = ToolContract::builder("search", "Search the catalogue.", schema).build();
    /// let tool = Profile::OpenAiChat { strict: true }.definition(&contract).unwrap();
    /// assert_eq!(tool["function"]["parameters"]["required"], json!(["q"]));
    /// assert_eq!(tool["function"]["parameters"]["properties"]["q"]["type"], json!(["string", "null"]));
    /// ```
    pub fn definition(self, contract: &ToolContract) -> Result<Value, ProfileError> {
        self.transform(contract, contract.input_schema())
            .map_err(|reason| ProfileError::new(self, contract.name(), reason))
    }

    /// The provider's definition of one tool, with `schema` as its arguments.
    pub(crate) fn transform(
        self,
        contract: &ToolContract,
        schema: &Value,
    ) -> Result<Value, String> {
        match self {
            Profile::OpenAiChat { strict } => openai::chat_tool(contract, schema, strict),
            Profile::OpenAiResponses { strict } => openai::responses_tool(contract, schema, strict),
            Profile::Anthropic { strict } => anthropic::tool(contract, schema, strict),
            Profile::Gemini => gemini::declaration(contract, schema),
            Profile::GeminiJsonSchema => gemini::json_schema_declaration(contract, schema),
            Profile::Mcp => mcp::tool(contract, schema),
        }
    }

    /// Limits the provider sets on all the tools of one request together.
    pub(crate) fn check_together(self, contracts: &[&ToolContract]) -> Result<(), ProfileError> {
        match self {
            Profile::Anthropic { strict: true } => anthropic::check_request(contracts)
                .map_err(|(tool, reason)| ProfileError::new(self, tool, reason)),
            _ => Ok(()),
        }
    }

    /// Wraps the tool definitions into the value of the request's `tools` field.
    pub(crate) fn tools_field(self, definitions: Vec<Value>) -> Value {
        match self {
            Profile::Gemini | Profile::GeminiJsonSchema => gemini::tools_field(definitions),
            _ => Value::Array(definitions),
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = UnknownProfile;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Profile::ALL
            .into_iter()
            .find(|profile| profile.name() == name)
            .ok_or_else(|| UnknownProfile(name.to_owned()))
    }
}

/// A profile name [`Profile::from_str`] does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownProfile(pub String);

impl fmt::Display for UnknownProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Profile::ALL.iter().map(|profile| profile.name()).collect();
        write!(
            f,
            "no profile is named `{}`: use one of {}",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownProfile {}

/// A tool a profile's provider cannot take, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileError {
    /// The profile.
    pub profile: Profile,
    /// The tool's name.
    pub tool: String,
    /// What the provider cannot take, and how to fix it.
    pub reason: String,
}

impl ProfileError {
    fn new(profile: Profile, tool: impl Into<String>, reason: impl Into<String>) -> Self {
        ProfileError {
            profile,
            tool: tool.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "profile `{}` cannot take tool `{}`: {}",
            self.profile, self.tool, self.reason
        )
    }
}

impl std::error::Error for ProfileError {}

/// Why [`Registry::export`](crate::Registry::export) produced no tool list.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExportError {
    /// The registry was not built for this profile: declare it with
    /// [`RegistryBuilder::profile`](crate::RegistryBuilder::profile), which checks every tool
    /// against it once, at build.
    UndeclaredProfile(Profile),
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::UndeclaredProfile(profile) => write!(
                f,
                "the registry was not built for profile `{profile}`: add \
                 `.profile(Profile::...)` to the registry builder"
            ),
        }
    }
}

impl std::error::Error for ExportError {}

/// Checks every contract against `profile`, alone and together, as the registry build does
/// for the profiles it declares.
pub(crate) fn check_all<'a>(
    profile: Profile,
    contracts: impl IntoIterator<Item = &'a ToolContract>,
) -> Result<(), ProfileError> {
    let contracts: Vec<&ToolContract> = contracts.into_iter().collect();
    for contract in &contracts {
        profile.check(contract)?;
    }
    profile.check_together(&contracts)
}
