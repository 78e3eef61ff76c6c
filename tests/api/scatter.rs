//! `scatter` (writing, or adding with `reduce="add"`) and `scatter_reduce`'s `amax` and `amin`:
//! values and gradients as PyTorch 2.15 gives them (the expected numbers below are its),
//! including ties, which share the gradient evenly, and NaN, which wins.

use torchfn::prelude::*;

fn t(rows: &[&[f32]]) -> Tensor {
    let data: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
    Tensor::from_vec(data, [rows.len(), rows[0].len()]).unwrap()
}

fn index(rows: &[&[i64]]) -> Tensor {
    let data: Vec<i64> = rows.iter().flat_map(|r| r.iter().copied()).collect();
    Tensor::from_vec(data, [rows.len(), rows[0].len()]).unwrap()
}

fn values(x: &Tensor) -> Vec<f32> {
    x.to_vec::<f32>().unwrap()
}

#[test]
fn scatter_writes_adds_and_differentiates_as_pytorch() {
    let z = torchfn::zeros([2, 3], None, None).unwrap();
    let idx = index(&[&[2, 0], &[1, 1]]);
    let src = t(&[&[1.0, 2.0], &[3.0, 4.0]]);
    // Row 1 writes position 1 twice: the last write wins.
    assert_eq!(values(&torchfn::scatter(&z, 1, &idx, &src, None).unwrap()), [2.0, 0.0, 1.0, 0.0, 4.0, 0.0]);
    assert_eq!(values(&torchfn::scatter(&z, 1, &idx, &src, Some("add")).unwrap()), [2.0, 0.0, 1.0, 0.0, 7.0, 0.0]);
    let filled = torchfn::scatter_value(&z, 0, &index(&[&[1, 0, 1]]), Scalar::Float(-1.5), None).unwrap();
    assert_eq!(values(&filled), [0.0, -1.5, 0.0, -1.5, 0.0, -1.5]);
    // Gradients: zero where written for the input, gathered for every source element.
    let a = torchfn::ones([2, 3], None, None).unwrap().requires_grad_(true).unwrap();
    let b = src.requires_grad_(true).unwrap();
    let w = torchfn::arange(6, DType::Float32, None).unwrap().reshape(&[2, 3]).unwrap();
    (&torchfn::scatter(&a, 1, &idx, &b, None).unwrap() * &w).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(values(&a.grad().unwrap().unwrap()), [0.0, 1.0, 0.0, 3.0, 0.0, 5.0]);
    assert_eq!(values(&b.grad().unwrap().unwrap()), [2.0, 0.0, 4.0, 4.0]);
    // reduce="multiply", as PyTorch 2.15 gives it: [1, 2, 3, 4] scattered by [0, 0, 2] with
    // [2, 3, 5] is [6, 2, 15, 4], with the value 2 it is [4, 2, 6, 4]; integers stay integers.
    let x = torchfn::tensor([1.0f32, 2.0, 3.0, 4.0]).unwrap().requires_grad_(true).unwrap();
    let positions = torchfn::tensor([0i64, 0, 2]).unwrap();
    let factors = torchfn::tensor([2.0f32, 3.0, 5.0]).unwrap();
    let product = torchfn::scatter(&x, 0, &positions, &factors, Some("multiply")).unwrap();
    assert_eq!(values(&product), [6.0, 2.0, 15.0, 4.0]);
    let twice = torchfn::scatter_value(&x, 0, &positions, Scalar::Float(2.0), Some("multiply")).unwrap();
    assert_eq!(values(&twice), [4.0, 2.0, 6.0, 4.0]);
    let ints = torchfn::tensor([1i64, 2, 3, 4]).unwrap();
    let int_product = ints.scatter(0, &positions, &torchfn::tensor([2i64, 3, 5]).unwrap(), Some("multiply")).unwrap();
    assert_eq!(int_product.to_vec::<i64>().unwrap(), [6, 2, 15, 4]);
    product.sum().unwrap().backward().unwrap();
    assert_eq!(values(&x.grad().unwrap().unwrap()), [6.0, 1.0, 5.0, 1.0]);
    let err = torchfn::scatter(&z, 1, &idx, &src, Some("max")).unwrap_err();
    assert!(err.to_string().contains("reduce argument must be either add or multiply"), "{err}");
}

