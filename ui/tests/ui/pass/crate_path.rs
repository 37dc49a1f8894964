//! `#[tool(crate = "...")]`: the path the generated code takes `portcullis` from.

use portcullis::prelude::*;

mod reexport {
    pub use portcullis::*;
}

use portcullis as gates;

/// Through the absolute path.
#[tool(crate = "::portcullis")]
fn absolute(value: u32) -> Result<u32, ToolError> {
    Ok(value)
}

/// Through a module that re-exports portcullis.
#[tool(crate = "crate::reexport", risk = "medium")]
fn through_reexport(value: u32) -> Result<u32, ToolError> {
    Ok(value)
}

/// Through a renamed import.
#[tool(crate = "gates", timeout_ms = 100)]
async fn through_alias(#[sensitive] secret: String) -> Result<usize, ToolError> {
    Ok(secret.len())
}

fn main() {
    assert_eq!(Absolute.contract().name(), "absolute");
    assert_eq!(ThroughReexport.contract().risk(), Risk::Medium);
    assert_eq!(ThroughAlias.contract().sensitive(), ["/secret"]);
    Registry::builder()
        .tool(Absolute)
        .tool(ThroughReexport)
        .tool(ThroughAlias)
        .build()
        .unwrap();
}
