//! `torchfn.linalg`'s decompositions: PyTorch 2.15's outputs and gradients for every sample
//! (and the matrix norms made of singular values)
//! (`tests/golden/linalg.json`, written by `bench/golden/gen_linalg.py`, singular and eigen
//! vectors in torchfn's sign convention), gradcheck, gradgradcheck and forward mode on the
//! symmetric inputs that `cholesky` and `eigh` are defined on, the errors PyTorch raises, and
//! the GPU (computed on the host, results back on the device).

use serde_json::Value as Json;
use torchfn::autograd::{GradcheckOptions, gradcheck, gradgradcheck};
use torchfn::overrides::find_function;
use torchfn::prelude::*;
use torchfn::testing::samples;
use torchfn::{ErrorKind, linalg};

fn golden() -> Json {
    let path = format!("{}/tests/golden/linalg.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn values(t: &Tensor) -> Vec<f64> {
    let host = t.detach().unwrap().to_device(torchfn::Device::CPU, Some(DType::Float64), false, false).unwrap();
    host.contiguous().unwrap().to_vec::<f64>().unwrap()
}

fn tensors(v: &Value) -> Vec<Tensor> {
    match v {
        Value::Tensor(t) => vec![t.clone()],
        Value::Tuple(items) | Value::List(items) => items.iter().flat_map(tensors).collect(),
        _ => vec![],
    }
}

/// Each expected tensor against what torchfn gave: shape and values within 1e-9 (float64) or
/// 1e-5 (float32), relative and absolute.
fn check(what: &str, got: &[Tensor], want: &Json) {
    let want = want.as_array().unwrap();
    assert_eq!(got.len(), want.len(), "{what}: count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let shape: Vec<usize> = w["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        assert_eq!(g.shape().unwrap().to_vec(), shape, "{what} {i}: shape");
        let data: Vec<f64> = w["data"].as_array().unwrap().iter().map(|d| d.as_f64().unwrap()).collect();
        let tol = if g.dtype().unwrap() == DType::Float32 { 1e-5 } else { 1e-9 };
        for (j, (a, b)) in values(g).iter().zip(&data).enumerate() {
            assert!((a - b).abs() <= tol + tol * b.abs(), "{what} {i}, element {j}: {a} against PyTorch's {b}");
        }
    }
}

#[test]
fn every_sample_gives_pytorch_s_outputs_and_gradients() {
    let golden = golden();
    for case in golden["cases"].as_array().unwrap() {
        let name = case["func"].as_str().unwrap();
        let func = find_function(name).unwrap_or_else(|| panic!("{name} is registered"));
        let index = case["sample"].as_u64().unwrap() as usize;
        let sample = samples(func).swap_remove(index);
        let what = format!("{name} sample {index}");
        // The sample's tensors as leaves.
        let leaf = |v: &Value| match v {
            Value::Tensor(t) => Value::Tensor(t.detach().unwrap().requires_grad_(true).unwrap()),
            other => other.clone(),
        };
        let args: Vec<Value> = sample.args.iter().map(leaf).collect();
        let leaves: Vec<Tensor> = args.iter().flat_map(tensors).collect();
        let out = tensors(&func.call(&args, &sample.kwargs).unwrap());
        check(&format!("{what}, outputs"), &out, &case["outputs"]);
        // The gradient of sum_k sum(out_k * cos(arange + k)).
        let mut total: Option<Tensor> = None;
        for (k, o) in out.iter().enumerate().filter(|(_, o)| o.requires_grad().unwrap()) {
            let n = o.numel().unwrap();
            let w: Vec<f64> = (0..n).map(|i| (i as f64 + k as f64).cos()).collect();
            let w = Tensor::from_vec(w, o.shape().unwrap()).unwrap().to(o.dtype().unwrap(), false, false).unwrap();
            let term = (o * &w).unwrap().sum().unwrap();
            total = Some(match total {
                Some(t) => (&t + &term).unwrap(),
                None => term,
            });
        }
        let grads = torchfn::autograd::grad(&[total.unwrap()], &leaves, None, None, false, false).unwrap();
        let grads: Vec<Tensor> = grads.into_iter().map(|g| g.unwrap()).collect();
        check(&format!("{what}, gradients"), &grads, &case["grads"]);
    }
}

/// `x` made symmetric: what `cholesky` and `eigh` are defined on, so that finite differences
/// perturb both triangles as PyTorch's symmetric gradient assumes.
fn symmetric(x: &Tensor) -> Result<Tensor> {
    &(x + &x.transpose(-2, -1)?)? * 0.5
}

fn spd(n: usize) -> Tensor {
    let m = Tensor::from_vec((0..n * n).map(|i| ((i * 7 + 3) % 11) as f64 / 4.0 - 1.0).collect(), [n, n]).unwrap();
    let eye = torchfn::eye(n, None, DType::Float64, None).unwrap();
    (&m.matmul(&m.transpose(0, 1).unwrap()).unwrap() + &(&eye * n as f64).unwrap()).unwrap()
}

#[test]
fn cholesky_and_eigh_pass_gradcheck_gradgradcheck_and_forward_mode_on_symmetric_inputs() {
    let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
    let options = GradcheckOptions::new().check_forward_ad(true);
    let a = spd(3).requires_grad_(true).unwrap();
    let cholesky = |x: &[Tensor]| linalg::cholesky(&symmetric(&x[0])?, false);
    let upper = |x: &[Tensor]| linalg::cholesky(&symmetric(&x[0])?, true);
    let eigh = |x: &[Tensor]| -> Result<(Tensor, Tensor)> { linalg::eigh(&symmetric(&x[0])?, "L") };
    let eigh_upper = |x: &[Tensor]| -> Result<(Tensor, Tensor)> { linalg::eigh(&symmetric(&x[0])?, "U") };
    let eigvalsh = |x: &[Tensor]| linalg::eigvalsh(&symmetric(&x[0])?, "L");
    let inputs = [a];
    assert!(gradcheck(cholesky, &inputs, &options).unwrap());
    assert!(gradcheck(upper, &inputs, &options).unwrap());
    assert!(gradcheck(eigh, &inputs, &options).unwrap());
    assert!(gradcheck(eigh_upper, &inputs, &options).unwrap());
    assert!(gradcheck(eigvalsh, &inputs, &options).unwrap());
    let second = GradcheckOptions::new();
    assert!(gradgradcheck(cholesky, &inputs, None, &second).unwrap());
    assert!(gradgradcheck(eigh, &inputs, None, &second).unwrap());
    // A batch, too.
    let batch = torchfn::stack(&[spd(2), (&spd(2) * 2.0).unwrap()], 0).unwrap().requires_grad_(true).unwrap();
    assert!(gradcheck(eigh, std::slice::from_ref(&batch), &options).unwrap());
    assert!(gradcheck(cholesky, &[batch], &options).unwrap());
}

#[test]
fn decompositions_put_their_factors_back_together() {
    let a = Tensor::from_vec((0..12).map(|i| ((i * 5 + 1) % 7) as f64 - 3.0).collect(), [4, 3]).unwrap();
    let close = |x: &Tensor, y: &Tensor| values(x).iter().zip(values(y)).all(|(p, q)| (p - q).abs() < 1e-12);
    let (q, r) = linalg::qr(&a, "complete").unwrap();
    assert_eq!((q.shape().unwrap().to_vec(), r.shape().unwrap().to_vec()), (vec![4, 4], vec![4, 3]));
    assert!(close(&q.matmul(&r).unwrap(), &a));
    let (q, r) = linalg::qr(&a, "r").unwrap();
    assert_eq!((q.shape().unwrap().to_vec(), r.shape().unwrap().to_vec()), (vec![0], vec![3, 3]));
    let (u, s, vh) = linalg::svd(&a, true).unwrap();
    let shapes = [u.shape().unwrap().to_vec(), s.shape().unwrap().to_vec(), vh.shape().unwrap().to_vec()];
    assert_eq!(shapes, [vec![4, 4], vec![3], vec![3, 3]]);
    let us = (&u.narrow(1, 0, 3).unwrap() * &s).unwrap();
    assert!(close(&us.matmul(&vh).unwrap(), &a));
    let (sign, logabsdet) = linalg::slogdet(&a.narrow(0, 0, 3).unwrap()).unwrap();
    let det = linalg::det(&a.narrow(0, 0, 3).unwrap()).unwrap();
    assert!(
        (sign.item().unwrap().to_f64() * logabsdet.exp().unwrap().item().unwrap().to_f64()
            - det.item().unwrap().to_f64())
        .abs()
            < 1e-9
    );
    // `B` as a batch of vectors, broadcast against `A`'s batch.
    let a2 = torchfn::stack(&[spd(2), (&spd(2) * 2.0).unwrap()], 0).unwrap();
    let b = torchfn::tensor([1.0f64, 2.0]).unwrap();
    let x = linalg::solve(&a2, &b, true).unwrap();
    assert_eq!(x.shape().unwrap(), [2, 2]);
    assert!(close(
        &a2.matmul(&x.unsqueeze(-1).unwrap()).unwrap().squeeze_dim(vec![-1]).unwrap(),
        &b.expand([2, 2]).unwrap()
    ));
    // Matrices without elements, as PyTorch's: identities for the complete factors,
    // determinants 1.
    let (q, r) = linalg::qr(&torchfn::zeros([3, 0], DType::Float64, None).unwrap(), "complete").unwrap();
    assert_eq!(
        (values(&q), r.shape().unwrap().to_vec()),
        (vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], vec![3, 0])
    );
    let (_, s, vh) = linalg::svd(&torchfn::zeros([0, 2], DType::Float64, None).unwrap(), true).unwrap();
    assert_eq!((s.numel().unwrap(), values(&vh)), (0, vec![1.0, 0.0, 0.0, 1.0]));
    assert_eq!(values(&linalg::det(&torchfn::zeros([2, 0, 0], DType::Float64, None).unwrap()).unwrap()), [1.0, 1.0]);
    // float32 in, float32 out.
    let a32 = spd(3).to(DType::Float32, false, false).unwrap();
    assert_eq!(linalg::inv(&a32).unwrap().dtype().unwrap(), DType::Float32);
}

