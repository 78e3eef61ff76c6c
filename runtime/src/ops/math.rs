//! Elementwise math: the unary functions (`exp`, `log`, `sqrt`, `sin`, `erf`, `floor`, `round`,
//! `abs`, `sign`, `relu`, ...), the binary ones (`pow`, `atan2`, `fmod`, `remainder`),
//! `clamp`, `where` and the dtype conversion `Tensor.to`, with PyTorch's dtype rules: the
//! floating-point functions give the default float dtype (float32) for integer and bool
//! inputs, the others keep their input's dtype.

use crate::cpu::{self, Float, Number, Signed};
use crate::error::{Error, Result, bail};
use crate::tensor::{DType, Dense, Scalar, Shape, Tensor, broadcast_shapes, result_type, with_dtype};
use crate::testing::{bools, f32s, i64s, sample, values};
use crate::torch_function;
use crate::value::Value;

/// The error of an operation PyTorch does not define for bool tensors.
#[cold]
fn no_bool(func: &str, name: &str) -> Error {
    Error::not_implemented(format!("{func}(): not implemented for bool tensors (argument '{name}' is a bool tensor)"))
}

/// The dtype a floating-point function computes and returns: the input's when it is a float,
/// the default float dtype otherwise.
fn float_dtype(dtype: DType) -> DType {
    if dtype.is_floating_point() { dtype } else { DType::DEFAULT_FLOAT }
}

/// A unary floating-point function.
#[derive(Clone, Copy)]
enum FloatOp {
    Exp,
    Log,
    Log1p,
    Expm1,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Tan,
    Tanh,
    Sigmoid,
    Erf,
    Reciprocal,
}

impl FloatOp {
    #[inline(always)]
    fn apply<F: Float>(self, x: F) -> F {
        let one = F::from_f64(1.0);
        match self {
            FloatOp::Exp => x.exp(),
            FloatOp::Log => x.ln(),
            FloatOp::Log1p => x.ln_1p(),
            FloatOp::Expm1 => x.exp_m1(),
            FloatOp::Sqrt => x.sqrt(),
            FloatOp::Rsqrt => x.sqrt().recip(),
            FloatOp::Sin => x.sin(),
            FloatOp::Cos => x.cos(),
            FloatOp::Tan => x.tan(),
            FloatOp::Tanh => x.tanh(),
            FloatOp::Sigmoid => one.add(x.neg().exp()).recip(),
            FloatOp::Erf => x.erf(),
            FloatOp::Reciprocal => x.recip(),
        }
    }
}

/// `op` on each element, in the input's float dtype or the default float dtype.
fn float_unary(func: &str, op: FloatOp, (name, t): (&str, &Tensor)) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let dense = match float_dtype(x.dtype) {
        DType::Float64 => cpu::unary::<f64, f64>(x, |v| op.apply(v)),
        _ => cpu::unary::<f32, f32>(x, |v| op.apply(v)),
    };
    Ok(Tensor::from_dense(dense))
}

/// A rounding function.
#[derive(Clone, Copy)]
enum Rounding {
    Ceil,
    Floor,
    Trunc,
    /// Half to even, at `decimals` decimal places (negative: to tens, hundreds, ...).
    Round(i64),
}

impl Rounding {
    fn apply<F: Float>(self, x: F) -> F {
        match self {
            Rounding::Ceil => x.ceil(),
            Rounding::Floor => x.floor(),
            Rounding::Trunc => x.trunc(),
            Rounding::Round(0) => x.round_ties_even(),
            Rounding::Round(decimals) => {
                // As PyTorch: scale by 10^|decimals|, round, scale back. The clamp keeps the
                // power finite in i32; beyond it the scale is 0 or infinite anyway.
                let scale = F::from_f64(10f64.powi(decimals.unsigned_abs().min(400) as i32));
                if decimals > 0 {
                    x.mul(scale).round_ties_even().div(scale)
                } else {
                    x.div(scale).round_ties_even().mul(scale)
                }
            }
        }
    }
}

/// Rounds floats; integers are already whole and come back as a copy; bools are an error.
fn round_impl(func: &str, op: Rounding, (name, t): (&str, &Tensor)) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let dense = match x.dtype {
        DType::Bool => return Err(no_bool(func, name)),
        DType::Int32 | DType::Int64 => {
            if let Rounding::Round(decimals) = op
                && decimals != 0
            {
                bail!(NotImplemented, "{func}(): decimals={decimals} is not implemented for integer tensors");
            }
            cpu::convert(x, x.dtype)
        }
        DType::Float32 => cpu::unary::<f32, f32>(x, |v| op.apply(v)),
        DType::Float64 => cpu::unary::<f64, f64>(x, |v| op.apply(v)),
    };
    Ok(Tensor::from_dense(dense))
}

