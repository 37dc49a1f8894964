//! The gates every call passes, in order. Each gate passes the call on or refuses it with a
//! [`Rejection`](crate::Rejection) carrying one of its codes; nothing reaches a tool's body unless
//! every gate before it passed.

pub(crate) mod approve;
pub(crate) mod authorize;
pub(crate) mod bound;
pub(crate) mod budget;
pub(crate) mod decode;
pub(crate) mod execute;
pub(crate) mod repeat;
pub(crate) mod resolve;
pub(crate) mod validate;

pub use decode::DecodeLimits;
