//! The runtime behind [torchfn](https://docs.rs/torchfn): the override protocol, the registry,
//! the tensor and its kernels. Use it through the `torchfn` crate, which re-exports all of it.
//!
//! ```
//! use torchfn::prelude::*;
//!
//! // A tensor subclass: the default hook keeps it through every operation.
//! #[derive(TensorSubclass)]
//! struct Tagged(&'static str);
//!
//! let t = torchfn::tensor([1.0f32, 2.0])?.as_subclass(Tagged("sensor-7"))?;
//! let u = (&t * 2.0)?.sum()?;
//! assert!(u.is_instance::<Tagged>());
//! assert_eq!(u.attrs::<Tagged>().unwrap().0, "sensor-7");
//! assert_eq!(u.to_string(), "Tagged(6.)");
//! # Ok::<(), torchfn::Error>(())
//! ```
//!
//! How it is built:
//! [`docs/architecture.md`](https://github.com/torchfn/torchfn/blob/main/docs/architecture.md)
//! (the layers `protocol/` → `ops/` → `primitive/` → `dispatch/` → `cpu/`, `wgpu/` and
//! `meta.rs`, autograd, the
//! backends, adding an operation); the protocol it implements:
//! [`docs/protocol.md`](https://github.com/torchfn/torchfn/blob/main/docs/protocol.md).
//!
//! The `wgpu` cargo feature (on by default) is the GPU backend, [`wgpu`]; without it the
//! runtime computes on the CPU only, and [`Device::wgpu`] returns an error saying so.

#![warn(missing_docs)]

// Generated code names `::torchfn`; inside the runtime that is the runtime itself.
extern crate self as torchfn;

pub mod amp;
pub mod autograd;
pub mod backend;
pub mod dispatch;
mod error;
pub mod fake_tensor;
pub mod func;
mod meta;
pub mod npy;
mod ops;
pub mod overrides;
mod primitive;
mod protocol;
mod tensor;
pub mod testing;
mod types;
mod value;
/// The CPU backend (the kernels crate's), and the host toolkit the layers above still use.
pub(crate) use torchfn_kernels::cpu;
/// The wgpu backend (Vulkan, Metal, DX12) from the kernels crate: adapters, preferences,
/// batching. Without the `wgpu` feature, the same API without the backend: errors and empty
/// lists.
pub use torchfn_kernels::wgpu;

pub use amp::autocast;
pub use backend::Device;
pub use error::{Error, ErrorKind, Result};
/// The ndarray version tensors convert to and from (`Tensor::from(array)`,
/// `Array2::<f32>::try_from(&tensor)`): name array types through it so that the versions match.
pub use ndarray;
pub use ops::*;
pub use protocol::{
    Class, DEFAULT_RECURSION_LIMIT, DisableTorchFunction, DisableTorchFunctionSubclass, DuckTensor,
    EnableTorchFunction, Func, FuncKind, Hook, IntoMode, ModeGuard, Outcome, Param, ParamDefault, Relevant, Signature,
    TensorLike, TensorParent, TensorSubclass, TorchFunction, TorchFunctionMode, Types, current_mode,
    enable_torch_function, is_torch_function_enabled, is_torch_function_mode_enabled, mode_stack, mode_stack_len,
    pop_mode, push_mode, recursion_limit, set_recursion_limit,
};
pub use tensor::{
    ById, DEFAULT_SEED, DType, Dims, Element, Generator, Index, IndexItem, ReduceDims, Scalar, Shape, Tensor,
    TensorData, initial_seed, manual_seed, seed,
};
pub use torchfn_kernels::cpu::threads::{get_num_threads, set_num_threads};
pub use torchfn_macros::{DuckTensor, TensorSubclass, dispatcher, implements, torch_function};
pub use types::{DefaultDTypeGuard, default_dtype, get_default_dtype, half, set_default_dtype};
pub use value::{Arg, FromValue, Kwargs, Object, Returns, Slice, ToValue, Value};

/// What most programs need: `use torchfn::prelude::*;`.
pub mod prelude {
    pub use crate::{
        Class, DType, DuckTensor, Error, Func, Generator, Kwargs, Outcome, Relevant, Result, Scalar, Tensor,
        TensorLike, TensorSubclass, TorchFunction, TorchFunctionMode, Types, Value, dispatcher, implements, pop_mode,
        push_mode, torch_function,
    };
}

/// What generated code calls. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::overrides::Registered;
    pub use crate::protocol::Route;
    pub use crate::protocol::bind::bind;
    pub use crate::protocol::dispatch::{Args, Typed, dispatch, fast_path};
    pub use crate::protocol::implements::Implements;
    pub use crate::protocol::{Overload, RegisteredOverload};
    pub use crate::value::{Arg, Returns};
    pub use inventory;
    pub use torchfn_macros::torch_function_checked;

    use crate::value::Value;

    /// The items of a variadic argument, as separate positional arguments.
    pub fn splat(value: Value) -> Vec<Value> {
        match value {
            Value::List(items) | Value::Tuple(items) => items,
            other => vec![other],
        }
    }

    /// Passes a keyword-only argument of a typed call to hooks and modes, unless it equals its
    /// parameter's default: a Python caller who left it out passes nothing.
    pub fn push_keyword(kwargs: &mut crate::Kwargs, name: &'static str, value: Value, default: Option<fn() -> Value>) {
        if !default.is_some_and(|d| value.is_same_constant(&d())) {
            kwargs.insert(name, value);
        }
    }
}
