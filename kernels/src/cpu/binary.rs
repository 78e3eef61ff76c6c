//! The elementwise operations of two operands ([`Binary`]) and the selection behind `where`
//! on the CPU: each operation becomes one monomorphised loop, chosen once per call.

use crate::backend::{Array, Binary};
use crate::error::Result;
use crate::types::{DType, Element, Shape, with_dtype};

use super::elementwise::{Bits, Float, Lifted, Signed, Stored};
use super::map::binary_to;
use super::{Number, undefined};
use crate::types::half::{bf16, f16};

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
        DType::Float32 => float::<f32, f32>(a, b, shape, op, out),
        DType::Float64 => float::<f64, f64>(a, b, shape, op, out),
        DType::Float16 => float::<f16, f32>(a, b, shape, op, out),
        DType::BFloat16 => float::<bf16, f32>(a, b, shape, op, out),
        DType::UInt8 => integer::<u8>(a, b, shape, op, out),
        DType::Int8 => integer::<i8>(a, b, shape, op, out),
        DType::Int16 => integer::<i16>(a, b, shape, op, out),
        DType::Int32 => integer::<i32>(a, b, shape, op, out),
        DType::Int64 => integer::<i64>(a, b, shape, op, out),
        DType::Bool => boolean(a, b, shape, op, out),
    }
}

/// `g` on two stored elements: widened, computed, rounded once.
#[inline(always)]
fn lifted2<S: Stored<Math = T>, T>(g: impl Fn(T, T) -> T + Sync) -> Lifted<S, impl Fn(T, T) -> T + Sync> {
    Lifted::new(g)
}

/// `g` on two stored elements, widened (a comparison).
#[inline(always)]
fn widened2<S: Stored<Math = T>, T>(g: impl Fn(T, T) -> bool + Sync) -> impl Fn(S, S) -> bool + Sync {
    #[inline(always)]
    move |p: S, q: S| g(p.widen(), q.widen())
}

/// The operations integers and floats share.
fn numeric<S: Stored<Math = T>, T: Signed>(
    a: &Array,
    b: &Array,
    shape: &Shape,
    op: Binary,
    out: Option<&Array>,
) -> Result<Array> {
    // `g` on each pair of elements, computed in `T`.
    macro_rules! map {
        ($g:expr) => {
            binary_to::<S, S>(a, b, shape, out, lifted2::<S, T>($g))
        };
    }
    let nan = |v: T| v.is_nan();
    match op {
        Binary::Add(alpha) => {
            let alpha = T::from_scalar(alpha);
            map!(move |p, q| p.add(alpha.mul(q)))
        }
        Binary::Sub(alpha) => {
            let alpha = T::from_scalar(alpha);
            map!(move |p, q| p.sub(alpha.mul(q)))
        }
        Binary::Mul => map!(Number::mul),
        Binary::DivTrunc => map!(|p, q| p.div_trunc(q).unwrap_or_default()),
        Binary::DivFloor => map!(|p, q| p.div_floor(q).unwrap_or_default()),
        Binary::Maximum => map!(move |p, q| {
            if nan(p) || nan(q) {
                T::from_f64(f64::NAN)
            } else if p > q {
                p
            } else {
                q
            }
        }),
        Binary::Minimum => map!(move |p, q| {
            if nan(p) || nan(q) {
                T::from_f64(f64::NAN)
            } else if p < q {
                p
            } else {
                q
            }
        }),
        Binary::Pow => map!(Signed::pow),
        Binary::Fmod => map!(|p, q| p.fmod(q).unwrap_or_default()),
        Binary::Remainder => map!(|p, q| p.remainder(q).unwrap_or_default()),
        Binary::ClampMin => map!(move |v, m| {
            if nan(v) {
                v
            } else if nan(m) || v < m {
                m
            } else {
                v
            }
        }),
        Binary::ClampMax => map!(move |v, m| {
            if nan(v) {
                v
            } else if nan(m) || v > m {
                m
            } else {
                v
            }
        }),
        _ => compare::<S, T>(a, b, shape, op, out),
    }
}

/// The comparisons and logical operations (bool results), of elements stored as `S` and
/// compared as `T`.
fn compare<S: Stored<Math = T>, T: Element>(
    a: &Array,
    b: &Array,
    shape: &Shape,
    op: Binary,
    out: Option<&Array>,
) -> Result<Array> {
    // `g` on each pair of elements, compared in `T`.
    macro_rules! map {
        ($g:expr) => {
            binary_to::<S, bool>(a, b, shape, out, widened2::<S, T>($g))
        };
    }
    let truth = |v: T| v != T::default();
    match op {
        Binary::Eq => map!(|p, q| p == q),
        Binary::Ne => map!(|p, q| p != q),
        Binary::Lt => map!(|p, q| p < q),
        Binary::Le => map!(|p, q| p <= q),
        Binary::Gt => map!(|p, q| p > q),
        Binary::Ge => map!(|p, q| p >= q),
        Binary::And => map!(move |p, q| truth(p) && truth(q)),
        Binary::Or => map!(move |p, q| truth(p) || truth(q)),
        Binary::Xor => map!(move |p, q| truth(p) != truth(q)),
        _ => Err(undefined(op, S::DTYPE)),
    }
}

/// The float operations, stored as `S` and computed in `F` (float16 and bfloat16 in float32,
/// rounded once).
fn float<S: Stored<Math = F>, F: Float + Signed>(
    a: &Array,
    b: &Array,
    shape: &Shape,
    op: Binary,
    out: Option<&Array>,
) -> Result<Array> {
    match op {
        Binary::Div => binary_to::<S, S>(a, b, shape, out, lifted2::<S, F>(Float::div)),
        Binary::Atan2 => binary_to::<S, S>(a, b, shape, out, lifted2::<S, F>(Float::atan2)),
        _ => numeric::<S, F>(a, b, shape, op, out),
    }
}

fn integer<I: Bits + Stored<Math = I>>(
    a: &Array,
    b: &Array,
    shape: &Shape,
    op: Binary,
    out: Option<&Array>,
) -> Result<Array> {
    match op {
        Binary::Div | Binary::Atan2 => Err(undefined(op, I::DTYPE)),
        Binary::BitAnd | Binary::BitOr | Binary::BitXor | Binary::Shl | Binary::Shr => {
            binary_to::<I, I>(a, b, shape, out, move |p: I, q: I| p.bits(q, op))
        }
        _ => numeric::<I, I>(a, b, shape, op, out),
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
        _ => compare::<bool, bool>(a, b, shape, op, out),
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
