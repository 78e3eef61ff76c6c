//! Elementwise arithmetic: `add`, `sub`, `mul`, `div`, `neg`, as functions, methods and
//! operators, with broadcasting and PyTorch's type promotion.

use crate::backend::{Binary, Reduce, Unary};
use crate::error::{Result, bail};
use crate::ops::device::device_of;
use crate::ops::inplace::{write_into, write_out};
use crate::primitive;
use crate::tensor::{DType, Dense, Scalar, Tensor, check_broadcast, result_type};
use crate::testing::{bools, f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

use super::math::float_dtype;

/// A binary arithmetic operation.
#[derive(Clone, Copy)]
enum Op {
    Add(Scalar),
    Sub(Scalar),
    Mul,
    Div(Option<Rounding>),
    /// The larger (`true`) or smaller of the two; NaN propagates.
    Extreme(bool),
}

#[derive(Clone, Copy)]
enum Rounding {
    Trunc,
    Floor,
}

fn rounding(func: &str, mode: Option<&str>) -> Result<Option<Rounding>> {
    match mode {
        None => Ok(None),
        Some("trunc") => Ok(Some(Rounding::Trunc)),
        Some("floor") => Ok(Some(Rounding::Floor)),
        Some(other) => {
            bail!(Value, "{func}(): expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{other}'")
        }
    }
}

/// Whether any element of the integer or bool divisor `y` is zero: integer division by it is
/// an error. (Not every element is true, read as bool.)
pub(super) fn any_zero(func: &str, (name, y): (&str, &Dense)) -> Result<bool> {
    device_of(func, &[(name, y)])?;
    if crate::fake_tensor::values_unknown(y) {
        return Ok(false);
    }
    let dims: Vec<usize> = (0..y.layout.ndim()).collect();
    let all = primitive::reduce(&Tensor::from_array(y.array.clone()), &dims, Reduce::All, DType::Bool)?;
    Ok(primitive::item(&all)?.to_i64() == 0)
}

/// The body shared by every binary arithmetic function, method and operator: `a op b`, where
/// `a` is named `a_name` in error messages, computed straight into `out` when the kernels can
/// (see [`Backend::binary`](crate::backend::Backend::binary)).
fn arithmetic(
    func: &str,
    op: Op,
    (a_name, a): (&str, &Tensor),
    (b_name, b): (&str, &Tensor),
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let (x, y) = (a.data(func, a_name)?, b.data(func, b_name)?);
    if let Some(o) = out {
        o.data(func, "out")?;
    }
    device_of(func, &[(a_name, x), (b_name, y)])?;
    check_broadcast(&x.layout.shape, &y.layout.shape, func)?;
    let common = result_type([x.participant(), y.participant()]);
    let (kernel, dtype) = match op {
        Op::Add(alpha) | Op::Sub(alpha) => {
            let subtract = matches!(op, Op::Sub(_));
            if subtract && (x.dtype == DType::Bool || y.dtype == DType::Bool) {
                bail!(
                    Runtime,
                    "{func}(): subtraction, the `-` operator, with a bool tensor is not supported; \
                     to invert a mask use `logical_not()`, to take the difference of masks use `logical_xor()`"
                );
            }
            if !common.is_floating_point() && alpha.is_floating_point() {
                bail!(
                    Runtime,
                    "{func}(): for integral input tensors, argument alpha must not be a floating point number"
                );
            }
            (if subtract { Binary::Sub(alpha) } else { Binary::Add(alpha) }, common)
        }
        Op::Mul => (Binary::Mul, common),
        Op::Extreme(larger) => (if larger { Binary::Maximum } else { Binary::Minimum }, common),
        Op::Div(None) => (Binary::Div, float_dtype(common)),
        Op::Div(Some(mode)) => {
            // Bools divide as int64, as in PyTorch.
            let dtype = if common == DType::Bool { DType::Int64 } else { common };
            if !dtype.is_floating_point() && any_zero(func, (b_name, y))? {
                bail!(Runtime, "{func}(): ZeroDivisionError: integer division by zero");
            }
            (if matches!(mode, Rounding::Trunc) { Binary::DivTrunc } else { Binary::DivFloor }, dtype)
        }
    };
    primitive::binary(a, b, kernel, dtype, out)
}

/// `target op= other`: the operation's kernel, given `target` itself to write into.
fn in_place(func: &str, op: Op, target: &Tensor, other: &Tensor) -> Result<Tensor> {
    write_into(func, target, arithmetic(func, op, ("self", target), ("other", other), Some(target))?)
}

/// `input op other` written into `out` (PyTorch's `out=`), which must have the result's shape.
fn into_out(func: &str, op: Op, input: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    write_out(func, out, &[input, other], || arithmetic(func, op, ("input", input), ("other", other), Some(out)))
}

/// `-a`, written into `out` where it can be.
fn negate(func: &str, (name, a): (&str, &Tensor), out: Option<&Tensor>) -> Result<Tensor> {
    let x = a.data(func, name)?;
    if x.dtype == DType::Bool {
        bail!(
            Runtime,
            "{func}(): negation, the `-` operator, on a bool tensor is not supported; \
             to invert a mask use the `logical_not()` operator instead"
        );
    }
    primitive::unary(a, Unary::Neg, x.dtype, out)
}

/// `input + alpha * other`, broadcasting the two (`torch.add`).
///
/// The result has PyTorch's promoted dtype: integer tensors stay integer, a Python number
/// ([`Tensor::scalar`], or a plain `2.5` through the operators) never upcasts a tensor within
/// its category.
///
/// ```
/// let a = torchfn::tensor([1.0f32, 2.0])?;
/// let b = torchfn::tensor([10.0f32, 20.0])?;
/// assert_eq!(torchfn::add(&a, &b, 2)?.to_vec::<f32>()?, [21.0, 42.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn add(
    input: &Tensor,
    other: &Tensor,
    #[keyword_only]
    #[default(1)]
    alpha: impl Into<Scalar>,
) -> Result<Tensor> {
    arithmetic("add", Op::Add(alpha.into()), ("input", input), ("other", other), None)
}

