//! A tool bound to one call's decoded arguments: everything the gates after decode ask of the
//! typed arguments, behind one object-safe trait.
//!
//! The gates are written once for every tool; were they generic over the tool, each tool a
//! program registers would compile its own copy of the whole pipeline. What is compiled per
//! tool is the decoding of its arguments and [`Bound`], a few calls into the tool's own
//! methods.

use serde_json::Value;
use validator::ValidationErrors;

use super::decode::canonical_of;
use super::execute::{Execution, execute};
use crate::future::BoxFuture;
use crate::{CallContext, Decision, PolicyError, Rejection, Tool, ToolError};

/// One call's typed arguments with their tool, as the gates after decode read them, for a
/// call whose tool and context live for `'a`.
pub(crate) trait BoundCall<'a>: Send + Sync {
    /// The tool's own checks of the arguments ([`Tool::validate_args`]).
    fn validate(&self) -> Result<(), ValidationErrors>;

    /// The canonical arguments, written by the arguments' `Serialize`.
    fn canonical(&self) -> Result<Value, Rejection>;

    /// The tool's own policy over the arguments, if it has one ([`Tool::policy`]).
    fn policy<'s>(
        &'s self,
        ctx: &'s CallContext,
    ) -> Option<BoxFuture<'s, Result<Decision, PolicyError>>>;

    /// Whether the tool asks a human to approve this call ([`Tool::approval_required`]).
    fn approval_required(&self, ctx: &CallContext) -> bool;

    /// The state the call changes, if the tool has a snapshot hook ([`Tool::snapshot`]).
    fn snapshot<'s>(&'s self, ctx: &'s CallContext) -> Option<BoxFuture<'s, Value>>;

    /// Runs the tool's body, which takes the arguments.
    fn execute(self: Box<Self>, ctx: &'a CallContext) -> Execution<'a>;

    /// The compensating action of the completed call that took these arguments and returned
    /// `output` ([`Tool::compensate_call`]).
    fn compensate(
        self: Box<Self>,
        ctx: &'a CallContext,
        output: Value,
    ) -> Option<BoxFuture<'a, Result<(), ToolError>>>;
}

/// [`BoundCall`] for a tool of type `T`.
pub(crate) struct Bound<'a, T: Tool> {
    pub(crate) tool: &'a T,
    pub(crate) args: T::Args,
}

impl<'a, T: Tool> BoundCall<'a> for Bound<'a, T> {
    fn validate(&self) -> Result<(), ValidationErrors> {
        self.tool.validate_args(&self.args)
    }

    fn canonical(&self) -> Result<Value, Rejection> {
        canonical_of(&self.args)
    }

    fn policy<'s>(
        &'s self,
        ctx: &'s CallContext,
    ) -> Option<BoxFuture<'s, Result<Decision, PolicyError>>> {
        self.tool.policy(ctx, &self.args)
    }

    fn approval_required(&self, ctx: &CallContext) -> bool {
        self.tool.approval_required(ctx, &self.args)
    }

    fn snapshot<'s>(&'s self, ctx: &'s CallContext) -> Option<BoxFuture<'s, Value>> {
        self.tool.snapshot(ctx, &self.args)
    }

    fn execute(self: Box<Self>, ctx: &'a CallContext) -> Execution<'a> {
        execute(self.tool, ctx, self.args)
    }

    fn compensate(
        self: Box<Self>,
        ctx: &'a CallContext,
        output: Value,
    ) -> Option<BoxFuture<'a, Result<(), ToolError>>> {
        self.tool.compensate_call(ctx, self.args, output)
    }
}
