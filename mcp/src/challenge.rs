//! The answer to a refused request: `401` (or `403` for too little scope) with a
//! `WWW-Authenticate: Bearer` challenge (RFC 6750) that names the server's protected resource
//! metadata (RFC 9728), and a JSON body with the refusal's code.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::identity::AuthRefusal;
use crate::oauth::ProtectedResource;

/// The response to a request refused for `refusal`.
pub(crate) fn refused(refusal: &AuthRefusal, resource: Option<&ProtectedResource>) -> Response {
    let mut params = Vec::new();
    if let Some(resource) = resource {
        params.push(("resource_metadata", resource.metadata_url()));
    }
    let status = match refusal {
        AuthRefusal::Missing => StatusCode::UNAUTHORIZED,
        AuthRefusal::InvalidToken { .. } => {
            params.push(("error", "invalid_token".to_owned()));
            params.push(("error_description", refusal.description().to_owned()));
            StatusCode::UNAUTHORIZED
        }
        AuthRefusal::InsufficientScope { scope, .. } => {
            params.push(("error", "insufficient_scope".to_owned()));
            params.push(("scope", scope.clone()));
            params.push(("error_description", refusal.description().to_owned()));
            StatusCode::FORBIDDEN
        }
    };
    let challenge = params
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", quotable(value)))
        .collect::<Vec<_>>()
        .join(", ");
    let challenge = if challenge.is_empty() {
        "Bearer".to_owned()
    } else {
        format!("Bearer {challenge}")
    };
    let challenge =
        HeaderValue::from_str(&challenge).unwrap_or_else(|_| HeaderValue::from_static("Bearer"));
    let body = json!({"error": refusal.code(), "message": refusal.description()});
    (
        status,
        [
            (header::WWW_AUTHENTICATE, challenge),
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
        ],
        body.to_string(),
    )
        .into_response()
}

/// `value` with only the characters RFC 6750 allows in a quoted parameter: printable ASCII
/// but `"` and `\`.
fn quotable(value: &str) -> String {
    value
        .chars()
        .map(|c| match c {
            ' ' | '!' | '#'..='[' | ']'..='~' => c,
            _ => '\'',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn challenge(refusal: &AuthRefusal, resource: Option<&ProtectedResource>) -> (u16, String) {
        let response = refused(refusal, resource);
        let challenge = response.headers()[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .to_owned();
        (response.status().as_u16(), challenge)
    }

    #[test]
    fn each_refusal_has_its_challenge() {
        let resource =
            ProtectedResource::new("https://mcp.example.com/mcp", ["https://auth.example.com"])
                .unwrap();
        let metadata = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
        assert_eq!(
            challenge(&AuthRefusal::Missing, Some(&resource)),
            (401, format!("Bearer resource_metadata=\"{metadata}\""))
        );
        assert_eq!(
            challenge(&AuthRefusal::Missing, None),
            (401, "Bearer".to_owned())
        );
        let expired = AuthRefusal::invalid_token("token_expired", "it \"expired\"\n");
        assert_eq!(
            challenge(&expired, Some(&resource)),
            (
                401,
                format!(
                    "Bearer resource_metadata=\"{metadata}\", error=\"invalid_token\", \
                     error_description=\"it 'expired''\""
                )
            )
        );
        let scope = AuthRefusal::InsufficientScope {
            scope: "billing tickets".to_owned(),
            description: "no scope".to_owned(),
        };
        assert_eq!(
            challenge(&scope, Some(&resource)),
            (
                403,
                format!(
                    "Bearer resource_metadata=\"{metadata}\", error=\"insufficient_scope\", \
                     scope=\"billing tickets\", error_description=\"no scope\""
                )
            )
        );
    }
}
