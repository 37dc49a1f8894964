//! MCP `tools/list` entries, with annotations derived from the contract.
//!
//! Annotations are hints for the client's user interface; MCP says clients must not rely on
//! them for safety, and the gates do not: they enforce the contract themselves.

use serde_json::{Map, Value, json};

use crate::{Risk, ToolContract};

/// `{"name", "description", "inputSchema", "outputSchema"?, "annotations"}`.
pub(super) fn tool(contract: &ToolContract, schema: &Value) -> Result<Value, String> {
    let read_only = contract.read_only();
    let destructive =
        !read_only && (contract.irreversible().is_some() || contract.risk() >= Risk::High);
    let mut tool = Map::new();
    tool.insert("name".into(), json!(contract.name()));
    tool.insert("description".into(), json!(contract.description()));
    tool.insert("inputSchema".into(), schema.clone());
    // MCP's output schema describes `structuredContent`, which is always an object.
    if let Some(output) = contract
        .output_schema()
        .filter(|output| output.get("type") == Some(&json!("object")))
    {
        tool.insert("outputSchema".into(), output.clone());
    }
    tool.insert(
        "annotations".into(),
        json!({
            "readOnlyHint": read_only,
            "destructiveHint": destructive,
            "idempotentHint": read_only || contract.idempotent(),
            "openWorldHint": contract.open_world(),
        }),
    );
    Ok(Value::Object(tool))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(contract: ToolContract) -> Value {
        let schema = contract.input_schema().clone();
        tool(&contract, &schema).unwrap()["annotations"].clone()
    }

    #[test]
    fn annotations_follow_the_contract() {
        let schema = json!({"type": "object", "additionalProperties": false});
        let read = ToolContract::builder("read", "Reads.", schema.clone())
            .read_only()
            .closed_world()
            .build();
        assert_eq!(
            annotations(read),
            json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true,
                "openWorldHint": false})
        );
        let wipe = ToolContract::builder("wipe", "Wipes.", schema.clone())
            .risk(Risk::Low)
            .irreversible("gone")
            .build();
        assert_eq!(annotations(wipe)["destructiveHint"], json!(true));
        let tag = ToolContract::builder("tag", "Tags.", schema)
            .risk(Risk::Medium)
            .idempotent()
            .build();
        assert_eq!(
            annotations(tag),
            json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true,
                "openWorldHint": true})
        );
    }
}
