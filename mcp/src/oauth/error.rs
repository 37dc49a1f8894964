//! Why an OAuth authenticator could not be built.

use std::fmt;

/// Why an [`OAuth`](super::OAuth) authenticator could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OAuthError {
    /// The resource URI is not `https://` (or `http://` on a loopback host), or has a query or
    /// a fragment.
    Resource(String),
    /// The issuer is empty.
    Issuer,
    /// The JWKS URL is not `https://` (or `http://` on a loopback host).
    JwksUrl(String),
    /// The system's root certificates could not be read.
    Tls(String),
    /// Neither a JWKS URL nor a key source was given.
    NoKeySource,
    /// No scope was given: every token would be refused.
    NoScopes,
}

impl OAuthError {
    /// The stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            OAuthError::Resource(_) => "oauth_resource_invalid",
            OAuthError::Issuer => "oauth_issuer_invalid",
            OAuthError::JwksUrl(_) => "oauth_jwks_url_invalid",
            OAuthError::Tls(_) => "oauth_tls_unavailable",
            OAuthError::NoKeySource => "oauth_no_key_source",
            OAuthError::NoScopes => "oauth_no_scopes",
        }
    }
}

impl fmt::Display for OAuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OAuthError::Resource(uri) => write!(
                f,
                "the resource URI {uri:?} is not https:// (or http:// on a loopback host) \
                 without query or fragment"
            ),
            OAuthError::Issuer => f.write_str("the issuer is empty"),
            OAuthError::JwksUrl(url) => write!(
                f,
                "the JWKS URL {url:?} is not https:// (or http:// on a loopback host)"
            ),
            OAuthError::Tls(reason) => write!(f, "TLS is unavailable: {reason}"),
            OAuthError::NoKeySource => {
                f.write_str("the issuer's keys come from nowhere: give a JWKS URL")
            }
            OAuthError::NoScopes => {
                f.write_str("no scope maps to roles: every token would be refused")
            }
        }
    }
}

impl std::error::Error for OAuthError {}
