//! The vocabulary every layer shares, below all of them: element types and their promotion,
//! shapes, strides and layouts, and scalars, from the `torchfn-types` crate (which cannot see
//! the layers above it).

pub use torchfn_types::{DType, DefaultDTypeGuard, Element, Layout, Scalar, Shape, Strides};
pub use torchfn_types::{default_dtype, get_default_dtype, half, set_default_dtype};

pub(crate) use torchfn_types::with_dtype;
pub(crate) use torchfn_types::{Participant, broadcast_shapes, check_broadcast, result_type};
