//! Gradient clipping, as `torch.nn.utils` does it between `backward` and the optimizer's step:
//! `clip_grad_norm_` and `clip_grad_value_`. Both write into the parameters' `.grad` in place,
//! unrecorded.

use crate::autograd::{meta, no_grad};
use crate::backend::{Binary, Reduce, Unary};
use crate::error::{Result, bail};
use crate::ops::inplace::write_into;
use crate::primitive;
use crate::tensor::{DType, Scalar, Shape, Tensor};
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::value::Value;

/// The gradients of `parameters` that have one, in order.
fn grads_of(func: &str, parameters: &[Tensor], foreach: Option<bool>) -> Result<Vec<Tensor>> {
    let mut grads = Vec::new();
    for p in parameters {
        p.data(func, "parameters")?;
        grads.extend(meta::grad(p));
    }
    if foreach == Some(true)
        && let Some(g) = grads.first()
    {
        // PyTorch's foreach kernels exist for CUDA-like devices only, and it refuses the others.
        bail!(
            Runtime,
            "{func}(): foreach=True was passed, but can't use the foreach API on {} tensors; pass foreach=None",
            g.device()?
        );
    }
    Ok(grads)
}

/// `torch.linalg.vector_norm(x, ord)` over every element of `x` (a float tensor), in its dtype:
/// the largest (`inf`) or smallest (`-inf`) magnitude, the count of non-zeros (`0`), else
/// `sum(|x|^ord)^(1/ord)`.
fn vector_norm(func: &str, x: &Tensor, ord: f64) -> Result<Tensor> {
    let d = x.data(func, "parameters")?;
    let (dtype, n) = (d.dtype, d.layout.numel());
    if ord.is_infinite() && n == 0 {
        bail!(
            Runtime,
            "{func}(): linalg.vector_norm cannot compute the {ord} norm on an empty tensor because the operation \
             does not have an identity"
        );
    }
    let flat = primitive::reshape(x, &Shape::from([n]))?;
    let magnitude = primitive::unary(&flat, Unary::Abs, dtype, None)?;
    if ord.is_infinite() {
        let op = if ord > 0.0 { Reduce::Max } else { Reduce::Min };
        return primitive::reduce(&magnitude, &[0], op, dtype);
    }
    if ord == 0.0 {
        let nonzero = primitive::binary(&flat, &Tensor::scalar(0), Binary::Ne, dtype, None)?;
        return primitive::reduce(&nonzero, &[0], Reduce::Sum, dtype);
    }
    let powered = if ord == 1.0 {
        magnitude
    } else {
        primitive::binary(&magnitude, &Tensor::scalar(ord), Binary::Pow, dtype, None)?
    };
    let sum = primitive::reduce(&powered, &[0], Reduce::Sum, dtype)?;
    if ord == 1.0 {
        return Ok(sum);
    }
    primitive::binary(&sum, &Tensor::scalar(1.0 / ord), Binary::Pow, dtype, None)
}

