//! The `out=` forms of the float functions in `math` (`exp_out`, ...), written straight into
//! `out`, and the in-place forms (`Tensor.exp_`, `Tensor.abs_`, ...): each
//! computes the out-of-place result and writes it into `self`, which keeps its dtype. A result
//! that cannot be cast to it (a float function of an integer tensor) is an error, as in PyTorch,
//! and leaves `self` as it was.

use crate::error::Result;
use crate::ops::inplace::{write_into, write_out};
use crate::tensor::Tensor;
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;

use crate::backend::Unary;

use super::math::{float_unary_to, positive, round_impl, signed_unary};

/// [`exp`](crate::exp()) written into `out` (`torch.exp(input, out=out)`), which must have
/// `input`'s shape and a float dtype; returns `out`.
///
/// ```
/// let x = torchfn::tensor([0.0f32, 1.0])?;
/// let out = torchfn::zeros([2], None, None)?;
/// assert!(torchfn::exp_out(&x, &out)?.is(&out));
/// assert_eq!(out.to_vec::<f32>()?, [1.0, std::f32::consts::E]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(overload_of = super::math::EXP)]
pub fn exp_out(input: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("exp", out, &[input], || float_unary_to("exp", Unary::Exp, ("input", input), Some(out)))
}

/// [`log`](crate::log()) written into `out` (`torch.log(input, out=out)`), which must have
/// `input`'s shape and a float dtype; returns `out`.
#[torch_function(overload_of = super::math::LOG)]
pub fn log_out(input: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("log", out, &[input], || float_unary_to("log", Unary::Log, ("input", input), Some(out)))
}

/// [`log1p`](crate::log1p()) written into `out` (`torch.log1p(input, out=out)`), which must have
/// `input`'s shape and a float dtype; returns `out`.
#[torch_function(overload_of = super::math::LOG1P)]
pub fn log1p_out(input: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("log1p", out, &[input], || float_unary_to("log1p", Unary::Log1p, ("input", input), Some(out)))
}

/// [`expm1`](crate::expm1()) written into `out` (`torch.expm1(input, out=out)`), which must have
/// `input`'s shape and a float dtype; returns `out`.
#[torch_function(overload_of = super::math::EXPM1)]
pub fn expm1_out(input: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("expm1", out, &[input], || float_unary_to("expm1", Unary::Expm1, ("input", input), Some(out)))
}

/// [`sqrt`](crate::sqrt()) written into `out` (`torch.sqrt(input, out=out)`), which must have
/// `input`'s shape and a float dtype; returns `out`.
#[torch_function(overload_of = super::math::SQRT)]
pub fn sqrt_out(input: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("sqrt", out, &[input], || float_unary_to("sqrt", Unary::Sqrt, ("input", input), Some(out)))
}

/// [`rsqrt`](crate::rsqrt()) written into `out` (`torch.rsqrt(input, out=out)`), which must have
/// `input`'s shape and a float dtype; returns `out`.
#[torch_function(overload_of = super::math::RSQRT)]
pub fn rsqrt_out(input: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("rsqrt", out, &[input], || float_unary_to("rsqrt", Unary::Rsqrt, ("input", input), Some(out)))
}

/// [`sin`](crate::sin()) written into `out` (`torch.sin(input, out=out)`), which must have
/// `input`'s shape and a float dtype; returns `out`.
#[torch_function(overload_of = super::math::SIN)]
pub fn sin_out(input: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("sin", out, &[input], || float_unary_to("sin", Unary::Sin, ("input", input), Some(out)))
}

/// [`cos`](crate::cos()) written into `out` (`torch.cos(input, out=out)`), which must have
/// `input`'s shape and a float dtype; returns `out`.
#[torch_function(overload_of = super::math::COS)]
pub fn cos_out(input: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("cos", out, &[input], || float_unary_to("cos", Unary::Cos, ("input", input), Some(out)))
}

/// [`tan`](crate::tan()) written into `out` (`torch.tan(input, out=out)`), which must have
/// `input`'s shape and a float dtype; returns `out`.
#[torch_function(overload_of = super::math::TAN)]
pub fn tan_out(input: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("tan", out, &[input], || float_unary_to("tan", Unary::Tan, ("input", input), Some(out)))
}

/// [`tanh`](crate::tanh()) written into `out` (`torch.tanh(input, out=out)`), which must have
/// `input`'s shape and a float dtype; returns `out`.
#[torch_function(overload_of = super::math::TANH)]
pub fn tanh_out(input: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("tanh", out, &[input], || float_unary_to("tanh", Unary::Tanh, ("input", input), Some(out)))
}

/// [`sigmoid`](crate::sigmoid()) written into `out` (`torch.sigmoid(input, out=out)`), which must have
/// `input`'s shape and a float dtype; returns `out`.
#[torch_function(overload_of = super::math::SIGMOID)]
pub fn sigmoid_out(input: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("sigmoid", out, &[input], || float_unary_to("sigmoid", Unary::Sigmoid, ("input", input), Some(out)))
}

