//! Unary elementwise math: the floating-point functions (`exp`, `log`, `sqrt`, `sin`, `erf`,
//! ...), rounding (`ceil`, `floor`, `round`, `trunc`) and the functions that keep their input's
//! dtype (`abs`, `sign`, `square`, `relu`), with PyTorch's dtype rules: the floating-point
//! functions give the default float dtype (float32) for integer and bool inputs. Their in-place
//! forms (`exp_`, ...) are in `math_inplace`.

use crate::backend::Unary;
use crate::error::{Error, Result, bail};
use crate::tensor::{DType, Tensor};
use crate::testing::{bools, f32s, i64s, sample, values};
use crate::torch_function;
use crate::value::Value;
use torchfn_types::Category;

/// The error of an operation PyTorch does not define for bool tensors.
#[cold]
pub(super) fn no_bool(func: &str, name: &str) -> Error {
    Error::not_implemented(format!("{func}(): not implemented for bool tensors (argument '{name}' is a bool tensor)"))
}

/// The dtype a floating-point function computes and returns: the input's when it is a float,
/// the default float dtype otherwise.
pub(super) fn float_dtype(dtype: DType) -> DType {
    if dtype.is_floating_point() { dtype } else { crate::types::get_default_dtype() }
}

/// `op` (a floating-point function) on each element, in the input's float dtype or the default
/// float dtype.
pub(super) fn float_unary(func: &str, op: Unary, input: (&str, &Tensor)) -> Result<Tensor> {
    float_unary_to(func, op, input, None)
}

/// As [`float_unary`], computed straight into `out` when the kernels can (see
/// [`Backend::unary`](crate::backend::Backend::unary)).
pub(super) fn float_unary_to(
    func: &str,
    op: Unary,
    (name, t): (&str, &Tensor),
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let x = t.data(func, name)?;
    if let Some(o) = out {
        o.data(func, "out")?;
    }
    crate::primitive::unary(t, op, float_dtype(x.dtype), out)
}

/// Rounds floats (`op` is `Ceil`, `Floor`, `Trunc` or `Round`); integers are already whole and
/// come back as a copy; bools are an error. Written into `out` where it can be (an in-place
/// form's target).
pub(super) fn round_impl(func: &str, op: Unary, (name, t): (&str, &Tensor), out: Option<&Tensor>) -> Result<Tensor> {
    let x = t.data(func, name)?;
    match x.dtype.category() {
        Category::Bool => Err(no_bool(func, name)),
        Category::Integral => {
            if let Unary::Round(decimals) = op
                && decimals != 0
            {
                bail!(NotImplemented, "{func}(): decimals={decimals} is not implemented for integer tensors");
            }
            crate::primitive::copy(t, x.dtype)
        }
        Category::Floating => crate::primitive::unary(t, op, x.dtype, out),
    }
}

/// An operation that keeps its input's dtype (`Abs`, `Sign`, `Square`, `Relu`), written into
/// `out` where it can be.
pub(super) fn signed_unary(func: &str, op: Unary, (name, t): (&str, &Tensor), out: Option<&Tensor>) -> Result<Tensor> {
    let x = t.data(func, name)?;
    match (x.dtype, op) {
        (DType::Bool, Unary::Sign) => crate::primitive::copy(t, DType::Bool),
        // `square` is `pow(input, 2)`, and a bool tensor with an int gives int64.
        (DType::Bool, Unary::Square) => crate::primitive::unary(t, op, DType::Int64, None),
        (DType::Bool, Unary::Relu) => bail!(Runtime, "{func}(): bool inputs are not supported (argument '{name}')"),
        (DType::Bool, _) => Err(no_bool(func, name)),
        (dtype, _) => crate::primitive::unary(t, op, dtype, out),
    }
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
    signed_unary("abs", Unary::Abs, ("input", input), None)
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
    float_unary("exp", Unary::Exp, ("input", input))
}

/// The natural logarithm of each element (`torch.log`): `-inf` at 0, NaN below; integer and
/// bool inputs give float32.
#[torch_function(module = "torchfn")]
pub fn log(input: &Tensor) -> Result<Tensor> {
    float_unary("log", Unary::Log, ("input", input))
}

