//! Cedar policies over portcullis' tool contracts.
//!
//! A policy team writes `permit` and `forbid` rules in Cedar, apart from the application's
//! code; [`Cedar`] is the registry policy that applies them to every call, over a schema
//! generated from the registry's tools by the Cedar project's MCP schema generator (so that a
//! policy written for cedar-for-agents or a gateway that uses its schema reads the same here).
//! The guide's page `cedar` tells the whole workflow.

mod authorizer;
mod error;
mod policies;
mod request;
mod schema;

pub use authorizer::Cedar;
pub use error::CedarError;
pub use policies::CedarPolicies;
pub use schema::{schema_for_contracts, schema_for_mcp_tools};
