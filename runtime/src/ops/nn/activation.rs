//! Activation functions of `torch.nn.functional`: `relu`, `gelu`, `silu`, `softmax` and
//! `log_softmax`.

use crate::cpu;
use crate::error::{Result, bail};
use crate::ops::inplace::write_into;
use crate::ops::softmax::softmax_along;
use crate::tensor::{DType, Dense, Element, Tensor, with_dtype};
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

/// `f` applied to each element of a floating-point `input`, computed in `f64`.
fn float_map(func: &str, (name, t): (&str, &Tensor), f: impl Fn(f64) -> f64 + Sync) -> Result<Tensor> {
    let x = t.data(func, name)?;
    fn each<T: Element>(x: &Dense, f: impl Fn(f64) -> f64 + Sync) -> Dense {
        cpu::unary::<T, T>(x, |v| T::from_f64(f(v.to_f64())))
    }
    let dense = match x.dtype {
        DType::Float32 => each::<f32>(x, f),
        DType::Float64 => each::<f64>(x, f),
        other => bail!(Runtime, "{func}(): not implemented for {other} inputs; expected a floating point tensor"),
    };
    Ok(Tensor::from_dense(dense))
}

/// The result of an operation with an `inplace` flag: `result` itself, or, with
/// `inplace=True`, `input` after `result` is written into it (through views too, with the cast
/// rules of in-place operations), as PyTorch returns its argument then.
pub(super) fn in_place_or_new(func: &str, input: &Tensor, result: Tensor, inplace: bool) -> Result<Tensor> {
    if inplace { write_into(func, input, result) } else { Ok(result) }
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
    let dense = with_dtype!(x.dtype, T => cpu::unary::<T, T>(x, |v| {
        if v > T::default() || v.to_f64().is_nan() { v } else { T::default() }
    }), bool => bail!(Runtime, "relu(): boolean inputs are not supported"));
    in_place_or_new("relu", input, Tensor::from_dense(dense), inplace)
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
        "none" => float_map("gelu", ("input", input), |x| 0.5 * x * cpu::erfc(-x * std::f64::consts::FRAC_1_SQRT_2)),
        "tanh" => float_map("gelu", ("input", input), |x| {
            let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + inner.tanh())
        }),
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
    let result = float_map("silu", ("input", input), |x| x / (1.0 + (-x).exp()))?;
    in_place_or_new("silu", input, result, inplace)
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

crate::samples! {
    RELU => [
        sample([f32s(&[2, 3])]),
        sample([i64s(&[4])]).kw("inplace", false),
        sample([f32s(&[3])]).kw("inplace", true),
    ],
    GELU => [sample([f32s(&[2, 3])]), sample([f32s(&[2, 3])]).kw("approximate", "tanh")],
    SILU => [sample([f32s(&[2, 3])]), sample([f32s(&[2, 2]), Value::Bool(true)])],
    SOFTMAX => [
        sample([f32s(&[2, 3, 2])]).kw("dim", 1),
        sample([f32s(&[4]), Value::Int(0)]).kw("dtype", DType::Float64),
    ],
    LOG_SOFTMAX => [sample([f32s(&[2, 3, 2])]).kw("dim", 1), sample([f32s(&[3, 4])])],
}
