//! The server as an OAuth 2.1 resource server, as the MCP authorization specification asks:
//! access tokens are JWTs (RFC 9068) from one issuer, verified against the issuer's published
//! keys, bound to this server by their audience (RFC 8707), their scopes mapped to roles; the
//! server publishes its protected resource metadata (RFC 9728) and names it in every
//! challenge (RFC 6750).
//!
//! ```no_run
//! use portcullis_mcp::oauth::OAuth;
//!
//! # fn run() -> Result<(), portcullis_mcp::oauth::OAuthError> {
//! let oauth = OAuth::builder("https://mcp.example.com/mcp", "https://auth.example.com")
//!     .jwks_url("https://auth.example.com/.well-known/jwks.json")
//!     .scope("tickets", ["support"])
//!     .scope("billing", ["finance"])
//!     .tenant_claim("org_id")
//!     .build()?;
//! # let _ = oauth;
//! # Ok(())
//! # }
//! ```

mod claims;
mod error;
mod keys;
mod metadata;

use std::collections::BTreeSet;
use std::time::Duration;

use axum::http::request::Parts;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use portcullis_core::{BoxFuture, CallContext};
use serde_json::{Map, Value};

pub use error::OAuthError;
pub use keys::{JwksUrl, KeySource, KeySourceError};
pub use metadata::ProtectedResource;

use self::claims::ClaimMap;
use self::keys::{KeyCache, Lookup};
use crate::identity::{AuthRefusal, Authenticator, bearer_token};

/// The algorithms a token may be signed with: asymmetric only. `none` is no algorithm, and an
/// HMAC (`HS*`) token would be "signed" with the issuer's public key, which anyone has.
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// An [`Authenticator`] for OAuth access tokens that are JWTs (`Authorization: Bearer <jwt>`),
/// from [`OAuth::builder`]. A token is accepted when:
///
/// - its header names an asymmetric algorithm (RS\*, PS\*, ES256, ES384, EdDSA) and a key
///   id (`kid`) the issuer publishes, and the key verifies its signature;
/// - `iss` is the issuer, `aud` is or contains this server's canonical URI, `exp` has not
///   passed and `nbf` (if there is one) has, each give or take the leeway;
/// - it has a `sub`, the caller's actor, and at least one scope (`scope`, space-separated, or
///   `scp`) the server knows, whose roles become the caller's; tenant and environment come
///   from the claims named, which must then be there.
///
/// A token without a scope the server knows gets `403` with `error="insufficient_scope"`
/// (least privilege: it grants nothing here, not even the tools that need no role); map a
/// scope to no roles to let it see those. Every other refusal is `401` with
/// `error="invalid_token"` and a stable code in the body: `token_malformed`,
/// `token_algorithm_refused`, `token_without_key_id`, `token_unknown_key`,
/// `token_bad_signature`, `token_expired`, `token_not_yet_valid`, `token_wrong_issuer`,
/// `token_wrong_audience`, `token_missing_claim`, `issuer_keys_unavailable`.
///
/// The keys come from a [`KeySource`] (a JWKS URL: [`OAuthBuilder::jwks_url`]): fetched at
/// the first request, again when they are older than [`refresh_every`](OAuthBuilder::refresh_every)
/// (a key the issuer stopped publishing is then refused) or when a token names a key id they
/// lack (a new key is picked up), and never more often than
/// [`refetch_at_most_every`](OAuthBuilder::refetch_at_most_every), so that tokens naming
/// made-up keys cannot make the server hammer the issuer. If a fetch fails, the keys fetched
/// before stay in use.
pub struct OAuth {
    issuer: String,
    resource: ProtectedResource,
    keys: KeyCache,
    claims: ClaimMap,
    leeway: Duration,
}

impl OAuth {
    /// A builder for the server whose canonical URI is `resource` (the audience its tokens
    /// must name, such as `https://mcp.example.com/mcp`), trusting tokens from `issuer` (the
    /// authorization server's issuer identifier, its `iss`).
    pub fn builder(resource: impl Into<String>, issuer: impl Into<String>) -> OAuthBuilder {
        OAuthBuilder {
            resource: resource.into(),
            issuer: issuer.into(),
            keys: None,
            claims: ClaimMap::default(),
            leeway: Duration::from_secs(30),
            refresh_every: Duration::from_secs(10 * 60),
            refetch_interval: Duration::from_secs(30),
        }
    }

