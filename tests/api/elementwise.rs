//! Elementwise math, comparisons and logic: known values at the edges (NaN, infinities, signed
//! zeros, integer division and overflow), PyTorch's dtype rules, broadcasting, and errors.

use torchfn::prelude::*;
use torchfn::{ErrorKind, IndexItem};

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

fn i64s(t: &Tensor) -> Vec<i64> {
    t.to_vec::<i64>().unwrap()
}

fn bools(t: &Tensor) -> Vec<bool> {
    t.to_vec::<bool>().unwrap()
}

fn kind_and_message(r: Result<Tensor>) -> (ErrorKind, String) {
    let err = r.unwrap_err();
    (err.kind(), err.to_string())
}

/// Python's number, as a wrapped scalar operand.
fn num(v: impl Into<Scalar>) -> Tensor {
    Tensor::scalar(v)
}

/// Equal as floats, NaN equal to NaN and the sign of zero compared too.
fn same(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        let ok = (g.is_nan() && w.is_nan()) || (g == w && g.is_sign_negative() == w.is_sign_negative());
        assert!(ok, "got {got:?}, expected {want:?}");
    }
}

/// Equal within a relative tolerance.
fn close(got: &[f64], want: &[f64], rtol: f64) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= rtol * w.abs(), "got {got:?}, expected {want:?}");
    }
}

fn same32(got: &Tensor, want: &[f32]) {
    same(
        &f32s(got).into_iter().map(f64::from).collect::<Vec<_>>(),
        &want.iter().map(|&w| f64::from(w)).collect::<Vec<_>>(),
    );
}

#[test]
fn float_functions_give_pytorchs_values_at_the_edges() {
    let t = torchfn::tensor([0.0f64, -0.0, 1.0, -1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN]).unwrap();
    let inf = f64::INFINITY;
    let nan = f64::NAN;
    same(&f64s(&t.log().unwrap()), &[-inf, -inf, 0.0, nan, inf, nan, nan]);
    same(&f64s(&t.sqrt().unwrap()), &[0.0, -0.0, 1.0, nan, inf, nan, nan]);
    same(&f64s(&t.rsqrt().unwrap()), &[inf, -inf, 1.0, nan, 0.0, nan, nan]);
    same(&f64s(&t.reciprocal().unwrap()), &[inf, -inf, 1.0, -1.0, 0.0, -0.0, nan]);
    same(&f64s(&t.exp().unwrap()), &[1.0, 1.0, std::f64::consts::E, 0.367_879_441_171_442_33, inf, 0.0, nan]);
    same(&f64s(&t.tanh().unwrap()), &[0.0, -0.0, 0.761_594_155_955_764_9, -0.761_594_155_955_764_9, 1.0, -1.0, nan]);
    same(&f64s(&t.sigmoid().unwrap())[4..], &[1.0, 0.0, nan]);
    let erf = f64s(&t.erf().unwrap());
    same(&[erf[0], erf[1], erf[4], erf[5], erf[6]], &[0.0, -0.0, 1.0, -1.0, nan]);
    close(&erf[2..4], &[0.842_700_792_949_714_9, -0.842_700_792_949_714_9], 1e-15);
    same(&f64s(&t.log1p().unwrap())[..4], &[0.0, -0.0, 2f64.ln(), -inf]);
    same(&f64s(&t.expm1().unwrap())[4..], &[inf, -1.0, nan]);
    same(&f64s(&t.sin().unwrap())[4..], &[nan, nan, nan]);
    // Accurate for tiny arguments, where the naive formulas lose everything.
    let tiny = torchfn::tensor([1e-10f64]).unwrap();
    close(&f64s(&torchfn::log1p(&tiny).unwrap()), &[9.999_999_999_5e-11], 1e-15);
    close(&f64s(&torchfn::expm1(&tiny).unwrap()), &[1.000_000_000_05e-10], 1e-15);
}

