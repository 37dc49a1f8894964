//! A verified token's claims become the caller's [`CallContext`]: the actor from `sub`, roles
//! from the scopes by the server's table, tenant and environment from claims the server names,
//! and the mark of a host that relays its user's messages from the scope the server names.

use std::collections::{BTreeMap, BTreeSet};

use portcullis_core::CallContext;
use serde_json::{Map, Value};

use crate::identity::{AuthRefusal, RelaysUserMessages};

/// How claims map to a caller.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClaimMap {
    /// Each scope this server knows, and the roles it grants (possibly none).
    pub(crate) scopes: BTreeMap<String, Vec<String>>,
    pub(crate) tenant_claim: Option<String>,
    pub(crate) environment_claim: Option<String>,
    /// The scope of hosts that relay their user's messages; it grants no roles.
    pub(crate) relay_scope: Option<String>,
}

impl ClaimMap {
    /// The caller the claims of a verified token name. A token with no scope this server
    /// knows is refused with `insufficient_scope`: it grants nothing here, not even the tools
    /// that need no role.
    pub(crate) fn caller(&self, claims: &Map<String, Value>) -> Result<CallContext, AuthRefusal> {
        let actor = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|sub| !sub.is_empty())
            .ok_or_else(|| missing_claim("sub"))?;
        let granted: Vec<&str> = scopes(claims)
            .filter(|scope| self.scopes.contains_key(*scope))
            .collect();
        if granted.is_empty() {
            return Err(AuthRefusal::InsufficientScope {
                scope: self.scopes.keys().cloned().collect::<Vec<_>>().join(" "),
                description: "the token grants no scope this server knows".to_owned(),
            });
        }
        let roles: BTreeSet<&str> = granted
            .iter()
            .flat_map(|scope| &self.scopes[*scope])
            .map(String::as_str)
            .collect();
        let mut caller = CallContext::new(actor).with_roles(roles);
        if let Some(relay) = &self.relay_scope
            && scopes(claims).any(|scope| scope == relay)
        {
            caller = caller.with_extension(RelaysUserMessages);
        }
        if let Some(name) = &self.tenant_claim {
            caller = caller.with_tenant(text_claim(claims, name)?);
        }
        if let Some(name) = &self.environment_claim {
            caller = caller.with_environment(text_claim(claims, name)?);
        }
        Ok(caller)
    }
}

/// The token's scopes: `scope`, space-separated (RFC 9068, RFC 8693), or `scp`, an array or
/// a space-separated string as some issuers write it.
fn scopes(claims: &Map<String, Value>) -> impl Iterator<Item = &str> {
    ["scope", "scp"]
        .into_iter()
        .filter_map(|name| claims.get(name))
        .flat_map(|value| -> Box<dyn Iterator<Item = &str> + '_> {
            match value {
                Value::String(text) => Box::new(text.split_ascii_whitespace()),
                Value::Array(items) => Box::new(items.iter().filter_map(Value::as_str)),
                _ => Box::new(std::iter::empty()),
            }
        })
}

fn text_claim<'a>(claims: &'a Map<String, Value>, name: &str) -> Result<&'a str, AuthRefusal> {
    claims
        .get(name)
        .and_then(Value::as_str)
        .filter(|value| !value.is_empty())
        .ok_or_else(|| missing_claim(name))
}

fn missing_claim(name: &str) -> AuthRefusal {
    AuthRefusal::invalid_token(
        "token_missing_claim",
        format!("the token has no `{name}` claim, or it is not a string"),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map() -> ClaimMap {
        let mut scopes = BTreeMap::new();
        scopes.insert("tickets".to_owned(), vec!["support".to_owned()]);
        scopes.insert(
            "billing".to_owned(),
            vec!["finance".to_owned(), "support".to_owned()],
        );
        scopes.insert("profile".to_owned(), Vec::new());
        ClaimMap {
            scopes,
            ..ClaimMap::default()
        }
    }

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn the_actor_is_the_subject_and_the_roles_come_from_the_known_scopes() {
        let caller = map()
            .caller(&claims(
                json!({"sub": "ann", "scope": "billing openid tickets"}),
            ))
            .unwrap();
        assert_eq!(caller.actor(), "ann");
        assert_eq!(caller.roles(), ["finance", "support"]);
        assert_eq!(caller.tenant(), None);
        assert_eq!(caller.environment(), None);
    }

    #[test]
    fn scp_is_read_as_an_array_or_a_string() {
        for scp in [json!(["tickets", "openid"]), json!("openid tickets")] {
            let caller = map()
                .caller(&claims(json!({"sub": "ann", "scp": scp})))
                .unwrap();
            assert_eq!(caller.roles(), ["support"]);
        }
    }

    #[test]
    fn a_known_scope_without_roles_grants_a_caller_without_roles() {
        let caller = map()
            .caller(&claims(json!({"sub": "ann", "scope": "profile"})))
            .unwrap();
        assert!(caller.roles().is_empty());
    }

    #[test]
    fn a_token_with_no_known_scope_is_refused_with_the_scopes_that_would_do() {
        for token in [
            json!({"sub": "ann", "scope": "openid email"}),
            json!({"sub": "ann"}),
            json!({"sub": "ann", "scope": 7}),
        ] {
            let refusal = map().caller(&claims(token)).unwrap_err();
            assert_eq!(refusal.code(), "insufficient_scope");
            let AuthRefusal::InsufficientScope { scope, .. } = refusal else {
                unreachable!()
            };
            assert_eq!(scope, "billing profile tickets");
        }
    }

    #[test]
    fn tenant_and_environment_come_from_the_named_claims_which_must_be_there() {
        let map = ClaimMap {
            tenant_claim: Some("org".to_owned()),
            environment_claim: Some("env".to_owned()),
            ..map()
        };
        let caller = map
            .caller(&claims(
                json!({"sub": "ann", "scope": "tickets", "org": "acme", "env": "prod"}),
            ))
            .unwrap();
        assert_eq!(caller.tenant(), Some("acme"));
        assert_eq!(caller.environment(), Some("prod"));
        for token in [
            json!({"sub": "ann", "scope": "tickets", "env": "prod"}),
            json!({"sub": "ann", "scope": "tickets", "org": 3, "env": "prod"}),
            json!({"sub": "ann", "scope": "tickets", "org": "acme"}),
        ] {
            let refusal = map.caller(&claims(token)).unwrap_err();
            assert_eq!(refusal.code(), "token_missing_claim");
        }
    }

    #[test]
    fn the_relay_scope_marks_a_host_and_grants_nothing_by_itself() {
        let map = ClaimMap {
            relay_scope: Some("relay".to_owned()),
            ..map()
        };
        let host = map
            .caller(&claims(json!({"sub": "desk", "scope": "tickets relay"})))
            .unwrap();
        assert!(RelaysUserMessages::marks(&host));
        assert_eq!(host.roles(), ["support"]);
        let other = map
            .caller(&claims(json!({"sub": "ann", "scope": "tickets"})))
            .unwrap();
        assert!(!RelaysUserMessages::marks(&other));
        let alone = map
            .caller(&claims(json!({"sub": "desk", "scope": "relay"})))
            .unwrap_err();
        assert_eq!(alone.code(), "insufficient_scope");
    }

    #[test]
    fn a_token_without_a_subject_is_refused() {
        for token in [
            json!({"scope": "tickets"}),
            json!({"sub": "", "scope": "tickets"}),
        ] {
            let refusal = map().caller(&claims(token)).unwrap_err();
            assert_eq!(refusal.code(), "token_missing_claim");
        }
    }
}