#[test]
fn scatter_reduce_takes_extremes_with_pytorch_s_gradients() {
    let weights = t(&[&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]]);
    let idx = index(&[&[2, 2], &[0, 1]]);
    // (reduce, include_self) -> PyTorch's result, input gradient, source gradient.
    type Case = (&'static str, bool, [f32; 6], [f32; 6], [f32; 4]);
    let cases: [Case; 4] = [
        ("amax", true, [1.0, 2.0, 8.0, 9.0, 5.0, 6.0], [1.0, 2.0, 0.0, 0.0, 5.0, 6.0], [0.0, 3.0, 4.0, 0.0]),
        ("amax", false, [1.0, 2.0, 8.0, 9.0, 2.0, 6.0], [1.0, 2.0, 0.0, 0.0, 0.0, 6.0], [0.0, 3.0, 4.0, 5.0]),
        ("amin", true, [1.0, 2.0, 3.0, 4.0, 2.0, 6.0], [1.0, 2.0, 3.0, 4.0, 0.0, 6.0], [0.0, 0.0, 0.0, 5.0]),
        ("amin", false, [1.0, 2.0, 7.0, 9.0, 2.0, 6.0], [1.0, 2.0, 0.0, 0.0, 0.0, 6.0], [3.0, 0.0, 4.0, 5.0]),
    ];
    for (reduce, include_self, out, grad_x, grad_src) in cases {
        let x = t(&[&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]]).requires_grad_(true).unwrap();
        let src = t(&[&[7.0, 8.0], &[9.0, 2.0]]).requires_grad_(true).unwrap();
        let y = torchfn::scatter_reduce(&x, 1, &idx, &src, reduce, include_self).unwrap();
        assert_eq!(values(&y), out, "{reduce}, include_self={include_self}");
        (&y * &weights).unwrap().sum().unwrap().backward().unwrap();
        assert_eq!(values(&x.grad().unwrap().unwrap()), grad_x, "{reduce}, include_self={include_self}");
        assert_eq!(values(&src.grad().unwrap().unwrap()), grad_src, "{reduce}, include_self={include_self}");
    }
    // Ties share the gradient evenly: 5 three times at position 0.
    let x = torchfn::tensor([5.0f32, 1.0]).unwrap().requires_grad_(true).unwrap();
    let src = torchfn::tensor([5.0f32, 5.0, 0.0]).unwrap().requires_grad_(true).unwrap();
    let y = torchfn::scatter_reduce(&x, 0, &torchfn::tensor([0i64, 0, 1]).unwrap(), &src, "amax", true).unwrap();
    assert_eq!(values(&y), [5.0, 1.0]);
    y.sum().unwrap().backward().unwrap();
    let third = 1.0f32 / 3.0;
    assert_eq!(values(&x.grad().unwrap().unwrap()), [third, 1.0]);
    assert_eq!(values(&src.grad().unwrap().unwrap()), [third, third, 0.0]);
    // NaN wins, for the smallest too, and its position's gradients are NaN (PyTorch's: none of
    // its elements equals the result, so the shares divide by zero).
    let x = torchfn::tensor([1.0f32, 2.0]).unwrap().requires_grad_(true).unwrap();
    let src = torchfn::tensor([f32::NAN, 0.0]).unwrap().requires_grad_(true).unwrap();
    let y = torchfn::scatter_reduce(&x, 0, &torchfn::tensor([0i64, 1]).unwrap(), &src, "amin", true).unwrap();
    let got = values(&y);
    assert!(got[0].is_nan() && got[1] == 0.0, "{got:?}");
    y.sum().unwrap().backward().unwrap();
    let (gx, gs) = (values(&x.grad().unwrap().unwrap()), values(&src.grad().unwrap().unwrap()));
    assert!(gx[0].is_nan() && gx[1] == 0.0 && gs[0].is_nan() && gs[1] == 1.0, "{gx:?} {gs:?}");
}

/// `scatter_reduce`'s product, exact (integers too), with gradients through zeros, as PyTorch
/// 2.15 gives them.
#[test]
fn scatter_reduce_multiplies_as_pytorch() {
    let weights = t(&[&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]]);
    let idx = index(&[&[2, 2], &[0, 2]]);
    type Case = (bool, [f32; 6], [f32; 6], [f32; 4]);
    let cases: [Case; 2] = [
        (true, [1.0, 2.0, 0.0, 36.0, 5.0, 12.0], [1.0, 2.0, 0.0, 36.0, 5.0, 12.0], [0.0, 63.0, 16.0, 36.0]),
        (false, [1.0, 2.0, 0.0, 9.0, 5.0, 2.0], [1.0, 2.0, 0.0, 0.0, 5.0, 0.0], [0.0, 21.0, 4.0, 6.0]),
    ];
    for (include_self, out, grad_x, grad_src) in cases {
        let x = t(&[&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]]).requires_grad_(true).unwrap();
        let src = t(&[&[7.0, 0.0], &[9.0, 2.0]]).requires_grad_(true).unwrap();
        let y = torchfn::scatter_reduce(&x, 1, &idx, &src, "prod", include_self).unwrap();
        assert_eq!(values(&y), out, "include_self={include_self}");
        (&y * &weights).unwrap().sum().unwrap().backward().unwrap();
        assert_eq!(values(&x.grad().unwrap().unwrap()), grad_x, "include_self={include_self}");
        assert_eq!(values(&src.grad().unwrap().unwrap()), grad_src, "include_self={include_self}");
    }
    let ints = torchfn::scatter_reduce(
        &torchfn::tensor([2i64, 3]).unwrap(),
        0,
        &torchfn::tensor([0i64, 0, 1]).unwrap(),
        &torchfn::tensor([4i64, 5, 6]).unwrap(),
        "prod",
        true,
    )
    .unwrap();
    assert_eq!(ints.to_vec::<i64>().unwrap(), [40, 18]);
}