/// `log(1 + x)` of each element, accurate for small `x` (`torch.log1p`); `-inf` at -1.
#[torch_function(module = "torchfn")]
pub fn log1p(input: &Tensor) -> Result<Tensor> {
    float_unary("log1p", Unary::Log1p, ("input", input))
}

/// `e^x - 1` of each element, accurate for small `x` (`torch.expm1`).
#[torch_function(module = "torchfn")]
pub fn expm1(input: &Tensor) -> Result<Tensor> {
    float_unary("expm1", Unary::Expm1, ("input", input))
}

/// The square root of each element (`torch.sqrt`): NaN for negative numbers, `-0.0` for `-0.0`.
#[torch_function(module = "torchfn")]
pub fn sqrt(input: &Tensor) -> Result<Tensor> {
    float_unary("sqrt", Unary::Sqrt, ("input", input))
}

/// `1 / sqrt(x)` of each element (`torch.rsqrt`): `inf` at 0, NaN for negative numbers.
#[torch_function(module = "torchfn")]
pub fn rsqrt(input: &Tensor) -> Result<Tensor> {
    float_unary("rsqrt", Unary::Rsqrt, ("input", input))
}

/// The sine of each element, in radians (`torch.sin`); NaN for infinities.
#[torch_function(module = "torchfn")]
pub fn sin(input: &Tensor) -> Result<Tensor> {
    float_unary("sin", Unary::Sin, ("input", input))
}

/// The cosine of each element, in radians (`torch.cos`); NaN for infinities.
#[torch_function(module = "torchfn")]
pub fn cos(input: &Tensor) -> Result<Tensor> {
    float_unary("cos", Unary::Cos, ("input", input))
}

/// The tangent of each element, in radians (`torch.tan`); NaN for infinities.
#[torch_function(module = "torchfn")]
pub fn tan(input: &Tensor) -> Result<Tensor> {
    float_unary("tan", Unary::Tan, ("input", input))
}

/// The hyperbolic tangent of each element (`torch.tanh`); ±1 at ±inf.
#[torch_function(module = "torchfn")]
pub fn tanh(input: &Tensor) -> Result<Tensor> {
    float_unary("tanh", Unary::Tanh, ("input", input))
}

/// The logistic function `1 / (1 + e^-x)` of each element (`torch.sigmoid`): 0 at `-inf`, 1 at
/// `inf`.
#[torch_function(module = "torchfn")]
pub fn sigmoid(input: &Tensor) -> Result<Tensor> {
    float_unary("sigmoid", Unary::Sigmoid, ("input", input))
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
    float_unary("erf", Unary::Erf, ("input", input))
}

/// `1 / x` of each element (`torch.reciprocal`): `±inf` at `±0`; integer and bool inputs give
/// float32.
#[torch_function(module = "torchfn")]
pub fn reciprocal(input: &Tensor) -> Result<Tensor> {
    float_unary("reciprocal", Unary::Reciprocal, ("input", input))
}

/// The smallest whole number not below each element (`torch.ceil`); `ceil(-0.5)` is `-0.0`.
/// Integer tensors come back as a copy; not defined for bool tensors.
#[torch_function(module = "torchfn")]
pub fn ceil(input: &Tensor) -> Result<Tensor> {
    round_impl("ceil", Unary::Ceil, ("input", input), None)
}

/// The largest whole number not above each element (`torch.floor`). Integer tensors come back
/// as a copy; not defined for bool tensors.
#[torch_function(module = "torchfn")]
pub fn floor(input: &Tensor) -> Result<Tensor> {
    round_impl("floor", Unary::Floor, ("input", input), None)
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
    round_impl("round", Unary::Round(decimals), ("input", input), None)
}

/// Each element rounded toward zero (`torch.trunc`). Integer tensors come back as a copy; not
/// defined for bool tensors.
#[torch_function(module = "torchfn")]
pub fn trunc(input: &Tensor) -> Result<Tensor> {
    round_impl("trunc", Unary::Trunc, ("input", input), None)
}

/// -1, 0 or 1 by the sign of each element, in the input's dtype (`torch.sign`); 0 for NaN and
/// both zeros; a bool tensor is its own sign.
#[torch_function(module = "torchfn")]
pub fn sign(input: &Tensor) -> Result<Tensor> {
    signed_unary("sign", Unary::Sign, ("input", input), None)
}

