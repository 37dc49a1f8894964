//! JSON as the gates read it: parsed strictly from the model's text (duplicate keys, depth and
//! size seen), viewed alike whether parsed or built, and written canonically for comparison
//! ([`canonical`]).

pub(crate) mod canonical;
mod stream;
pub(crate) mod strict;

pub use canonical::canonical;
pub(crate) use canonical::{
    JsonView, Sets, View, canonical_text, identity_text, integer_value, sorted,
};
pub(crate) use stream::write_canonical_of;
pub(crate) use strict::{StrictJsonError, longer_than, parse as parse_strictly};
