//! Activation functions of `torch.nn.functional`: `relu`, `leaky_relu`, `gelu`, `silu`,
//! `hardswish`, `hardsigmoid`, `softmax` and `log_softmax`.

use crate::backend::{Binary, Unary};
use crate::error::{Result, bail};
use crate::ops::inplace::{update, write_into};
use crate::ops::softmax::softmax_along;
use crate::tensor::{DType, Tensor};
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

/// The dtype of `t`, an activation's input, which must be floating-point: any other is
/// PyTorch's `NotImplementedError`.
fn floating(func: &str, (name, t): (&str, &Tensor)) -> Result<DType> {
    let dtype = t.data(func, name)?.dtype;
    if !dtype.is_floating_point() {
        bail!(NotImplemented, "{func}(): \"{func}_cpu\" not implemented for '{}'", dtype.scalar_type_name());
    }
    Ok(dtype)
}

/// `op` (an activation computed in the input's float dtype) on each element of a
/// floating-point `input`; with `inplace`, written into `input` itself (see [`apply`]).
fn activation(func: &str, input: &Tensor, op: Unary, inplace: bool) -> Result<Tensor> {
    apply(func, input, op, floating(func, ("input", input))?, inplace)
}

/// `op` on each element of `input`, in `dtype`: a new tensor, or, with `inplace`, the kernel
/// writing into `input` itself, which is returned (through a view, into its base; with the
/// cast rules of in-place operations), as PyTorch returns its argument then.
fn apply(func: &str, input: &Tensor, op: Unary, dtype: DType, inplace: bool) -> Result<Tensor> {
    if inplace {
        return write_into(func, input, crate::primitive::unary(input, op, dtype, Some(input))?);
    }
    crate::primitive::unary(input, op, dtype, None)
}

/// The result of an operation with an `inplace` flag composed of several kernels: `compute` of
/// `input`, or, with `inplace=True`, `input` after that result is written into it (while
/// recording, `compute` reads a copy: see [`update`]).
pub(super) fn in_place_or_new(
    func: &str,
    input: &Tensor,
    inplace: bool,
    compute: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    if inplace { update(func, input, &[], compute) } else { compute(input) }
}

/// The rectified linear unit, `max(input, 0)` elementwise (`torch.nn.functional.relu`), for
/// floating-point and integer tensors (not bool). NaN stays NaN.
///
/// With `inplace=True` the result is written into `input` (through a view, into its base) and
/// `input` itself is returned, as in PyTorch.
///
/// ```
/// use torchfn::nn::functional as F;
/// let t = torchfn::tensor([-1.5f32, 0.0, 2.0])?;
/// assert_eq!(F::relu(&t, false)?.to_vec::<f32>()?, [0.0, 0.0, 2.0]);
/// assert_eq!(t.to_vec::<f32>()?, [-1.5, 0.0, 2.0]);
/// let same = F::relu(&t, true)?;
/// assert!(same.is(&t));
/// assert_eq!(t.to_vec::<f32>()?, [0.0, 0.0, 2.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn relu(input: &Tensor, #[default(false)] inplace: bool) -> Result<Tensor> {
    let x = input.data("relu", "input")?;
    if x.dtype == DType::Bool {
        bail!(Runtime, "relu(): boolean inputs are not supported");
    }
    let dtype = x.dtype;
    apply("relu", input, Unary::Relu, dtype, inplace)
}

/// The Gaussian error linear unit (`torch.nn.functional.gelu`): `x * Φ(x)`, with `Φ` the
/// standard normal distribution function, `0.5 * (1 + erf(x / sqrt(2)))`. With
/// `approximate = "tanh"`, `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.
/// Floating-point tensors only; any other `approximate` is a `RuntimeError`.
///
/// ```
/// use torchfn::nn::functional as F;
/// let t = torchfn::tensor([0.0f64, 1.0])?;
/// let y = F::gelu(&t, "none")?.to_vec::<f64>()?;
/// assert_eq!(y[0], 0.0);
/// assert!((y[1] - 0.8413447460685429).abs() < 1e-15);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn gelu(input: &Tensor, #[default("none")] approximate: &str) -> Result<Tensor> {
    match approximate {
        "none" => activation("gelu", input, Unary::Gelu, false),
        "tanh" => activation("gelu", input, Unary::GeluTanh, false),
        other => bail!(Runtime, "gelu(): approximate argument must be either none or tanh, but got '{other}'"),
    }
}

/// The sigmoid linear unit, `x * sigmoid(x)` (`torch.nn.functional.silu`, also called swish).
/// Floating-point tensors only. With `inplace=True` the result is written into `input` and
/// `input` itself is returned.
///
/// ```
/// use torchfn::nn::functional as F;
/// let t = torchfn::tensor([0.0f64, 2.0])?;
/// let y = F::silu(&t, false)?.to_vec::<f64>()?;
/// assert_eq!(y[0], 0.0);
/// assert!((y[1] - 2.0 / (1.0 + (-2.0f64).exp())).abs() < 1e-15);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn silu(input: &Tensor, #[default(false)] inplace: bool) -> Result<Tensor> {
    activation("silu", input, Unary::Silu, inplace)
}

/// `x * min(max(x + 3, 0), 6) / 6` (`torch.nn.functional.hardswish`, MobileNetV3's
/// activation), for floating-point tensors; the gradient is 0 up to -3, `x / 3 + 1/2` below 3
/// and 1 from 3 on, as PyTorch's. With `inplace=True` the result is written into `input` and
/// `input` itself is returned.
///
/// ```
/// use torchfn::nn::functional as F;
/// let t = torchfn::tensor([-4.0f32, -1.5, 0.0, 1.5, 4.0])?;
/// assert_eq!(F::hardswish(&t, false)?.to_vec::<f32>()?, [-0.0, -0.375, 0.0, 1.125, 4.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn hardswish(input: &Tensor, #[default(false)] inplace: bool) -> Result<Tensor> {
    activation("hardswish", input, Unary::Hardswish, inplace)
}