/// An operation that keeps its input's dtype.
#[derive(Clone, Copy)]
enum SignedOp {
    Abs,
    Sign,
    Square,
    Relu,
}

fn signed_unary(func: &str, op: SignedOp, (name, t): (&str, &Tensor)) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let dense = with_dtype!(x.dtype, T => match op {
        SignedOp::Abs => cpu::unary::<T, T>(x, Signed::abs),
        SignedOp::Sign => cpu::unary::<T, T>(x, Signed::sign),
        SignedOp::Square => cpu::unary::<T, T>(x, |v| v.mul(v)),
        // NaN propagates, as PyTorch's `clamp_min(input, 0)`.
        SignedOp::Relu => cpu::unary::<T, T>(x, |v| if v.is_nan() || v > T::default() { v } else { T::default() }),
    }, bool => match op {
        SignedOp::Sign => cpu::convert(x, DType::Bool),
        // `square` is `pow(input, 2)`, and a bool tensor with an int gives int64.
        SignedOp::Square => cpu::unary::<i64, i64>(x, |v| v * v),
        SignedOp::Relu => bail!(Runtime, "{func}(): bool inputs are not supported (argument '{name}')"),
        SignedOp::Abs => return Err(no_bool(func, name)),
    });
    Ok(Tensor::from_dense(dense))
}

/// A binary math operation.
#[derive(Clone, Copy)]
enum BinaryOp {
    Pow,
    Atan2,
    Fmod,
    Remainder,
}

/// `a op b`, broadcast, in PyTorch's promoted dtype (the default float dtype for `atan2` of
/// integers).
fn binary_math(func: &str, op: BinaryOp, (a_name, a): (&str, &Tensor), (b_name, b): (&str, &Tensor)) -> Result<Tensor> {
    let (x, y) = (a.data(func, a_name)?, b.data(func, b_name)?);
    let shape = broadcast_shapes(&x.layout.shape, &y.layout.shape, func)?;
    let common = result_type([x.participant(), y.participant()]);
    let dense = match op {
        BinaryOp::Atan2 => match float_dtype(common) {
            DType::Float64 => cpu::binary::<f64, f64>(x, y, &shape, Float::atan2)?,
            _ => cpu::binary::<f32, f32>(x, y, &shape, Float::atan2)?,
        },
        BinaryOp::Pow => power(func, (a_name, x), (b_name, y), &shape, common)?,
        BinaryOp::Fmod | BinaryOp::Remainder => {
            let remainder = matches!(op, BinaryOp::Remainder);
            with_dtype!(common, T => {
                if !common.is_floating_point() && cpu::any::<T>(y, |q| q == T::default()) {
                    bail!(Runtime, "{func}(): ZeroDivisionError: integer division by zero (argument '{b_name}' has a zero)");
                }
                let rem = |p: T, q: T| if remainder { p.remainder(q) } else { p.fmod(q) }.unwrap_or_default();
                cpu::binary::<T, T>(x, y, &shape, rem)?
            }, bool => return Err(no_bool(func, a_name)))
        }
    };
    Ok(Tensor::from_dense(dense))
}

/// `x ** y` in `common`. As PyTorch: integers to a negative integer number (a Python number,
/// not a tensor) are an error, bools to bools are not defined, and a float to the number 0.5
/// or -0.5 is a square root (so `-0.0 ** 0.5` is `-0.0` and `-inf ** 0.5` is NaN).
fn power(func: &str, (base, x): (&str, &Dense), (exp, y): (&str, &Dense), shape: &Shape, common: DType) -> Result<Dense> {
    let number = y.wrapped_number.then(|| cpu::read_scalar(y));
    if !x.dtype.is_floating_point()
        && let Some(Scalar::Int(e @ ..0)) = number
    {
        bail!(Runtime, "{func}(): integers to negative integer powers are not allowed (argument '{exp}' is {e})");
    }
    if common.is_floating_point()
        && let Some(Scalar::Float(e)) = number
        && e.abs() == 0.5
    {
        // The number is zero-dimensional, so the result has the base's shape.
        let root = move |v: f64| if e > 0.0 { v.sqrt() } else { v.sqrt().recip() };
        return Ok(match common {
            DType::Float64 => cpu::unary::<f64, f64>(x, root),
            _ => cpu::unary::<f32, f32>(x, move |v| root(f64::from(v)) as f32),
        });
    }
    Ok(with_dtype!(common, T => cpu::binary::<T, T>(x, y, shape, Signed::pow)?, bool => return Err(no_bool(func, base))))
}

