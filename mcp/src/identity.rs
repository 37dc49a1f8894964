//! Who is calling over HTTP: the request's credentials become the caller's [`CallContext`].

use std::collections::HashMap;
use std::fmt;

use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use portcullis_core::{BoxFuture, CallContext};
use sha2::{Digest, Sha256};

use crate::oauth::ProtectedResource;

/// The caller of an HTTP request, as the server's [`Authenticator`]
/// found it; the HTTP admission puts it in the request's extensions.
#[derive(Clone)]
pub(crate) struct Authenticated(pub(crate) CallContext);

/// Reads who sent an HTTP request from its credentials. A request it refuses is answered
/// before the MCP layer sees it: `401 Unauthorized` (or `403 Forbidden` for
/// [`AuthRefusal::InsufficientScope`]) with a `WWW-Authenticate: Bearer` challenge (RFC 6750)
/// and a JSON body whose `error` is the refusal's [`code`](AuthRefusal::code).
///
/// The context it returns is the caller's identity: actor, roles, tenant, environment. The
/// server gives each MCP session its own task id, and a session answers only the identity that
/// opened it.
pub trait Authenticator: Send + Sync + 'static {
    /// The caller of the request whose head is `request`, or why it is refused.
    fn authenticate<'a>(
        &'a self,
        request: &'a Parts,
    ) -> BoxFuture<'a, Result<CallContext, AuthRefusal>>;

    /// The server as an OAuth protected resource (RFC 9728), if the credentials are OAuth
    /// access tokens: the router serves its metadata document and names it in every challenge,
    /// so that a client finds the authorization server to get a token from. `None` (the
    /// default) for credentials handed out another way, such as [`BearerTokens`].
    fn protected_resource(&self) -> Option<&ProtectedResource> {
        None
    }
}

/// Why an [`Authenticator`] refused a request; each has a stable [`code`](Self::code), the
/// `error` of the response's body.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthRefusal {
    /// The request carries no credentials the authenticator reads (code `unauthenticated`):
    /// `401` with a challenge that names no error, as RFC 6750 asks.
    Missing,
    /// The request carries a token that is not good: unknown, expired, for another audience,
    /// signed by a key the issuer does not publish... `401` with `error="invalid_token"`.
    InvalidToken {
        /// The stable code, such as `token_expired`.
        code: &'static str,
        /// What is wrong with the token, for the client's developer.
        description: String,
    },
    /// A good token that grants nothing on this server (code `insufficient_scope`): `403` with
    /// `error="insufficient_scope"` and the scopes that would.
    InsufficientScope {
        /// The scopes to ask the authorization server for, space-separated.
        scope: String,
        /// Why the token's scopes are not enough.
        description: String,
    },
}

impl AuthRefusal {
    /// A refusal of a token that is not good, with its stable `code`.
    pub fn invalid_token(code: &'static str, description: impl Into<String>) -> Self {
        AuthRefusal::InvalidToken {
            code,
            description: description.into(),
        }
    }

    /// The refusal's stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            AuthRefusal::Missing => "unauthenticated",
            AuthRefusal::InvalidToken { code, .. } => code,
            AuthRefusal::InsufficientScope { .. } => "insufficient_scope",
        }
    }

    /// What the client should know, for the response's body and the challenge's
    /// `error_description`.
    pub fn description(&self) -> &str {
        match self {
            AuthRefusal::Missing => {
                "send credentials this server knows: Authorization: Bearer <token>"
            }
            AuthRefusal::InvalidToken { description, .. }
            | AuthRefusal::InsufficientScope { description, .. } => description,
        }
    }
}

impl fmt::Display for AuthRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code(), self.description())
    }
}

impl std::error::Error for AuthRefusal {}

