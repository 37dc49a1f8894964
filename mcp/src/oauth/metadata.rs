//! The server as an OAuth protected resource: its metadata document (RFC 9728), which tells a
//! client where to get a token for it.

use axum::Router;
use axum::http::header;
use axum::routing::get;
use serde_json::{Value, json};

use super::error::OAuthError;

/// Where RFC 9728 puts a protected resource's metadata, before the resource's own path.
const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// This server as an OAuth 2.1 protected resource (RFC 9728): its canonical URI, which tokens
/// must name as their audience (RFC 8707), the authorization servers that issue them, and the
/// scopes it knows. The router serves the document at
/// `/.well-known/oauth-protected-resource` followed by the resource's path (and at the bare
/// well-known path, which clients try next), and every challenge names it.
///
/// ```
/// use portcullis_mcp::oauth::ProtectedResource;
///
/// let authorization_servers = ["https://auth.example.com"];
/// let resource = ProtectedResource::new("https://mcp.example.com/mcp", authorization_servers)
///     .unwrap()
///     .scopes(["tickets:read"]);
/// assert_eq!(
///     resource.metadata_url(),
///     "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
/// );
/// assert_eq!(resource.document()["scopes_supported"][0], "tickets:read");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedResource {
    resource: String,
    origin: String,
    path: String,
    authorization_servers: Vec<String>,
    scopes: Vec<String>,
}

impl ProtectedResource {
    /// The resource at `resource`, its canonical URI: `https://` (or `http://` on a loopback
    /// host, for local use), no query, no fragment. [`OAuthError::Resource`] otherwise.
    pub fn new<I, S>(
        resource: impl Into<String>,
        authorization_servers: I,
    ) -> Result<Self, OAuthError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let resource = resource.into();
        let (origin, path) =
            split_url(&resource).ok_or_else(|| OAuthError::Resource(resource.clone()))?;
        Ok(ProtectedResource {
            origin: origin.to_owned(),
            path: path.trim_end_matches('/').to_owned(),
            resource,
            authorization_servers: authorization_servers.into_iter().map(Into::into).collect(),
            scopes: Vec::new(),
        })
    }

    /// The scopes this resource knows, published as `scopes_supported` and asked for when a
    /// token's scopes are not enough.
    pub fn scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The canonical URI: the audience tokens must name.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The scopes this resource knows.
    pub fn scopes_supported(&self) -> &[String] {
        &self.scopes
    }

    /// The URL of the metadata document, as challenges name it (`resource_metadata`).
    pub fn metadata_url(&self) -> String {
        format!("{}{WELL_KNOWN}{}", self.origin, self.path)
    }

    /// The metadata document (RFC 9728 section 2).
    pub fn document(&self) -> Value {
        json!({
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "scopes_supported": self.scopes,
            "bearer_methods_supported": ["header"],
        })
    }

    /// The routes that serve the document, outside any authentication.
    pub(crate) fn routes(&self) -> Router {
        let document = self.document().to_string();
        let serve = move || {
            let document = document.clone();
            async move { ([(header::CONTENT_TYPE, "application/json")], document) }
        };
        let mut router = Router::new().route(WELL_KNOWN, get(serve.clone()));
        if !self.path.is_empty() {
            router = router.route(&format!("{WELL_KNOWN}{}", self.path), get(serve));
        }
        router
    }
}

/// Splits an absolute `https` URL (or `http` on a loopback host) without query or fragment
/// into its origin and its path.
pub(crate) fn split_url(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    if url.contains(['?', '#', '@']) || url.chars().any(char::is_whitespace) {
        return None;
    }
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let (host, port) = match authority.find(']') {
        Some(end) if authority.starts_with('[') => authority.split_at(end + 1),
        _ => authority.split_at(authority.find(':').unwrap_or(authority.len())),
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
    if host.is_empty() || !port_ok {
        return None;
    }
    let loopback = matches!(host, "localhost" | "127.0.0.1" | "[::1]");
    match scheme {
        "https" => {}
        "http" if loopback => {}
        _ => return None,
    }
    let origin_len = scheme.len() + "://".len() + authority_end;
    Some((&url[..origin_len], &url[origin_len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_puts_the_well_known_path_before_the_resources_path() {
        let at = |resource: &str| {
            ProtectedResource::new(resource, ["https://auth.example.com"])
                .unwrap()
                .metadata_url()
        };
        assert_eq!(
            at("https://mcp.example.com/mcp"),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            at("https://mcp.example.com"),
            "https://mcp.example.com/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            at("https://mcp.example.com:8443/"),
            "https://mcp.example.com:8443/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            at("http://127.0.0.1:8765/mcp"),
            "http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            at("http://[::1]:8765/mcp"),
            "http://[::1]:8765/.well-known/oauth-protected-resource/mcp"
        );
    }

    #[test]
    fn a_resource_is_https_or_loopback_http_without_query_or_fragment() {
        for refused in [
            "http://mcp.example.com/mcp",
            "ftp://mcp.example.com",
            "https://mcp.example.com/mcp?tenant=a",
            "https://mcp.example.com/mcp#x",
            "https:///mcp",
            "https://user@mcp.example.com/mcp",
            "mcp.example.com/mcp",
            "https://mcp.example.com:/mcp",
            "http://localhost.evil.example/mcp",
        ] {
            let error = ProtectedResource::new(refused, ["https://auth.example.com"]).unwrap_err();
            assert_eq!(error.code(), "oauth_resource_invalid", "{refused}");
        }
    }
}
