//! The elementwise operations of two operands ([`Binary`]) and the selection behind `where`
//! on the CPU: each operation becomes one monomorphised loop, chosen once per call.

use crate::backend::{Array, Binary};
use crate::error::Result;
use crate::types::{DType, Element, Shape, with_dtype};

use super::elementwise::{Bits, Float, Signed};
use super::map::binary_to;
use super::{Number, undefined};

/// `op` on the elements of `a` and `b` broadcast to `shape`, computed in `dtype` (see
/// [`Backend::binary`](crate::backend::Backend::binary)).
pub(super) fn binary(
    a: &Array,
    b: &Array,
    shape: &Shape,
    op: Binary,
    dtype: DType,
    out: Option<&Array>,
) -> Result<Array> {
    match dtype {
        DType::Float32 => float::<f32>(a, b, shape, op, out),
        DType::Float64 => float::<f64>(a, b, shape, op, out),
        DType::UInt8 => integer::<u8>(a, b, shape, op, out),
        DType::Int8 => integer::<i8>(a, b, shape, op, out),
        DType::Int16 => integer::<i16>(a, b, shape, op, out),
        DType::Int32 => integer::<i32>(a, b, shape, op, out),
        DType::Int64 => integer::<i64>(a, b, shape, op, out),
        DType::Bool => boolean(a, b, shape, op, out),
        // Half precision computes in float32: the backend widens it first.
        DType::Float16 | DType::BFloat16 => Err(undefined(op, dtype)),
    }
}

/// The operations integers and floats share.
fn numeric<T: Signed>(a: &Array, b: &Array, shape: &Shape, op: Binary, out: Option<&Array>) -> Result<Array> {
    let nan = |v: T| v.is_nan();
    match op {
        Binary::Add(alpha) => {
            let alpha = T::from_scalar(alpha);
            binary_to::<T, T>(a, b, shape, out, move |p, q| p.add(alpha.mul(q)))
        }
        Binary::Sub(alpha) => {
            let alpha = T::from_scalar(alpha);
            binary_to::<T, T>(a, b, shape, out, move |p, q| p.sub(alpha.mul(q)))
        }
        Binary::Mul => binary_to::<T, T>(a, b, shape, out, Number::mul),
        Binary::DivTrunc => binary_to::<T, T>(a, b, shape, out, |p, q| p.div_trunc(q).unwrap_or_default()),
        Binary::DivFloor => binary_to::<T, T>(a, b, shape, out, |p, q| p.div_floor(q).unwrap_or_default()),
        Binary::Maximum => binary_to::<T, T>(a, b, shape, out, move |p, q| {
            if nan(p) || nan(q) {
                T::from_f64(f64::NAN)
            } else if p > q {
                p
            } else {
                q
            }
        }),
        Binary::Minimum => binary_to::<T, T>(a, b, shape, out, move |p, q| {
            if nan(p) || nan(q) {
                T::from_f64(f64::NAN)
            } else if p < q {
                p
            } else {
                q
            }
        }),
        Binary::Pow => binary_to::<T, T>(a, b, shape, out, Signed::pow),
        Binary::Fmod => binary_to::<T, T>(a, b, shape, out, |p, q| p.fmod(q).unwrap_or_default()),
        Binary::Remainder => binary_to::<T, T>(a, b, shape, out, |p, q| p.remainder(q).unwrap_or_default()),
        Binary::ClampMin => binary_to::<T, T>(a, b, shape, out, move |v, m| {
            if nan(v) {
                v
            } else if nan(m) || v < m {
                m
            } else {
                v
            }
        }),
        Binary::ClampMax => binary_to::<T, T>(a, b, shape, out, move |v, m| {
            if nan(v) {
                v
            } else if nan(m) || v > m {
                m
            } else {
                v
            }
        }),
        _ => compare::<T>(a, b, shape, op, out),
    }
}

/// The comparisons and logical operations, for any element type (bool results).
fn compare<T: Element>(a: &Array, b: &Array, shape: &Shape, op: Binary, out: Option<&Array>) -> Result<Array> {
    let truth = |v: T| v != T::default();
    match op {
        Binary::Eq => binary_to::<T, bool>(a, b, shape, out, |p, q| p == q),
        Binary::Ne => binary_to::<T, bool>(a, b, shape, out, |p, q| p != q),
        Binary::Lt => binary_to::<T, bool>(a, b, shape, out, |p, q| p < q),
        Binary::Le => binary_to::<T, bool>(a, b, shape, out, |p, q| p <= q),
        Binary::Gt => binary_to::<T, bool>(a, b, shape, out, |p, q| p > q),
        Binary::Ge => binary_to::<T, bool>(a, b, shape, out, |p, q| p >= q),
        Binary::And => binary_to::<T, bool>(a, b, shape, out, move |p, q| truth(p) && truth(q)),
        Binary::Or => binary_to::<T, bool>(a, b, shape, out, move |p, q| truth(p) || truth(q)),
        Binary::Xor => binary_to::<T, bool>(a, b, shape, out, move |p, q| truth(p) != truth(q)),
        _ => Err(undefined(op, T::DTYPE)),
    }
}

