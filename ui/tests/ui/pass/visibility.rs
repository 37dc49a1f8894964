//! The generated items take the function's visibility: `pub`, `pub(crate)` and private tools.

mod tools {
    use portcullis::prelude::*;

    /// A public tool.
    #[tool]
    pub fn public_tool(value: u32) -> Result<u32, ToolError> {
        Ok(value)
    }

    /// A crate-visible tool.
    #[tool]
    pub(crate) fn crate_tool(value: u32) -> Result<u32, ToolError> {
        Ok(value)
    }

    /// A private tool, registered from its own module.
    #[tool]
    fn private_tool(value: u32) -> Result<u32, ToolError> {
        Ok(value)
    }

    pub(crate) fn registry() -> Registry {
        Registry::builder()
            .tool(PublicTool)
            .tool(CrateTool)
            .tool(PrivateTool)
            .build()
            .unwrap()
    }

    pub(crate) fn private_args() -> String {
        format!("{:?}", PrivateToolArgs { value: 1 })
    }
}

use portcullis::prelude::*;

/// A private tool at the crate root.
#[tool]
fn root_tool() -> Result<(), ToolError> {
    Ok(())
}

fn main() {
    // Items of `pub` and `pub(crate)` tools, and their fields, are reachable from outside.
    let _ = tools::PublicToolArgs { value: 1 }.value;
    let _ = tools::CrateToolArgs { value: 1 }.value;
    assert_eq!(tools::public_tool(2), Ok(2));
    assert_eq!(tools::crate_tool(2), Ok(2));
    assert_eq!(tools::CrateTool.contract().name(), "crate_tool");

    let registry = tools::registry();
    let mut names: Vec<&str> = registry.contracts().map(ToolContract::name).collect();
    names.sort_unstable();
    assert_eq!(names, ["crate_tool", "private_tool", "public_tool"]);
    assert_eq!(tools::private_args(), "PrivateToolArgs { value: 1 }");

    assert_eq!(RootTool.contract().name(), "root_tool");
    assert_eq!(root_tool(), Ok(()));
}
