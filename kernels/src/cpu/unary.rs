//! The elementwise functions of one operand ([`Unary`]) on the CPU: each becomes one
//! monomorphised loop, chosen once per call (never per element).

use crate::backend::{Array, Unary};
use crate::error::Result;
use crate::types::DType;

use super::elementwise::{Bits, Float, Lifted, Signed, Stored};
use super::map::unary_to;
use super::{Number, undefined};
use crate::types::half::{bf16, f16};

/// `op` on each element of `x`, computed in `dtype` (see [`Backend::unary`](crate::backend::Backend::unary)).
pub(super) fn unary(x: &Array, op: Unary, dtype: DType, out: Option<&Array>) -> Result<Array> {
    match dtype {
        DType::Float32 => float::<f32, f32>(x, op, out),
        DType::Float64 => float::<f64, f64>(x, op, out),
        DType::Float16 => float::<f16, f32>(x, op, out),
        DType::BFloat16 => float::<bf16, f32>(x, op, out),
        DType::UInt8 => integer::<u8>(x, op, out),
        DType::Int8 => integer::<i8>(x, op, out),
        DType::Int16 => integer::<i16>(x, op, out),
        DType::Int32 => integer::<i32>(x, op, out),
        DType::Int64 => integer::<i64>(x, op, out),
        DType::Bool => boolean(x, op, out),
    }
}

/// `x Φ(x) = x erfc(-x / sqrt 2) / 2`, with the exact normal distribution function (through
/// `erfc`, which keeps its relative accuracy where `x` is very negative).
#[inline(always)]
fn gelu<F: Float>(x: F) -> F {
    let half = F::from_f64(0.5);
    half.mul(x).mul(x.neg().mul(F::from_f64(std::f64::consts::FRAC_1_SQRT_2)).erfc())
}

/// The tanh approximation of [`gelu`], `x (1 + tanh(y)) / 2` with
/// `y = sqrt(2 / pi) (x + 0.044715 x^3)`, computed as `x sigmoid(2y)` (the same function,
/// without the cancellation of `1 + tanh(y)` where `y` is very negative).
#[inline(always)]
fn gelu_tanh<F: Float>(x: F) -> F {
    let two_beta = F::from_f64(2.0 * (2.0 / std::f64::consts::PI).sqrt());
    let y = two_beta.mul(x.add(F::from_f64(0.044715).mul(x).mul(x).mul(x)));
    x.div(F::from_f64(1.0).add(y.neg().exp()))
}

/// Rounds half to even at `decimals` decimal places, as PyTorch: scale by 10^|decimals|,
/// round, scale back. The clamp keeps the power finite in i32; beyond it the scale is 0 or
/// infinite anyway.
fn round<F: Float>(x: F, decimals: i64) -> F {
    if decimals == 0 {
        return x.round_ties_even();
    }
    let scale = F::from_f64(10f64.powi(decimals.unsigned_abs().min(400) as i32));
    if decimals > 0 { x.mul(scale).round_ties_even().div(scale) } else { x.div(scale).round_ties_even().mul(scale) }
}

/// `g` on a stored element: widened, computed, rounded once.
#[inline(always)]
fn lifted<S: Stored<Math = F>, F>(g: impl Fn(F) -> F + Sync) -> Lifted<S, impl Fn(F) -> F + Sync> {
    Lifted::new(g)
}

