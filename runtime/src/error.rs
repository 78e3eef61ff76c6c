//! The one error type of torchfn, from the `torchfn-types` crate.

pub use torchfn_types::error::*;

pub(crate) use torchfn_types::bail;
