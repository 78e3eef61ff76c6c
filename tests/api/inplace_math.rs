//! The in-place forms of elementwise math, comparisons and logic (`exp_`, `pow_`, `clamp_`,
//! `eq_`, `logical_and_`, ...): values written into `self`, which comes back, through views,
//! with PyTorch's cast and shape rules, by name and through a subclass's hook.

use std::cell::RefCell;

use torchfn::prelude::*;
use torchfn::{ErrorKind, Kwargs};

fn f64s(values: &[f64]) -> Tensor {
    torchfn::tensor(values.to_vec()).unwrap()
}

fn f32s(values: &[f32]) -> Tensor {
    torchfn::tensor(values.to_vec()).unwrap()
}

fn i64s(values: &[i64]) -> Tensor {
    torchfn::tensor(values.to_vec()).unwrap()
}

fn bools(values: &[bool]) -> Tensor {
    torchfn::tensor(values.to_vec()).unwrap()
}

fn num(v: impl Into<Scalar>) -> Tensor {
    Tensor::scalar(v)
}

/// Runs `op` on a fresh `f64` tensor of `input`; checks that it returns that very tensor and
/// gives back what it wrote.
fn in_place(input: &[f64], op: impl Fn(&Tensor) -> Result<Tensor>) -> Vec<f64> {
    let t = f64s(input);
    let returned = op(&t).unwrap();
    assert!(returned.is(&t), "an in-place method returns self");
    assert_eq!(t.dtype().unwrap(), DType::Float64);
    t.to_vec::<f64>().unwrap()
}

fn close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "got {got:?}, expected {want:?}");
    }
}

fn runtime_error(r: Result<Tensor>) -> String {
    let err = r.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime, "{err}");
    err.to_string()
}

#[test]
fn float_functions_write_their_values_into_self() {
    use std::f64::consts::{E, FRAC_PI_4, LN_2};
    close(&in_place(&[0.0, 1.0], Tensor::exp_), &[1.0, E]);
    close(&in_place(&[1.0, E], Tensor::log_), &[0.0, 1.0]);
    close(&in_place(&[0.0, 1.0], Tensor::log1p_), &[0.0, LN_2]);
    close(&in_place(&[0.0, LN_2], Tensor::expm1_), &[0.0, 1.0]);
    close(&in_place(&[4.0, 9.0], Tensor::sqrt_), &[2.0, 3.0]);
    close(&in_place(&[4.0, 0.25], Tensor::rsqrt_), &[0.5, 2.0]);
    close(&in_place(&[0.0, std::f64::consts::FRAC_PI_2], Tensor::sin_), &[0.0, 1.0]);
    close(&in_place(&[0.0, std::f64::consts::PI], Tensor::cos_), &[1.0, -1.0]);
    close(&in_place(&[0.0, FRAC_PI_4], Tensor::tan_), &[0.0, 1.0]);
    close(&in_place(&[0.0, 0.5], Tensor::tanh_), &[0.0, 0.462_117_157_260_009_8]);
    close(&in_place(&[0.0, 2.0], Tensor::sigmoid_), &[0.5, 0.880_797_077_977_882_3]);
    close(&in_place(&[0.0, 1.0], Tensor::erf_), &[0.0, 0.842_700_792_949_714_9]);
    close(&in_place(&[2.0, -0.5], Tensor::reciprocal_), &[0.5, -2.0]);
}

#[test]
fn rounding_and_dtype_keeping_functions_write_into_self() {
    let x = [-1.5, -0.5, 0.5, 1.25, 2.5];
    assert_eq!(in_place(&x, Tensor::ceil_), [-1.0, -0.0, 1.0, 2.0, 3.0]);
    assert_eq!(in_place(&x, Tensor::floor_), [-2.0, -1.0, 0.0, 1.0, 2.0]);
    assert_eq!(in_place(&x, Tensor::trunc_), [-1.0, -0.0, 0.0, 1.0, 2.0]);
    assert_eq!(in_place(&x, |t| t.round_(0)), [-2.0, -0.0, 0.0, 1.0, 2.0]);
    assert_eq!(in_place(&x, |t| t.round_(1)), [-1.5, -0.5, 0.5, 1.2, 2.5]);
    assert_eq!(in_place(&x, Tensor::abs_), [1.5, 0.5, 0.5, 1.25, 2.5]);
    assert_eq!(in_place(&x, Tensor::sign_), [-1.0, -1.0, 1.0, 1.0, 1.0]);
    assert_eq!(in_place(&x, Tensor::square_), [2.25, 0.25, 0.25, 1.5625, 6.25]);
    assert_eq!(in_place(&x, Tensor::relu_), [0.0, 0.0, 0.5, 1.25, 2.5]);
    // Integer tensors keep their dtype where the result is an integer too.
    let n = i64s(&[-3, 0, 4]);
    n.abs_().unwrap().square_().unwrap().relu_().unwrap().floor_().unwrap();
    assert_eq!(n.to_vec::<i64>().unwrap(), [9, 0, 16]);
    n.sub_(&num(5), 1).unwrap().sign_().unwrap();
    assert_eq!(n.to_vec::<i64>().unwrap(), [1, -1, 1]);
    let b = bools(&[true, false]);
    assert!(b.sign_().unwrap().is(&b));
    assert_eq!(b.to_vec::<bool>().unwrap(), [true, false]);
}