/// `min(max(input, min), max)`, broadcast, in the promoted dtype of the three; NaN in the input
/// or a bound propagates. A `min` above `max` gives `max` everywhere.
fn clamp_impl(func: &str, (name, t): (&str, &Tensor), min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
    let x = t.data(func, name)?;
    if min.is_none() && max.is_none() {
        bail!(Runtime, "{func}(): at least one of 'min' or 'max' must not be None");
    }
    let lo = min.map(|m| m.data(func, "min")).transpose()?;
    let hi = max.map(|m| m.data(func, "max")).transpose()?;
    let common = result_type([Some(x), lo, hi].into_iter().flatten().map(Dense::participant));
    let mut dense = x.clone();
    let mut shape = x.layout.shape.clone();
    for (bound, upper) in [(lo, false), (hi, true)] {
        let Some(bound) = bound else { continue };
        shape = broadcast_shapes(&shape, &bound.layout.shape, func)?;
        dense = with_dtype!(common, T => cpu::binary::<T, T>(&dense, bound, &shape, |v, b| {
            if v.is_nan() { v } else if b.is_nan() || (if upper { v > b } else { v < b }) { b } else { v }
        })?, bool => return Err(no_bool(func, name)));
    }
    Ok(Tensor::from_dense(dense))
}

/// `input` where `condition` is true, `other` elsewhere, the three broadcast together.
fn where_impl(func: &str, condition: &Tensor, input: &Tensor, other: &Tensor) -> Result<Tensor> {
    let c = condition.data(func, "condition")?;
    let (x, y) = (input.data(func, "input")?, other.data(func, "other")?);
    if c.dtype != DType::Bool {
        bail!(Runtime, "{func}(): expected condition to be a bool tensor, but got a tensor with dtype {}", c.dtype.name());
    }
    let shape = broadcast_shapes(&c.layout.shape, &x.layout.shape, func)?;
    let shape = broadcast_shapes(&shape, &y.layout.shape, func)?;
    let common = result_type([x.participant(), y.participant()]);
    let dense = with_dtype!(common, T => cpu::select::<T>(c, x, y, &shape)?);
    Ok(Tensor::from_dense(dense))
}

/// The tensor converted to `dtype`; the very same tensor when it already has that dtype and no
/// `copy` is asked for.
fn to_impl(func: &str, (name, t): (&str, &Tensor), dtype: DType, copy: bool) -> Result<Tensor> {
    let x = t.data(func, name)?;
    if x.dtype == dtype && !copy {
        return Ok(t.clone());
    }
    Ok(Tensor::from_dense(cpu::convert(x, dtype)))
}

/// The absolute value of each element (`torch.abs`); integers keep their dtype (the most
/// negative integer wraps to itself, as in PyTorch). Not defined for bool tensors.
///
/// ```
/// let t = torchfn::tensor([-1.5f32, 0.0, 2.0])?;
/// assert_eq!(torchfn::abs(&t)?.to_vec::<f32>()?, [1.5, 0.0, 2.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn abs(input: &Tensor) -> Result<Tensor> {
    signed_unary("abs", SignedOp::Abs, ("input", input))
}

/// `e^x` of each element (`torch.exp`); integer and bool inputs give float32.
///
/// ```
/// let t = torchfn::tensor([0i64, 1])?;
/// let e = torchfn::exp(&t)?;
/// assert_eq!(e.dtype()?, torchfn::DType::Float32);
/// assert_eq!(e.to_vec::<f32>()?, [1.0, std::f32::consts::E]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn exp(input: &Tensor) -> Result<Tensor> {
    float_unary("exp", FloatOp::Exp, ("input", input))
}

/// The natural logarithm of each element (`torch.log`): `-inf` at 0, NaN below; integer and
/// bool inputs give float32.
#[torch_function(module = "torchfn")]
pub fn log(input: &Tensor) -> Result<Tensor> {
    float_unary("log", FloatOp::Log, ("input", input))
}

/// `log(1 + x)` of each element, accurate for small `x` (`torch.log1p`); `-inf` at -1.
#[torch_function(module = "torchfn")]
pub fn log1p(input: &Tensor) -> Result<Tensor> {
    float_unary("log1p", FloatOp::Log1p, ("input", input))
}

/// `e^x - 1` of each element, accurate for small `x` (`torch.expm1`).
#[torch_function(module = "torchfn")]
pub fn expm1(input: &Tensor) -> Result<Tensor> {
    float_unary("expm1", FloatOp::Expm1, ("input", input))
}

