//! Binary elementwise math, broadcasting with PyTorch's type promotion: `pow`, `atan2`, `fmod`,
//! `remainder`, and `clamp`, `where` and `masked_fill`, which take up to three operands; and the
//! in-place forms PyTorch has (`pow_`, `atan2_`, `fmod_`, `remainder_`, `clamp_`,
//! `masked_fill_`).

use crate::backend::host::scalar_of;
use crate::backend::{Binary, Unary};
use crate::error::{Result, bail};
use crate::ops::device::device_of;
use crate::ops::inplace::update;
use crate::primitive;
use crate::tensor::{DType, Dense, Scalar, Tensor, broadcast_shapes, check_broadcast, result_type};
use crate::testing::{bools, f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

use super::arithmetic::any_zero;
use super::math::{float_dtype, no_bool, positive};

/// `a op b` (`Pow`, `Atan2`, `Fmod` or `Remainder`), broadcast, in PyTorch's promoted dtype
/// (the default float dtype for `atan2` of integers).
fn binary_math(func: &str, op: Binary, (a_name, a): (&str, &Tensor), (b_name, b): (&str, &Tensor)) -> Result<Tensor> {
    let (x, y) = (a.data(func, a_name)?, b.data(func, b_name)?);
    device_of(func, &[(a_name, x), (b_name, y)])?;
    check_broadcast(&x.layout.shape, &y.layout.shape, func)?;
    let common = result_type([x.participant(), y.participant()]);
    let dtype = match op {
        Binary::Atan2 => float_dtype(common),
        Binary::Pow => return power(func, (a_name, a), (b_name, b), common),
        _ => {
            if common == DType::Bool {
                return Err(no_bool(func, a_name));
            }
            if !common.is_floating_point() && any_zero(func, (b_name, y))? {
                bail!(
                    Runtime,
                    "{func}(): ZeroDivisionError: integer division by zero (argument '{b_name}' has a zero)"
                );
            }
            common
        }
    };
    primitive::binary(a, b, op, dtype, None)
}

/// `x ** y` in `common`. As PyTorch: integers to a negative integer number (a Python number,
/// not a tensor) are an error, bools to bools are not defined, and a float to the number 0.5
/// or -0.5 is a square root (so `-0.0 ** 0.5` is `-0.0` and `-inf ** 0.5` is NaN).
fn power(func: &str, (base, a): (&str, &Tensor), (exp, b): (&str, &Tensor), common: DType) -> Result<Tensor> {
    let (x, y) = (a.data(func, base)?, b.data(func, exp)?);
    let number = if y.wrapped_number { Some(scalar_of(y)?) } else { None };
    if !x.dtype.is_floating_point()
        && let Some(Scalar::Int(e @ ..0)) = number
    {
        bail!(Runtime, "{func}(): integers to negative integer powers are not allowed (argument '{exp}' is {e})");
    }
    if common == DType::Bool {
        return Err(no_bool(func, base));
    }
    if common.is_floating_point()
        && let Some(Scalar::Float(e)) = number
        && e.abs() == 0.5
    {
        // The number is zero-dimensional, so the result has the base's shape.
        let root = if e > 0.0 { Unary::Sqrt } else { Unary::Rsqrt };
        return primitive::unary(a, root, common, None);
    }
    primitive::binary(a, b, Binary::Pow, common, None)
}

/// `min(max(input, min), max)`, broadcast, in the promoted dtype of the three; NaN in the input
/// or a bound propagates. A `min` above `max` gives `max` everywhere. Each step is written into
/// `out` where it can be.
fn clamp_impl(
    func: &str,
    (name, t): (&str, &Tensor),
    min: Option<&Tensor>,
    max: Option<&Tensor>,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let x = t.data(func, name)?;
    if min.is_none() && max.is_none() {
        bail!(Runtime, "{func}(): at least one of 'min' or 'max' must not be None");
    }
    let lo = min.map(|m| m.data(func, "min")).transpose()?;
    let hi = max.map(|m| m.data(func, "max")).transpose()?;
    let operands: Vec<(&str, &Dense)> =
        [Some((name, x)), lo.map(|l| ("min", l)), hi.map(|h| ("max", h))].into_iter().flatten().collect();
    device_of(func, &operands)?;
    let common = result_type(operands.iter().map(|(_, d)| d.participant()));
    if common == DType::Bool {
        return Err(no_bool(func, name));
    }
    let mut result = t.clone();
    for (bound, op) in [(min, Binary::ClampMin), (max, Binary::ClampMax)] {
        let Some(bound) = bound else { continue };
        check_broadcast(&result.shape()?, &bound.shape()?, func)?;
        result = primitive::binary(&result, bound, op, common, out)?;
    }
    Ok(result)
}

/// `input` where `condition` is true, `other` elsewhere, the three broadcast together.
fn where_impl(func: &str, condition: &Tensor, input: &Tensor, other: &Tensor) -> Result<Tensor> {
    let c = condition.data(func, "condition")?;
    let (x, y) = (input.data(func, "input")?, other.data(func, "other")?);
    if c.dtype != DType::Bool {
        bail!(
            Runtime,
            "{func}(): expected condition to be a bool tensor, but got a tensor with dtype {}",
            c.dtype.name()
        );
    }
    device_of(func, &[("condition", c), ("input", x), ("other", y)])?;
    let shape = broadcast_shapes(&c.layout.shape, &x.layout.shape, func)?;
    broadcast_shapes(&shape, &y.layout.shape, func)?;
    let common = result_type([x.participant(), y.participant()]);
    primitive::select(condition, input, other, common)
}

/// `value` where `mask` is true and `input` elsewhere, broadcast together, in `input`'s dtype
/// (the value is converted to it, as PyTorch does: `0.7` into an int64 tensor is 0). `mask`
/// must be a bool tensor and `value` a number or a zero-dimensional tensor; through
/// [`primitive::select`], so gradients flow to `input` (where not masked) and to a `value`
/// tensor (summed where masked).
fn masked_fill_impl(func: &str, (name, t): (&str, &Tensor), mask: &Tensor, value: &Tensor) -> Result<Tensor> {
    let (x, m, v) = (t.data(func, name)?, mask.data(func, "mask")?, value.data(func, "value")?);
    if m.dtype != DType::Bool {
        bail!(Runtime, "{func}(): only supports boolean masks, but got mask with dtype {}", m.dtype.name());
    }
    if v.layout.ndim() != 0 {
        bail!(
            Runtime,
            "{func}(): only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).",
            v.layout.ndim()
        );
    }
    device_of(func, &[(name, x), ("mask", m), ("value", v)])?;
    broadcast_shapes(&x.layout.shape, &m.layout.shape, func)?;
    primitive::select(mask, value, t, x.dtype)
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
    binary_math("pow", Binary::Pow, ("input", input), ("exponent", exponent))
}

/// The angle of the point `(other, input)` from the positive x axis, in `[-pi, pi]`, broadcast
/// (`torch.atan2`); integer and bool inputs give float32.
#[torch_function(module = "torchfn")]
pub fn atan2(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    binary_math("atan2", Binary::Atan2, ("input", input), ("other", other))
}

/// The remainder of `input / other` with the sign of the dividend, as C's `fmod`, broadcast
/// (`torch.fmod`): `fmod(-7, 3)` is -1. Integer division by zero is an error; float division by
/// zero gives NaN. Not defined for bool tensors.
#[torch_function(module = "torchfn")]
pub fn fmod(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    binary_math("fmod", Binary::Fmod, ("input", input), ("other", other))
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
    binary_math("remainder", Binary::Remainder, ("input", input), ("other", other))
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
    clamp_impl("clamp", ("input", input), min.as_ref(), max.as_ref(), None)
}

/// Each element limited to the elements of `min` and `max`, broadcast together
/// (`torch.clamp(input, min: Tensor, max: Tensor)`); see [`clamp`].
#[torch_function(overload_of = CLAMP)]
pub fn clamp_tensor(
    input: &Tensor,
    #[default(None)] min: Option<&Tensor>,
    #[default(None)] max: Option<&Tensor>,
) -> Result<Tensor> {
    clamp_impl("clamp", ("input", input), min, max, None)
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

/// `input` with the elements where `mask` is true replaced by `value`
/// (`torch.masked_fill`): `mask` is a bool tensor that broadcasts with `input` (the result has
/// their broadcast shape), `value` a Python number ([`Tensor::scalar`]) or a zero-dimensional
/// tensor, converted to `input`'s dtype, which the result keeps. Differentiable in `input` and
/// in a `value` tensor.
///
/// ```
/// let scores = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]])?;
/// let mask = torchfn::tensor([false, true])?; // broadcast over the rows
/// let out = torchfn::masked_fill(&scores, &mask, &f32::NEG_INFINITY.into())?;
/// assert_eq!(out.to_vec::<f32>()?, [1.0, f32::NEG_INFINITY, 3.0, f32::NEG_INFINITY]);
/// let ints = torchfn::tensor([1i64, 2])?;
/// assert_eq!(torchfn::masked_fill(&ints, &mask, &0.7.into())?.to_vec::<i64>()?, [1, 0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn masked_fill(input: &Tensor, mask: &Tensor, value: &Tensor) -> Result<Tensor> {
    masked_fill_impl("masked_fill", ("input", input), mask, value)
}

/// `op` of `t` and `other`, written into `t` (the in-place binary functions).
fn binary_math_(func: &str, op: Binary, t: &Tensor, (name, other): (&str, &Tensor)) -> Result<Tensor> {
    update(func, t, &[other], |source| binary_math(func, op, ("self", source), (name, other)))
}

impl Tensor {
    /// `self` with `value` where `mask` is true: the method form of
    /// [`masked_fill`](crate::masked_fill()).
    #[torch_function]
    pub fn masked_fill(&self, mask: &Tensor, value: &Tensor) -> Result<Tensor> {
        masked_fill_impl("masked_fill", ("self", self), mask, value)
    }

    /// Writes `value` where `mask` is true, in place (`Tensor.masked_fill_`); returns `self`.
    /// The mask broadcasts to `self`'s shape (not the other way round). See
    /// [`masked_fill`](crate::masked_fill()).
    ///
    /// ```
    /// let t = torchfn::zeros([2, 2], None, None)?;
    /// let mask = torchfn::tensor([[true], [false]])?;
    /// assert!(t.masked_fill_(&mask, &5.into())?.is(&t));
    /// assert_eq!(t.to_vec::<f32>()?, [5.0, 5.0, 0.0, 0.0]);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn masked_fill_(&self, mask: &Tensor, value: &Tensor) -> Result<Tensor> {
        update("masked_fill_", self, &[mask, value], |source| {
            masked_fill_impl("masked_fill_", ("self", source), mask, value)
        })
    }

    /// `self ** exponent`: the method form of [`pow`](crate::pow()).
    #[torch_function]
    pub fn pow(&self, exponent: &Tensor) -> Result<Tensor> {
        binary_math("pow", Binary::Pow, ("self", self), ("exponent", exponent))
    }

    /// Python's `**` operator (`self ** exponent`), which Rust has no symbol for.
    #[torch_function]
    pub fn __pow__(&self, exponent: &Tensor) -> Result<Tensor> {
        binary_math("__pow__", Binary::Pow, ("self", self), ("exponent", exponent))
    }

    /// The reflected `**` operator (`other ** self`).
    #[torch_function]
    pub fn __rpow__(&self, other: &Tensor) -> Result<Tensor> {
        binary_math("__rpow__", Binary::Pow, ("other", other), ("self", self))
    }

    /// The `%` operator (`self % other`): the remainder with the divisor's sign, as
    /// [`remainder`](crate::remainder()).
    #[torch_function]
    pub fn __mod__(&self, other: &Tensor) -> Result<Tensor> {
        binary_math("__mod__", Binary::Remainder, ("self", self), ("other", other))
    }

    /// The reflected `%` operator (`other % self`).
    #[torch_function]
    pub fn __rmod__(&self, other: &Tensor) -> Result<Tensor> {
        binary_math("__rmod__", Binary::Remainder, ("other", other), ("self", self))
    }

    /// The angle of `(other, self)`: the method form of [`atan2`](crate::atan2()).
    #[torch_function]
    pub fn atan2(&self, other: &Tensor) -> Result<Tensor> {
        binary_math("atan2", Binary::Atan2, ("self", self), ("other", other))
    }

    /// The remainder with the dividend's sign: the method form of [`fmod`](crate::fmod()).
    #[torch_function]
    pub fn fmod(&self, other: &Tensor) -> Result<Tensor> {
        binary_math("fmod", Binary::Fmod, ("self", self), ("other", other))
    }

    /// The remainder with the divisor's sign: the method form of
    /// [`remainder`](crate::remainder()).
    #[torch_function]
    pub fn remainder(&self, other: &Tensor) -> Result<Tensor> {
        binary_math("remainder", Binary::Remainder, ("self", self), ("other", other))
    }

    /// Limited to `[min, max]`: the method form of [`clamp`](crate::clamp()).
    #[torch_function]
    pub fn clamp(&self, #[default(None)] min: Option<Scalar>, #[default(None)] max: Option<Scalar>) -> Result<Tensor> {
        let (min, max) = (min.map(Tensor::scalar), max.map(Tensor::scalar));
        clamp_impl("clamp", ("self", self), min.as_ref(), max.as_ref(), None)
    }

    /// Limited by tensor bounds: the method form of [`clamp_tensor`](crate::clamp_tensor()).
    #[torch_function(overload_of = Tensor::CLAMP)]
    pub fn clamp_tensor(
        &self,
        #[default(None)] min: Option<&Tensor>,
        #[default(None)] max: Option<&Tensor>,
    ) -> Result<Tensor> {
        clamp_impl("clamp", ("self", self), min, max, None)
    }

    /// `self ** exponent`, in place (`Tensor.pow_`); returns `self`. The exponent broadcasts
    /// to `self`'s shape, and the result must be castable to `self`'s dtype: an integer tensor
    /// to a float power is an error. See [`pow`](crate::pow()).
    ///
    /// ```
    /// let t = torchfn::tensor([1i64, 2, 3])?;
    /// assert!(t.pow_(&2.into())?.is(&t));
    /// assert_eq!(t.to_vec::<i64>()?, [1, 4, 9]);
    /// assert!(t.pow_(&0.5.into()).is_err()); // a float result does not go into an int64 tensor
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn pow_(&self, exponent: &Tensor) -> Result<Tensor> {
        binary_math_("pow_", Binary::Pow, self, ("exponent", exponent))
    }

    /// The angle of `(other, self)`, in place (`Tensor.atan2_`); `self` must be a float tensor.
    /// See [`atan2`](crate::atan2()).
    #[torch_function]
    pub fn atan2_(&self, other: &Tensor) -> Result<Tensor> {
        binary_math_("atan2_", Binary::Atan2, self, ("other", other))
    }

    /// The remainder with the dividend's sign, in place (`Tensor.fmod_`). See
    /// [`fmod`](crate::fmod()).
    #[torch_function]
    pub fn fmod_(&self, other: &Tensor) -> Result<Tensor> {
        binary_math_("fmod_", Binary::Fmod, self, ("other", other))
    }

    /// The remainder with the divisor's sign, in place (`Tensor.remainder_`). See
    /// [`remainder`](crate::remainder()).
    #[torch_function]
    pub fn remainder_(&self, other: &Tensor) -> Result<Tensor> {
        binary_math_("remainder_", Binary::Remainder, self, ("other", other))
    }

    /// Python's `%=` (`Tensor.__imod__`; Rust's `%=` calls it): the remainder with the divisor's
    /// sign, in place, as [`remainder_`](Tensor::remainder_).
    #[torch_function]
    pub fn __imod__(&self, other: &Tensor) -> Result<Tensor> {
        binary_math_("__imod__", Binary::Remainder, self, ("other", other))
    }

    /// Python's `**=` (`Tensor.__ipow__`), which Rust has no symbol for: `self ** exponent`, in
    /// place, as [`pow_`](Tensor::pow_).
    #[torch_function]
    pub fn __ipow__(&self, exponent: &Tensor) -> Result<Tensor> {
        binary_math_("__ipow__", Binary::Pow, self, ("exponent", exponent))
    }

    /// Limited to `[min, max]`, in place (`Tensor.clamp_`); an integer tensor with a float
    /// bound is an error. See [`clamp`](crate::clamp()).
    #[torch_function]
    pub fn clamp_(&self, #[default(None)] min: Option<Scalar>, #[default(None)] max: Option<Scalar>) -> Result<Tensor> {
        let (min, max) = (min.map(Tensor::scalar), max.map(Tensor::scalar));
        update("clamp_", self, &[], |source| {
            clamp_impl("clamp_", ("self", source), min.as_ref(), max.as_ref(), Some(self))
        })
    }

    /// Limited by tensor bounds, in place (`Tensor.clamp_(min: Tensor, max: Tensor)`); the
    /// bounds broadcast to `self`'s shape. See [`clamp_tensor`](crate::clamp_tensor()).
    #[torch_function(overload_of = Tensor::CLAMP_)]
    pub fn clamp_tensor_(
        &self,
        #[default(None)] min: Option<&Tensor>,
        #[default(None)] max: Option<&Tensor>,
    ) -> Result<Tensor> {
        update("clamp_", self, &[], |source| clamp_impl("clamp_", ("self", source), min, max, Some(self)))
    }
}