/// `min(max(x + 3, 0), 6) / 6` (`torch.nn.functional.hardsigmoid`), for floating-point
/// tensors; the gradient is 1/6 strictly between -3 and 3 and 0 elsewhere, as PyTorch's. With
/// `inplace=True` the result is written into `input` and `input` itself is returned.
///
/// ```
/// use torchfn::nn::functional as F;
/// let t = torchfn::tensor([-4.0f32, 0.0, 1.5, 4.0])?;
/// assert_eq!(F::hardsigmoid(&t, false)?.to_vec::<f32>()?, [0.0, 0.5, 0.75, 1.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn hardsigmoid(input: &Tensor, #[default(false)] inplace: bool) -> Result<Tensor> {
    activation("hardsigmoid", input, Unary::Hardsigmoid, inplace)
}

/// The dimension PyTorch's softmax family picks when `dim` is `None` (a legacy rule, with a
/// deprecation warning in PyTorch): 0 for 0-, 1- and 3-dimensional inputs, else 1.
fn implicit_dim(func: &str, (name, t): (&str, &Tensor), dim: Option<i64>) -> Result<i64> {
    let ndim = t.data(func, name)?.layout.ndim();
    Ok(dim.unwrap_or(if matches!(ndim, 0 | 1 | 3) { 0 } else { 1 }))
}

/// The softmax along `dim` (`torch.nn.functional.softmax`), as
/// [`torchfn::softmax`](crate::softmax()). Without `dim`, PyTorch's legacy implicit choice
/// applies (0 for 0-, 1- and 3-dimensional inputs, else 1); pass it. `_stacklevel` only places
/// PyTorch's warning and is ignored.
///
/// ```
/// use torchfn::nn::functional as F;
/// let t = torchfn::tensor([[1.0f32, 1.0, 1.0, 1.0]])?;
/// assert_eq!(F::softmax(&t, 1, 3, None)?.to_vec::<f32>()?, [0.25; 4]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn softmax(
    input: &Tensor,
    #[default(None)] dim: impl Into<Option<i64>>,
    #[default(3)] _stacklevel: i64,
    #[default(None)] dtype: impl Into<Option<DType>>,
) -> Result<Tensor> {
    let dim = implicit_dim("softmax", ("input", input), dim.into())?;
    softmax_along("softmax", ("input", input), dim, dtype.into(), false)
}

/// The log-softmax along `dim` (`torch.nn.functional.log_softmax`), as
/// [`torchfn::log_softmax`](crate::log_softmax()); `dim` and `_stacklevel` as in [`softmax`].
#[torch_function(module = "torchfn.nn.functional")]
pub fn log_softmax(
    input: &Tensor,
    #[default(None)] dim: impl Into<Option<i64>>,
    #[default(3)] _stacklevel: i64,
    #[default(None)] dtype: impl Into<Option<DType>>,
) -> Result<Tensor> {
    let dim = implicit_dim("log_softmax", ("input", input), dim.into())?;
    softmax_along("log_softmax", ("input", input), dim, dtype.into(), true)
}

/// `input` where it is positive, `negative_slope * input` elsewhere
/// (`torch.nn.functional.leaky_relu`), for floating-point tensors; the gradient is 1 where the
/// input is positive and `negative_slope` elsewhere (at 0 and NaN too), as PyTorch's.
///
/// ```
/// use torchfn::nn::functional as F;
/// let t = torchfn::tensor([-2.0f32, 0.0, 3.0])?;
/// assert_eq!(F::leaky_relu(&t, 0.1, false)?.to_vec::<f32>()?, [-0.2, 0.0, 3.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn leaky_relu(
    input: &Tensor,
    #[default(0.01)] negative_slope: f64,
    #[default(false)] inplace: bool,
) -> Result<Tensor> {
    let dtype = floating("leaky_relu", ("input", input))?;
    in_place_or_new("leaky_relu", input, inplace, |source| {
        let positive = crate::primitive::binary(source, &Tensor::scalar(0.0), Binary::Gt, dtype, None)?;
        let sloped = crate::primitive::binary(source, &Tensor::scalar(negative_slope), Binary::Mul, dtype, None)?;
        crate::primitive::select(&positive, source, &sloped, dtype)
    })
}

crate::samples! {
    LEAKY_RELU => [sample([f32s(&[2, 3])]), sample([f32s(&[4]), Value::Float(0.2)]), sample([f32s(&[3])]).kw("inplace", true)],
    RELU => [
        sample([f32s(&[2, 3])]),
        sample([i64s(&[4])]).kw("inplace", false),
        sample([f32s(&[3])]).kw("inplace", true),
    ],
    GELU => [sample([f32s(&[2, 3])]), sample([f32s(&[2, 3])]).kw("approximate", "tanh")],
    SILU => [sample([f32s(&[2, 3])]), sample([f32s(&[2, 2]), Value::Bool(true)])],
    HARDSWISH => [sample([f32s(&[2, 3])]), sample([f32s(&[4]), Value::Bool(true)])],
    HARDSIGMOID => [sample([f32s(&[2, 3])]), sample([f32s(&[4])]).kw("inplace", true)],
    SOFTMAX => [
        sample([f32s(&[2, 3, 2])]).kw("dim", 1),
        sample([f32s(&[4]), Value::Int(0)]).kw("dtype", DType::Float64),
    ],
    LOG_SOFTMAX => [sample([f32s(&[2, 3, 2])]).kw("dim", 1), sample([f32s(&[3, 4])])],
}