/// `x * x` of each element (`torch.square`), as `pow(input, 2)`: integers keep their dtype
/// (and wrap on overflow), bools give int64.
#[torch_function(module = "torchfn")]
pub fn square(input: &Tensor) -> Result<Tensor> {
    signed_unary("square", Unary::Square, ("input", input), None)
}

/// `max(x, 0)` of each element, in the input's dtype (`torch.relu`); NaN stays NaN. Bool
/// tensors are an error.
#[torch_function(module = "torchfn")]
pub fn relu(input: &Tensor) -> Result<Tensor> {
    signed_unary("relu", Unary::Relu, ("input", input), None)
}

impl Tensor {
    /// The absolute values: the method form of [`abs`](crate::abs()).
    #[torch_function]
    pub fn abs(&self) -> Result<Tensor> {
        signed_unary("abs", Unary::Abs, ("self", self), None)
    }

    /// `e^x`: the method form of [`exp`](crate::exp()).
    #[torch_function]
    pub fn exp(&self) -> Result<Tensor> {
        float_unary("exp", Unary::Exp, ("self", self))
    }

    /// The natural logarithm: the method form of [`log`](crate::log()).
    #[torch_function]
    pub fn log(&self) -> Result<Tensor> {
        float_unary("log", Unary::Log, ("self", self))
    }

    /// `log(1 + x)`: the method form of [`log1p`](crate::log1p()).
    #[torch_function]
    pub fn log1p(&self) -> Result<Tensor> {
        float_unary("log1p", Unary::Log1p, ("self", self))
    }

    /// `e^x - 1`: the method form of [`expm1`](crate::expm1()).
    #[torch_function]
    pub fn expm1(&self) -> Result<Tensor> {
        float_unary("expm1", Unary::Expm1, ("self", self))
    }

    /// The square roots: the method form of [`sqrt`](crate::sqrt()).
    #[torch_function]
    pub fn sqrt(&self) -> Result<Tensor> {
        float_unary("sqrt", Unary::Sqrt, ("self", self))
    }

    /// `1 / sqrt(x)`: the method form of [`rsqrt`](crate::rsqrt()).
    #[torch_function]
    pub fn rsqrt(&self) -> Result<Tensor> {
        float_unary("rsqrt", Unary::Rsqrt, ("self", self))
    }

    /// The sines: the method form of [`sin`](crate::sin()).
    #[torch_function]
    pub fn sin(&self) -> Result<Tensor> {
        float_unary("sin", Unary::Sin, ("self", self))
    }

    /// The cosines: the method form of [`cos`](crate::cos()).
    #[torch_function]
    pub fn cos(&self) -> Result<Tensor> {
        float_unary("cos", Unary::Cos, ("self", self))
    }

    /// The tangents: the method form of [`tan`](crate::tan()).
    #[torch_function]
    pub fn tan(&self) -> Result<Tensor> {
        float_unary("tan", Unary::Tan, ("self", self))
    }

    /// The hyperbolic tangents: the method form of [`tanh`](crate::tanh()).
    #[torch_function]
    pub fn tanh(&self) -> Result<Tensor> {
        float_unary("tanh", Unary::Tanh, ("self", self))
    }

    /// The logistic function: the method form of [`sigmoid`](crate::sigmoid()).
    #[torch_function]
    pub fn sigmoid(&self) -> Result<Tensor> {
        float_unary("sigmoid", Unary::Sigmoid, ("self", self))
    }

    /// The error function: the method form of [`erf`](crate::erf()).
    #[torch_function]
    pub fn erf(&self) -> Result<Tensor> {
        float_unary("erf", Unary::Erf, ("self", self))
    }

    /// `1 / x`: the method form of [`reciprocal`](crate::reciprocal()).
    #[torch_function]
    pub fn reciprocal(&self) -> Result<Tensor> {
        float_unary("reciprocal", Unary::Reciprocal, ("self", self))
    }

    /// Rounded up: the method form of [`ceil`](crate::ceil()).
    #[torch_function]
    pub fn ceil(&self) -> Result<Tensor> {
        round_impl("ceil", Unary::Ceil, ("self", self), None)
    }

