//! In-place operations and `out=`: results written into existing tensors, through views, with
//! PyTorch's shape and cast rules.

use std::cell::RefCell;

use torchfn::prelude::*;
use torchfn::{ErrorKind, Kwargs};

fn f(values: &[f32]) -> Tensor {
    torchfn::tensor(values.to_vec()).unwrap()
}

fn i(values: &[i64]) -> Tensor {
    torchfn::tensor(values.to_vec()).unwrap()
}

#[test]
fn in_place_arithmetic_writes_into_self_and_returns_it() {
    let x = f(&[1.0, 2.0]);
    let same = x.add_(&f(&[10.0, 20.0]), 2).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [21.0, 42.0]);
    assert_eq!(same.to_vec::<f32>().unwrap(), [21.0, 42.0]);
    x.sub_(&Tensor::scalar(1), 1).unwrap();
    x.mul_(&Tensor::scalar(2)).unwrap();
    x.div_(&f(&[4.0, 8.0]), None).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [10.0, 10.25]);
    x.neg_().unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [-10.0, -10.25]);
    // The operator methods are the same operations.
    x.__iadd__(&f(&[10.0, 10.0])).unwrap();
    x.__imul__(&Tensor::scalar(4)).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [0.0, -1.0]);
    let mut y = x.clone();
    y += &f(&[1.0, 1.0]);
    y *= 3;
    y -= 1.5;
    y /= 0.5;
    assert_eq!(x.to_vec::<f32>().unwrap(), [3.0, -3.0], "the operators write into the shared storage");
}

#[test]
#[should_panic(expected = "can't be cast to the desired output type")]
fn an_assignment_operator_panics_where_its_method_errs() {
    let mut n = i(&[1]);
    n += 0.5;
}

#[test]
fn a_tensor_may_be_updated_from_itself() {
    let x = f(&[1.0, 2.0, 3.0]);
    x.add_(&x, 1).unwrap();
    x.mul_(&x).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [4.0, 16.0, 36.0]);
}

#[test]
fn writes_through_a_view_reach_the_base() {
    let base = torchfn::zeros([2, 3], None, None).unwrap();
    let row = base.get(1).unwrap();
    row.add_(&f(&[1.0, 2.0, 3.0]), 1).unwrap();
    base.get(0).unwrap().fill_(7).unwrap();
    assert_eq!(base.to_vec::<f32>().unwrap(), [7.0, 7.0, 7.0, 1.0, 2.0, 3.0]);
    base.zero_().unwrap();
    assert_eq!(row.to_vec::<f32>().unwrap(), [0.0; 3]);
}

#[test]
fn the_result_keeps_self_s_dtype_when_it_can_be_cast() {
    let x = f(&[1.5]);
    x.add_(&i(&[2]), 1).unwrap();
    assert_eq!((x.dtype().unwrap(), x.to_vec::<f32>().unwrap()), (DType::Float32, vec![3.5]));
    let n = i(&[1, 2]);
    let err = n.add_(&f(&[0.5, 0.5]), 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert!(err.to_string().contains("can't be cast to the desired output type"), "{err}");
    assert_eq!(n.to_vec::<i64>().unwrap(), [1, 2], "a failed in-place operation leaves self as it was");
    // A float Python number is a float too.
    assert!(n.mul_(&Tensor::scalar(1.5)).is_err());
    n.mul_(&Tensor::scalar(3)).unwrap();
    assert_eq!(n.to_vec::<i64>().unwrap(), [3, 6]);
}

#[test]
fn self_must_have_the_broadcast_shape() {
    let x = f(&[1.0, 2.0]);
    x.add_(&Tensor::scalar(1), 1).unwrap();
    let err = x.add_(&torchfn::ones([3, 2], None, None).unwrap(), 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert_eq!(err.to_string(), "add_(): output with shape [2] doesn't match the broadcast shape [3, 2]");
}

#[test]
fn out_receives_the_result_and_is_returned() {
    let out = torchfn::zeros([2], Some(DType::Float64), None).unwrap();
    let returned = torchfn::add_out(&f(&[1.0, 2.0]), &i(&[10, 20]), &out, 1).unwrap();
    assert_eq!(out.to_vec::<f64>().unwrap(), [11.0, 22.0]);
    returned.fill_(0).unwrap();
    assert_eq!(out.to_vec::<f64>().unwrap(), [0.0, 0.0], "the returned tensor is `out` itself");
    torchfn::mul_out(&f(&[3.0]), &f(&[4.0, 5.0]), &out).unwrap();
    assert_eq!(out.to_vec::<f64>().unwrap(), [12.0, 15.0]);
    let err = torchfn::div_out(&f(&[1.0]), &f(&[3.0]), &i(&[0]), None).unwrap_err();
    assert!(err.to_string().contains("can't be cast"), "{err}");
}

#[test]
fn by_name_the_out_keyword_picks_the_out_overload() {
    let out = torchfn::zeros([2], None, None).unwrap();
    let kwargs = Kwargs::from([("out", Value::from(&out)), ("alpha", Value::Int(3))]);
    let returned = torchfn::ADD.call(&[(&f(&[1.0, 1.0])).into(), (&f(&[1.0, 2.0])).into()], &kwargs).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), [4.0, 7.0]);
    assert_eq!(returned.to::<Tensor>().unwrap().to_vec::<f32>().unwrap(), [4.0, 7.0]);
}