/// The square root of each element (`torch.sqrt`): NaN for negative numbers, `-0.0` for `-0.0`.
#[torch_function(module = "torchfn")]
pub fn sqrt(input: &Tensor) -> Result<Tensor> {
    float_unary("sqrt", FloatOp::Sqrt, ("input", input))
}

/// `1 / sqrt(x)` of each element (`torch.rsqrt`): `inf` at 0, NaN for negative numbers.
#[torch_function(module = "torchfn")]
pub fn rsqrt(input: &Tensor) -> Result<Tensor> {
    float_unary("rsqrt", FloatOp::Rsqrt, ("input", input))
}

/// The sine of each element, in radians (`torch.sin`); NaN for infinities.
#[torch_function(module = "torchfn")]
pub fn sin(input: &Tensor) -> Result<Tensor> {
    float_unary("sin", FloatOp::Sin, ("input", input))
}

/// The cosine of each element, in radians (`torch.cos`); NaN for infinities.
#[torch_function(module = "torchfn")]
pub fn cos(input: &Tensor) -> Result<Tensor> {
    float_unary("cos", FloatOp::Cos, ("input", input))
}

/// The tangent of each element, in radians (`torch.tan`); NaN for infinities.
#[torch_function(module = "torchfn")]
pub fn tan(input: &Tensor) -> Result<Tensor> {
    float_unary("tan", FloatOp::Tan, ("input", input))
}

/// The hyperbolic tangent of each element (`torch.tanh`); ±1 at ±inf.
#[torch_function(module = "torchfn")]
pub fn tanh(input: &Tensor) -> Result<Tensor> {
    float_unary("tanh", FloatOp::Tanh, ("input", input))
}

/// The logistic function `1 / (1 + e^-x)` of each element (`torch.sigmoid`): 0 at `-inf`, 1 at
/// `inf`.
#[torch_function(module = "torchfn")]
pub fn sigmoid(input: &Tensor) -> Result<Tensor> {
    float_unary("sigmoid", FloatOp::Sigmoid, ("input", input))
}

/// The error function of each element (`torch.erf`), accurate to about 1e-15 before rounding
/// to the result dtype; ±1 at ±inf.
///
/// ```
/// let t = torchfn::tensor([0.0f64, 1.0, f64::INFINITY])?;
/// let e = torchfn::erf(&t)?.to_vec::<f64>()?;
/// assert_eq!(e[0], 0.0);
/// assert!((e[1] - 0.8427007929497149).abs() < 1e-15);
/// assert_eq!(e[2], 1.0);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn erf(input: &Tensor) -> Result<Tensor> {
    float_unary("erf", FloatOp::Erf, ("input", input))
}

/// `1 / x` of each element (`torch.reciprocal`): `±inf` at `±0`; integer and bool inputs give
/// float32.
#[torch_function(module = "torchfn")]
pub fn reciprocal(input: &Tensor) -> Result<Tensor> {
    float_unary("reciprocal", FloatOp::Reciprocal, ("input", input))
}

/// The smallest whole number not below each element (`torch.ceil`); `ceil(-0.5)` is `-0.0`.
/// Integer tensors come back as a copy; not defined for bool tensors.
#[torch_function(module = "torchfn")]
pub fn ceil(input: &Tensor) -> Result<Tensor> {
    round_impl("ceil", Rounding::Ceil, ("input", input))
}

/// The largest whole number not above each element (`torch.floor`). Integer tensors come back
/// as a copy; not defined for bool tensors.
#[torch_function(module = "torchfn")]
pub fn floor(input: &Tensor) -> Result<Tensor> {
    round_impl("floor", Rounding::Floor, ("input", input))
}

/// Each element rounded to the nearest whole number, halves to even (`torch.round`): 0.5 is 0,
/// 1.5 and 2.5 are 2. With `decimals`, rounds to that many decimal places (negative: to tens,
/// hundreds, ...). Integer tensors come back as a copy (`decimals` other than 0 is not
/// implemented for them); not defined for bool tensors.
///
/// ```
/// let t = torchfn::tensor([0.5f32, 1.5, 2.5, -0.5, 1.2345])?;
/// assert_eq!(torchfn::round(&t, 0)?.to_vec::<f32>()?, [0.0, 2.0, 2.0, -0.0, 1.0]);
/// assert_eq!(torchfn::round(&t, 2)?.to_vec::<f32>()?, [0.5, 1.5, 2.5, -0.5, 1.23]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn round(input: &Tensor, #[default(0)] decimals: i64) -> Result<Tensor> {
    round_impl("round", Rounding::Round(decimals), ("input", input))
}

/// Each element rounded toward zero (`torch.trunc`). Integer tensors come back as a copy; not
/// defined for bool tensors.
#[torch_function(module = "torchfn")]
pub fn trunc(input: &Tensor) -> Result<Tensor> {
    round_impl("trunc", Rounding::Trunc, ("input", input))
}