/// `input - alpha * other`, broadcasting the two (`torch.sub`). Not defined for bool tensors.
#[torch_function(module = "torchfn")]
pub fn sub(
    input: &Tensor,
    other: &Tensor,
    #[keyword_only]
    #[default(1)]
    alpha: impl Into<Scalar>,
) -> Result<Tensor> {
    arithmetic("sub", Op::Sub(alpha.into()), ("input", input), ("other", other), None)
}

/// `input + alpha * other` written into `out` (`torch.add(input, other, alpha=alpha, out=out)`),
/// which must have the result's shape and a dtype it can be cast to; returns `out`.
#[torch_function(overload_of = ADD)]
pub fn add_out(
    input: &Tensor,
    other: &Tensor,
    #[keyword_only] out: &Tensor,
    #[default(1)] alpha: impl Into<Scalar>,
) -> Result<Tensor> {
    into_out("add", Op::Add(alpha.into()), input, other, out)
}

/// `input - alpha * other` written into `out` (`torch.sub(..., out=out)`).
#[torch_function(overload_of = SUB)]
pub fn sub_out(
    input: &Tensor,
    other: &Tensor,
    #[keyword_only] out: &Tensor,
    #[default(1)] alpha: impl Into<Scalar>,
) -> Result<Tensor> {
    into_out("sub", Op::Sub(alpha.into()), input, other, out)
}

/// `input * other` written into `out` (`torch.mul(..., out=out)`).
#[torch_function(overload_of = MUL)]
pub fn mul_out(input: &Tensor, other: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    into_out("mul", Op::Mul, input, other, out)
}

/// `input / other` written into `out` (`torch.div(..., out=out)`).
#[torch_function(overload_of = DIV)]
pub fn div_out(
    input: &Tensor,
    other: &Tensor,
    #[keyword_only] out: &Tensor,
    #[default(None)] rounding_mode: Option<&str>,
) -> Result<Tensor> {
    into_out("div", Op::Div(rounding("div", rounding_mode)?), input, other, out)
}

/// `input * other`, broadcasting the two (`torch.mul`); logical and for bool tensors.
#[torch_function(module = "torchfn")]
pub fn mul(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    arithmetic("mul", Op::Mul, ("input", input), ("other", other), None)
}

/// `input / other` (`torch.div`). Without `rounding_mode` the division is true division and
/// integer inputs give the default float dtype; `"trunc"` rounds toward zero and `"floor"` toward
/// negative infinity, keeping integer dtypes (integer division by zero is an error).
#[torch_function(module = "torchfn")]
pub fn div(
    input: &Tensor,
    other: &Tensor,
    #[keyword_only]
    #[default(None)]
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    arithmetic("div", Op::Div(rounding("div", rounding_mode)?), ("input", input), ("other", other), None)
}

