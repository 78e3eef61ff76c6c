//! `torch.nn`'s modules on the torchfn runtime: [`nn::Module`] and the layers, module hooks,
//! state dicts and their safetensors files, [`func::functional_call`], and the tools that follow
//! modules ([`utils::module_tracker`], [`utils::flop_counter`]). Use it through the `torchfn`
//! crate, which re-exports all of it.
//!
//! The crate is the runtime's API with these added: its root re-exports the runtime's, and its
//! `nn` and `func` modules are the runtime's with the modules' part added. So code here, and the
//! code the derives write (`::torchfn::nn::Module`), names everything by the paths users write,
//! while the runtime, one crate down, cannot name a module at all.
//!
//! ```
//! use torchfn::nn::{Layer, Linear};
//!
//! let fc = Linear::new(3, 2, true, &torchfn::Generator::new().manual_seed(0))?;
//! let y = fc.call(&torchfn::ones([4, 3], None, None)?)?;
//! assert_eq!(y.shape()?, [4, 2]);
//! # Ok::<(), torchfn::Error>(())
//! ```

#![warn(missing_docs)]

// Generated code names `::torchfn`; inside this crate that is this crate, the runtime's API and
// the modules.
extern crate self as torchfn;

mod functional_call;
mod modules;
pub mod safetensors;
pub mod utils;

pub use torchfn_runtime::*;

/// `torch.nn`: the modules and layers, [`init`](nn::init) and the module hooks of this crate, the
/// functional interface ([`functional`](nn::functional)) and gradient utilities
/// ([`utils`](nn::utils)) of the runtime, and `#[derive(Module)]`.
pub mod nn {
    pub use crate::modules::*;
    pub use torchfn_macros::Module;
    pub use torchfn_runtime::nn::*;
}

/// Function transforms (`torch.func`): the runtime's, and modules as functions of their state.
pub mod func {
    pub use crate::functional_call::{functional_call, functional_call_with, stack_module_state};
    pub use torchfn_runtime::func::*;
}

/// The error type and `bail!`, as the runtime's modules name them.
mod error {
    pub(crate) use torchfn_types::bail;
    pub(crate) use torchfn_types::error::*;
}