#[test]
fn erf_is_accurate_in_float32_and_float64() {
    // erf at 0.5, 1.5, 2.5, 3.5 and 5 (mpmath), and its oddness.
    let x = torchfn::tensor([0.5f64, 1.5, 2.5, 3.5, 5.0, -1.5]).unwrap();
    let want = [
        0.520_499_877_813_046_5,
        0.966_105_146_475_310_8,
        0.999_593_047_982_555,
        0.999_999_256_901_627_6,
        0.999_999_999_998_462_6,
        -0.966_105_146_475_310_8,
    ];
    for (g, w) in f64s(&torchfn::erf(&x).unwrap()).into_iter().zip(want) {
        assert!((g - w).abs() < 1e-15, "erf gave {g}, expected {w}");
    }
    let x32 = x.to(DType::Float32, false, false).unwrap();
    for (g, w) in f32s(&x32.erf().unwrap()).into_iter().zip(want) {
        assert_eq!(g, w as f32);
    }
}

#[test]
fn float_functions_of_integers_and_bools_give_float32() {
    let ints = torchfn::tensor([0i64, 1, 4]).unwrap();
    let sqrt = torchfn::sqrt(&ints).unwrap();
    assert_eq!(sqrt.dtype().unwrap(), DType::Float32);
    assert_eq!(f32s(&sqrt), [0.0, 1.0, 2.0]);
    assert_eq!(f32s(&ints.reciprocal().unwrap()), [f32::INFINITY, 1.0, 0.25]);
    let flags = torchfn::tensor([false, true]).unwrap();
    assert_eq!(f32s(&flags.sigmoid().unwrap()), [0.5, 0.731_058_6]);
    let int32 = torchfn::tensor([1i32]).unwrap();
    for f in [torchfn::exp, torchfn::log, torchfn::sin, torchfn::cos, torchfn::tan, torchfn::erf, torchfn::expm1] {
        assert_eq!(f(&int32).unwrap().dtype().unwrap(), DType::Float32);
    }
    let doubles = torchfn::tensor([1.0f64]).unwrap();
    assert_eq!(torchfn::exp(&doubles).unwrap().dtype().unwrap(), DType::Float64);
}

#[test]
fn rounding_is_half_to_even_and_keeps_signed_zeros() {
    let t = torchfn::tensor([0.5f32, 1.5, 2.5, -0.5, -1.5, -0.4, 2.7, -2.7]).unwrap();
    same32(&t.round(0).unwrap(), &[0.0, 2.0, 2.0, -0.0, -2.0, -0.0, 3.0, -3.0]);
    same32(&t.floor().unwrap(), &[0.0, 1.0, 2.0, -1.0, -2.0, -1.0, 2.0, -3.0]);
    same32(&t.ceil().unwrap(), &[1.0, 2.0, 3.0, -0.0, -1.0, -0.0, 3.0, -2.0]);
    same32(&t.trunc().unwrap(), &[0.0, 1.0, 2.0, -0.0, -1.0, -0.0, 2.0, -2.0]);
    let d = torchfn::tensor([1234.5678f64, -0.125, 0.375]).unwrap();
    same(&f64s(&torchfn::round(&d, 2).unwrap()), &[1234.57, -0.12, 0.38]);
    same(&f64s(&torchfn::round(&d, -2).unwrap()), &[1200.0, -0.0, 0.0]);
    // By name, `decimals` is keyword-only in PyTorch and defaults to 0.
    let by_name = torchfn::ROUND.call(&[d.clone().into()], &Kwargs::from([("decimals", 1)])).unwrap();
    same(&f64s(by_name.as_tensor().unwrap()), &[1234.6, -0.1, 0.4]);
}

#[test]
fn rounding_copies_integers_and_refuses_bools() {
    let ints = torchfn::tensor([-3i64, 7]).unwrap();
    for out in [ints.floor(), ints.ceil(), ints.round(0), ints.trunc()] {
        let out = out.unwrap();
        assert_eq!(out.dtype().unwrap(), DType::Int64);
        assert_eq!(i64s(&out), [-3, 7]);
        assert!(!out.is(&ints));
    }
    let (kind, message) = kind_and_message(ints.round(1));
    assert_eq!(kind, ErrorKind::NotImplemented);
    assert!(message.starts_with("round(): decimals=1"), "{message}");
    let flags = torchfn::tensor([true]).unwrap();
    let (kind, message) = kind_and_message(torchfn::floor(&flags));
    assert_eq!(kind, ErrorKind::NotImplemented);
    assert!(message.contains("floor()") && message.contains("'input'"), "{message}");
}