#[test]
fn copy_broadcasts_and_converts_the_source() {
    let x = torchfn::zeros([2, 2], Some(DType::Int64), None).unwrap();
    x.copy_(&f(&[1.9, -2.9])).unwrap();
    assert_eq!(x.to_vec::<i64>().unwrap(), [1, -2, 1, -2]);
    let err = x.copy_(&f(&[1.0, 2.0, 3.0])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert!(
        err.to_string().starts_with("copy_(): the size of tensor a (2) must match the size of tensor b (3)"),
        "{err}"
    );
}

#[derive(TensorSubclass)]
#[torchfn(hook)]
struct Logged;

thread_local! {
    static LOG: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

impl TorchFunction for Logged {
    fn torch_function(
        cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        LOG.with(|l| l.borrow_mut().push(format!("{func} {}", args.len() + kwargs.len())));
        Tensor::torch_function(cls, func, types, args, kwargs)
    }
}

#[test]
fn in_place_operations_dispatch_and_keep_the_subclass() {
    let x = f(&[1.0]).as_subclass(Logged).unwrap();
    let returned = x.add_(&f(&[1.0]), 1).unwrap();
    assert!(returned.is_instance::<Logged>());
    assert_eq!(x.to_vec::<f32>().unwrap(), [2.0]);
    let out = f(&[0.0]).as_subclass(Logged).unwrap();
    torchfn::add_out(&f(&[1.0]), &f(&[2.0]), &out, 1).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), [3.0]);
    assert_eq!(
        LOG.with(|l| l.take()),
        ["Tensor.add_ 2", "torchfn.add 3"],
        "the out overload dispatches as torchfn.add, with alpha=1 left out as a Python caller leaves it"
    );
}

#[test]
fn large_writes_land_in_place_whatever_aliases_the_output() {
    // Large enough for the parallel loops; every aliasing case gives the plain result.
    let n = 1 << 18;
    let ramp = |k: f32| Tensor::from_vec((0..n).map(|i| i as f32 * k).collect::<Vec<_>>(), [n]).unwrap();
    let expect = |t: &Tensor, f: &dyn Fn(f32) -> f32| {
        let v = t.to_vec::<f32>().unwrap();
        assert!(v.iter().enumerate().all(|(i, &x)| x == f(i as f32)), "{:?}", &v[..4]);
    };
    let (x, y) = (ramp(1.0), ramp(2.0));
    let ptr = x.data_ptr().unwrap();
    torchfn::add_out(&x, &y, &x, 1).unwrap(); // out is the first operand
    expect(&x, &|i| 3.0 * i);
    torchfn::sub_out(&y, &x, &x, 1).unwrap(); // out is the second operand
    expect(&x, &|i| -i);
    x.mul_(&x).unwrap(); // both
    expect(&x, &|i| i * i);
    x.exp_().unwrap();
    x.log_().unwrap();
    assert_eq!(x.data_ptr().unwrap(), ptr, "in-place operations keep the storage");
    let out = torchfn::zeros([n], Some(DType::Float64), None).unwrap();
    torchfn::add_out(&y, &y, &out, 1).unwrap(); // converted on the way
    assert_eq!(out.to_vec::<f64>().unwrap()[5], 20.0);
    let strided = torchfn::zeros([n, 2], None, None).unwrap();
    let column = strided.select(1, 1).unwrap();
    torchfn::mul_out(&y, &Tensor::scalar(2), &column).unwrap();
    assert_eq!(strided.to_vec::<f32>().unwrap()[..6], [0.0, 0.0, 0.0, 4.0, 0.0, 8.0]);
}

