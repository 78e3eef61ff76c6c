//! The vocabulary every layer of [torchfn](https://docs.rs/torchfn) shares, below all of them:
//! the one error type, element types and their promotion, shapes, strides and layouts, and
//! scalars. Nothing here knows tensors, backends or the protocol, and, as a crate of its own,
//! nothing here can reach them. Use it through the `torchfn` crate, which re-exports all of it.
//!
//! ```
//! use torchfn::{DType, Scalar, Shape};
//!
//! assert_eq!(DType::Int64.promote(DType::Float32), DType::Float32);
//! assert_eq!(Shape::new(&[2, 3]).numel(), 6);
//! assert_eq!(Scalar::from(2.5).dtype(), DType::Float64);
//! ```

#![warn(missing_docs)]

mod dtype;

/// The `half` crate, whose `f16` and `bf16` are the elements of float16 and bfloat16 tensors.
pub use half;
pub mod error;
mod layout;
mod scalar;

#[doc(hidden)]
pub use dtype::reduced as dtype_reduced;
pub use dtype::{
    Category, DType, DefaultDTypeGuard, Element, Participant, default_dtype, get_default_dtype, result_type,
    set_default_dtype,
};
pub use error::{Error, ErrorKind, Result};
pub use layout::{Layout, Shape, Strides, broadcast_shapes, check_broadcast};
pub use scalar::{Scalar, python_float};