#[test]
fn abs_sign_square_and_relu_keep_integer_dtypes() {
    let ints = torchfn::tensor([i64::MIN, -5, 0, 3]).unwrap();
    assert_eq!(i64s(&ints.abs().unwrap()), [i64::MIN, 5, 0, 3]);
    assert_eq!(i64s(&ints.sign().unwrap()), [-1, -1, 0, 1]);
    assert_eq!(i64s(&torchfn::relu(&ints).unwrap()), [0, 0, 0, 3]);
    // Squares wrap like PyTorch's integer tensors instead of overflowing.
    assert_eq!(i64s(&torchfn::square(&ints).unwrap()), [0, 25, 0, 9]);
    let int32 = torchfn::tensor([-4i32]).unwrap();
    assert_eq!(torchfn::square(&int32).unwrap().to_vec::<i32>().unwrap(), [16]);

    let floats = torchfn::tensor([-0.0f32, 0.0, -2.5, f32::NAN, f32::NEG_INFINITY]).unwrap();
    same32(&floats.abs().unwrap(), &[0.0, 0.0, 2.5, f32::NAN, f32::INFINITY]);
    same32(&floats.sign().unwrap(), &[0.0, 0.0, -1.0, 0.0, -1.0]);
    let relu = floats.relu().unwrap();
    assert!(f32s(&relu)[3].is_nan());
    assert_eq!([f32s(&relu)[0], f32s(&relu)[1], f32s(&relu)[2], f32s(&relu)[4]], [0.0, 0.0, 0.0, 0.0]);
}

#[test]
fn bools_follow_pytorchs_rules_for_abs_sign_square_and_relu() {
    let flags = torchfn::tensor([true, false]).unwrap();
    assert_eq!(bools(&flags.sign().unwrap()), [true, false]);
    let squared = flags.square().unwrap();
    assert_eq!(squared.dtype().unwrap(), DType::Int64);
    assert_eq!(i64s(&squared), [1, 0]);
    assert_eq!(kind_and_message(flags.abs()).0, ErrorKind::NotImplemented);
    let (kind, message) = kind_and_message(flags.relu());
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(message.starts_with("relu(): bool inputs are not supported"), "{message}");
}

#[test]
fn isnan_isinf_and_logical_not_give_bools() {
    let t = torchfn::tensor([1.0f64, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0]).unwrap();
    assert_eq!(bools(&t.isnan().unwrap()), [false, true, false, false, false, false]);
    assert_eq!(bools(&torchfn::isinf(&t).unwrap()), [false, false, true, true, false, false]);
    // NaN is non-zero, so true; both zeros are false.
    assert_eq!(bools(&t.logical_not().unwrap()), [false, false, false, false, true, true]);
    let ints = torchfn::tensor([[0i64, 5]]).unwrap();
    let nan = torchfn::isnan(&ints).unwrap();
    assert_eq!((nan.dtype().unwrap(), nan.shape().unwrap().to_vec()), (DType::Bool, vec![1, 2]));
    assert_eq!(bools(&nan), [false, false]);
    assert_eq!(bools(&torchfn::logical_not(&ints).unwrap()), [true, false]);
    assert_eq!(bools(&torchfn::isinf(&torchfn::tensor([true]).unwrap()).unwrap()), [false]);
}