/// The elementwise larger of `input` and `other`, broadcast; NaN propagates (`torch.maximum`).
#[torch_function(module = "torchfn")]
pub fn maximum(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    arithmetic("maximum", Op::Extreme(true), ("input", input), ("other", other), None)
}

/// The elementwise smaller of `input` and `other`, broadcast; NaN propagates (`torch.minimum`).
#[torch_function(module = "torchfn")]
pub fn minimum(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    arithmetic("minimum", Op::Extreme(false), ("input", input), ("other", other), None)
}

/// `-input` (`torch.neg`). Not defined for bool tensors.
#[torch_function(module = "torchfn")]
pub fn neg(input: &Tensor) -> Result<Tensor> {
    negate("neg", ("input", input), None)
}

impl Tensor {
    /// `self + alpha * other`: the method form of [`add`](crate::add()).
    #[torch_function]
    pub fn add(
        &self,
        other: &Tensor,
        #[keyword_only]
        #[default(1)]
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        arithmetic("add", Op::Add(alpha.into()), ("self", self), ("other", other), None)
    }

    /// `self - alpha * other`: the method form of [`sub`](crate::sub()).
    #[torch_function]
    pub fn sub(
        &self,
        other: &Tensor,
        #[keyword_only]
        #[default(1)]
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        arithmetic("sub", Op::Sub(alpha.into()), ("self", self), ("other", other), None)
    }