fn float<F: Float + Signed>(a: &Array, b: &Array, shape: &Shape, op: Binary, out: Option<&Array>) -> Result<Array> {
    match op {
        Binary::Div => binary_to::<F, F>(a, b, shape, out, Float::div),
        Binary::Atan2 => binary_to::<F, F>(a, b, shape, out, Float::atan2),
        _ => numeric::<F>(a, b, shape, op, out),
    }
}

fn integer<I: Bits>(a: &Array, b: &Array, shape: &Shape, op: Binary, out: Option<&Array>) -> Result<Array> {
    match op {
        Binary::Div | Binary::Atan2 => Err(undefined(op, I::DTYPE)),
        Binary::BitAnd | Binary::BitOr | Binary::BitXor | Binary::Shl | Binary::Shr => {
            binary_to::<I, I>(a, b, shape, out, move |p, q| p.bits(q, op))
        }
        _ => numeric::<I>(a, b, shape, op, out),
    }
}

fn boolean(a: &Array, b: &Array, shape: &Shape, op: Binary, out: Option<&Array>) -> Result<Array> {
    match op {
        Binary::Add(alpha) => {
            let alpha = alpha.to_i64() != 0;
            binary_to::<bool, bool>(a, b, shape, out, move |p, q| p || (alpha && q))
        }
        Binary::Mul | Binary::Minimum | Binary::BitAnd => binary_to::<bool, bool>(a, b, shape, out, |p, q| p && q),
        Binary::Maximum | Binary::BitOr => binary_to::<bool, bool>(a, b, shape, out, |p, q| p || q),
        Binary::BitXor => binary_to::<bool, bool>(a, b, shape, out, |p, q| p != q),
        _ => compare::<bool>(a, b, shape, op, out),
    }
}

/// `a` where `condition` is true, `b` elsewhere, the three broadcast to `shape` (`condition`
/// read as bool, the others as `dtype`).
pub(super) fn select(condition: &Array, a: &Array, b: &Array, shape: &Shape, dtype: DType) -> Result<Array> {
    with_dtype!(dtype, T => super::map::select::<T>(condition, a, b, shape))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{array, elements};
    use crate::types::Scalar;

    fn ints(values: &[i64]) -> Array {
        array(values.to_vec(), Shape::from([values.len()]))
    }

    fn run(op: Binary, a: &[i64], b: &[i64], dtype: DType) -> Vec<i64> {
        let shape = Shape::from([a.len()]);
        elements::<i64>("test", &binary(&ints(a), &ints(b), &shape, op, dtype, None).unwrap()).unwrap()
    }

    #[test]
    fn integer_division_and_remainders_follow_pytorch() {
        assert_eq!(run(Binary::DivFloor, &[7, -7], &[-2, 2], DType::Int64), [-4, -4]);
        assert_eq!(run(Binary::DivTrunc, &[7, -7], &[-2, 2], DType::Int64), [-3, -3]);
        assert_eq!(run(Binary::Remainder, &[-7, 7], &[3, -3], DType::Int64), [2, -2]);
        assert_eq!(run(Binary::Sub(Scalar::Int(2)), &[10, 10], &[1, 2], DType::Int64), [8, 6]);
    }

    #[test]
    fn comparisons_give_bools_and_bool_arithmetic_is_logic() {
        assert_eq!(run(Binary::Lt, &[1, 3], &[2, 2], DType::Int64), [1, 0]);
        assert_eq!(run(Binary::Add(Scalar::Int(1)), &[0, 1], &[0, 0], DType::Bool), [0, 1]);
        assert!(binary(&ints(&[1]), &ints(&[1]), &Shape::from([1]), Binary::Div, DType::Int64, None).is_err());
    }

    #[test]
    fn selection_broadcasts_its_three_operands() {
        let c = array(vec![true, false], Shape::from([2, 1]));
        let got = select(&c, &ints(&[1, 2, 3]), &ints(&[0]), &Shape::from([2, 3]), DType::Int64).unwrap();
        assert_eq!(elements::<i64>("test", &got).unwrap(), [1, 2, 3, 0, 0, 0]);
    }
}