#[test]
fn in_place_blends_write_their_result_whatever_aliases_it() {
    // In-place operations write their last step into their tensor: large enough for the
    // parallel loops, with the other operands aliasing the target, and into a strided view.
    let n = 1 << 18;
    let ramp = |k: f32| Tensor::from_vec((0..n).map(|i| (i % 100) as f32 * k).collect::<Vec<_>>(), [n]).unwrap();
    let check = |t: &Tensor, f: &dyn Fn(f32) -> f32| {
        let v = t.to_vec::<f32>().unwrap();
        assert!(v.iter().enumerate().all(|(i, &x)| x == f((i % 100) as f32)), "{:?}", &v[..4]);
    };
    let (x, y) = (ramp(1.0), ramp(2.0));
    let ptr = x.data_ptr().unwrap();
    x.lerp_(&y, &0.5.into()).unwrap(); // i + 0.5 * (2i - i)
    check(&x, &|i| 1.5 * i);
    x.lerp_(&x, &0.25.into()).unwrap(); // end is self
    check(&x, &|i| 1.5 * i);
    x.addcmul_(&x, &y, 0.5).unwrap(); // 1.5i + 0.5 * 1.5i * 2i
    check(&x, &|i| 1.5 * i + 0.5 * (1.5 * i) * (2.0 * i));
    let z = ramp(1.0);
    z.addcdiv_(&y, &ramp(4.0).add(&Tensor::scalar(1.0), 1).unwrap(), -2.0).unwrap();
    check(&z, &|i| i + -2.0 * (2.0 * i / (4.0 * i + 1.0)));
    // Negation, clamping (two steps into the target) and the sign-keeping operations too.
    let w = ramp(1.0);
    w.neg_().unwrap().clamp_(Some((-50.0).into()), Some((-10.0).into())).unwrap().abs_().unwrap();
    check(&w, &|i| i.clamp(10.0, 50.0));
    assert_eq!(x.data_ptr().unwrap(), ptr, "in-place operations keep the storage");
    let strided = torchfn::zeros([n, 2], None, None).unwrap();
    let column = strided.select(1, 1).unwrap();
    column.lerp_(&y, &0.5.into()).unwrap();
    assert_eq!(strided.to_vec::<f32>().unwrap()[..6], [0.0, 0.0, 0.0, 1.0, 0.0, 2.0]);
}

#[test]
fn threads_writing_into_each_other_s_operands_finish() {
    let n = 1 << 18;
    let (a, b) = (torchfn::ones([n], None, None).unwrap(), torchfn::ones([n], None, None).unwrap());
    std::thread::scope(|s| {
        for (x, y) in [(&a, &b), (&b, &a)] {
            s.spawn(move || {
                for _ in 0..20 {
                    x.add_(y, 0).unwrap();
                    torchfn::mul_out(y, &Tensor::scalar(1), x).unwrap();
                }
            });
        }
    });
    assert_eq!(a.to_vec::<f32>().unwrap()[0], 1.0);
}