/// [`erf`](crate::erf()) written into `out` (`torch.erf(input, out=out)`), which must have
/// `input`'s shape and a float dtype; returns `out`.
#[torch_function(overload_of = super::math::ERF)]
pub fn erf_out(input: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("erf", out, &[input], || float_unary_to("erf", Unary::Erf, ("input", input), Some(out)))
}

/// [`reciprocal`](crate::reciprocal()) written into `out` (`torch.reciprocal(input, out=out)`), which must have
/// `input`'s shape and a float dtype; returns `out`.
#[torch_function(overload_of = super::math::RECIPROCAL)]
pub fn reciprocal_out(input: &Tensor, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    write_out("reciprocal", out, &[input], || {
        float_unary_to("reciprocal", Unary::Reciprocal, ("input", input), Some(out))
    })
}

impl Tensor {
    /// The absolute values, in place (`Tensor.abs_`); returns `self`. Integer tensors are
    /// fine; bool tensors are an error. See [`abs`](crate::abs()).
    ///
    /// ```
    /// let t = torchfn::tensor([-3i64, 4])?;
    /// assert!(t.abs_()?.is(&t)); // the very same tensor comes back
    /// assert_eq!(t.to_vec::<i64>()?, [3, 4]);
    /// assert!(t.exp_().is_err()); // a float result does not go into an int64 tensor
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn abs_(&self) -> Result<Tensor> {
        write_into("abs_", self, signed_unary("abs_", Unary::Abs, ("self", self), Some(self))?)
    }

    /// `e^x`, in place (`Tensor.exp_`); `self` must be a float tensor. See [`exp`](crate::exp()).
    #[torch_function]
    pub fn exp_(&self) -> Result<Tensor> {
        write_into("exp_", self, float_unary_to("exp_", Unary::Exp, ("self", self), Some(self))?)
    }

    /// The natural logarithm, in place (`Tensor.log_`); `self` must be a float tensor. See
    /// [`log`](crate::log()).
    #[torch_function]
    pub fn log_(&self) -> Result<Tensor> {
        write_into("log_", self, float_unary_to("log_", Unary::Log, ("self", self), Some(self))?)
    }

    /// `log(1 + x)`, in place (`Tensor.log1p_`); `self` must be a float tensor. See
    /// [`log1p`](crate::log1p()).
    #[torch_function]
    pub fn log1p_(&self) -> Result<Tensor> {
        write_into("log1p_", self, float_unary_to("log1p_", Unary::Log1p, ("self", self), Some(self))?)
    }

    /// `e^x - 1`, in place (`Tensor.expm1_`); `self` must be a float tensor. See
    /// [`expm1`](crate::expm1()).
    #[torch_function]
    pub fn expm1_(&self) -> Result<Tensor> {
        write_into("expm1_", self, float_unary_to("expm1_", Unary::Expm1, ("self", self), Some(self))?)
    }

    /// The square roots, in place (`Tensor.sqrt_`); `self` must be a float tensor. See
    /// [`sqrt`](crate::sqrt()).
    #[torch_function]
    pub fn sqrt_(&self) -> Result<Tensor> {
        write_into("sqrt_", self, float_unary_to("sqrt_", Unary::Sqrt, ("self", self), Some(self))?)
    }

    /// `1 / sqrt(x)`, in place (`Tensor.rsqrt_`); `self` must be a float tensor. See
    /// [`rsqrt`](crate::rsqrt()).
    #[torch_function]
    pub fn rsqrt_(&self) -> Result<Tensor> {
        write_into("rsqrt_", self, float_unary_to("rsqrt_", Unary::Rsqrt, ("self", self), Some(self))?)
    }

    /// The sines, in place (`Tensor.sin_`); `self` must be a float tensor. See
    /// [`sin`](crate::sin()).
    #[torch_function]
    pub fn sin_(&self) -> Result<Tensor> {
        write_into("sin_", self, float_unary_to("sin_", Unary::Sin, ("self", self), Some(self))?)
    }

    /// The cosines, in place (`Tensor.cos_`); `self` must be a float tensor. See
    /// [`cos`](crate::cos()).
    #[torch_function]
    pub fn cos_(&self) -> Result<Tensor> {
        write_into("cos_", self, float_unary_to("cos_", Unary::Cos, ("self", self), Some(self))?)
    }

    /// The tangents, in place (`Tensor.tan_`); `self` must be a float tensor. See
    /// [`tan`](crate::tan()).
    #[torch_function]
    pub fn tan_(&self) -> Result<Tensor> {
        write_into("tan_", self, float_unary_to("tan_", Unary::Tan, ("self", self), Some(self))?)
    }

    /// The hyperbolic tangents, in place (`Tensor.tanh_`); `self` must be a float tensor. See
    /// [`tanh`](crate::tanh()).
    #[torch_function]
    pub fn tanh_(&self) -> Result<Tensor> {
        write_into("tanh_", self, float_unary_to("tanh_", Unary::Tanh, ("self", self), Some(self))?)
    }