    /// `self * other`: the method form of [`mul`](crate::mul()).
    #[torch_function]
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        arithmetic("mul", Op::Mul, ("self", self), ("other", other), None)
    }

    /// `self / other`: the method form of [`div`](crate::div()).
    #[torch_function]
    pub fn div(
        &self,
        other: &Tensor,
        #[keyword_only]
        #[default(None)]
        rounding_mode: Option<&str>,
    ) -> Result<Tensor> {
        arithmetic("div", Op::Div(rounding("div", rounding_mode)?), ("self", self), ("other", other), None)
    }

    /// The elementwise larger: the method form of [`maximum`](crate::maximum()).
    #[torch_function]
    pub fn maximum(&self, other: &Tensor) -> Result<Tensor> {
        arithmetic("maximum", Op::Extreme(true), ("self", self), ("other", other), None)
    }

    /// The elementwise smaller: the method form of [`minimum`](crate::minimum()).
    #[torch_function]
    pub fn minimum(&self, other: &Tensor) -> Result<Tensor> {
        arithmetic("minimum", Op::Extreme(false), ("self", self), ("other", other), None)
    }

    /// `-self`: the method form of [`neg`](crate::neg()).
    #[torch_function]
    pub fn neg(&self) -> Result<Tensor> {
        negate("neg", ("self", self), None)
    }

    /// `self += alpha * other`, in place (`Tensor.add_`); returns `self`. The result must
    /// broadcast to this tensor's shape and be castable to its dtype.
    ///
    /// ```
    /// let x = torchfn::tensor([1.0f32, 2.0])?;
    /// let y = x.clone();
    /// x.add_(&torchfn::tensor([10.0f32, 20.0])?, 1)?;
    /// assert_eq!(y.to_vec::<f32>()?, [11.0, 22.0]); // the very same tensor
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn add_(
        &self,
        other: &Tensor,
        #[keyword_only]
        #[default(1)]
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        in_place("add_", Op::Add(alpha.into()), self, other)
    }

    /// `self -= alpha * other`, in place (`Tensor.sub_`).
    #[torch_function]
    pub fn sub_(
        &self,
        other: &Tensor,
        #[keyword_only]
        #[default(1)]
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        in_place("sub_", Op::Sub(alpha.into()), self, other)
    }

    /// `self *= other`, in place (`Tensor.mul_`).
    #[torch_function]
    pub fn mul_(&self, other: &Tensor) -> Result<Tensor> {
        in_place("mul_", Op::Mul, self, other)
    }

    /// `self /= other`, in place (`Tensor.div_`); true division needs a floating-point `self`.
    #[torch_function]
    pub fn div_(
        &self,
        other: &Tensor,
        #[keyword_only]
        #[default(None)]
        rounding_mode: Option<&str>,
    ) -> Result<Tensor> {
        in_place("div_", Op::Div(rounding("div_", rounding_mode)?), self, other)
    }

    /// `self = -self`, in place (`Tensor.neg_`).
    #[torch_function]
    pub fn neg_(&self) -> Result<Tensor> {
        write_into("neg_", self, negate("neg_", ("self", self), Some(self))?)
    }

    /// The `+=` operator (`Tensor.__iadd__`): `a += &b` calls it and panics on error.
    #[torch_function]
    pub fn __iadd__(&self, other: &Tensor) -> Result<Tensor> {
        in_place("__iadd__", Op::Add(Scalar::Int(1)), self, other)
    }

    /// The `-=` operator (`Tensor.__isub__`).
    #[torch_function]
    pub fn __isub__(&self, other: &Tensor) -> Result<Tensor> {
        in_place("__isub__", Op::Sub(Scalar::Int(1)), self, other)
    }

    /// The `*=` operator (`Tensor.__imul__`).
    #[torch_function]
    pub fn __imul__(&self, other: &Tensor) -> Result<Tensor> {
        in_place("__imul__", Op::Mul, self, other)
    }

    /// The `/=` operator (`Tensor.__itruediv__`).
    #[torch_function]
    pub fn __itruediv__(&self, other: &Tensor) -> Result<Tensor> {
        in_place("__itruediv__", Op::Div(None), self, other)
    }

    /// Python's `//=` (`Tensor.__ifloordiv__`), which Rust has no symbol for: division rounded
    /// down, in place (integer division by zero is an error).
    #[torch_function]
    pub fn __ifloordiv__(&self, other: &Tensor) -> Result<Tensor> {
        in_place("__ifloordiv__", Op::Div(Some(Rounding::Floor)), self, other)
    }

    /// The `+` operator (`self + other`).
    #[torch_function]
    pub fn __add__(&self, other: &Tensor) -> Result<Tensor> {
        arithmetic("__add__", Op::Add(Scalar::Int(1)), ("self", self), ("other", other), None)
    }

    /// The reflected `+` operator (`other + self`), used when the left operand is a number.
    #[torch_function]
    pub fn __radd__(&self, other: &Tensor) -> Result<Tensor> {
        arithmetic("__radd__", Op::Add(Scalar::Int(1)), ("other", other), ("self", self), None)
    }

    /// The `-` operator (`self - other`).
    #[torch_function]
    pub fn __sub__(&self, other: &Tensor) -> Result<Tensor> {
        arithmetic("__sub__", Op::Sub(Scalar::Int(1)), ("self", self), ("other", other), None)
    }

    /// The reflected `-` operator (`other - self`).
    #[torch_function]
    pub fn __rsub__(&self, other: &Tensor) -> Result<Tensor> {
        arithmetic("__rsub__", Op::Sub(Scalar::Int(1)), ("other", other), ("self", self), None)
    }

    /// The `*` operator (`self * other`).
    #[torch_function]
    pub fn __mul__(&self, other: &Tensor) -> Result<Tensor> {
        arithmetic("__mul__", Op::Mul, ("self", self), ("other", other), None)
    }

    /// The reflected `*` operator (`other * self`).
    #[torch_function]
    pub fn __rmul__(&self, other: &Tensor) -> Result<Tensor> {
        arithmetic("__rmul__", Op::Mul, ("other", other), ("self", self), None)
    }

    /// The `/` operator (`self / other`, true division).
    #[torch_function]
    pub fn __truediv__(&self, other: &Tensor) -> Result<Tensor> {
        arithmetic("__truediv__", Op::Div(None), ("self", self), ("other", other), None)
    }

    /// The reflected `/` operator (`other / self`).
    #[torch_function]
    pub fn __rtruediv__(&self, other: &Tensor) -> Result<Tensor> {
        arithmetic("__rtruediv__", Op::Div(None), ("other", other), ("self", self), None)
    }

    /// Python's `//` operator (`self // other`, division rounded down, as
    /// `div(other, rounding_mode="floor")`), which Rust has no symbol for.
    #[torch_function]
    pub fn __floordiv__(&self, other: &Tensor) -> Result<Tensor> {
        arithmetic("__floordiv__", Op::Div(Some(Rounding::Floor)), ("self", self), ("other", other), None)
    }

    /// The reflected `//` operator (`other // self`).
    #[torch_function]
    pub fn __rfloordiv__(&self, other: &Tensor) -> Result<Tensor> {
        arithmetic("__rfloordiv__", Op::Div(Some(Rounding::Floor)), ("other", other), ("self", self), None)
    }

    /// The unary `-` operator.
    #[torch_function]
    pub fn __neg__(&self) -> Result<Tensor> {
        negate("__neg__", ("self", self), None)
    }

    /// Python's unary `+` (`Tensor.__pos__`, `torch.positive`): the tensor itself; on a bool
    /// tensor, PyTorch's `NotImplementedError`.
    #[torch_function]
    pub fn __pos__(&self) -> Result<Tensor> {
        if self.data("__pos__", "self")?.dtype == DType::Bool {
            bail!(NotImplemented, "The `+` operator, on a bool tensor is not supported.");
        }
        Ok(self.clone())
    }

    /// Python's `abs(t)` (`Tensor.__abs__`): the absolute values, as [`abs`](Tensor::abs).
    #[torch_function]
    pub fn __abs__(&self) -> Result<Tensor> {
        crate::ops::math::signed_unary("__abs__", crate::backend::Unary::Abs, ("self", self), None)
    }
}