#[test]
fn writes_into_a_whole_storage_are_seen_by_every_view() {
    // Large enough for the parallel loops and the buffer pool.
    let n = 1 << 19;
    let base = torchfn::zeros([2, n], None, None).unwrap();
    let (row, flat) = (base.get(1).unwrap(), torchfn::flatten(&base, 0, -1).unwrap());
    base.add_(&Tensor::scalar(1), 1).unwrap();
    flat.mul_(&Tensor::scalar(3)).unwrap();
    row.sub_(&Tensor::scalar(1), 1).unwrap();
    let values = base.to_vec::<f32>().unwrap();
    assert!(values[..n].iter().all(|&v| v == 3.0) && values[n..].iter().all(|&v| v == 2.0));
    let out = torchfn::zeros([2, n], None, None).unwrap();
    let out_row = out.get(0).unwrap();
    torchfn::add_out(&base, &base, &out, 1).unwrap();
    assert_eq!(out_row.to_vec::<f32>().unwrap()[0], 6.0);
}

#[test]
fn float_functions_write_into_out() {
    let out = torchfn::zeros([3], None, None).unwrap();
    assert!(torchfn::exp_out(&i(&[0, 1, 2]), &out).unwrap().is(&out));
    let e = std::f32::consts::E;
    assert_eq!(out.to_vec::<f32>().unwrap(), [1.0, e, 2f32.exp()]);
    torchfn::sqrt_out(&f(&[4.0, 9.0, 16.0]), &out).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), [2.0, 3.0, 4.0]);
    let wide = torchfn::zeros([3], Some(DType::Float64), None).unwrap();
    torchfn::reciprocal_out(&f(&[2.0, 4.0, 8.0]), &wide).unwrap();
    assert_eq!(wide.to_vec::<f64>().unwrap(), [0.5, 0.25, 0.125]);
    let err = torchfn::exp_out(&f(&[1.0]), &i(&[0])).unwrap_err();
    assert!(err.to_string().starts_with("exp(): result type"), "{err}");
    let err = torchfn::sin_out(&f(&[1.0, 2.0]), &out).unwrap_err();
    assert!(err.to_string().contains("output with shape [3]"), "{err}");
    let by_name = torchfn::TANH.call(&[(&f(&[0.0, 0.0, 0.0])).into()], &Kwargs::from([("out", Value::from(&out))]));
    assert!(by_name.unwrap().to::<Tensor>().unwrap().is(&out));
    assert_eq!(out.to_vec::<f32>().unwrap(), [0.0; 3]);
}

#[test]
fn writing_into_a_huge_expanded_tensor_is_an_error_or_one_write_not_an_abort() {
    // Found by tests/api/no_panic.rs: `copy_` read its 2^40 source values before seeing that the
    // destination's elements share memory, and the allocation failure aborted the process.
    let one = torchfn::zeros([1], None, None).unwrap();
    let huge = one.expand([1 << 40]).unwrap();
    let err = huge.copy_(&f(&[1.0])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert_eq!(
        err.to_string(),
        "copy_(): unsupported operation: more than one element of the written-to tensor refers to a single memory \
         location"
    );
    // Filling writes the one element all of them share, as PyTorch's fill_ and zero_ do.
    assert!(huge.fill_(2).unwrap().is(&huge));
    assert_eq!(one.to_vec::<f32>().unwrap(), [2.0]);
    let row = torchfn::zeros([3], None, None).unwrap();
    let rows = row.expand([2, 3]).unwrap();
    rows.zero_().unwrap();
    rows.select(1, 1).unwrap().fill_(5).unwrap();
    assert_eq!(rows.to_vec::<f32>().unwrap(), [0.0, 5.0, 0.0, 0.0, 5.0, 0.0]);
    assert_eq!(huge.add_(&f(&[1.0]), 1).unwrap_err().kind(), ErrorKind::Runtime);
    // An expanded destination without elements takes nothing, and that is fine.
    let empty = torchfn::zeros([1, 3], None, None).unwrap().expand([0, 3]).unwrap();
    assert_eq!(empty.copy_(&f(&[1.0])).unwrap().shape().unwrap(), [0, 3]);
}