/// The float operations, stored as `S` and computed in `F` (float16 and bfloat16 in float32,
/// rounded once).
fn float<S: Stored<Math = F>, F: Float + Signed>(x: &Array, op: Unary, out: Option<&Array>) -> Result<Array> {
    // `g` on each element, computed in `F`.
    macro_rules! map {
        ($g:expr) => {
            unary_to::<S, S>(x, out, lifted::<S, F>($g))
        };
    }
    let one = F::from_f64(1.0);
    let zero = F::default();
    let (three, six) = (F::from_f64(3.0), F::from_f64(6.0));
    // min(max(v, 0), 6) as C++'s std::min and std::max compute it: NaN stays NaN.
    let relu6 = move |v: F| {
        let v = if v < zero { zero } else { v };
        if v > six { six } else { v }
    };
    match op {
        Unary::Exp => map!(F::exp),
        Unary::Log => map!(F::ln),
        Unary::Log1p => map!(F::ln_1p),
        Unary::Expm1 => map!(F::exp_m1),
        Unary::Sqrt => map!(F::sqrt),
        Unary::Rsqrt => map!(|v| v.sqrt().recip()),
        Unary::Sin => map!(F::sin),
        Unary::Cos => map!(F::cos),
        Unary::Tan => map!(F::tan),
        Unary::Tanh => map!(F::tanh),
        Unary::Sigmoid => map!(move |v| one.add(v.neg().exp()).recip()),
        Unary::Erf => map!(F::erf),
        Unary::Reciprocal => map!(F::recip),
        Unary::Gelu => map!(gelu),
        Unary::GeluTanh => map!(gelu_tanh),
        Unary::Silu => map!(move |v| v.div(one.add(v.neg().exp()))),
        Unary::Hardswish => map!(move |v| v.mul(relu6(v.add(three))).div(six)),
        Unary::Hardsigmoid => map!(move |v| relu6(v.add(three)).div(six)),
        Unary::Ceil => map!(F::ceil),
        Unary::Floor => map!(F::floor),
        Unary::Trunc => map!(F::trunc),
        Unary::Round(decimals) => map!(move |v| round(v, decimals)),
        Unary::Neg => map!(Number::neg),
        Unary::Abs => map!(Signed::abs),
        Unary::Sign => map!(Signed::sign),
        Unary::Square => map!(|v| v.mul(v)),
        Unary::Relu => map!(move |v| if v.is_nan() || v > zero { v } else { zero }),
        Unary::IsNan => unary_to::<S, bool>(x, out, |v: S| v.widen().is_nan()),
        Unary::IsInf => unary_to::<S, bool>(x, out, |v: S| v.widen().is_infinite()),
        Unary::Not | Unary::BitNot => Err(undefined(op, S::DTYPE)),
    }
}

fn integer<I: Bits>(x: &Array, op: Unary, out: Option<&Array>) -> Result<Array> {
    let zero = I::default();
    match op {
        Unary::Neg => unary_to::<I, I>(x, out, Number::neg),
        Unary::Abs => unary_to::<I, I>(x, out, Signed::abs),
        Unary::Sign => unary_to::<I, I>(x, out, Signed::sign),
        Unary::Square => unary_to::<I, I>(x, out, |v: I| v.mul(v)),
        Unary::Relu => unary_to::<I, I>(x, out, move |v| if v > zero { v } else { zero }),
        Unary::IsNan | Unary::IsInf => unary_to::<I, bool>(x, out, |_| false),
        Unary::BitNot => unary_to::<I, I>(x, out, Bits::not),
        // Integers are already whole.
        Unary::Ceil | Unary::Floor | Unary::Trunc | Unary::Round(0) => unary_to::<I, I>(x, out, |v| v),
        _ => Err(undefined(op, I::DTYPE)),
    }
}

fn boolean(x: &Array, op: Unary, out: Option<&Array>) -> Result<Array> {
    match op {
        Unary::Not | Unary::BitNot => unary_to::<bool, bool>(x, out, |b: bool| !b),
        Unary::IsNan | Unary::IsInf => unary_to::<bool, bool>(x, out, |_| false),
        Unary::Sign | Unary::Abs | Unary::Relu => unary_to::<bool, bool>(x, out, |b| b),
        _ => Err(undefined(op, DType::Bool)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{array, elements};
    use crate::types::Shape;

    fn apply(op: Unary, values: Vec<f64>) -> Vec<f64> {
        let x = array(values, Shape::from([3]));
        elements::<f64>("test", &unary(&x, op, DType::Float64, None).unwrap()).unwrap()
    }

    #[test]
    fn rounding_keeps_ties_even_at_any_decimal_place() {
        assert_eq!(apply(Unary::Round(0), vec![0.5, 1.5, -2.5]), [0.0, 2.0, -2.0]);
        assert_eq!(apply(Unary::Round(1), vec![0.25, 0.35, -1.05]), [0.2, 0.4, -1.0]);
        assert_eq!(apply(Unary::Round(-1), vec![15.0, 25.0, -4.0]), [20.0, 20.0, -0.0]);
    }

    #[test]
    fn activations_match_their_definitions() {
        let y = apply(Unary::Gelu, vec![0.0, 1.0, -1.0]);
        assert!((y[1] - 0.841_344_746_068_542_9).abs() < 1e-15 && (y[2] + 0.158_655_253_931_457_05).abs() < 1e-15);
        let s = apply(Unary::Silu, vec![0.0, 2.0, -2.0]);
        assert!((s[1] - 2.0 / (1.0 + (-2.0f64).exp())).abs() < 1e-15);
        assert!(apply(Unary::Relu, vec![f64::NAN, -1.0, 2.0])[0].is_nan());
    }

    #[test]
    fn functions_a_dtype_lacks_are_errors() {
        let x = array(vec![1i64, 2], Shape::from([2]));
        assert!(unary(&x, Unary::Exp, DType::Int64, None).is_err());
        assert!(unary(&x, Unary::Not, DType::Float32, None).is_err());
    }
}