/// -1, 0 or 1 by the sign of each element, in the input's dtype (`torch.sign`); 0 for NaN and
/// both zeros; a bool tensor is its own sign.
#[torch_function(module = "torchfn")]
pub fn sign(input: &Tensor) -> Result<Tensor> {
    signed_unary("sign", SignedOp::Sign, ("input", input))
}

/// `x * x` of each element (`torch.square`), as `pow(input, 2)`: integers keep their dtype
/// (and wrap on overflow), bools give int64.
#[torch_function(module = "torchfn")]
pub fn square(input: &Tensor) -> Result<Tensor> {
    signed_unary("square", SignedOp::Square, ("input", input))
}

/// `max(x, 0)` of each element, in the input's dtype (`torch.relu`); NaN stays NaN. Bool
/// tensors are an error.
#[torch_function(module = "torchfn")]
pub fn relu(input: &Tensor) -> Result<Tensor> {
    signed_unary("relu", SignedOp::Relu, ("input", input))
}

/// `input ** exponent`, broadcast, in the promoted dtype (`torch.pow`). Either side may be a
/// Python number ([`Tensor::scalar`]). Integers to a negative integer *number* are an error;
/// to a negative integer tensor element they give 0 (1 and -1 excepted), as in PyTorch.
///
/// ```
/// let t = torchfn::tensor([1i64, 2, 3])?;
/// assert_eq!(torchfn::pow(&t, &2.into())?.to_vec::<i64>()?, [1, 4, 9]);
/// assert_eq!(torchfn::pow(&t, &0.5.into())?.dtype()?, torchfn::DType::Float32);
/// assert!(torchfn::pow(&t, &(-1).into()).is_err());
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn pow(input: &Tensor, exponent: &Tensor) -> Result<Tensor> {
    binary_math("pow", BinaryOp::Pow, ("input", input), ("exponent", exponent))
}

/// The angle of the point `(other, input)` from the positive x axis, in `[-pi, pi]`, broadcast
/// (`torch.atan2`); integer and bool inputs give float32.
#[torch_function(module = "torchfn")]
pub fn atan2(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    binary_math("atan2", BinaryOp::Atan2, ("input", input), ("other", other))
}

/// The remainder of `input / other` with the sign of the dividend, as C's `fmod`, broadcast
/// (`torch.fmod`): `fmod(-7, 3)` is -1. Integer division by zero is an error; float division by
/// zero gives NaN. Not defined for bool tensors.
#[torch_function(module = "torchfn")]
pub fn fmod(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    binary_math("fmod", BinaryOp::Fmod, ("input", input), ("other", other))
}

/// The remainder of `input / other` with the sign of the divisor, as Python's `%`, broadcast
/// (`torch.remainder`): `remainder(-7, 3)` is 2. Integer division by zero is an error; float
/// division by zero gives NaN. Not defined for bool tensors.
///
/// ```
/// let t = torchfn::tensor([-7i64, 7])?;
/// assert_eq!(torchfn::remainder(&t, &3.into())?.to_vec::<i64>()?, [2, 1]);
/// assert_eq!(torchfn::fmod(&t, &3.into())?.to_vec::<i64>()?, [-1, 1]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn remainder(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    binary_math("remainder", BinaryOp::Remainder, ("input", input), ("other", other))
}

/// Each element limited to `[min, max]` (`torch.clamp`), with numbers as bounds; either bound
/// may be `None`, not both. The dtype is promoted with the bounds (an int tensor clamped to 0.5
/// gives float32); NaN stays NaN, and a `min` above `max` gives `max` everywhere.
/// [`clamp_tensor`] takes tensor bounds.
///
/// ```
/// use torchfn::Scalar;
/// let t = torchfn::tensor([-2.0f32, 0.25, 3.0])?;
/// let c = torchfn::clamp(&t, Some(Scalar::from(-1.0)), Some(Scalar::from(0.5)))?;
/// assert_eq!(c.to_vec::<f32>()?, [-1.0, 0.25, 0.5]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn clamp(
    input: &Tensor,
    #[default(None)] min: Option<Scalar>,
    #[default(None)] max: Option<Scalar>,
) -> Result<Tensor> {
    let (min, max) = (min.map(Tensor::scalar), max.map(Tensor::scalar));
    clamp_impl("clamp", ("input", input), min.as_ref(), max.as_ref())
}

