//! The `Tool` trait that `#[tool]` implements, and the error a tool returns.

use std::borrow::Cow;
use std::fmt;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use validator::{Validate, ValidationErrors};

use crate::context::CallContext;
use crate::contract::{Approval, ToolContract};
use crate::future::BoxFuture;
use crate::policy::{Decision, PolicyError};

/// What a tool's body produced: at once (a sync tool) or later (an async tool).
pub enum Invocation<'a, T> {
    /// A sync tool has already run.
    Ready(Result<T, ToolError>),
    /// An async tool runs when this future is polled.
    Pending(BoxFuture<'a, Result<T, ToolError>>),
}

/// A tool the registry can dispatch to. `#[tool]` implements it for a generated unit type
/// (`delete_record` gets `DeleteRecord`); implement it by hand only for tools that a function
/// cannot express.
pub trait Tool: Send + Sync + 'static {
    /// The typed arguments: strict serde, JSON Schema, and validator constraints. Their
    /// `Serialize` writes the canonical arguments every gate after decode reads, so it must
    /// mirror `Deserialize`: the same names, every field written.
    type Args: DeserializeOwned + Serialize + JsonSchema + Validate + Send + Sync + 'static;
    /// What a successful call returns.
    type Output: Serialize + Send + 'static;

    /// The tool's contract, built once.
    fn contract(&self) -> &ToolContract;

    /// Runs the tool's body on arguments that passed every gate.
    fn call<'a>(&'a self, ctx: &'a CallContext, args: Self::Args) -> Invocation<'a, Self::Output>;

    /// Checks the declared constraints of decoded arguments. The default runs the arguments'
    /// `Validate`; `#[tool]` also checks, for every parameter whose type implements `Validate`
    /// itself (or is an `Option` or a `Box` of such a type), that type's own constraints, as if `#[validate(nested)]` were written, so that
    /// every constraint the schema shows is enforced.
    fn validate_args(&self, args: &Self::Args) -> Result<(), ValidationErrors> {
        args.validate()
    }

    /// The tool's own policy over its typed arguments, if the contract names one
    /// (`#[tool(policy = path)]`): consulted by the authorize gate before the registry-wide
    /// policies. A denial refuses the call with `policy_denied`.
    fn policy<'a>(
        &'a self,
        ctx: &'a CallContext,
        args: &'a Self::Args,
    ) -> Option<BoxFuture<'a, Result<Decision, PolicyError>>> {
        let _ = (ctx, args);
        None
    }

    /// A snapshot of the state this call changes, taken just before and just after it runs
    /// and kept in its audit record, if the contract names a hook (`#[tool(snapshot = path)]`).
    fn snapshot<'a>(
        &'a self,
        ctx: &'a CallContext,
        args: &'a Self::Args,
    ) -> Option<BoxFuture<'a, serde_json::Value>> {
        let _ = (ctx, args);
        None
    }

    /// Whether this call needs a human's approval. The default follows the contract;
    /// `approval = path` replaces it with the predicate.
    fn approval_required(&self, ctx: &CallContext, args: &Self::Args) -> bool {
        let _ = (ctx, args);
        matches!(self.contract().approval(), Approval::Required)
    }

    /// The compensating action of a completed call, from its decoded arguments and its output
    /// as JSON, as a [`Transaction`](crate::Transaction) runs it, for a tool whose contract
    /// declares a rollback. `#[tool(rollback = ...)]` implements it by reading the output back
    /// into its type, which must therefore implement `Deserialize`.
    fn compensate_call<'a>(
        &'a self,
        ctx: &'a CallContext,
        args: Self::Args,
        output: serde_json::Value,
    ) -> Option<BoxFuture<'a, Result<(), ToolError>>> {
        let _ = (ctx, args, output);
        None
    }

    /// The compensating action that undoes a completed call, if the contract declares one.
    fn compensate<'a>(
        &'a self,
        ctx: &'a CallContext,
        args: &'a Self::Args,
        output: &'a Self::Output,
    ) -> Option<BoxFuture<'a, Result<(), ToolError>>> {
        let _ = (ctx, args, output);
        None
    }
}

/// The error a tool returns: a stable code of its own, a message for the model, and whether
/// trying again can help. The dispatcher refuses the call with `tool_failed` and carries the
/// tool's code as the rejection's reason.
///
/// ```
/// use portcullis_core::ToolError;
///
/// let error = ToolError::new("insufficient_funds", "the account holds 12.00 USD").retryable(false);
/// assert_eq!(error.code(), "insufficient_funds");
/// assert!(!error.is_retryable());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolError {
    code: Cow<'static, str>,
    message: String,
    retryable: bool,
}

impl ToolError {
    /// An error with the tool's own stable `code` (snake_case) and a message for the model.
    /// Not retryable unless marked so.
    pub fn new(code: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        ToolError {
            code: code.into(),
            message: message.into(),
            retryable: false,
        }
    }

    /// Marks whether trying again (later, or with other arguments) can help.
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// The tool's own code.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The message for the model.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether trying again can help.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}

/// The return types a `#[tool]` function may have: `Result<T, E>` with a serializable `T` and an
/// error that converts into [`ToolError`].
#[diagnostic::on_unimplemented(
    message = "a tool must return `Result<T, E>` where `T: Serialize` and `E: Into<ToolError>`, not `{Self}`",
    label = "this return type",
    note = "return `Result<YourOutput, ToolError>`; the model receives the output as JSON"
)]
pub trait IntoToolResult {
    /// The `T` of `Result<T, E>`.
    type Output: Serialize + Send + 'static;
    /// Converts the error into a [`ToolError`].
    fn into_tool_result(self) -> Result<Self::Output, ToolError>;
}

impl<T, E> IntoToolResult for Result<T, E>
where
    T: Serialize + Send + 'static,
    E: Into<ToolError>,
{
    type Output = T;

    fn into_tool_result(self) -> Result<T, ToolError> {
        self.map_err(Into::into)
    }
}
