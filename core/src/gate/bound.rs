//! A tool bound to one call's decoded arguments: everything the gates after decode ask of the
//! typed arguments, behind one object-safe trait.
//!
//! The gates are written once for every tool; were they generic over the tool, each tool a
//! program registers would compile its own copy of the whole pipeline. What is compiled per
//! tool is the decoding of its arguments and [`Bound`], a few calls into the tool's own
//! methods.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::Value;
use validator::ValidationErrors;

use super::decode::{self, DecodeLimits, Decoded, WriteCanonical, canonical_of};
use super::execute::{Execution, execute};
use crate::call::Arguments;
use crate::context::CallContext;
use crate::contract::ToolContract;
use crate::future::BoxFuture;
use crate::json::write_canonical_of;
use crate::policy::{Decision, PolicyError};
use crate::rejection::{Rejection, RejectionCode};
use crate::schema::check::SchemaCheck;
use crate::tool::{Tool, ToolError};

/// One call's typed arguments with their tool, as the gates after decode read them, for a
/// call whose tool and context live for `'a`.
pub(crate) trait BoundCall<'a>: WriteCanonical + Send + Sync {
    /// The tool's own checks of the arguments ([`Tool::validate_args`]).
    fn validate(&self) -> Result<(), ValidationErrors>;

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

/// The canonical arguments, written by the arguments' `Serialize`.
impl<T: Tool> WriteCanonical for Bound<'_, T> {
    fn value(&self) -> Result<Value, Rejection> {
        canonical_of(&self.args)
    }

    fn text(&self, out: &mut String) -> bool {
        write_canonical_of(&self.args, out)
    }
}

impl<'a, T: Tool> BoundCall<'a> for Bound<'a, T> {
    fn validate(&self) -> Result<(), ValidationErrors> {
        self.tool.validate_args(&self.args)
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

/// A tool with its types erased, so that tools of different argument types live in one map.
/// What is generic in a tool is its arguments' decoding; the gates then read them through
/// [`BoundCall`], so that they are compiled once, not once per tool.
pub(crate) trait ErasedTool: Send + Sync {
    fn contract(&self) -> &ToolContract;

    /// 2. decode: the arguments as sent into the typed arguments, bound to the tool.
    fn decode<'a>(
        &'a self,
        check: &SchemaCheck,
        arguments: &Arguments,
        limits: &DecodeLimits,
    ) -> Result<Decoded<'a, Box<dyn BoundCall<'a> + 'a>>, Rejection>;

    /// The canonical arguments of a call, which passed decode once, bound to the tool again
    /// (see [`rebind`], which checks that they read back as themselves).
    fn bind<'a>(&'a self, canonical: &Value) -> Result<Box<dyn BoundCall<'a> + 'a>, Rejection>;
}

impl<T: Tool> ErasedTool for T {
    fn contract(&self) -> &ToolContract {
        Tool::contract(self)
    }

    fn decode<'a>(
        &'a self,
        check: &SchemaCheck,
        arguments: &Arguments,
        limits: &DecodeLimits,
    ) -> Result<Decoded<'a, Box<dyn BoundCall<'a> + 'a>>, Rejection> {
        let contract = Tool::contract(self);
        decode::decode(
            contract,
            check,
            arguments,
            limits,
            &mut |node, sensitive| {
                let args = decode::typed_node::<T::Args>(node, sensitive)?;
                Ok(Box::new(Bound { tool: self, args }))
            },
        )
    }

    fn bind<'a>(&'a self, canonical: &Value) -> Result<Box<dyn BoundCall<'a> + 'a>, Rejection> {
        let args = decode::typed::<T::Args>(canonical)?;
        Ok(Box::new(Bound { tool: self, args }))
    }
}

/// The canonical arguments of a call that passed decode, bound to its tool again, only if they
/// read back as themselves (as one call: see [`SchemaCheck::identity_text`]): arguments whose
/// `Deserialize` and `Serialize` disagree would show a snapshot hook or a compensation another
/// call than the one the gates judged. A panic while they are read is contained.
pub(crate) fn rebind<'a>(
    tool: &'a dyn ErasedTool,
    check: &SchemaCheck,
    canonical: &Value,
) -> Result<Box<dyn BoundCall<'a> + 'a>, Rejection> {
    catch_unwind(AssertUnwindSafe(|| {
        let bound = tool.bind(canonical).map_err(|_| not_reproducible())?;
        if decode::identity_of(check, &*bound)? != check.identity_text(canonical) {
            return Err(not_reproducible());
        }
        Ok(bound)
    }))
    .unwrap_or_else(|_| Err(not_reproducible()))
}

fn not_reproducible() -> Rejection {
    Rejection::new(
        RejectionCode::ArgumentsNotReproducible,
        "the canonical arguments do not read back as the same arguments: the argument types' `Deserialize` and `Serialize` disagree",
    )
}