    async fn caller(&self, token: &str) -> Result<CallContext, AuthRefusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            AuthRefusal::invalid_token(
                "token_malformed",
                "the token is not a JWT with a JWS header this server reads \
                 (alg \"none\" is refused)",
            )
        })?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(AuthRefusal::invalid_token(
                "token_algorithm_refused",
                format!(
                    "tokens signed with {:?} are refused: only asymmetric signatures are",
                    header.alg
                ),
            ));
        }
        let kid = header.kid.ok_or_else(|| {
            AuthRefusal::invalid_token("token_without_key_id", "the token names no key (`kid`)")
        })?;
        let key = match self.keys.key(&kid).await {
            Lookup::Found(key) => key,
            Lookup::Unknown => {
                return Err(AuthRefusal::invalid_token(
                    "token_unknown_key",
                    "the issuer publishes no key with the token's key id",
                ));
            }
            Lookup::Unavailable(error) => {
                return Err(AuthRefusal::invalid_token(
                    "issuer_keys_unavailable",
                    format!("the token cannot be verified now: {error}"),
                ));
            }
        };
        if !key.algorithms.contains(&header.alg) {
            return Err(AuthRefusal::invalid_token(
                "token_algorithm_refused",
                format!("the token's key is not for {:?}", header.alg),
            ));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[self.resource.resource()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = self.leeway.as_secs();
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation)
            .map_err(|error| refusal(error.kind()))?
            .claims;
        // The crate accepts an `iss` array that contains the issuer; a token has one issuer.
        if claims.get("iss").and_then(Value::as_str) != Some(self.issuer.as_str()) {
            return Err(refusal(&ErrorKind::InvalidIssuer));
        }
        self.claims.caller(&claims)
    }
}

/// The refusal of a token the JWT crate did not accept.
fn refusal(kind: &ErrorKind) -> AuthRefusal {
    let (code, description) = match kind {
        ErrorKind::InvalidSignature => ("token_bad_signature", "the token's signature is wrong"),
        ErrorKind::ExpiredSignature => ("token_expired", "the token has expired"),
        ErrorKind::ImmatureSignature => ("token_not_yet_valid", "the token is not valid yet"),
        ErrorKind::InvalidIssuer => ("token_wrong_issuer", "the token is from another issuer"),
        ErrorKind::InvalidAudience => (
            "token_wrong_audience",
            "the token is for another audience: ask for one for this server's URI (RFC 8707)",
        ),
        ErrorKind::MissingRequiredClaim(_) => (
            "token_missing_claim",
            "the token lacks exp, iss, aud or sub",
        ),
        ErrorKind::InvalidAlgorithm => (
            "token_algorithm_refused",
            "the token's algorithm does not fit its key",
        ),
        _ => (
            "token_malformed",
            "the token is not a JWT this server reads",
        ),
    };
    AuthRefusal::invalid_token(code, description)
}

impl Authenticator for OAuth {
    fn authenticate<'a>(
        &'a self,
        request: &'a Parts,
    ) -> BoxFuture<'a, Result<CallContext, AuthRefusal>> {
        Box::pin(async move {
            let token = bearer_token(request).ok_or(AuthRefusal::Missing)?;
            self.caller(token).await
        })
    }

    fn protected_resource(&self) -> Option<&ProtectedResource> {
        Some(&self.resource)
    }
}

/// The settings of an [`OAuth`] authenticator, from [`OAuth::builder`]. It needs a key source
/// ([`jwks_url`](Self::jwks_url) or [`key_source`](Self::key_source)) and at least one
/// [`scope`](Self::scope).
pub struct OAuthBuilder {
    resource: String,
    issuer: String,
    keys: Option<Result<Box<dyn KeySource>, OAuthError>>,
    claims: ClaimMap,
    leeway: Duration,
    refresh_every: Duration,
    refetch_interval: Duration,
}

impl OAuthBuilder {
    /// The issuer's keys are the JWK Set at `url` (its `jwks_uri`): `https://`, or `http://`
    /// on a loopback host.
    pub fn jwks_url(mut self, url: impl Into<String>) -> Self {
        self.keys = Some(JwksUrl::new(url).map(|source| Box::new(source) as Box<dyn KeySource>));
        self
    }

    /// The issuer's keys come from `source`.
    pub fn key_source(mut self, source: impl KeySource) -> Self {
        self.keys = Some(Ok(Box::new(source)));
        self
    }

    /// A token with `scope` grants `roles` (none: the tools that need no role). The scopes
    /// given are the ones the server publishes as `scopes_supported`.
    pub fn scope<I, S>(mut self, scope: impl Into<String>, roles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.claims
            .scopes
            .insert(scope.into(), roles.into_iter().map(Into::into).collect());
        self
    }