#[test]
fn pow_promotes_and_rejects_negative_integer_numbers() {
    let ints = torchfn::tensor([2i64, 1, -1, 3]).unwrap();
    assert_eq!(i64s(&ints.pow(&num(3)).unwrap()), [8, 1, -1, 27]);
    assert_eq!(i64s(&ints.pow(&num(0)).unwrap()), [1, 1, 1, 1]);
    // A negative integer *tensor* exponent truncates 1 / base^n, as PyTorch's integer kernel.
    let negative = torchfn::tensor([-1i64, -2, -3, -2]).unwrap();
    assert_eq!(i64s(&ints.pow(&negative).unwrap()), [0, 1, -1, 0]);
    // A negative integer *number* is an error.
    let (kind, message) = kind_and_message(torchfn::pow(&ints, &num(-2)));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(message.starts_with("pow(): integers to negative integer powers are not allowed"), "{message}");
    // A float number gives the default float dtype; a float exponent -2.0 is fine.
    let halves = ints.pow(&num(-2.0)).unwrap();
    assert_eq!(halves.dtype().unwrap(), DType::Float32);
    close(&f32s(&halves).into_iter().map(f64::from).collect::<Vec<_>>(), &[0.25, 1.0, 1.0, 1.0 / 9.0], 1e-7);
    // Integers overflow by wrapping.
    assert_eq!(i64s(&torchfn::tensor([2i64]).unwrap().pow(&num(64)).unwrap()), [0]);
    // A number base: `2 ** t`, in the tensor's dtype.
    let base = torchfn::pow(&num(2), &torchfn::tensor([0i32, 3]).unwrap()).unwrap();
    assert_eq!(base.to_vec::<i32>().unwrap(), [1, 8]);
    let fbase = torchfn::pow(&num(2.0), &torchfn::tensor([0i64, -1]).unwrap()).unwrap();
    assert_eq!(f32s(&fbase), [1.0, 0.5]);
    // Bools: to an int number they count as int64; to a bool they are not defined.
    let flags = torchfn::tensor([true, false]).unwrap();
    assert_eq!(i64s(&flags.pow(&num(2)).unwrap()), [1, 0]);
    assert_eq!(kind_and_message(flags.pow(&flags)).0, ErrorKind::NotImplemented);
}

#[test]
fn pow_of_floats_follows_ieee_and_pytorchs_square_root() {
    let t = torchfn::tensor([4.0f32, -0.0, f32::NEG_INFINITY, -1.0, 0.0]).unwrap();
    same32(&t.pow(&num(0.5)).unwrap(), &[2.0, -0.0, f32::NAN, f32::NAN, 0.0]);
    same32(&t.pow(&num(-0.5)).unwrap(), &[0.5, f32::NEG_INFINITY, f32::NAN, f32::NAN, f32::INFINITY]);
    same32(&t.pow(&num(2)).unwrap(), &[16.0, 0.0, f32::INFINITY, 1.0, 0.0]);
    same32(&t.pow(&num(0)).unwrap(), &[1.0; 5]);
    // A tensor exponent broadcasts.
    let a = torchfn::tensor([[2.0f64], [3.0]]).unwrap();
    let b = torchfn::tensor([1.0f64, 2.0, 0.5]).unwrap();
    let out = torchfn::pow(&a, &b).unwrap();
    assert_eq!(out.shape().unwrap(), [2, 3]);
    close(&f64s(&out), &[2.0, 4.0, std::f64::consts::SQRT_2, 3.0, 9.0, 1.732_050_807_568_877_2], 1e-15);
}

#[test]
fn atan2_covers_every_quadrant_and_signed_zeros() {
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};
    let y = torchfn::tensor([1.0f64, 1.0, -1.0, 0.0, -0.0, 1.0]).unwrap();
    let x = torchfn::tensor([1.0f64, -1.0, -1.0, -1.0, -1.0, 0.0]).unwrap();
    close(&f64s(&y.atan2(&x).unwrap()), &[FRAC_PI_4, 3.0 * FRAC_PI_4, -3.0 * FRAC_PI_4, PI, -PI, FRAC_PI_2], 1e-15);
    let ints = torchfn::atan2(&torchfn::tensor([0i64, 1]).unwrap(), &num(1)).unwrap();
    assert_eq!(ints.dtype().unwrap(), DType::Float32);
    close(&f32s(&ints).into_iter().map(f64::from).collect::<Vec<_>>(), &[0.0, FRAC_PI_4], 1e-7);
}