crate::samples! {
    ADD => [sample([f32s(&[2, 3]), f32s(&[3])]), sample([i64s(&[4]), i64s(&[4])]).kw("alpha", 2), sample([f32s(&[2]), Value::Float(0.5)]),
        sample([f32s(&[2, 3]), f32s(&[3])]).kw("out", f32s(&[2, 3]))],
    SUB => [sample([f32s(&[2, 3]), f32s(&[2, 1])]), sample([i64s(&[3]), i64s(&[3])]).kw("alpha", 3),
        sample([f32s(&[3]), f32s(&[3])]).kw("out", f32s(&[3]))],
    MUL => [sample([f32s(&[2, 3]), f32s(&[3])]), sample([bools(&[4]), bools(&[4])]), sample([f32s(&[3]), f32s(&[3])]).kw("out", f32s(&[3]))],
    DIV => [sample([f32s(&[3]), f32s(&[3])]), sample([i64s(&[4]), i64s(&[4])]).kw("rounding_mode", "floor"),
        sample([f32s(&[3]), f32s(&[3])]).kw("out", f32s(&[3]))],
    NEG => [sample([f32s(&[2, 2])])],
    MAXIMUM => [sample([f32s(&[2, 3]), f32s(&[3])])],
    MINIMUM => [sample([f32s(&[2, 3]), f32s(&[3])])],
    Tensor::ADD => [sample([f32s(&[3]), f32s(&[3])]).kw("alpha", 2)],
    Tensor::SUB => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::MUL => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::DIV => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::NEG => [sample([i64s(&[3])])],
    Tensor::MAXIMUM => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::MINIMUM => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::__ADD__ => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::__RADD__ => [sample([f32s(&[3]), Value::Float(2.0)])],
    Tensor::__SUB__ => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::__RSUB__ => [sample([f32s(&[3]), Value::Int(1)])],
    Tensor::__MUL__ => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::__RMUL__ => [sample([f32s(&[3]), Value::Float(2.0)])],
    Tensor::__TRUEDIV__ => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::__RTRUEDIV__ => [sample([f32s(&[3]), Value::Float(1.0)])],
    Tensor::__FLOORDIV__ => [sample([f32s(&[3]), f32s(&[3])]), sample([i64s(&[4]), Value::Int(3)])],
    Tensor::__RFLOORDIV__ => [sample([f32s(&[3]), Value::Float(7.0)]), sample([i64s(&[4]), Value::Int(7)])],
    Tensor::__NEG__ => [sample([f32s(&[3])])],
    Tensor::__POS__ => [sample([f32s(&[3])]), sample([i64s(&[2])])],
    Tensor::__ABS__ => [sample([f32s(&[2, 3])]), sample([i64s(&[3])])],
    Tensor::__IFLOORDIV__ => [sample([f32s(&[3]), f32s(&[3])]), sample([i64s(&[4]), Value::Int(2)])],
    Tensor::ADD_ => [sample([f32s(&[2, 3]), f32s(&[3])]).kw("alpha", 2)],
    Tensor::SUB_ => [sample([i64s(&[3]), i64s(&[3])])],
    Tensor::MUL_ => [sample([f32s(&[2, 3]), f32s(&[2, 3])])],
    Tensor::DIV_ => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::NEG_ => [sample([f32s(&[3])])],
    Tensor::__IADD__ => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::__ISUB__ => [sample([f32s(&[3]), f32s(&[3])])],
    Tensor::__IMUL__ => [sample([f32s(&[3]), Value::Float(2.0)])],
    Tensor::__ITRUEDIV__ => [sample([f32s(&[3]), f32s(&[3])])],
}
