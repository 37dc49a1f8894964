//! What a tool declares about itself: its name, description, risk, who may call it, how it is
//! undone, and the schema of its arguments.

mod builder;
mod check;
mod dynamic;
mod entry;
mod provenance;
mod sensitive;
mod tool_contract;

pub use builder::ContractBuilder;
pub use check::{ContractError, name_problem};
pub(crate) use entry::{contract_hash, entry};
pub use provenance::{
    AfterUntrusted, Matching, OnUntrusted, Origin, OutputTrust, Provenance, SourceRule, Sources,
    ValueSource,
};
pub use sensitive::REDACTED;
pub(crate) use sensitive::{recorded_arguments, recorded_canonical};
pub(crate) use tool_contract::{AllowedValues, ValuesApply};
pub use tool_contract::{AllowedValuesFn, Approval, Risk, ToolContract};
