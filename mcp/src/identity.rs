//! Who is calling over HTTP: the request's credentials become the caller's [`CallContext`].

use std::collections::HashMap;

use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use portcullis_core::{BoxFuture, CallContext};
use sha2::{Digest, Sha256};

/// Reads who sent an HTTP request from its credentials. A request it does not recognise
/// (`None`) is refused with `401 Unauthorized` before the MCP layer sees it.
///
/// The context it returns is the caller's identity: actor, roles, tenant, environment. The
/// server gives each MCP session its own task id, and a session answers only the identity that
/// opened it.
pub trait Authenticator: Send + Sync + 'static {
    /// The caller of the request whose head is `request`, if its credentials are good.
    fn authenticate<'a>(&'a self, request: &'a Parts) -> BoxFuture<'a, Option<CallContext>>;
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
    fn authenticate<'a>(&'a self, request: &'a Parts) -> BoxFuture<'a, Option<CallContext>> {
        let caller = request
            .headers
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .and_then(|token| self.callers.get(&digest(token.trim())))
            .cloned();
        Box::pin(std::future::ready(caller))
    }
}

/// Whether two contexts name the same caller: actor, tenant, roles and environment.
pub(crate) fn same_caller(a: &CallContext, b: &CallContext) -> bool {
    a.actor() == b.actor()
        && a.tenant() == b.tenant()
        && a.roles() == b.roles()
        && a.environment() == b.environment()
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
        let ann = tokens.authenticate(&parts(Some("Bearer t-1"))).await;
        assert_eq!(ann.map(|ctx| ctx.actor().to_owned()), Some("ann".into()));
        for refused in [None, Some("Bearer t-2"), Some("Basic t-1"), Some("t-1")] {
            assert!(tokens.authenticate(&parts(refused)).await.is_none());
        }
    }
}
