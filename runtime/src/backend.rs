//! The kernels below the dispatch layer (layer 5), from the `torchfn-kernels` crate: the few
//! kernel families every backend implements ([`Backend`]), the memory tensors live in
//! ([`Array`], [`Storage`]), devices, and the table of backends ([`BACKENDS`]), which a
//! separate crate can add a backend to:
//!
//! ```text
//! #[linkme::distributed_slice(torchfn::backend::BACKENDS)]
//! static MINE: &dyn torchfn::backend::Backend = &MyBackend; // MyBackend: impl Backend
//! ```
//!
//! The kernels crate sees only the vocabulary below it: a backend sees arrays, never tensors,
//! classes or hooks, as ATen's kernels do.

pub use torchfn_kernels::backend::{
    AdamArrays, AdamHyperparameters, AdamStep, Array, BACKENDS, Backend, Binary, Buffer, Device, Layout, LstmSaved,
    Reduce, Scan, SgdArrays, SgdHyperparameters, SgdStep, Storage, Strides, Unary, Window, backend, live_storages,
};

pub(crate) use torchfn_kernels::backend::host;
pub(crate) use torchfn_kernels::random::{Distribution, sample};