#[test]
fn binary_functions_write_into_self() {
    assert_eq!(in_place(&[1.0, 2.0, 3.0], |t| t.pow_(&num(2))), [1.0, 4.0, 9.0]);
    assert_eq!(in_place(&[4.0, 9.0], |t| t.pow_(&num(0.5))), [2.0, 3.0]);
    assert_eq!(in_place(&[2.0, 2.0], |t| t.pow_(&f64s(&[3.0, -1.0]))), [8.0, 0.5]);
    close(
        &in_place(&[1.0, -1.0], |t| t.atan2_(&f64s(&[1.0, 0.0]))),
        &[std::f64::consts::FRAC_PI_4, -std::f64::consts::FRAC_PI_2],
    );
    assert_eq!(in_place(&[-7.0, 7.0], |t| t.fmod_(&num(3))), [-1.0, 1.0]);
    assert_eq!(in_place(&[-7.0, 7.0], |t| t.remainder_(&num(3))), [2.0, 1.0]);
    let n = i64s(&[-7, 7, 2]);
    n.remainder_(&num(3)).unwrap().pow_(&i64s(&[3, 2, 1])).unwrap();
    assert_eq!(n.to_vec::<i64>().unwrap(), [8, 1, 2]);
    n.fmod_(&i64s(&[5, 5, 5])).unwrap();
    assert_eq!(n.to_vec::<i64>().unwrap(), [3, 1, 2]);
}

#[test]
fn clamp_takes_number_or_tensor_bounds() {
    let x = [-2.0, 0.25, 3.0];
    assert_eq!(in_place(&x, |t| t.clamp_(Some((-1.0).into()), Some(0.5.into()))), [-1.0, 0.25, 0.5]);
    assert_eq!(in_place(&x, |t| t.clamp_(None, Some(0.into()))), [-2.0, 0.0, 0.0]);
    let (lo, hi) = (f64s(&[0.0, 0.5, 0.0]), f64s(&[1.0]));
    assert_eq!(in_place(&x, |t| t.clamp_tensor_(Some(&lo), Some(&hi))), [0.0, 0.5, 1.0]);
    let n = i64s(&[-5, 5]);
    n.clamp_(Some(0.into()), None).unwrap();
    assert_eq!(n.to_vec::<i64>().unwrap(), [0, 5]);
    let msg = runtime_error(n.clamp_(None, None));
    assert_eq!(msg, "clamp_(): at least one of 'min' or 'max' must not be None");
}

