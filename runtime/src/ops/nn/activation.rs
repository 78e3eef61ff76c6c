//! Activation functions of `torch.nn.functional`: `relu`, `gelu`, `silu`, `softmax` and
//! `log_softmax`.

use crate::cpu;
use crate::error::{Result, bail};
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

/// Refuses `inplace=True`: torchfn tensors cannot be written in place yet.
pub(super) fn not_in_place(func: &str, inplace: bool) -> Result<()> {
    if inplace {
        bail!(
            NotImplemented,
            "{func}(): inplace=True is not supported: torchfn has no in-place operations yet; \
             use the returned tensor (inplace=False)"
        );
    }
    Ok(())
}

/// The error function, accurate to a few units in the last place of `f64`: its Maclaurin
/// series below 2, one minus [`erfc`] above.
fn erf(x: f64) -> f64 {
    let a = x.abs();
    if a.is_nan() {
        return f64::NAN;
    }
    let value = if a < 2.0 {
        // erf(a) = 2/sqrt(pi) * sum_n (-1)^n a^(2n+1) / (n! (2n+1))
        let (square, mut power, mut sum) = (a * a, a, a);
        for n in 1..100 {
            power *= -square / n as f64;
            let term = power / (2 * n + 1) as f64;
            sum += term;
            if term.abs() <= 1e-17 * sum.abs() {
                break;
            }
        }
        std::f64::consts::FRAC_2_SQRT_PI * sum
    } else {
        1.0 - erfc_large(a)
    };
    value.copysign(x)
}

/// `1 - erf(x)` for `x >= 2`, from its continued fraction
/// `exp(-x^2) / sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...))))`, evaluated from
/// its sixtieth term back (converged to `f64` precision from 2 on).
fn erfc_large(x: f64) -> f64 {
    if x > 27.0 {
        return 0.0;
    }
    let mut tail = x;
    for k in (1..=60).rev() {
        tail = x + (k as f64 * 0.5) / tail;
    }
    (-x * x).exp() / (std::f64::consts::PI.sqrt() * tail)
}

/// `1 - erf(x)`, without cancellation for large positive `x`.
fn erfc(x: f64) -> f64 {
    if x >= 2.0 {
        erfc_large(x)
    } else if x <= -2.0 {
        2.0 - erfc_large(-x)
    } else {
        1.0 - erf(x)
    }
}

/// The rectified linear unit, `max(input, 0)` elementwise (`torch.nn.functional.relu`), for
/// floating-point and integer tensors (not bool). NaN stays NaN.
///
/// `inplace=True` is refused (`NotImplementedError`): torchfn has no in-place operations yet.
///
/// ```
/// use torchfn::nn::functional as F;
/// let t = torchfn::tensor([-1.5f32, 0.0, 2.0])?;
/// assert_eq!(F::relu(&t, false)?.to_vec::<f32>()?, [0.0, 0.0, 2.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn relu(input: &Tensor, #[default(false)] inplace: bool) -> Result<Tensor> {
    let x = input.data("relu", "input")?;
    not_in_place("relu", inplace)?;
    let dense = with_dtype!(x.dtype, T => cpu::unary::<T, T>(x, |v| {
        if v > T::default() || v.to_f64().is_nan() { v } else { T::default() }
    }), bool => bail!(Runtime, "relu(): boolean inputs are not supported"));
    Ok(Tensor::from_dense(dense))
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
        "none" => float_map("gelu", ("input", input), |x| 0.5 * x * erfc(-x * std::f64::consts::FRAC_1_SQRT_2)),
        "tanh" => float_map("gelu", ("input", input), |x| {
            let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + inner.tanh())
        }),
        other => bail!(Runtime, "gelu(): approximate argument must be either none or tanh, but got '{other}'"),
    }
}

/// The sigmoid linear unit, `x * sigmoid(x)` (`torch.nn.functional.silu`, also called swish).
/// Floating-point tensors only; `inplace=True` is refused (`NotImplementedError`).
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
    input.data("silu", "input")?;
    not_in_place("silu", inplace)?;
    float_map("silu", ("input", input), |x| x / (1.0 + (-x).exp()))
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
    RELU => [sample([f32s(&[2, 3])]), sample([i64s(&[4])]).kw("inplace", false)],
    GELU => [sample([f32s(&[2, 3])]), sample([f32s(&[2, 3])]).kw("approximate", "tanh")],
    SILU => [sample([f32s(&[2, 3])])],
    SOFTMAX => [sample([f32s(&[2, 3, 2])]).kw("dim", 1), sample([f32s(&[4]), Value::Int(0)]).kw("dtype", DType::Float64)],
    LOG_SOFTMAX => [sample([f32s(&[2, 3, 2])]).kw("dim", 1), sample([f32s(&[3, 4])])],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // Values from Abramowitz and Stegun, table 7.1, and erfc from the same tables.
        let cases = [
            (0.0, 0.0),
            (0.1, 0.1124629160182849),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (1.5, 0.9661051464753108),
            (2.0, 0.9953222650189527),
            (2.5, 0.999_593_047_982_555),
            (3.0, 0.9999779095030014),
        ];
        for (x, want) in cases {
            assert!((erf(x) - want).abs() <= 1e-15, "erf({x}) = {}, expected {want}", erf(x));
            assert!((erf(-x) + want).abs() <= 1e-15);
        }
        assert!((erfc(3.0) - 2.209049699858544e-05).abs() <= 1e-18);
        assert!((erfc(5.0) - 1.537_459_794_428_035e-12).abs() <= 1e-25);
        assert!((erfc(-5.0) - (2.0 - 1.537_459_794_428_035e-12)).abs() <= 1e-15);
        assert_eq!(erf(f64::INFINITY), 1.0);
        assert!(erf(f64::NAN).is_nan());
    }
}
