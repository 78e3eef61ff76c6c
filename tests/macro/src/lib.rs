//! Dispatchers and an overridable function in a crate of their own, so that torchfn's tests
//! can check `#[torch_function(dispatcher = other_crate::path)]` and registration across
//! crates. The compile tests of the macros (`tests/ui.rs`) live here too: their test projects
//! build only torchfn and this crate.

use torchfn::prelude::*;

/// The dispatcher of `(input, other, alpha)` functions: both tensors are relevant.
#[dispatcher]
pub fn binary_dispatcher(input: &Tensor, other: &Tensor, #[default(None)] alpha: f64) -> impl Relevant {
    [input, other]
}

/// Dispatchers in a submodule.
pub mod nested {
    use torchfn::prelude::*;

    /// The dispatcher of one-tensor functions.
    #[dispatcher]
    pub fn unary_dispatcher(input: &Tensor) -> impl Relevant {
        [input]
    }
}

/// `input + alpha * other`, registered under `xcrate`.
#[torch_function(dispatcher = binary_dispatcher, module = "xcrate")]
pub fn axpy(input: &Tensor, other: &Tensor, #[default(1.0)] alpha: f64) -> Result<Tensor> {
    &(other * alpha)? + input
}
