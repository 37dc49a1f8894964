//! A contract as the manifest writes it, and its hash, which a ticket records so that a call
//! is never run under a contract other than the one it was approved for.

use serde_json::{Value, json};

use super::ToolContract;
use crate::digest::sha256_hex;
use crate::json::canonical_text;

/// The contract's entry in a registry's manifest: a stable, sorted JSON document.
pub(crate) fn entry(contract: &ToolContract) -> Value {
    let mut roles = contract.roles().to_vec();
    roles.sort();
    let mut environments = contract.environments().to_vec();
    environments.sort();
    let mut sensitive = contract.sensitive().to_vec();
    sensitive.sort();
    let mut dynamic: Vec<&str> = contract.dynamic_arguments().collect();
    dynamic.sort();
    let mut entry = json!({
        "name": contract.name(),
        "description": contract.description(),
        "risk": contract.risk(),
        "roles": roles,
        "environments": environments,
        "approval": contract.approval(),
        "approvers": contract.approvers(),
        "audit_required": contract.audit_required(),
        "rollback": contract.rollback(),
        "irreversible": contract.irreversible(),
        "read_only": contract.read_only(),
        "idempotent": contract.idempotent(),
        "open_world": contract.open_world(),
        "cost": contract.cost(),
        "max_calls_per_task": contract.max_calls_per_task(),
        "timeout_ms": contract.timeout().map(|timeout| timeout.as_millis()),
        "policy": contract.policy(),
        "tenant_argument": contract.tenant_argument(),
        "environment_argument": contract.environment_argument(),
        "sensitive": sensitive,
        "one_of": dynamic,
        "input_schema_sha256": schema_hash(contract.input_schema()),
        "output_schema_sha256": contract.output_schema().map(schema_hash),
    });
    // Only when set, so that the hashes of earlier contracts, which tickets waiting across
    // an upgrade recorded, stay what they were.
    if contract.caller_confirms() {
        entry["caller_confirms"] = Value::Bool(true);
    }
    if !contract.provenance().is_empty() {
        let mut provenance = contract.provenance().clone();
        provenance
            .rules
            .sort_by(|one, other| one.pointer.cmp(&other.pointer));
        entry["provenance"] = json!(provenance);
    }
    entry
}

/// The SHA-256 of a contract's manifest entry: what a ticket records, so that a call is never
/// run under a contract other than the one it was approved for.
pub(crate) fn contract_hash(contract: &ToolContract) -> String {
    sha256_hex(canonical_text(&entry(contract)).as_bytes())
}

/// The SHA-256 of `schema` as compact JSON with every object's keys sorted, whatever order
/// the map keeps (serde_json keeps insertion order when any crate in the build turns on its
/// `preserve_order` feature), so that equal schemas hash equally.
fn schema_hash(schema: &Value) -> String {
    sha256_hex(canonical_text(schema).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_schemas_hash_equally_whatever_their_key_order() {
        let mut one = serde_json::Map::new();
        one.insert("a".into(), json!([1, {"y": "\"", "x": null}]));
        one.insert("b".into(), json!(2));
        let mut two = serde_json::Map::new();
        two.insert("b".into(), json!(2));
        two.insert("a".into(), json!([1, {"x": null, "y": "\""}]));
        assert_eq!(
            canonical_text(&Value::Object(two.clone())),
            r#"{"a":[1,{"x":null,"y":"\""}],"b":2}"#
        );
        assert_eq!(
            schema_hash(&Value::Object(one)),
            schema_hash(&Value::Object(two))
        );
        assert_ne!(schema_hash(&json!({"a": 1})), schema_hash(&json!({"a": 2})));
    }
}