    /// The caller's tenant is the token's claim `claim`, which a token must then have.
    pub fn tenant_claim(mut self, claim: impl Into<String>) -> Self {
        self.claims.tenant_claim = Some(claim.into());
        self
    }

    /// A token with `scope` belongs to a host that relays its user's messages
    /// ([`RelaysUserMessages`](crate::RelaysUserMessages)): its calls may carry the user's
    /// latest message. The scope grants no roles: a host's token has a scope that does too.
    /// Let the authorization server grant it to hosts only, never to a client the model
    /// drives.
    pub fn relay_scope(mut self, scope: impl Into<String>) -> Self {
        self.claims.relay_scope = Some(scope.into());
        self
    }

    /// The caller's environment is the token's claim `claim`, which a token must then have.
    pub fn environment_claim(mut self, claim: impl Into<String>) -> Self {
        self.claims.environment_claim = Some(claim.into());
        self
    }

    /// How far `exp` and `nbf` may be off, for clocks that drift (default 30 seconds; whole
    /// seconds count).
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// How old the keys may get before a request fetches them again (default 10 minutes): how
    /// long a key the issuer stopped publishing may still be accepted.
    pub fn refresh_every(mut self, period: Duration) -> Self {
        self.refresh_every = period;
        self
    }

    /// The least time between two fetches of the keys, for whatever reason (default 30
    /// seconds): a flood of tokens naming unknown keys causes at most one fetch per interval.
    pub fn refetch_at_most_every(mut self, interval: Duration) -> Self {
        self.refetch_interval = interval;
        self
    }

    /// The authenticator; [`OAuthError`] if the resource or the JWKS URL is not one the
    /// server may use, or no key source or scope was given.
    pub fn build(self) -> Result<OAuth, OAuthError> {
        let scopes = self
            .claims
            .scopes
            .keys()
            .chain(&self.claims.relay_scope)
            .cloned()
            .collect::<BTreeSet<_>>();
        let resource = ProtectedResource::new(self.resource, [self.issuer.clone()])?.scopes(scopes);
        if self.issuer.is_empty() {
            return Err(OAuthError::Issuer);
        }
        let source = self.keys.ok_or(OAuthError::NoKeySource)??;
        if self.claims.scopes.is_empty() {
            return Err(OAuthError::NoScopes);
        }
        Ok(OAuth {
            issuer: self.issuer,
            resource,
            keys: KeyCache::new(source, self.refresh_every, self.refetch_interval),
            claims: self.claims,
            leeway: self.leeway,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder() -> OAuthBuilder {
        OAuth::builder("https://mcp.example.com/mcp", "https://auth.example.com")
            .jwks_url("https://auth.example.com/jwks.json")
            .scope("tickets", ["support"])
    }

    #[test]
    fn a_builder_needs_a_usable_resource_jwks_url_and_scopes() {
        let refused = |builder: OAuthBuilder| builder.build().err().map(|error| error.code());
        assert_eq!(refused(builder()), None);
        assert_eq!(
            refused(OAuth::builder(
                "http://mcp.example.com/mcp",
                "https://auth.example.com"
            )),
            Some("oauth_resource_invalid")
        );
        assert_eq!(
            refused(builder().jwks_url("http://auth.example.com/jwks.json")),
            Some("oauth_jwks_url_invalid")
        );
        assert_eq!(
            refused(OAuth::builder(
                "https://mcp.example.com/mcp",
                "https://auth.example.com"
            )),
            Some("oauth_no_key_source")
        );
        assert_eq!(
            refused(
                OAuth::builder("https://mcp.example.com/mcp", "https://auth.example.com")
                    .jwks_url("https://auth.example.com/jwks.json")
            ),
            Some("oauth_no_scopes")
        );
        assert_eq!(
            refused(
                OAuth::builder("https://mcp.example.com/mcp", "")
                    .jwks_url("https://auth.example.com/jwks.json")
                    .scope("tickets", ["support"])
            ),
            Some("oauth_issuer_invalid")
        );
    }

    #[test]
    fn the_metadata_names_the_issuer_and_the_scopes() {
        let oauth = builder()
            .scope("billing", ["finance"])
            .relay_scope("relay")
            .build()
            .unwrap();
        let document = oauth.protected_resource().unwrap().document();
        assert_eq!(
            document,
            serde_json::json!({
                "resource": "https://mcp.example.com/mcp",
                "authorization_servers": ["https://auth.example.com"],
                "scopes_supported": ["billing", "relay", "tickets"],
                "bearer_methods_supported": ["header"],
            })
        );
    }
}