crate::samples! {
    POW => [sample([positive(&[2, 3]), f32s(&[3])]), sample([i64s(&[3]), Value::Int(2)]), sample([Value::Float(2.0), f32s(&[3])])],
    ATAN2 => [sample([f32s(&[2, 3]), f32s(&[2, 1])])],
    FMOD => [sample([f32s(&[2, 3]), f32s(&[3])]), sample([i64s(&[4]), i64s(&[4])])],
    REMAINDER => [sample([f32s(&[2, 3]), f32s(&[3])]), sample([i64s(&[4]), Value::Int(3)])],
    CLAMP => [sample([f32s(&[2, 3])]).kw("min", -1.0).kw("max", 0.5), sample([i64s(&[4])]).kw("min", 0),
        sample([f32s(&[2, 3]), f32s(&[3]), f32s(&[2, 1])])],
    WHERE => [sample([bools(&[2, 3]), f32s(&[2, 3]), f32s(&[3])]), sample([bools(&[2, 1]), i64s(&[3]), Value::Float(0.5)])],
    MASKED_FILL => [sample([f32s(&[2, 3]), bools(&[3]), Value::Float(-1.5)]), sample([f32s(&[2, 1, 3]), bools(&[2, 1]), f32s(&[])]),
        sample([i64s(&[4]), bools(&[4]), Value::Float(0.7)])],
    Tensor::MASKED_FILL => [sample([f32s(&[2, 3]), bools(&[2, 3]), f32s(&[])])],
    Tensor::MASKED_FILL_ => [sample([f32s(&[2, 3]), bools(&[2, 1]), Value::Float(2.5)]), sample([f32s(&[2, 3]), bools(&[3]), f32s(&[])])],
    Tensor::POW => [sample([positive(&[3]), f32s(&[3])]), sample([f32s(&[3]), Value::Float(0.5)])],
    Tensor::ATAN2 => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::FMOD => [sample([f32s(&[3]), Value::Float(1.5)])],
    Tensor::REMAINDER => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::__MOD__ => [sample([f32s(&[3]), f32s(&[3])]), sample([i64s(&[4]), Value::Int(3)])],
    Tensor::__RMOD__ => [sample([f32s(&[3]), Value::Float(2.5)]), sample([i64s(&[4]), Value::Int(7)])],
    Tensor::__POW__ => [sample([f32s(&[3]), Value::Int(2)])],
    Tensor::__RPOW__ => [sample([f32s(&[3]), Value::Float(2.0)])],
    Tensor::CLAMP => [sample([f32s(&[3])]).kw("max", 0.0), sample([f32s(&[3])]).kw("min", f32s(&[1]))],
    Tensor::POW_ => [sample([positive(&[2, 3]), f32s(&[3])]), sample([i64s(&[3]), Value::Int(2)])],
    Tensor::ATAN2_ => [sample([f32s(&[2, 3]), f32s(&[2, 1])])],
    Tensor::FMOD_ => [sample([f32s(&[3]), Value::Float(1.5)]), sample([i64s(&[4]), i64s(&[4])])],
    Tensor::REMAINDER_ => [sample([f32s(&[2, 3]), f32s(&[3])]), sample([i64s(&[4]), Value::Int(3)])],
    Tensor::__IMOD__ => [sample([f32s(&[2, 3]), f32s(&[3])]), sample([i64s(&[4]), Value::Int(3)])],
    Tensor::__IPOW__ => [sample([positive(&[2, 3]), f32s(&[3])]), sample([i64s(&[3]), Value::Int(2)])],
    Tensor::CLAMP_ => [sample([f32s(&[3])]).kw("min", -1.0).kw("max", 0.5), sample([i64s(&[4])]).kw("min", 0),
        sample([f32s(&[2, 3]), f32s(&[3]), f32s(&[2, 1])])],
}
