//! # torchfn
//!
//! PyTorch's `__torch_function__` override protocol for Rust, with the tensor runtime it
//! dispatches to. Every public operation can be intercepted by your own types: tensor
//! subclasses that keep their type and attributes through every operation, duck tensors,
//! modes that see every call; your own functions join the protocol with one attribute.
//!
//! ```
//! use torchfn::prelude::*;
//!
//! // An overridable function of your own, with a dispatcher that names its relevant arguments.
//! #[dispatcher]
//! fn scale_dispatcher(input: &Tensor, #[default(None)] factor: f64) -> impl Relevant {
//!     [input]
//! }
//!
//! #[torch_function(dispatcher = scale_dispatcher, module = "mylib")]
//! pub fn scale(input: &Tensor, #[default(2.0)] factor: f64) -> Result<Tensor> {
//!     input * factor
//! }
//!
//! // A subclass whose instances carry a unit through every operation: the derive gives it
//! // the default hook, which keeps the subclass (`#[torchfn(hook)]` declares a hook of its own).
//! #[derive(TensorSubclass)]
//! struct Meters;
//!
//! let d = torchfn::tensor([1.0f32, 2.0])?.as_subclass(Meters)?;
//! let e = scale(&(&d + &d)?, 3.0)?;
//! assert!(e.is_instance::<Meters>());
//! assert_eq!(e.to_string(), "Meters([ 6., 12.])");
//!
//! // The registry lists it beside torchfn's own functions, and calls it by name.
//! let funcs = torchfn::overrides::get_overridable_functions();
//! assert!(funcs["mylib"].iter().any(|f| f.qualified_name() == "mylib.scale"));
//! let by_name = SCALE.call(&[Value::from(&d)], &Kwargs::new())?;
//! assert_eq!(by_name.to_string(), "Meters([2., 4.])");
//! # Ok::<(), torchfn::Error>(())
//! ```
//!
//! # Design documents
//!
//! Two documents in the repository (and in the published package, under `docs/`) explain
//! what the API documentation does not:
//!
//! - [`docs/protocol.md`](https://github.com/torchfn/torchfn/blob/main/docs/protocol.md): the
//!   override protocol as torchfn implements it, step by step (classes and hooks, subclasses,
//!   ducks, modes, the order of dispatch, the default hook, the guards, the registry, the
//!   by-name call, dispatchers and their compile-time check, errors), with its deliberate
//!   differences from PyTorch in one table;
//! - [`docs/architecture.md`](https://github.com/torchfn/torchfn/blob/main/docs/architecture.md):
//!   the five layers a call goes through (protocol, operation, primitive, dispatch, kernels),
//!   the crates of the workspace, autograd, the backends, and how an operation is added.
//!
//! # Cargo features
//!
//! - `wgpu` (on by default): the GPU backend, through [wgpu](https://wgpu.rs) (Vulkan, Metal,
//!   DX12). With `default-features = false` torchfn computes on the CPU only and compiles
//!   neither wgpu nor its shaders. The API stays the same, so code compiles either way:
//!   [`Device::wgpu`] and `Device::parse("wgpu:0")` then return an error saying that torchfn
//!   was built without the `wgpu` feature, and [`wgpu::adapters`] is empty.

#![warn(missing_docs)]

/// Process groups, collectives and DistributedDataParallel on MPI (`torch.distributed`), from
/// the `torchfn-distributed` crate; MPI itself with the `mpi` feature.
pub use torchfn_distributed as distributed;
/// Symbolic tracing into graphs (`torch.fx`), from the `torchfn-fx` crate.
pub use torchfn_fx as fx;
// The runtime's API, and `torch.nn`'s modules with what follows them, from the `torchfn-nn`
// crate (which re-exports the runtime's).
pub use torchfn_nn::*;
/// Optimizers and learning-rate schedulers (`torch.optim`), from the `torchfn-optim` crate.
pub use torchfn_optim as optim;

/// Automatic mixed precision (`torch.amp`): [`autocast`] regions, from the runtime, and loss
/// scaling for float16 training, [`GradScaler`](amp::GradScaler), from the optimizers' crate.
pub mod amp {
    pub use torchfn_optim::{GradScaler, GradScalerState};
    pub use torchfn_runtime::amp::*;
}
