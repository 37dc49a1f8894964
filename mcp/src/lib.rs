//! Serve a portcullis [`Registry`](portcullis_core::Registry) over the Model Context Protocol,
//! on [rmcp](https://docs.rs/rmcp), over stdio or streamable HTTP.
//!
//! - `tools/list` is the caller's own export: only the tools its identity may use, with the
//!   MCP profile's annotations and output schemas.
//! - `tools/call` goes through [`Registry::dispatch`](portcullis_core::Registry::dispatch):
//!   a refusal is a result with `isError: true` and the model message (a stable `error`
//!   code), an unknown tool the specification's `-32602` error.
//! - A call that needs a human waits while its request is open: for the caller's own
//!   confirmation through elicitation, where the tool's contract allows it
//!   (`#[tool(caller_confirms)]`), otherwise for an operator's decision in the approval store
//!   (the `portcullis` command line). When the wait ends first, the result names the ticket,
//!   and calling the tool again with the same arguments resumes the call.
//! - Over stdio the caller comes from the configuration; over HTTP from each request's
//!   credentials, through an [`Authenticator`]: [`BearerTokens`] for static tokens in local
//!   use, [`oauth::OAuth`] for OAuth 2.1 access tokens (JWTs checked against the issuer's
//!   keys, the audience bound to this server, scopes mapped to roles) with the protected
//!   resource metadata the MCP authorization specification asks for.
//! - Both lifecycles, as each request asks: 2025-11-25, where each session has a task id of
//!   its own and answers only the caller that opened it; and the stateless 2026-07-28, where
//!   a request without a task handle is a task that ends with it, and a continuable task
//!   (asked for with `_meta["dev.portcullis/continuable"]: true`) is named by a handle the
//!   server seals for the caller and returns in each result's `_meta["dev.portcullis/task"]`,
//!   lives at most [`continuable_task_lifetime`](McpServerBuilder::continuable_task_lifetime)
//!   and ends the caller's oldest past
//!   [`max_continuable_tasks_per_caller`](McpServerBuilder::max_continuable_tasks_per_caller),
//!   a caller's confirmation goes through `InputRequiredResult` with a sealed `requestState`,
//!   and any instance sharing the stores and the
//!   [`state_codec`](McpServerBuilder::state_codec) answers any request.
//! - A host the operator trusts to relay its user's words ([`RelaysUserMessages`]) sends the
//!   user's latest message with a `tools/call`, in `_meta["dev.portcullis/user_message"]`;
//!   the server records it in the call's task before the call is judged, so that a
//!   `#[from(user)]` value the user gave passes. Any other caller that sends one is refused
//!   (`user_message_not_allowed`).
//! - Over HTTP, each caller may hold at most 128 sessions and 32 requests in flight, and the
//!   server 4096 sessions ([`McpServerBuilder::max_sessions_per_caller`] and the others): past a
//!   cap, `429` with the JSON-RPC error `-32010`. A request with an `Origin` not allowed
//!   ([`McpServerBuilder::allowed_origins`]) gets `403`, and so does any request on a session
//!   from a caller other than the one that opened it (`session_of_another_caller`).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod admission;
mod approval;
mod challenge;
mod handler;
mod http;
mod identity;
mod limits;
mod live_tasks;
mod message;
pub mod oauth;
mod reply;
mod sealed;
mod server;
mod session;
mod stateless;
mod stdio;
mod task;
mod user_message;
mod waiting;

pub use identity::{AuthRefusal, Authenticator, BearerTokens, RelaysUserMessages};
pub use rmcp::model::RequestStateCodec;
pub use server::{McpServer, McpServerBuilder, ServeError};