/// Each element limited to the elements of `min` and `max`, broadcast together
/// (`torch.clamp(input, min: Tensor, max: Tensor)`); see [`clamp`].
#[torch_function(overload_of = CLAMP)]
pub fn clamp_tensor(
    input: &Tensor,
    #[default(None)] min: Option<&Tensor>,
    #[default(None)] max: Option<&Tensor>,
) -> Result<Tensor> {
    clamp_impl("clamp", ("input", input), min, max)
}

/// The elements of `input` where `condition` is true and of `other` elsewhere, the three
/// broadcast together (`torch.where`). `condition` must be a bool tensor; `input` and `other`
/// may be Python numbers, and the result has their promoted dtype.
///
/// ```
/// let c = torchfn::tensor([true, false, true])?;
/// let x = torchfn::tensor([1.0f32, 2.0, 3.0])?;
/// let out = torchfn::r#where(&c, &x, &0.0.into())?;
/// assert_eq!(out.to_vec::<f32>()?, [1.0, 0.0, 3.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn r#where(condition: &Tensor, input: &Tensor, other: &Tensor) -> Result<Tensor> {
    where_impl("where", condition, input, other)
}

impl Tensor {
    /// The absolute values: the method form of [`abs`](crate::abs()).
    #[torch_function]
    pub fn abs(&self) -> Result<Tensor> {
        signed_unary("abs", SignedOp::Abs, ("self", self))
    }

    /// `e^x`: the method form of [`exp`](crate::exp()).
    #[torch_function]
    pub fn exp(&self) -> Result<Tensor> {
        float_unary("exp", FloatOp::Exp, ("self", self))
    }

    /// The natural logarithm: the method form of [`log`](crate::log()).
    #[torch_function]
    pub fn log(&self) -> Result<Tensor> {
        float_unary("log", FloatOp::Log, ("self", self))
    }

    /// `log(1 + x)`: the method form of [`log1p`](crate::log1p()).
    #[torch_function]
    pub fn log1p(&self) -> Result<Tensor> {
        float_unary("log1p", FloatOp::Log1p, ("self", self))
    }

    /// `e^x - 1`: the method form of [`expm1`](crate::expm1()).
    #[torch_function]
    pub fn expm1(&self) -> Result<Tensor> {
        float_unary("expm1", FloatOp::Expm1, ("self", self))
    }

    /// The square roots: the method form of [`sqrt`](crate::sqrt()).
    #[torch_function]
    pub fn sqrt(&self) -> Result<Tensor> {
        float_unary("sqrt", FloatOp::Sqrt, ("self", self))
    }

    /// `1 / sqrt(x)`: the method form of [`rsqrt`](crate::rsqrt()).
    #[torch_function]
    pub fn rsqrt(&self) -> Result<Tensor> {
        float_unary("rsqrt", FloatOp::Rsqrt, ("self", self))
    }

    /// The sines: the method form of [`sin`](crate::sin()).
    #[torch_function]
    pub fn sin(&self) -> Result<Tensor> {
        float_unary("sin", FloatOp::Sin, ("self", self))
    }

    /// The cosines: the method form of [`cos`](crate::cos()).
    #[torch_function]
    pub fn cos(&self) -> Result<Tensor> {
        float_unary("cos", FloatOp::Cos, ("self", self))
    }

    /// The tangents: the method form of [`tan`](crate::tan()).
    #[torch_function]
    pub fn tan(&self) -> Result<Tensor> {
        float_unary("tan", FloatOp::Tan, ("self", self))
    }

    /// The hyperbolic tangents: the method form of [`tanh`](crate::tanh()).
    #[torch_function]
    pub fn tanh(&self) -> Result<Tensor> {
        float_unary("tanh", FloatOp::Tanh, ("self", self))
    }

    /// The logistic function: the method form of [`sigmoid`](crate::sigmoid()).
    #[torch_function]
    pub fn sigmoid(&self) -> Result<Tensor> {
        float_unary("sigmoid", FloatOp::Sigmoid, ("self", self))
    }

    /// The error function: the method form of [`erf`](crate::erf()).
    #[torch_function]
    pub fn erf(&self) -> Result<Tensor> {
        float_unary("erf", FloatOp::Erf, ("self", self))
    }

    /// `1 / x`: the method form of [`reciprocal`](crate::reciprocal()).
    #[torch_function]
    pub fn reciprocal(&self) -> Result<Tensor> {
        float_unary("reciprocal", FloatOp::Reciprocal, ("self", self))
    }

    /// Rounded up: the method form of [`ceil`](crate::ceil()).
    #[torch_function]
    pub fn ceil(&self) -> Result<Tensor> {
        round_impl("ceil", Rounding::Ceil, ("self", self))
    }

