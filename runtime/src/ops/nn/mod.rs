//! `torch.nn`'s functions: the functional interface, [`functional`], and the gradient
//! utilities, [`utils`]. The modules, layers and `init` are the `torchfn-nn` crate's, one layer
//! up, whose `torchfn::nn` is this module and those together.

mod activation;
mod adaptive;
mod attention;
mod clip;
mod conv;
mod interpolate;
mod layers;
mod loss;
mod norm;
mod pad;
pub(crate) mod recurrent;

// The cell an `nn.LSTM` or `nn.GRU` module of `torchfn-nn` runs.
#[doc(hidden)]
pub use recurrent::Cell;

/// `torch.nn.functional`: activations, layers, attention, losses, convolution and pooling as
/// functions, registered as `torchfn.nn.functional.*`. Each is overridable like every other operation.
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
    pub use super::activation::{
        GELU, HARDSIGMOID, HARDSWISH, LEAKY_RELU, LOG_SOFTMAX, RELU, SILU, SOFTMAX, gelu, hardsigmoid, hardswish,
        leaky_relu, log_softmax, relu, silu, softmax,
    };
    pub use super::adaptive::{ADAPTIVE_AVG_POOL2D, adaptive_avg_pool2d};
    pub use super::attention::{
        MULTI_HEAD_ATTENTION_FORWARD, SCALED_DOT_PRODUCT_ATTENTION, multi_head_attention_forward,
        scaled_dot_product_attention,
    };
    pub use super::conv::{
        AVG_POOL2D, CONV_TRANSPOSE2D, CONV1D, CONV2D, MAX_POOL2D, MAX_POOL2D_WITH_INDICES, avg_pool2d,
        conv_transpose2d, conv1d, conv2d, max_pool2d, max_pool2d_with_indices,
    };
    pub use super::interpolate::{INTERPOLATE, interpolate};
    pub use super::layers::{DROPOUT, EMBEDDING, LINEAR, dropout, embedding, linear};
    pub use super::loss::{
        BINARY_CROSS_ENTROPY, BINARY_CROSS_ENTROPY_WITH_LOGITS, CROSS_ENTROPY, CTC_LOSS, HUBER_LOSS, KL_DIV, L1_LOSS,
        MSE_LOSS, NLL_LOSS, SMOOTH_L1_LOSS, binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy,
        ctc_loss, huber_loss, kl_div, l1_loss, mse_loss, nll_loss, smooth_l1_loss,
    };
    pub use super::norm::{BATCH_NORM, GROUP_NORM, LAYER_NORM, RMS_NORM, batch_norm, group_norm, layer_norm, rms_norm};
    pub use super::pad::{PAD, pad};
}

/// `torch.nn.utils`: gradient clipping, registered as `torchfn.nn.utils.*` and overridable like
/// every other operation.
///
/// ```
/// let w = torchfn::ones([4], None, None)?.requires_grad_(true)?;
/// (&w * 3.0)?.sum()?.backward()?; // every gradient element is 3: norm 6
/// let total = torchfn::nn::utils::clip_grad_norm_(&[w.clone()], 3.0, 2.0, false, None)?;
/// assert_eq!(total.item()?, torchfn::Scalar::Float(6.0));
/// assert!(w.grad()?.unwrap().to_vec::<f32>()?.iter().all(|&g| (g - 1.5).abs() < 1e-5));
/// # Ok::<(), torchfn::Error>(())
/// ```
pub mod utils {
    pub use super::clip::{CLIP_GRAD_NORM_, CLIP_GRAD_VALUE_, clip_grad_norm_, clip_grad_value_};
}
