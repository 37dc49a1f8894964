use portcullis::prelude::*;

/// Reserve seats.
#[tool]
fn reserve_seats(#[schemars(description = "How many seats.")] seats: u32) -> Result<u32, ToolError> {
    Ok(seats)
}

fn main() {}