#[test]
fn fmod_and_remainder_take_the_sign_of_the_dividend_and_the_divisor() {
    let a = torchfn::tensor([-7i64, 7, -7, 7, 6]).unwrap();
    let b = torchfn::tensor([3i64, -3, -3, 3, 3]).unwrap();
    assert_eq!(i64s(&torchfn::fmod(&a, &b).unwrap()), [-1, 1, -1, 1, 0]);
    assert_eq!(i64s(&torchfn::remainder(&a, &b).unwrap()), [2, -2, -1, 1, 0]);
    // The most negative integer divided by -1 does not overflow.
    let min = torchfn::tensor([i64::MIN]).unwrap();
    assert_eq!(i64s(&min.remainder(&num(-1)).unwrap()), [0]);
    assert_eq!(i64s(&min.fmod(&num(-1)).unwrap()), [0]);

    let x = torchfn::tensor([-7.5f64, 7.5, 5.0, -0.0, 1.0, f64::INFINITY]).unwrap();
    let y = torchfn::tensor([2.0f64, -2.0, 0.0, 3.0, f64::INFINITY, 2.0]).unwrap();
    same(&f64s(&x.fmod(&y).unwrap()), &[-1.5, 1.5, f64::NAN, -0.0, 1.0, f64::NAN]);
    same(&f64s(&x.remainder(&y).unwrap()), &[0.5, -0.5, f64::NAN, -0.0, 1.0, f64::NAN]);

    // An int tensor and a float number compute in float32.
    let mixed = torchfn::remainder(&torchfn::tensor([-5i64, 5]).unwrap(), &num(2.5)).unwrap();
    assert_eq!(mixed.dtype().unwrap(), DType::Float32);
    assert_eq!(f32s(&mixed), [0.0, 0.0]);
}

#[test]
fn integer_remainders_by_zero_and_bool_remainders_are_errors() {
    let a = torchfn::tensor([1i64, 2]).unwrap();
    let zero = torchfn::tensor([1i64, 0]).unwrap();
    for r in [torchfn::fmod(&a, &zero), torchfn::remainder(&a, &zero), a.remainder(&num(0))] {
        let (kind, message) = kind_and_message(r);
        assert_eq!(kind, ErrorKind::Runtime);
        assert!(message.contains("ZeroDivisionError"), "{message}");
    }
    let flags = torchfn::tensor([true]).unwrap();
    assert_eq!(kind_and_message(torchfn::fmod(&flags, &flags)).0, ErrorKind::NotImplemented);
}

#[test]
fn comparisons_broadcast_promote_and_treat_nan_as_unordered() {
    let a = torchfn::tensor([1.0f32, f32::NAN, 3.0]).unwrap();
    let b = torchfn::tensor([1.0f32, f32::NAN, 2.0]).unwrap();
    assert_eq!(bools(&torchfn::eq(&a, &b).unwrap()), [true, false, false]);
    assert_eq!(bools(&torchfn::ne(&a, &b).unwrap()), [false, true, true]);
    assert_eq!(bools(&torchfn::lt(&a, &b).unwrap()), [false, false, false]);
    assert_eq!(bools(&torchfn::le(&a, &b).unwrap()), [true, false, false]);
    assert_eq!(bools(&torchfn::gt(&a, &b).unwrap()), [false, false, true]);
    assert_eq!(bools(&torchfn::ge(&a, &b).unwrap()), [true, false, true]);
    // -0.0 equals 0.0.
    let zeros = torchfn::tensor([-0.0f64]).unwrap();
    assert_eq!(bools(&zeros.eq(&num(0)).unwrap()), [true]);

    // An int tensor against a float number compares as floats, not truncated integers.
    let ints = torchfn::tensor([[1i64], [2], [3]]).unwrap();
    assert_eq!(bools(&ints.lt(&num(2.5)).unwrap()), [true, true, false]);
    assert_eq!(bools(&ints.eq(&num(2)).unwrap()), [false, true, false]);
    // Broadcasting [3, 1] with [2] gives [3, 2].
    let row = torchfn::tensor([2i32, 3]).unwrap();
    let ge = ints.ge(&row).unwrap();
    assert_eq!((ge.dtype().unwrap(), ge.shape().unwrap().to_vec()), (DType::Bool, vec![3, 2]));
    assert_eq!(bools(&ge), [false, false, true, false, true, true]);
    // Bools compare as false < true.
    let flags = torchfn::tensor([false, true]).unwrap();
    assert_eq!(bools(&flags.gt(&num(false)).unwrap()), [false, true]);

    let (kind, message) = kind_and_message(torchfn::eq(&a, &torchfn::tensor([1.0f32, 2.0]).unwrap()));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(message.starts_with("eq(): the size of tensor a (3) must match the size of tensor b (2)"), "{message}");
}

