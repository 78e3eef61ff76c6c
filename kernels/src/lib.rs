//! torchfn's kernels, the layer below the dispatcher (layer 5): the [`Backend`](backend::Backend)
//! trait every device type implements, the arrays and storage its kernels read and write, and
//! the three backends, [`cpu`], [`wgpu`] and [`meta`]. This crate sees only the vocabulary
//! below it (`torchfn-types`): nothing here can reach a tensor, an operator or autograd.
//!
//! ```
//! use torchfn_kernels::backend::{Device, Unary};
//! use torchfn_types::{DType, Scalar, Shape};
//!
//! let cpu = Device::CPU.backend();
//! let x = cpu.fill(Device::CPU, &Shape::from([2, 3]), Scalar::Float(4.0), DType::Float32)?;
//! let y = cpu.unary(&x, Unary::Sqrt, DType::Float32, None)?;
//! assert_eq!(cpu.download(&y)?.as_slice::<f32>().unwrap(), [2.0; 6]);
//! # Ok::<(), torchfn_types::Error>(())
//! ```

#![warn(missing_docs)]

pub mod backend;
pub mod cpu;
pub mod meta;
pub mod random;
// Without the `wgpu` feature, the same API without the backend: errors and empty lists.
#[cfg_attr(not(feature = "wgpu"), path = "wgpu/disabled.rs")]
pub mod wgpu;

/// The error type, from `torchfn-types`.
mod error {
    pub use torchfn_types::bail;
    pub use torchfn_types::error::*;
}

/// The shared vocabulary, from `torchfn-types`.
mod types {
    pub use torchfn_types::*;
}