#[test]
fn comparisons_and_logic_write_one_or_zero_in_self_s_dtype() {
    let other = f64s(&[1.0, 2.0, 3.0]);
    let x = [2.0, 2.0, 2.0];
    assert_eq!(in_place(&x, |t| t.eq_(&other)), [0.0, 1.0, 0.0]);
    assert_eq!(in_place(&x, |t| t.ne_(&other)), [1.0, 0.0, 1.0]);
    assert_eq!(in_place(&x, |t| t.lt_(&other)), [0.0, 0.0, 1.0]);
    assert_eq!(in_place(&x, |t| t.le_(&other)), [0.0, 1.0, 1.0]);
    assert_eq!(in_place(&x, |t| t.gt_(&other)), [1.0, 0.0, 0.0]);
    assert_eq!(in_place(&x, |t| t.ge_(&other)), [1.0, 1.0, 0.0]);
    let logic = [0.0, 2.5, f64::NAN, 0.0];
    let mask = bools(&[true, true, false, false]);
    assert_eq!(in_place(&logic, |t| t.logical_and_(&mask)), [0.0, 1.0, 0.0, 0.0]);
    assert_eq!(in_place(&logic, |t| t.logical_or_(&mask)), [1.0, 1.0, 1.0, 0.0]);
    assert_eq!(in_place(&logic, |t| t.logical_xor_(&mask)), [1.0, 0.0, 1.0, 0.0]);
    assert_eq!(in_place(&logic, Tensor::logical_not_), [1.0, 0.0, 0.0, 1.0]);
    // An int tensor compared with a float compares as floats, and keeps its dtype.
    let n = i64s(&[1, 2, 3]);
    n.gt_(&num(1.5)).unwrap();
    assert_eq!((n.dtype().unwrap(), n.to_vec::<i64>().unwrap()), (DType::Int64, vec![0, 1, 1]));
    // A bool tensor stays bool.
    let b = bools(&[true, false, true]);
    b.logical_xor_(&i64s(&[0, 0, 7])).unwrap().eq_(&num(false)).unwrap();
    assert_eq!((b.dtype().unwrap(), b.to_vec::<bool>().unwrap()), (DType::Bool, vec![false, true, true]));
}

#[test]
fn a_result_that_cannot_be_cast_to_self_s_dtype_is_refused_and_self_is_left_alone() {
    let n = i64s(&[1, 4]);
    assert_eq!(
        runtime_error(n.exp_()),
        "exp_(): result type torch.float32 can't be cast to the desired output type torch.int64"
    );
    assert!(runtime_error(n.sqrt_()).starts_with("sqrt_(): result type torch.float32"));
    assert!(runtime_error(n.sigmoid_()).contains("can't be cast"));
    assert!(runtime_error(n.atan2_(&i64s(&[1, 1]))).contains("can't be cast"));
    assert!(runtime_error(n.pow_(&num(0.5))).starts_with("pow_(): result type torch.float32"));
    assert!(runtime_error(n.clamp_(Some(0.5.into()), None)).contains("can't be cast"));
    assert!(runtime_error(n.remainder_(&f32s(&[1.5]))).contains("can't be cast"));
    assert_eq!(n.to_vec::<i64>().unwrap(), [1, 4], "a refused in-place operation leaves self as it was");
    // int64 into bool is refused too: the square of a bool tensor is int64.
    let b = bools(&[true]);
    assert!(runtime_error(b.square_()).starts_with("square_(): result type torch.int64"));
    // Errors of the operation itself name the in-place method.
    let err = b.abs_().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotImplemented);
    assert!(err.to_string().starts_with("abs_(): not implemented for bool tensors"), "{err}");
    assert!(runtime_error(n.fmod_(&i64s(&[0]))).starts_with("fmod_(): ZeroDivisionError"));
    // A float32 tensor takes a float64 result, rounded.
    let x = f32s(&[1.0]);
    x.pow_(&f64s(&[0.5])).unwrap();
    assert_eq!((x.dtype().unwrap(), x.to_vec::<f32>().unwrap()), (DType::Float32, vec![1.0]));
}

#[test]
fn the_other_operand_broadcasts_to_self_but_self_does_not_grow() {
    let x = torchfn::ones([2, 3], Some(DType::Float64), None).unwrap();
    x.mul_(&num(2)).unwrap().pow_(&f64s(&[0.0, 1.0, 2.0])).unwrap();
    assert_eq!(x.to_vec::<f64>().unwrap(), [1.0, 2.0, 4.0, 1.0, 2.0, 4.0]);
    x.lt_(&f64s(&[1.5, 3.0]).reshape(&[2, 1]).unwrap()).unwrap();
    assert_eq!(x.to_vec::<f64>().unwrap(), [1.0, 0.0, 0.0, 1.0, 1.0, 0.0]);

    let row = f64s(&[1.0, 2.0, 3.0]);
    let grown = torchfn::ones([2, 3], Some(DType::Float64), None).unwrap();
    assert_eq!(
        runtime_error(row.pow_(&grown)),
        "pow_(): output with shape [3] doesn't match the broadcast shape [2, 3]"
    );
    assert!(runtime_error(row.eq_(&grown)).starts_with("eq_(): output with shape [3]"));
    assert!(runtime_error(row.logical_or_(&grown)).starts_with("logical_or_(): output with shape [3]"));
    let low = f64s(&[0.0, 0.0]).reshape(&[2, 1]).unwrap();
    assert!(runtime_error(row.clamp_tensor_(Some(&low), None)).starts_with("clamp_(): output with shape [3]"));
    assert_eq!(row.to_vec::<f64>().unwrap(), [1.0, 2.0, 3.0]);
}