#[test]
fn logical_operations_treat_non_zero_as_true() {
    let a = torchfn::tensor([0.0f32, -2.0, f32::NAN, 0.0]).unwrap();
    let b = torchfn::tensor([0i64, 0, 7, 1]).unwrap();
    assert_eq!(bools(&torchfn::logical_and(&a, &b).unwrap()), [false, false, true, false]);
    assert_eq!(bools(&torchfn::logical_or(&a, &b).unwrap()), [false, true, true, true]);
    assert_eq!(bools(&a.logical_xor(&b).unwrap()), [false, true, false, true]);
    let column = torchfn::tensor([[true], [false]]).unwrap();
    let out = column.logical_or(&num(0.0)).unwrap();
    assert_eq!((out.dtype().unwrap(), out.shape().unwrap().to_vec()), (DType::Bool, vec![2, 1]));
    assert_eq!(bools(&out), [true, false]);
    assert_eq!(bools(&column.logical_and(&b).unwrap()), [false, false, true, true, false, false, false, false]);
}

#[test]
fn clamp_promotes_with_its_bounds_and_propagates_nan() {
    let t = torchfn::tensor([-3.0f32, 0.25, 3.0, f32::NAN]).unwrap();
    let c = torchfn::clamp(&t, Some(Scalar::from(-1)), Some(Scalar::from(0.5))).unwrap();
    same32(&c, &[-1.0, 0.25, 0.5, f32::NAN]);
    same32(&t.clamp(None, Some(Scalar::from(0))).unwrap(), &[-3.0, 0.0, 0.0, f32::NAN]);
    // A min above the max gives the max everywhere.
    same32(&t.clamp(Some(Scalar::from(2)), Some(Scalar::from(1))).unwrap(), &[1.0, 1.0, 1.0, f32::NAN]);
    // A NaN bound makes everything NaN.
    same32(&t.clamp(Some(Scalar::from(f64::NAN)), None).unwrap(), &[f32::NAN; 4]);

    let ints = torchfn::tensor([-5i64, 5]).unwrap();
    let kept = torchfn::clamp(&ints, Some(Scalar::from(0)), None).unwrap();
    assert_eq!((kept.dtype().unwrap(), i64s(&kept)), (DType::Int64, vec![0, 5]));
    let promoted = torchfn::clamp(&ints, Some(Scalar::from(0.5)), None).unwrap();
    assert_eq!((promoted.dtype().unwrap(), f32s(&promoted)), (DType::Float32, vec![0.5, 5.0]));

    let (kind, message) = kind_and_message(torchfn::clamp(&t, None, None));
    assert_eq!(kind, ErrorKind::Runtime);
    assert_eq!(message, "clamp(): at least one of 'min' or 'max' must not be None");
}

#[test]
fn clamp_takes_tensor_bounds_that_broadcast() {
    let t = torchfn::tensor([[0.0f64, 5.0, 10.0]]).unwrap();
    let lo = torchfn::tensor([[1.0f64], [6.0]]).unwrap();
    let hi = torchfn::tensor([4.0f64, 8.0, 9.0]).unwrap();
    let c = torchfn::clamp_tensor(&t, Some(&lo), Some(&hi)).unwrap();
    assert_eq!(c.shape().unwrap(), [2, 3]);
    same(&f64s(&c), &[1.0, 5.0, 9.0, 4.0, 6.0, 9.0]);
    // By name, numbers pick the number signature and tensors the tensor one.
    let by_number = torchfn::CLAMP.call(&[t.clone().into()], &Kwargs::from([("max", 4.0)])).unwrap();
    same(&f64s(by_number.as_tensor().unwrap()), &[0.0, 4.0, 4.0]);
    let by_tensor = Tensor::CLAMP.call(&[t.clone().into(), Value::None, hi.into()], &Kwargs::new()).unwrap();
    same(&f64s(by_tensor.as_tensor().unwrap()), &[0.0, 5.0, 9.0]);
    let bad = torchfn::tensor([1.0f64, 2.0]).unwrap();
    assert_eq!(kind_and_message(t.clamp_tensor(Some(&bad), None)).0, ErrorKind::Runtime);
}

