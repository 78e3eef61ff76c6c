//! The optimizers' fused steps (`torch._fused_adam_`, `torch._fused_adamw_`,
//! `torch._fused_sgd_`): one pass over each parameter's memory per step, what
//! `torch.optim.Adam(..., fused=True)` and `SGD(..., fused=True)` call.

use crate::backend::{AdamHyperparameters, SgdHyperparameters};
use crate::dispatch::{AdamLists, SgdLists};
use crate::error::Result;
use crate::tensor::Tensor;

/// The keyword arguments of [`_fused_adam_`] and [`_fused_adamw_`].
#[derive(Clone, Debug)]
pub struct FusedAdamOptions {
    /// `lr`, `beta1`, `beta2`, `weight_decay`, `eps`, `amsgrad`, `maximize`.
    pub hyper: AdamHyperparameters,
    /// A one-element tensor the gradients are divided by first (and stored so).
    pub grad_scale: Option<Tensor>,
    /// A one-element tensor: when not zero, the step writes nothing.
    pub found_inf: Option<Tensor>,
}

/// One Adam step of every parameter, in place (`torch._fused_adam_`): the gradient plus
/// `weight_decay` times the parameter, the moments `exp_avgs` and `exp_avg_sqs` (and, with
/// `amsgrad`, their running maxima `max_exp_avg_sqs`, else an empty list) updated, and each
/// parameter moved by `lr` times the bias-corrected ratio, `state_steps` giving each
/// parameter's step number (already counted, as PyTorch's optimizer counts it). CPU float
/// tensors (float16 and bfloat16 computed in float32 and rounded once, as PyTorch's), each list
/// one tensor per parameter, contiguous; outside
/// [`no_grad`](crate::autograd::no_grad) a parameter that requires grad is refused, as any
/// in-place write into a leaf.
///
/// ```
/// use torchfn::{AdamHyperparameters, FusedAdamOptions};
/// let p = torchfn::tensor([1.0f32, -2.0])?;
/// let g = torchfn::tensor([0.5f32, 0.5])?;
/// let (m, v) = (torchfn::zeros_like(&p, None)?, torchfn::zeros_like(&p, None)?);
/// let hyper = AdamHyperparameters {
///     lr: 0.1, beta1: 0.9, beta2: 0.999, weight_decay: 0.0, eps: 1e-8, amsgrad: false, maximize: false,
/// };
/// let options = FusedAdamOptions { hyper, grad_scale: None, found_inf: None };
/// let step = torchfn::tensor([1.0f32])?;
/// torchfn::_fused_adam_(&[p.clone()], &[g], &[m], &[v], &[], &[step], &options)?;
/// // The first step moves each parameter by about lr against its gradient's sign.
/// let moved: Vec<f32> = p.to_vec::<f32>()?;
/// assert!(moved.iter().zip([0.9, -2.1]).all(|(a, b)| (a - b).abs() < 1e-6), "{moved:?}");
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn _fused_adam_(
    params: &[Tensor],
    grads: &[Tensor],
    exp_avgs: &[Tensor],
    exp_avg_sqs: &[Tensor],
    max_exp_avg_sqs: &[Tensor],
    state_steps: &[Tensor],
    options: &FusedAdamOptions,
) -> Result<()> {
    let lists = AdamLists { params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps };
    crate::primitive::fused_adam(false, &lists, options)
}

/// [`_fused_adam_`] with AdamW's decoupled weight decay (`torch._fused_adamw_`): each parameter
/// is first multiplied by `1 - lr · weight_decay`, and the gradient is left as it is.
pub fn _fused_adamw_(
    params: &[Tensor],
    grads: &[Tensor],
    exp_avgs: &[Tensor],
    exp_avg_sqs: &[Tensor],
    max_exp_avg_sqs: &[Tensor],
    state_steps: &[Tensor],
    options: &FusedAdamOptions,
) -> Result<()> {
    let lists = AdamLists { params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps };
    crate::primitive::fused_adam(true, &lists, options)
}

/// The keyword arguments of [`_fused_sgd_`].
#[derive(Clone, Debug)]
pub struct FusedSgdOptions {
    /// `lr`, `momentum`, `dampening`, `weight_decay`, `nesterov`, `maximize`, `is_first_step`.
    pub hyper: SgdHyperparameters,
    /// A one-element tensor the gradients are divided by first (and stored so).
    pub grad_scale: Option<Tensor>,
    /// A one-element tensor: when not zero, the step writes nothing.
    pub found_inf: Option<Tensor>,
}

/// One SGD step of every parameter, in place (`torch._fused_sgd_`): the gradient plus
/// `weight_decay` times the parameter, taken into each momentum buffer
/// (`momentum_buffer_list`, empty without momentum; on the first step the buffer becomes
/// the gradient), and each parameter moved by `lr` times the buffer (or, Nesterov, the
/// gradient plus `momentum` times the buffer). CPU float tensors, contiguous,
/// under the rules of [`_fused_adam_`].
pub fn _fused_sgd_(
    params: &[Tensor],
    grads: &[Tensor],
    momentum_buffer_list: &[Tensor],
    options: &FusedSgdOptions,
) -> Result<()> {
    let lists = SgdLists { params, grads, momentum_buffers: momentum_buffer_list };
    crate::primitive::fused_sgd(&lists, options)
}