#[test]
fn writes_through_views_reach_the_base() {
    let base = torchfn::zeros([2, 3], None, None).unwrap();
    base.get(1).unwrap().exp_().unwrap();
    assert_eq!(base.to_vec::<f32>().unwrap(), [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    // A strided column of the transpose.
    let column = base.t().unwrap().get(0).unwrap();
    column.add_(&num(-3), 1).unwrap().clamp_(Some((-2).into()), None).unwrap().abs_().unwrap();
    assert_eq!(base.to_vec::<f32>().unwrap(), [2.0, 0.0, 0.0, 2.0, 1.0, 1.0]);
    base.get((.., 1..)).unwrap().eq_(&num(1)).unwrap().logical_not_().unwrap();
    assert_eq!(base.to_vec::<f32>().unwrap(), [2.0, 1.0, 1.0, 2.0, 0.0, 0.0]);
}

#[test]
fn by_name_the_in_place_methods_bind_like_python() {
    let t = f32s(&[0.0, 1.0]);
    let returned = Tensor::EXP_.call(&[(&t).into()], &Kwargs::new()).unwrap().to::<Tensor>().unwrap();
    assert!(returned.is(&t));
    assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, std::f32::consts::E]);
    assert_eq!(Tensor::EXP_.qualified_name(), "Tensor.exp_");

    let r = f32s(&[1.25, 2.75]);
    Tensor::ROUND_.call(&[(&r).into()], &Kwargs::from([("decimals", Value::Int(1))])).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [1.2, 2.8]);

    // Number bounds and tensor bounds pick the two signatures of `clamp_`.
    let c = f32s(&[-2.0, 0.0, 2.0]);
    Tensor::CLAMP_.call(&[(&c).into()], &Kwargs::from([("min", Value::Float(-1.0))])).unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap(), [-1.0, 0.0, 2.0]);
    let hi = f32s(&[1.0, -0.5, 1.0]);
    Tensor::CLAMP_.call(&[(&c).into()], &Kwargs::from([("max", Value::from(&hi))])).unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap(), [-1.0, -0.5, 1.0]);

    let n = i64s(&[2]);
    let err = Tensor::POW_.call(&[(&n).into(), 0.5.into()], &Kwargs::new()).unwrap_err();
    assert!(err.to_string().contains("can't be cast"), "{err}");
}

#[derive(TensorSubclass)]
#[torchfn(hook)]
struct Tagged {
    tag: u32,
}

thread_local! {
    static SEEN: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

impl TorchFunction for Tagged {
    fn torch_function(
        cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        SEEN.with(|s| s.borrow_mut().push(func.qualified_name()));
        Tensor::torch_function(cls, func, types, args, kwargs)
    }
}

#[test]
fn a_subclass_keeps_its_class_and_attributes_through_in_place_methods() {
    let s = f32s(&[-1.0, 4.0]).as_subclass(Tagged { tag: 3 }).unwrap();
    let returned = s.relu_().unwrap().sqrt_().unwrap().clamp_(None, Some(1.5.into())).unwrap();
    assert!(returned.is_instance::<Tagged>());
    assert_eq!(returned.attrs::<Tagged>().map(|t| t.tag), Some(3));
    assert!(returned.is(&s), "the very same object comes back");
    assert_eq!(s.to_vec::<f32>().unwrap(), [0.0, 1.5]);
    // A plain `self` with a subclass operand: as in PyTorch, the hook sees the call and the
    // default hook returns `self` seen as the subclass (a view of the same data); `self`
    // itself stays plain.
    let plain = f32s(&[1.0, 2.0]);
    let viewed = plain.ge_(&s).unwrap();
    assert_eq!(SEEN.with(|s| s.take()), ["Tensor.relu_", "Tensor.sqrt_", "Tensor.clamp_", "Tensor.ge_"]);
    assert!(viewed.is_instance::<Tagged>() && !plain.is_instance::<Tagged>());
    assert_eq!(viewed.data_ptr().unwrap(), plain.data_ptr().unwrap());
    assert_eq!(plain.to_vec::<f32>().unwrap(), [1.0, 1.0]);
}
