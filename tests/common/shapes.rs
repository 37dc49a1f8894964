//! Tools of every shape the gates must enforce exactly as their schema says: maps, sets,
//! boxes, lists of options, enum payloads, tagged and untagged enums, user types without
//! `#[validate(nested)]`, `f32` and `f64` bounds, `does_not_contain`. Shared by the regression
//! tests (`one_truth.rs`) and the schema parity test (`schema_parity.rs`).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use portcullis::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use validator::Validate;

#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct Dims {
    #[validate(range(min = 1, max = 100))]
    pub width: u32,
    #[validate(length(max = 8))]
    label: String,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub enum Shape {
    Boxed(Dims),
    Framed { inner: Dims },
    Point,
}

/// A holder of `Dims` that never says `#[validate(nested)]`.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub struct Crate {
    dims: Dims,
    spare: Box<Dims>,
}

/// Pack boxes.
#[tool]
#[allow(clippy::too_many_arguments)]
pub fn pack(
    by_name: HashMap<String, Dims>,
    sorted: BTreeMap<String, Dims>,
    boxed: Box<Dims>,
    maybe: Vec<Option<Dims>>,
    shape: Shape,
    holder: Crate,
    tags: HashSet<String>,
    codes: BTreeSet<u32>,
) -> Result<usize, ToolError> {
    let _ = (sorted, boxed, maybe, shape, holder, tags, codes);
    Ok(by_name.len())
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Internal {
    Resize { width: u32 },
    Rotate { degrees: i16 },
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(
    tag = "kind",
    content = "data",
    rename_all = "snake_case",
    deny_unknown_fields
)]
pub enum Adjacent {
    Resize(u32),
    Stop,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Untagged {
    Count(u32),
    Label(String),
}

/// Transform an image.
#[tool]
pub fn transform(
    internal: Internal,
    adjacent: Adjacent,
    untagged: Untagged,
) -> Result<String, ToolError> {
    Ok(format!("{internal:?} {adjacent:?} {untagged:?}"))
}

/// Weigh an item.
#[tool]
pub fn weigh(
    #[validate(range(max = 100.0))] light: f32,
    #[validate(range(exclusive_max = 100.0))] below: f32,
    #[validate(range(exclusive_max = 100.0))] precise: f64,
) -> Result<String, ToolError> {
    Ok(format!("{light} {below} {precise}"))
}

/// Rename a user.
#[tool]
pub fn rename_user(
    #[validate(does_not_contain(pattern = "admin"))] new_name: String,
) -> Result<String, ToolError> {
    Ok(new_name)
}
