use portcullis::prelude::*;

/// Reserve seats.
#[tool]
fn reserve_seats(#[schemars(range(max = 10))] seats: u32) -> Result<u32, ToolError> {
    Ok(seats)
}

fn main() {}