    /// Rounded down: the method form of [`floor`](crate::floor()).
    #[torch_function]
    pub fn floor(&self) -> Result<Tensor> {
        round_impl("floor", Rounding::Floor, ("self", self))
    }

    /// Rounded half to even: the method form of [`round`](crate::round()).
    #[torch_function]
    pub fn round(&self, #[default(0)] decimals: i64) -> Result<Tensor> {
        round_impl("round", Rounding::Round(decimals), ("self", self))
    }

    /// Rounded toward zero: the method form of [`trunc`](crate::trunc()).
    #[torch_function]
    pub fn trunc(&self) -> Result<Tensor> {
        round_impl("trunc", Rounding::Trunc, ("self", self))
    }

    /// The signs: the method form of [`sign`](crate::sign()).
    #[torch_function]
    pub fn sign(&self) -> Result<Tensor> {
        signed_unary("sign", SignedOp::Sign, ("self", self))
    }

    /// `x * x`: the method form of [`square`](crate::square()).
    #[torch_function]
    pub fn square(&self) -> Result<Tensor> {
        signed_unary("square", SignedOp::Square, ("self", self))
    }

    /// `max(x, 0)`: the method form of [`relu`](crate::relu()).
    #[torch_function]
    pub fn relu(&self) -> Result<Tensor> {
        signed_unary("relu", SignedOp::Relu, ("self", self))
    }

    /// `self ** exponent`: the method form of [`pow`](crate::pow()).
    #[torch_function]
    pub fn pow(&self, exponent: &Tensor) -> Result<Tensor> {
        binary_math("pow", BinaryOp::Pow, ("self", self), ("exponent", exponent))
    }

    /// The angle of `(other, self)`: the method form of [`atan2`](crate::atan2()).
    #[torch_function]
    pub fn atan2(&self, other: &Tensor) -> Result<Tensor> {
        binary_math("atan2", BinaryOp::Atan2, ("self", self), ("other", other))
    }

    /// The remainder with the dividend's sign: the method form of [`fmod`](crate::fmod()).
    #[torch_function]
    pub fn fmod(&self, other: &Tensor) -> Result<Tensor> {
        binary_math("fmod", BinaryOp::Fmod, ("self", self), ("other", other))
    }

    /// The remainder with the divisor's sign: the method form of
    /// [`remainder`](crate::remainder()).
    #[torch_function]
    pub fn remainder(&self, other: &Tensor) -> Result<Tensor> {
        binary_math("remainder", BinaryOp::Remainder, ("self", self), ("other", other))
    }

    /// Limited to `[min, max]`: the method form of [`clamp`](crate::clamp()).
    #[torch_function]
    pub fn clamp(&self, #[default(None)] min: Option<Scalar>, #[default(None)] max: Option<Scalar>) -> Result<Tensor> {
        let (min, max) = (min.map(Tensor::scalar), max.map(Tensor::scalar));
        clamp_impl("clamp", ("self", self), min.as_ref(), max.as_ref())
    }

    /// Limited by tensor bounds: the method form of [`clamp_tensor`](crate::clamp_tensor()).
    #[torch_function(overload_of = Tensor::CLAMP)]
    pub fn clamp_tensor(
        &self,
        #[default(None)] min: Option<&Tensor>,
        #[default(None)] max: Option<&Tensor>,
    ) -> Result<Tensor> {
        clamp_impl("clamp", ("self", self), min, max)
    }

    /// This tensor converted to `dtype` (`Tensor.to(dtype)`): floats truncate toward zero into
    /// integers (NaN and out-of-range values saturate), anything non-zero (NaN included) is
    /// `true`. With the dtype it already has and `copy` false, the very same tensor comes
    /// back; `non_blocking` has no effect on the CPU.
    ///
    /// ```
    /// use torchfn::DType;
    /// let t = torchfn::tensor([-1.7f32, 0.0, 2.5])?;
    /// assert_eq!(t.to(DType::Int64, false, false)?.to_vec::<i64>()?, [-1, 0, 2]);
    /// assert_eq!(t.to(DType::Bool, false, false)?.to_vec::<bool>()?, [true, false, true]);
    /// assert!(t.to(DType::Float32, false, false)?.is(&t));
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn to(&self, dtype: DType, #[default(false)] non_blocking: bool, #[default(false)] copy: bool) -> Result<Tensor> {
        let _ = non_blocking;
        to_impl("to", ("self", self), dtype, copy)
    }
}

/// Positive values of `shape`, to keep samples of `log`, `sqrt` and `pow` real.
fn positive(shape: &[usize]) -> Value {
    Value::Tensor(values(shape, DType::Float32).abs().expect("abs of a float tensor"))
}