#[test]
fn decompositions_refuse_what_pytorch_refuses() {
    let singular = torchfn::tensor([[1.0f64, 2.0], [2.0, 4.0]]).unwrap();
    let err = linalg::inv(&singular).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    assert!(err.to_string().contains("singular"), "{err}");
    assert_eq!(
        linalg::solve(&singular, &torchfn::tensor([1.0f64, 1.0]).unwrap(), true).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    let err = linalg::cholesky(&torchfn::tensor([[1.0f64, 2.0], [2.0, 1.0]]).unwrap(), false).unwrap_err();
    assert!(err.to_string().contains("the leading minor of order 2 is not positive-definite"), "{err}");
    let rect = torchfn::zeros([2, 3], DType::Float64, None).unwrap();
    let err = linalg::det(&rect).unwrap_err();
    assert!(err.to_string().contains("A must be batches of square matrices, but they are 2 by 3 matrices"), "{err}");
    let ints = torchfn::tensor([[1i64, 0], [0, 1]]).unwrap();
    assert_eq!(linalg::inv(&ints).unwrap_err().kind(), ErrorKind::Runtime);
    assert_eq!(linalg::det(&torchfn::tensor([1.0f64]).unwrap()).unwrap_err().kind(), ErrorKind::Runtime);
    assert_eq!(linalg::qr(&rect, "thin").unwrap_err().kind(), ErrorKind::Runtime);
    assert_eq!(linalg::eigh(&spd(2), "X").unwrap_err().kind(), ErrorKind::Runtime);
    // The determinant of a singular matrix is 0 and its slogdet (0, -inf), as PyTorch's, also
    // where the zero pivot comes first (the elimination must stop there, not divide by it).
    for m in [
        singular,
        torchfn::zeros([2, 2], DType::Float64, None).unwrap(),
        torchfn::tensor([[0.0f64, 1.0], [0.0, 2.0]]).unwrap(),
    ] {
        assert_eq!(linalg::det(&m).unwrap().item().unwrap().to_f64(), 0.0, "{m}");
        let (sign, log) = linalg::slogdet(&m).unwrap();
        assert_eq!((sign.item().unwrap().to_f64(), log.item().unwrap().to_f64()), (0.0, f64::NEG_INFINITY));
    }
    // A batch of vectors cannot be solved from the right, as in PyTorch.
    let err = linalg::solve(&spd(2), &torchfn::tensor([1.0f64, 2.0]).unwrap(), false).unwrap_err();
    assert!(err.to_string().contains("Vector broadcasting of the left hand side is not supported"), "{err}");
    assert_eq!(
        linalg::lstsq(&spd(2), &torchfn::zeros([1, 2, 2, 1], DType::Float64, None).unwrap(), None, None)
            .unwrap_err()
            .kind(),
        ErrorKind::Runtime
    );
}

/// `det`'s gradient is the matrix of cofactors, also at a singular matrix (PyTorch's: for
/// `[[1, 2], [2, 4]]`, `[[4, -2], [-2, 1]]`), and its forward derivative agrees.
#[test]
fn det_has_a_gradient_at_singular_matrices() {
    let a = torchfn::tensor([[1.0f64, 2.0], [2.0, 4.0]]).unwrap().requires_grad_(true).unwrap();
    linalg::det(&a).unwrap().backward().unwrap();
    let grad = values(&a.grad().unwrap().unwrap());
    assert!(grad.iter().zip([4.0, -2.0, -2.0, 1.0]).all(|(g, w)| (g - w).abs() < 1e-12), "{grad:?}");
    let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
    let x = torchfn::tensor([[0.0f64, 1.0], [0.0, 2.0]]).unwrap().requires_grad_(true).unwrap();
    let options = GradcheckOptions::new().check_forward_ad(true);
    assert!(gradcheck(|x| linalg::det(&x[0]), &[x], &options).unwrap());
}

/// `upper=true` reads the upper triangle, as LAPACK's `potrf('U')` behind PyTorch's.
#[test]
fn cholesky_reads_the_triangle_it_is_asked_for() {
    let a = torchfn::tensor([[4.0f64, 2.0], [100.0, 5.0]]).unwrap();
    assert_eq!(values(&linalg::cholesky(&a, true).unwrap()), [2.0, 1.0, 0.0, 2.0]);
    assert!(linalg::cholesky(&a, false).is_err(), "the lower triangle is not positive-definite");
    let (values_u, _) = linalg::eigh(&a, "U").unwrap();
    let (values_l, _) = linalg::eigh(&a, "L").unwrap();
    assert_ne!(values(&values_u), values(&values_l));
}

/// `lstsq` differentiates as the pseudo-inverse does: finite where singular values repeat (the
/// identity: `gA = -gX Bᵀ`, `gB = gX`), and on empty matrices it gives zeros, as PyTorch's.
#[test]
fn lstsq_gradients_stay_finite_at_repeated_singular_values_and_empty_inputs_work() {
    let a = torchfn::eye(3, None, DType::Float64, None).unwrap().requires_grad_(true).unwrap();
    let b = torchfn::tensor([[1.0f64, 2.0], [3.0, 4.0], [5.0, 6.0]]).unwrap().requires_grad_(true).unwrap();
    let w = torchfn::tensor([[0.5f64, -1.0], [2.0, 0.25], [-0.75, 1.5]]).unwrap();
    let (x, _, rank, _) = linalg::lstsq(&a, &b, None, None).unwrap();
    assert_eq!(rank.item().unwrap().to_i64(), 3);
    (&x * &w).unwrap().sum().unwrap().backward().unwrap();
    let want = w.matmul(&b.detach().unwrap().transpose(0, 1).unwrap()).unwrap().neg().unwrap();
    let close = |x: Vec<f64>, y: Vec<f64>| x.iter().zip(&y).all(|(p, q)| (p - q).abs() < 1e-12);
    assert!(close(values(&a.grad().unwrap().unwrap()), values(&want)));
    assert!(close(values(&b.grad().unwrap().unwrap()), values(&w)));
    let options = GradcheckOptions::new().check_forward_ad(true);
    let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
    let eye = torchfn::eye(3, None, DType::Float64, None).unwrap().requires_grad_(true).unwrap();
    let f = |x: &[Tensor]| -> Result<Tensor> { Ok(linalg::lstsq(&x[0], &x[1], None, None)?.0) };
    assert!(gradcheck(f, &[eye, b.detach().unwrap().requires_grad_(true).unwrap()], &options).unwrap());
    let empty = torchfn::zeros([0, 3], DType::Float64, None).unwrap();
    let (x, residuals, rank, s) =
        linalg::lstsq(&empty, &torchfn::zeros([0, 2], DType::Float64, None).unwrap(), None, None).unwrap();
    assert_eq!((x.shape().unwrap().to_vec(), values(&x)), (vec![3, 2], vec![0.0; 6]));
    assert_eq!((residuals.numel().unwrap(), rank.item().unwrap().to_i64(), s.numel().unwrap()), (0, 0, 0));
}

/// On the GPU: computed on the host, the results back on the device, the same values.
#[cfg(feature = "wgpu")]
#[test]
fn decompositions_run_for_gpu_tensors_and_return_there() {
    let Some(device) = crate::gpu::gpu() else { return };
    let a = spd(3).to(DType::Float32, false, false).unwrap();
    let on = a.to_device(device, None, false, false).unwrap().requires_grad_(true).unwrap();
    let (values_gpu, vectors) = linalg::eigh(&on, "L").unwrap();
    assert_eq!(vectors.device().unwrap(), device);
    let (values_cpu, _) = linalg::eigh(&a, "L").unwrap();
    assert!(values(&values_gpu).iter().zip(values(&values_cpu)).all(|(g, c)| (g - c).abs() < 1e-5));
    let inv = linalg::inv(&on).unwrap();
    inv.sum().unwrap().backward().unwrap();
    assert_eq!(on.grad().unwrap().unwrap().device().unwrap(), device);
}