#[test]
fn where_broadcasts_three_operands_and_promotes() {
    let cond = torchfn::tensor([[true], [false]]).unwrap();
    let x = torchfn::tensor([1i64, 2, 3]).unwrap();
    let out = torchfn::r#where(&cond, &x, &num(0.5)).unwrap();
    assert_eq!(out.shape().unwrap(), [2, 3]);
    assert_eq!(out.dtype().unwrap(), DType::Float32);
    assert_eq!(f32s(&out), [1.0, 2.0, 3.0, 0.5, 0.5, 0.5]);
    let ints = torchfn::r#where(&cond, &x, &num(-1)).unwrap();
    assert_eq!(i64s(&ints), [1, 2, 3, -1, -1, -1]);
    let y = torchfn::tensor([10.0f64]).unwrap();
    let mixed = torchfn::r#where(&torchfn::tensor([true, false, true]).unwrap(), &x, &y).unwrap();
    assert_eq!(f64s(&mixed), [1.0, 10.0, 3.0]);

    let (kind, message) = kind_and_message(torchfn::r#where(&x, &x, &x));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(message.starts_with("where(): expected condition to be a bool tensor"), "{message}");
    let short = torchfn::tensor([true, false]).unwrap();
    assert_eq!(kind_and_message(torchfn::r#where(&short, &x, &x)).0, ErrorKind::Runtime);
    assert!(torchfn::overrides::find_function("torchfn.where").is_some());
}

#[test]
fn to_converts_like_pytorch_and_returns_the_same_tensor_when_nothing_changes() {
    let t = torchfn::tensor([-1.7f32, -0.5, 0.0, 2.9, f32::NAN]).unwrap();
    assert_eq!(i64s(&t.to(DType::Int64, false, false).unwrap()), [-1, 0, 0, 2, 0]);
    assert_eq!(bools(&t.to(DType::Bool, false, false).unwrap()), [true, true, false, true, true]);
    let flags = torchfn::tensor([true, false]).unwrap();
    assert_eq!(f64s(&flags.to(DType::Float64, false, false).unwrap()), [1.0, 0.0]);
    let big = torchfn::tensor([3_000_000_000i64]).unwrap();
    assert_eq!(big.to(DType::Int32, false, false).unwrap().to_vec::<i32>().unwrap(), [3_000_000_000i64 as i32]);

    assert!(t.to(DType::Float32, false, false).unwrap().is(&t));
    let copy = t.to(DType::Float32, false, true).unwrap();
    assert!(!copy.is(&t));
    assert_ne!(copy.data_ptr().unwrap(), t.data_ptr().unwrap());

    let by_name = Tensor::TO.call(&[flags.into(), Value::DType(DType::Int32)], &Kwargs::new()).unwrap();
    assert_eq!(by_name.as_tensor().unwrap().to_vec::<i32>().unwrap(), [1, 0]);
}

#[test]
fn strided_views_are_read_in_logical_order() {
    let t = torchfn::tensor([[1.0f32, -2.0, 3.0], [-4.0, 5.0, -6.0]]).unwrap();
    let column = t.get((.., 1)).unwrap();
    assert_eq!(f32s(&column.abs().unwrap()), [2.0, 5.0]);
    let stepped = t.get((1, IndexItem::slice(None, None, 2))).unwrap();
    assert_eq!(bools(&stepped.lt(&column.get(..1).unwrap()).unwrap()), [true, true]);
    assert_eq!(f32s(&stepped.clamp(Some(Scalar::from(-5)), None).unwrap()), [-4.0, -5.0]);
}

#[derive(TensorSubclass)]
struct Tagged;

#[test]
fn subclasses_are_kept() {
    let t = torchfn::tensor([1.0f32, 4.0]).unwrap().as_subclass(Tagged).unwrap();
    assert!(t.sqrt().unwrap().is_instance::<Tagged>());
    assert!(torchfn::lt(&t, &num(2)).unwrap().is_instance::<Tagged>());
    assert!(torchfn::r#where(&torchfn::tensor([true, false]).unwrap(), &t, &num(0)).unwrap().is_instance::<Tagged>());
}
