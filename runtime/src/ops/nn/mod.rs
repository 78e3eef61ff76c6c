//! `torch.nn`: modules and layers (from `crate::modules`), [`init`], and the functional
//! interface, [`functional`].

mod activation;
mod adaptive;
mod conv;
mod layers;
mod loss;
mod norm;

pub use crate::modules::*;
pub use torchfn_macros::Module;

/// `torch.nn.functional`: activations, layers, losses, convolution and pooling as functions,
/// registered as `torchfn.nn.functional.*`. Each is overridable like every other operation.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[1.0f32, -1.0, 2.0]])?;
/// let w = torchfn::tensor([[1.0f32, 1.0, 1.0], [0.0, -1.0, 0.0]])?;
/// let h = F::relu(&F::linear(&x, &w, None)?, false)?;
/// assert_eq!(h.to_vec::<f32>()?, [2.0, 1.0]);
/// assert_eq!(torchfn::nn::functional::RELU.qualified_name(), "torchfn.nn.functional.relu");
/// # Ok::<(), torchfn::Error>(())
/// ```
pub mod functional {
    pub use super::activation::{GELU, LOG_SOFTMAX, RELU, SILU, SOFTMAX, gelu, log_softmax, relu, silu, softmax};
    pub use super::adaptive::{ADAPTIVE_AVG_POOL2D, adaptive_avg_pool2d};
    pub use super::conv::{CONV2D, MAX_POOL2D, MAX_POOL2D_WITH_INDICES, conv2d, max_pool2d, max_pool2d_with_indices};
    pub use super::layers::{DROPOUT, EMBEDDING, LINEAR, dropout, embedding, linear};
    pub use super::loss::{CROSS_ENTROPY, MSE_LOSS, cross_entropy, mse_loss};
    pub use super::norm::{BATCH_NORM, LAYER_NORM, batch_norm, layer_norm};
}