crate::samples! {
    ABS => [sample([f32s(&[2, 3])]), sample([i64s(&[4])])],
    EXP => [sample([f32s(&[2, 3])]), sample([i64s(&[3])])],
    LOG => [sample([positive(&[2, 3])])],
    LOG1P => [sample([positive(&[2, 3])])],
    EXPM1 => [sample([f32s(&[2, 3])])],
    SQRT => [sample([positive(&[2, 3])])],
    RSQRT => [sample([positive(&[4])])],
    SIN => [sample([f32s(&[2, 3])])],
    COS => [sample([f32s(&[2, 3])])],
    TAN => [sample([f32s(&[4])])],
    TANH => [sample([f32s(&[2, 3])])],
    SIGMOID => [sample([f32s(&[2, 3])]), sample([bools(&[3])])],
    ERF => [sample([f32s(&[2, 3])])],
    RECIPROCAL => [sample([f32s(&[2, 3])]), sample([i64s(&[3])])],
    CEIL => [sample([f32s(&[2, 3])])],
    FLOOR => [sample([f32s(&[2, 3])]), sample([i64s(&[3])])],
    ROUND => [sample([f32s(&[2, 3])]), sample([f32s(&[4])]).kw("decimals", 1)],
    TRUNC => [sample([f32s(&[2, 3])])],
    SIGN => [sample([f32s(&[2, 3])]), sample([bools(&[3])])],
    SQUARE => [sample([f32s(&[2, 3])]), sample([bools(&[3])])],
    RELU => [sample([f32s(&[2, 3])]), sample([i64s(&[3])])],
    POW => [sample([positive(&[2, 3]), f32s(&[3])]), sample([i64s(&[3]), Value::Int(2)]), sample([Value::Float(2.0), f32s(&[3])])],
    ATAN2 => [sample([f32s(&[2, 3]), f32s(&[2, 1])])],
    FMOD => [sample([f32s(&[2, 3]), f32s(&[3])]), sample([i64s(&[4]), i64s(&[4])])],
    REMAINDER => [sample([f32s(&[2, 3]), f32s(&[3])]), sample([i64s(&[4]), Value::Int(3)])],
    CLAMP => [sample([f32s(&[2, 3])]).kw("min", -1.0).kw("max", 0.5), sample([i64s(&[4])]).kw("min", 0),
        sample([f32s(&[2, 3]), f32s(&[3]), f32s(&[2, 1])])],
    WHERE => [sample([bools(&[2, 3]), f32s(&[2, 3]), f32s(&[3])]), sample([bools(&[2, 1]), i64s(&[3]), Value::Float(0.5)])],
    Tensor::ABS => [sample([f32s(&[3])])],
    Tensor::EXP => [sample([f32s(&[3])])],
    Tensor::LOG => [sample([positive(&[3])])],
    Tensor::LOG1P => [sample([positive(&[3])])],
    Tensor::EXPM1 => [sample([f32s(&[3])])],
    Tensor::SQRT => [sample([positive(&[3])])],
    Tensor::RSQRT => [sample([positive(&[3])])],
    Tensor::SIN => [sample([f32s(&[3])])],
    Tensor::COS => [sample([f32s(&[3])])],
    Tensor::TAN => [sample([f32s(&[3])])],
    Tensor::TANH => [sample([f32s(&[3])])],
    Tensor::SIGMOID => [sample([f32s(&[3])])],
    Tensor::ERF => [sample([f32s(&[3])])],
    Tensor::RECIPROCAL => [sample([f32s(&[3])])],
    Tensor::CEIL => [sample([f32s(&[3])])],
    Tensor::FLOOR => [sample([f32s(&[3])])],
    Tensor::ROUND => [sample([f32s(&[3])]), sample([f32s(&[3])]).kw("decimals", -1)],
    Tensor::TRUNC => [sample([f32s(&[3])])],
    Tensor::SIGN => [sample([i64s(&[3])])],
    Tensor::SQUARE => [sample([i64s(&[3])])],
    Tensor::RELU => [sample([f32s(&[3])])],
    Tensor::POW => [sample([positive(&[3]), f32s(&[3])]), sample([f32s(&[3]), Value::Float(0.5)])],
    Tensor::ATAN2 => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::FMOD => [sample([f32s(&[3]), Value::Float(1.5)])],
    Tensor::REMAINDER => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::CLAMP => [sample([f32s(&[3])]).kw("max", 0.0), sample([f32s(&[3])]).kw("min", f32s(&[1]))],
    Tensor::TO => [sample([f32s(&[3]), Value::DType(DType::Int64)]), sample([i64s(&[3]), Value::DType(DType::Bool)]).kw("copy", true)],
}
