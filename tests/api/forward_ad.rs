//! Forward-mode AD (`torchfn::autograd::forward_ad`) and the functional `torchfn::func::{jvp,
//! vjp}`: levels, dual tensors, views and in-place operations on them, and misuse. Every
//! operation's formulas are checked by gradcheck's forward-mode check and by grads.json.

use torchfn::autograd::forward_ad::{dual_level, make_dual, unpack_dual};
use torchfn::prelude::*;

fn t(values: &[f64]) -> Tensor {
    torchfn::tensor(values.to_vec()).unwrap()
}

fn v(t: &Tensor) -> Vec<f64> {
    t.contiguous().unwrap().to_vec::<f64>().unwrap()
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn levels_do_not_nest_and_take_their_tangents_with_them() {
    let _serial = serial();
    let err = make_dual(&t(&[1.0]), &t(&[1.0])).unwrap_err();
    assert!(err.to_string().contains("no level exists"), "{err}");
    let level = dual_level().unwrap();
    assert_eq!(
        dual_level().unwrap_err().to_string(),
        "dual_level(): Nested forward mode AD is not supported at the moment"
    );
    let dual = make_dual(&t(&[1.0, 2.0]), &t(&[3.0, 4.0])).unwrap();
    let y = dual.exp().unwrap();
    assert!(unpack_dual(&y).unwrap().tangent.is_some());
    drop(level);
    assert!(unpack_dual(&y).unwrap().tangent.is_none(), "the level's tangents are gone");
    let _again = dual_level().unwrap();
    assert!(unpack_dual(&y).unwrap().tangent.is_none(), "and do not come back with a new level");
}

#[test]
fn make_dual_checks_its_arguments() {
    let _serial = serial();
    let _level = dual_level().unwrap();
    let err = make_dual(&t(&[1.0, 2.0]), &t(&[1.0])).unwrap_err();
    assert!(err.to_string().contains("different size"), "{err}");
    let ints = torchfn::tensor([1i64, 2]).unwrap();
    assert_eq!(make_dual(&ints, &t(&[1.0, 2.0])).unwrap_err().kind(), torchfn::ErrorKind::Value);
    let f32s = torchfn::tensor([1.0f32, 2.0]).unwrap();
    assert!(make_dual(&f32s, &t(&[1.0, 2.0])).unwrap_err().to_string().contains("dtype"));
    // The dual is a view of the primal: same memory, its own tangent.
    let x = t(&[1.0, 2.0]);
    let dual = make_dual(&x, &t(&[0.5, 0.5])).unwrap();
    assert_eq!(dual.data_ptr().unwrap(), x.data_ptr().unwrap());
    assert!(unpack_dual(&x).unwrap().tangent.is_none());
    let unpacked = unpack_dual(&dual).unwrap();
    assert!(unpack_dual(&unpacked.primal).unwrap().tangent.is_none(), "the primal carries no tangent");
}

#[test]
fn tangents_follow_views_and_in_place_writes() {
    let _serial = serial();
    let _level = dual_level().unwrap();
    let base = make_dual(&t(&[1.0, 2.0, 3.0, 4.0]), &t(&[1.0, 1.0, 1.0, 1.0])).unwrap().reshape(&[2, 2]).unwrap();
    // A view's tangent is the same view of the tangent.
    let column = base.select(1, 1).unwrap();
    assert_eq!(v(&unpack_dual(&column).unwrap().tangent.unwrap()), [1.0, 1.0]);
    // An in-place write updates the tangent, and through a view, the base's.
    let x = base.copy().unwrap();
    x.mul_(&t(&[10.0])).unwrap();
    assert_eq!(v(&unpack_dual(&x).unwrap().tangent.unwrap()), [10.0, 10.0, 10.0, 10.0]);
    let row = x.select(0, 0).unwrap();
    row.zero_().unwrap();
    assert_eq!(v(&unpack_dual(&x).unwrap().tangent.unwrap()), [0.0, 0.0, 10.0, 10.0]);
    // A plain tensor written with a dual one takes its tangent.
    let plain = torchfn::zeros([2, 2], DType::Float64, None).unwrap();
    plain.copy_(&base).unwrap();
    assert_eq!(v(&unpack_dual(&plain).unwrap().tangent.unwrap()), [1.0, 1.0, 1.0, 1.0]);
}

#[test]
fn forward_and_reverse_mode_compose() {
    let _serial = serial();
    // The tangent is differentiable: d/dx (d/dt sin(x + t)) = -sin(x).
    let x = t(&[0.5]).requires_grad_(true).unwrap();
    let tangent = {
        let _level = dual_level().unwrap();
        let y = make_dual(&x, &t(&[1.0])).unwrap().sin().unwrap();
        unpack_dual(&y).unwrap().tangent.unwrap()
    };
    assert!((v(&tangent)[0] - 0.5f64.cos()).abs() < 1e-15);
    let d = torchfn::autograd::grad(&[tangent], &[x], None, None, false, false).unwrap()[0].clone().unwrap();
    assert!((v(&d)[0] + 0.5f64.sin()).abs() < 1e-15);
}

#[test]
fn func_jvp_and_vjp() {
    let _serial = serial();
    let f = |x: &[Tensor]| -> torchfn::Result<(Tensor, Tensor)> { Ok(((&x[0] * &x[1])?, x[0].exp()?)) };
    let (a, b) = (t(&[1.0, 2.0]), t(&[3.0, 4.0]));
    let ((prod, exp), (d_prod, d_exp)) =
        torchfn::func::jvp(f, &[a.clone(), b.clone()], &[t(&[1.0, 0.0]), t(&[0.0, 1.0])]).unwrap();
    assert_eq!(v(&prod), [3.0, 8.0]);
    assert_eq!(v(&d_prod), [3.0, 2.0]); // b·da + a·db
    assert_eq!(v(&d_exp), [1.0f64.exp(), 0.0]);
    assert!(unpack_dual(&exp).unwrap().tangent.is_none());
    let err = torchfn::func::jvp(f, std::slice::from_ref(&a), &[]).unwrap_err();
    assert!(err.to_string().contains("same length"), "{err}");

    let (out, pullback) = torchfn::func::vjp(f, &[a.clone(), b.clone()]).unwrap();
    assert_eq!(v(&out.0), [3.0, 8.0]);
    assert!(!out.0.requires_grad().unwrap());
    let grads = pullback((t(&[1.0, 1.0]), t(&[0.0, 0.0]))).unwrap();
    assert_eq!(v(&grads[0]), [3.0, 4.0]);
    assert_eq!(v(&grads[1]), [1.0, 2.0]);
    // Again, with other cotangents.
    let grads = pullback((t(&[0.0, 0.0]), t(&[1.0, 1.0]))).unwrap();
    assert_eq!(v(&grads[0]), [1.0f64.exp(), 2.0f64.exp()]);
    assert_eq!(v(&grads[1]), [0.0, 0.0], "no dependence gives zeros");
}
