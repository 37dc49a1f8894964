use portcullis::prelude::*;

fn cents_from_dollars<'de, D: serde::Deserializer<'de>>(dollars: D) -> Result<u64, D::Error> {
    let dollars = <u64 as serde::Deserialize>::deserialize(dollars)?;
    Ok(dollars.saturating_mul(100))
}

/// Charge a card.
#[tool(risk = "medium", irreversible = "charges settle at once")]
fn charge(
    #[serde(deserialize_with = "cents_from_dollars")] amount_cents: u64,
) -> Result<u64, ToolError> {
    Ok(amount_cents)
}

fn main() {}