/// Scales the gradients of `parameters` so that their total norm is at most `max_norm`, in
/// place (`torch.nn.utils.clip_grad_norm_`), and returns the total norm from before, a
/// zero-dimensional tensor.
///
/// As PyTorch computes it: the total norm is the `norm_type` vector norm of the gradients'
/// own norms (so of all their elements together; `f64::INFINITY` for the largest magnitude),
/// and every gradient is multiplied by `min(max_norm / (total + 1e-6), 1)`. Parameters without
/// a gradient are skipped; with none at all the result is `tensor(0.)`. With
/// `error_if_nonfinite`, a NaN or infinite total norm is an error and no gradient changes.
/// `foreach` picks PyTorch's fused kernels, which exist for CUDA-like devices only: `Some(true)`
/// is an error here, as PyTorch's on CPU tensors; `None` and `Some(false)` compute the same.
/// Not recorded by autograd.
///
/// ```
/// use torchfn::nn::utils::clip_grad_norm_;
/// let w = torchfn::zeros([2], None, None)?.requires_grad_(true)?;
/// w.set_grad(Some(&torchfn::tensor([3.0f32, 4.0])?))?;
/// let total = clip_grad_norm_(&[w.clone()], 1.0, 2.0, false, None)?;
/// assert_eq!(total.item()?, torchfn::Scalar::Float(5.0));
/// let g = w.grad()?.unwrap().to_vec::<f32>()?;
/// assert!((g[0] - 0.6).abs() < 1e-6 && (g[1] - 0.8).abs() < 1e-6);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.utils")]
pub fn clip_grad_norm_(
    parameters: &[Tensor],
    max_norm: f64,
    #[default(2.0)] norm_type: f64,
    #[default(false)] error_if_nonfinite: bool,
    #[default(None)] foreach: Option<bool>,
) -> Result<Tensor> {
    const FUNC: &str = "clip_grad_norm_";
    let _no_grad = no_grad();
    let grads = grads_of(FUNC, parameters, foreach)?;
    let Some(first) = grads.first() else {
        return Tensor::from_vec(vec![0.0f32], Shape::from([]));
    };
    if norm_type.is_nan() {
        bail!(Runtime, "{FUNC}(): norm_type must be a number, but got nan");
    }
    let device = first.device()?;
    let norms: Vec<Tensor> = grads
        .iter()
        .map(|g| {
            let norm = vector_norm(FUNC, g, norm_type)?;
            if norm.device()? == device { Ok(norm) } else { primitive::transfer(&norm, device, norm.dtype()?) }
        })
        .collect::<Result<_>>()?;
    // `torch.stack` of the norms: their promoted dtype.
    let dtype = norms.iter().try_fold(first.dtype()?, |d, n| Ok::<_, crate::Error>(d.promote(n.dtype()?)))?;
    let stacked = primitive::concat(
        &norms.iter().map(|n| primitive::reshape(n, &Shape::from([1]))).collect::<Result<Vec<_>>>()?,
        0,
        &Shape::from([norms.len()]),
        dtype,
    )?;
    let total = vector_norm(FUNC, &stacked, norm_type)?;
    if error_if_nonfinite && !total.item()?.to_f64().is_finite() {
        bail!(
            Runtime,
            "{FUNC}(): The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it \
             cannot be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set \
             `error_if_nonfinite=False`"
        );
    }
    let shifted = primitive::binary(&total, &Tensor::scalar(1e-6), Binary::Add(Scalar::Int(1)), dtype, None)?;
    let coef = primitive::binary(&Tensor::scalar(max_norm), &shifted, Binary::Div, dtype, None)?;
    let coef = primitive::binary(&coef, &Tensor::scalar(1.0), Binary::ClampMax, dtype, None)?;
    for g in &grads {
        let coef = if g.device()? == device { coef.clone() } else { primitive::transfer(&coef, g.device()?, dtype)? };
        let scaled = primitive::binary(g, &coef, Binary::Mul, g.dtype()?, None)?;
        write_into(FUNC, g, scaled)?;
    }
    Ok(total)
}

/// Clamps the gradients of `parameters` to `[-clip_value, clip_value]`, in place
/// (`torch.nn.utils.clip_grad_value_`); parameters without a gradient are skipped. `foreach`
/// as in [`clip_grad_norm_`]. Not recorded by autograd.
///
/// ```
/// use torchfn::nn::utils::clip_grad_value_;
/// let w = torchfn::zeros([3], None, None)?.requires_grad_(true)?;
/// w.set_grad(Some(&torchfn::tensor([-3.0f32, 0.5, 2.0])?))?;
/// clip_grad_value_(&[w.clone()], 1.0, None)?;
/// assert_eq!(w.grad()?.unwrap().to_vec::<f32>()?, [-1.0, 0.5, 1.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.utils")]
pub fn clip_grad_value_(parameters: &[Tensor], clip_value: f64, #[default(None)] foreach: Option<bool>) -> Result<()> {
    const FUNC: &str = "clip_grad_value_";
    let _no_grad = no_grad();
    for g in grads_of(FUNC, parameters, foreach)? {
        let dtype = g.dtype()?;
        let low = primitive::binary(&g, &Tensor::scalar(-clip_value), Binary::ClampMin, dtype, None)?;
        let clamped = primitive::binary(&low, &Tensor::scalar(clip_value), Binary::ClampMax, dtype, None)?;
        write_into(FUNC, &g, clamped)?;
    }
    Ok(())
}

/// A float32 parameter of `shape` whose gradient is set (sample values), as a sample argument.
fn with_grad(shape: &[usize]) -> Value {
    let p = crate::testing::values(shape, DType::Float32).requires_grad_(true).expect("a float leaf");
    let g = crate::testing::values(shape, DType::Float32).flip([0]).expect("a flipped copy");
    p.set_grad(Some(&g)).expect("a gradient of the parameter's shape");
    Value::Tensor(p)
}

crate::samples! {
    CLIP_GRAD_NORM_ => [
        sample([Value::List(vec![with_grad(&[2, 3]), with_grad(&[4]), f32s(&[2])]), Value::Float(1.0)]),
        sample([Value::List(vec![with_grad(&[3]), with_grad(&[2, 2])]), Value::Float(0.5)]).kw("norm_type", f64::INFINITY),
        sample([Value::List(vec![with_grad(&[3])]), Value::Float(100.0), Value::Float(1.0)]),
        sample([Value::List(vec![f32s(&[3])]), Value::Float(1.0)]),
    ],
    CLIP_GRAD_VALUE_ => [sample([Value::List(vec![with_grad(&[2, 3]), f32s(&[2])]), Value::Float(0.5)])],
}