    /// The logistic function, in place (`Tensor.sigmoid_`); `self` must be a float tensor. See
    /// [`sigmoid`](crate::sigmoid()).
    #[torch_function]
    pub fn sigmoid_(&self) -> Result<Tensor> {
        write_into("sigmoid_", self, float_unary_to("sigmoid_", Unary::Sigmoid, ("self", self), Some(self))?)
    }

    /// The error function, in place (`Tensor.erf_`); `self` must be a float tensor. See
    /// [`erf`](crate::erf()).
    #[torch_function]
    pub fn erf_(&self) -> Result<Tensor> {
        write_into("erf_", self, float_unary_to("erf_", Unary::Erf, ("self", self), Some(self))?)
    }

    /// `1 / x`, in place (`Tensor.reciprocal_`); `self` must be a float tensor. See
    /// [`reciprocal`](crate::reciprocal()).
    #[torch_function]
    pub fn reciprocal_(&self) -> Result<Tensor> {
        write_into("reciprocal_", self, float_unary_to("reciprocal_", Unary::Reciprocal, ("self", self), Some(self))?)
    }

    /// Rounded up, in place (`Tensor.ceil_`); integer tensors stay as they are. See
    /// [`ceil`](crate::ceil()).
    #[torch_function]
    pub fn ceil_(&self) -> Result<Tensor> {
        write_into("ceil_", self, round_impl("ceil_", Unary::Ceil, ("self", self), Some(self))?)
    }

    /// Rounded down, in place (`Tensor.floor_`); integer tensors stay as they are. See
    /// [`floor`](crate::floor()).
    #[torch_function]
    pub fn floor_(&self) -> Result<Tensor> {
        write_into("floor_", self, round_impl("floor_", Unary::Floor, ("self", self), Some(self))?)
    }

    /// Rounded half to even at `decimals` decimal places, in place (`Tensor.round_`). See
    /// [`round`](crate::round()).
    #[torch_function]
    pub fn round_(&self, #[default(0)] decimals: i64) -> Result<Tensor> {
        write_into("round_", self, round_impl("round_", Unary::Round(decimals), ("self", self), Some(self))?)
    }

    /// Rounded toward zero, in place (`Tensor.trunc_`); integer tensors stay as they are. See
    /// [`trunc`](crate::trunc()).
    #[torch_function]
    pub fn trunc_(&self) -> Result<Tensor> {
        write_into("trunc_", self, round_impl("trunc_", Unary::Trunc, ("self", self), Some(self))?)
    }

    /// The signs, in place (`Tensor.sign_`); any dtype. See [`sign`](crate::sign()).
    #[torch_function]
    pub fn sign_(&self) -> Result<Tensor> {
        write_into("sign_", self, signed_unary("sign_", Unary::Sign, ("self", self), Some(self))?)
    }

    /// `x * x`, in place (`Tensor.square_`); a bool tensor is an error (its square is int64).
    /// See [`square`](crate::square()).
    #[torch_function]
    pub fn square_(&self) -> Result<Tensor> {
        write_into("square_", self, signed_unary("square_", Unary::Square, ("self", self), Some(self))?)
    }

    /// `max(x, 0)`, in place (`Tensor.relu_`); integer tensors are fine. See
    /// [`relu`](crate::relu()).
    #[torch_function]
    pub fn relu_(&self) -> Result<Tensor> {
        write_into("relu_", self, signed_unary("relu_", Unary::Relu, ("self", self), Some(self))?)
    }
}

crate::samples! {
    Tensor::ABS_ => [sample([f32s(&[2, 3])]), sample([i64s(&[3])])],
    Tensor::EXP_ => [sample([f32s(&[2, 3])])],
    Tensor::LOG_ => [sample([positive(&[3])])],
    Tensor::LOG1P_ => [sample([positive(&[3])])],
    Tensor::EXPM1_ => [sample([f32s(&[3])])],
    Tensor::SQRT_ => [sample([positive(&[3])])],
    Tensor::RSQRT_ => [sample([positive(&[3])])],
    Tensor::SIN_ => [sample([f32s(&[3])])],
    Tensor::COS_ => [sample([f32s(&[3])])],
    Tensor::TAN_ => [sample([f32s(&[3])])],
    Tensor::TANH_ => [sample([f32s(&[3])])],
    Tensor::SIGMOID_ => [sample([f32s(&[3])])],
    Tensor::ERF_ => [sample([f32s(&[3])])],
    Tensor::RECIPROCAL_ => [sample([f32s(&[3])])],
    Tensor::CEIL_ => [sample([f32s(&[3])])],
    Tensor::FLOOR_ => [sample([f32s(&[3])]), sample([i64s(&[3])])],
    Tensor::ROUND_ => [sample([f32s(&[3])]), sample([f32s(&[3])]).kw("decimals", 1)],
    Tensor::TRUNC_ => [sample([f32s(&[3])])],
    Tensor::SIGN_ => [sample([f32s(&[3])]), sample([i64s(&[3])])],
    Tensor::SQUARE_ => [sample([f32s(&[3])]), sample([i64s(&[3])])],
    Tensor::RELU_ => [sample([f32s(&[2, 3])]), sample([i64s(&[3])])],
}
