use portcullis::prelude::*;

/// Read a raw pointer.
#[tool]
unsafe fn read_address(address: usize) -> Result<u8, ToolError> {
    Ok(unsafe { *(address as *const u8) })
}

fn main() {}