/// The token of an `Authorization: Bearer <token>` header; the scheme is case-insensitive
/// (RFC 7235). `None` when the request has no such header.
pub(crate) fn bearer_token(request: &Parts) -> Option<&str> {
    let value = request.headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// An [`Authenticator`] over a table of bearer tokens (`Authorization: Bearer <token>`), each
/// naming its caller. Tokens are kept only as SHA-256 digests and looked up by digest, so the
/// table holds no secret and a lookup takes no longer for a near miss.
///
/// ```
/// use portcullis_core::CallContext;
/// use portcullis_mcp::BearerTokens;
///
/// let tokens = BearerTokens::new()
///     .token("s3cret-support", CallContext::new("sam").with_roles(["support"]))
///     .token("s3cret-finance", CallContext::new("fiona").with_roles(["finance"]));
/// # let _ = tokens;
/// ```
#[derive(Default)]
pub struct BearerTokens {
    callers: HashMap<[u8; 32], CallContext>,
}

impl BearerTokens {
    /// An empty table: every request is refused.
    pub fn new() -> Self {
        BearerTokens::default()
    }

    /// Adds `token`, whose bearer is `caller`.
    pub fn token(mut self, token: impl AsRef<str>, caller: CallContext) -> Self {
        self.callers.insert(digest(token.as_ref()), caller);
        self
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Authenticator for BearerTokens {
    fn authenticate<'a>(
        &'a self,
        request: &'a Parts,
    ) -> BoxFuture<'a, Result<CallContext, AuthRefusal>> {
        let caller = match bearer_token(request) {
            None => Err(AuthRefusal::Missing),
            Some(token) => self.callers.get(&digest(token)).cloned().ok_or_else(|| {
                AuthRefusal::invalid_token("unknown_token", "the server knows no such token")
            }),
        };
        Box::pin(std::future::ready(caller))
    }
}

/// Marks a caller's identity as a host that relays its user's messages: a `tools/call` of such
/// a caller may carry the user's latest message in `_meta["dev.portcullis/user_message"]`, and
/// the server records it as a message of the user in the call's task
/// ([`Registry::add_user_message`](portcullis_core::Registry::add_user_message)) before the
/// call is judged. A caller without the mark that sends one is refused
/// (`user_message_not_allowed`).
///
/// Give the mark to the host's credentials only (its token, or an OAuth scope:
/// [`OAuthBuilder::relay_scope`](crate::oauth::OAuthBuilder::relay_scope)), never to
/// credentials the model's side holds: the host is trusted to write only what its user wrote.
///
/// ```
/// use portcullis_core::CallContext;
/// use portcullis_mcp::{BearerTokens, RelaysUserMessages};
///
/// let tokens = BearerTokens::new()
///     .token("s3cret-desk", CallContext::new("desk").with_extension(RelaysUserMessages))
///     .token("s3cret-batch", CallContext::new("batch"));
/// # let _ = tokens;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelaysUserMessages;

impl RelaysUserMessages {
    /// Whether the operator marked `identity` as relaying its user's messages.
    pub(crate) fn marks(identity: &CallContext) -> bool {
        identity.extension::<RelaysUserMessages>().is_some()
    }
}

/// Who a caller is, wherever the server tells callers apart (a session's owner, the caps, what
/// a sealed handle is bound to): its actor, tenant, roles and environment.
#[derive(Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub(crate) struct Caller {
    actor: String,
    tenant: Option<String>,
    roles: Vec<String>,
    environment: Option<String>,
}

impl Caller {
    pub(crate) fn of(ctx: &CallContext) -> Self {
        Caller {
            actor: ctx.actor().to_owned(),
            tenant: ctx.tenant().map(str::to_owned),
            roles: ctx.roles().to_vec(),
            environment: ctx.environment().map(str::to_owned),
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::Request;

    use super::*;

    fn parts(authorization: Option<&str>) -> Parts {
        let mut request = Request::builder();
        if let Some(value) = authorization {
            request = request.header(AUTHORIZATION, value);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[tokio::test]
    async fn bearer_tokens_name_their_caller_and_nothing_else() {
        let tokens = BearerTokens::new().token("t-1", CallContext::new("ann"));
        for accepted in ["Bearer t-1", "bearer  t-1"] {
            let ann = tokens.authenticate(&parts(Some(accepted))).await;
            assert_eq!(ann.map(|ctx| ctx.actor().to_owned()), Ok("ann".into()));
        }
        for (refused, code) in [
            (None, "unauthenticated"),
            (Some("Basic t-1"), "unauthenticated"),
            (Some("t-1"), "unauthenticated"),
            (Some("Bearer t-2"), "unknown_token"),
        ] {
            let refusal = tokens.authenticate(&parts(refused)).await.unwrap_err();
            assert_eq!(refusal.code(), code, "{refused:?}");
        }
    }

    #[test]
    fn a_caller_is_its_actor_tenant_roles_and_environment_whatever_its_task() {
        let plain = CallContext::new("ann");
        for other in [
            CallContext::new("ann").with_roles(["support"]),
            CallContext::new("ann").with_tenant("acme"),
            CallContext::new("ann").with_environment("production"),
            CallContext::new("bob"),
        ] {
            assert!(Caller::of(&plain) != Caller::of(&other));
        }
        let again = CallContext::new("ann").with_fresh_task_id();
        assert!(Caller::of(&plain) == Caller::of(&again));
    }
}