    /// Rounded down: the method form of [`floor`](crate::floor()).
    #[torch_function]
    pub fn floor(&self) -> Result<Tensor> {
        round_impl("floor", Unary::Floor, ("self", self), None)
    }

    /// Rounded half to even: the method form of [`round`](crate::round()).
    #[torch_function]
    pub fn round(&self, #[default(0)] decimals: i64) -> Result<Tensor> {
        round_impl("round", Unary::Round(decimals), ("self", self), None)
    }

    /// Rounded toward zero: the method form of [`trunc`](crate::trunc()).
    #[torch_function]
    pub fn trunc(&self) -> Result<Tensor> {
        round_impl("trunc", Unary::Trunc, ("self", self), None)
    }

    /// The signs: the method form of [`sign`](crate::sign()).
    #[torch_function]
    pub fn sign(&self) -> Result<Tensor> {
        signed_unary("sign", Unary::Sign, ("self", self), None)
    }

    /// `x * x`: the method form of [`square`](crate::square()).
    #[torch_function]
    pub fn square(&self) -> Result<Tensor> {
        signed_unary("square", Unary::Square, ("self", self), None)
    }

    /// `max(x, 0)`: the method form of [`relu`](crate::relu()).
    #[torch_function]
    pub fn relu(&self) -> Result<Tensor> {
        signed_unary("relu", Unary::Relu, ("self", self), None)
    }
}

/// Positive values of `shape`, to keep samples of `log`, `sqrt` and `pow` real.
pub(super) fn positive(shape: &[usize]) -> Value {
    Value::Tensor(values(shape, DType::Float32).abs().expect("abs of a float tensor"))
}

crate::samples! {
    ABS => [sample([f32s(&[2, 3])]), sample([i64s(&[4])])],
    EXP => [sample([f32s(&[2, 3])]), sample([i64s(&[3])]), sample([f32s(&[3])]).kw("out", f32s(&[3]))],
    LOG => [sample([positive(&[2, 3])]), sample([positive(&[2, 3])]).kw("out", positive(&[2, 3]))],
    LOG1P => [sample([positive(&[2, 3])]), sample([positive(&[2, 3])]).kw("out", positive(&[2, 3]))],
    EXPM1 => [sample([f32s(&[2, 3])]), sample([f32s(&[2, 3])]).kw("out", f32s(&[2, 3]))],
    SQRT => [sample([positive(&[2, 3])]), sample([positive(&[2, 3])]).kw("out", positive(&[2, 3]))],
    RSQRT => [sample([positive(&[4])]), sample([positive(&[4])]).kw("out", positive(&[4]))],
    SIN => [sample([f32s(&[2, 3])]), sample([f32s(&[2, 3])]).kw("out", f32s(&[2, 3]))],
    COS => [sample([f32s(&[2, 3])]), sample([f32s(&[2, 3])]).kw("out", f32s(&[2, 3]))],
    TAN => [sample([f32s(&[4])]), sample([f32s(&[4])]).kw("out", f32s(&[4]))],
    TANH => [sample([f32s(&[2, 3])]), sample([f32s(&[2, 3])]).kw("out", f32s(&[2, 3]))],
    SIGMOID => [sample([f32s(&[2, 3])]), sample([bools(&[3])]), sample([f32s(&[2, 3])]).kw("out", f32s(&[2, 3]))],
    ERF => [sample([f32s(&[2, 3])]), sample([f32s(&[2, 3])]).kw("out", f32s(&[2, 3]))],
    RECIPROCAL => [sample([f32s(&[2, 3])]), sample([i64s(&[3])]), sample([f32s(&[2, 3])]).kw("out", f32s(&[2, 3]))],
    CEIL => [sample([f32s(&[2, 3])])],
    FLOOR => [sample([f32s(&[2, 3])]), sample([i64s(&[3])])],
    ROUND => [sample([f32s(&[2, 3])]), sample([f32s(&[4])]).kw("decimals", 1)],
    TRUNC => [sample([f32s(&[2, 3])])],
    SIGN => [sample([f32s(&[2, 3])]), sample([bools(&[3])])],
    SQUARE => [sample([f32s(&[2, 3])]), sample([bools(&[3])])],
    RELU => [sample([f32s(&[2, 3])]), sample([i64s(&[3])])],
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
}
