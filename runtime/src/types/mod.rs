//! The vocabulary every layer shares, below all of them: element types and their promotion,
//! shapes, strides and layouts, and scalars. Nothing here knows tensors, backends or the
//! protocol.

mod dtype;
mod layout;
mod scalar;

pub use dtype::{DType, DefaultDTypeGuard, Element, default_dtype, get_default_dtype, set_default_dtype};
pub use layout::{Layout, Shape, Strides};
pub use scalar::Scalar;

pub(crate) use dtype::{Participant, result_type, with_dtype};
pub(crate) use layout::{broadcast_shapes, check_broadcast};
