//! Linear algebra (`bmm`, `mv`, `dot`, `outer`), the softmax family and
//! `torch.nn.functional`: values computed by hand or from PyTorch's documented formulas, the
//! errors PyTorch raises, and no panics on bad input.

use torchfn::nn::functional as F;
use torchfn::prelude::*;
use torchfn::{Dims, ErrorKind};

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

fn t32<const N: usize>(data: [f32; N], shape: &[usize]) -> Tensor {
    Tensor::from_vec(data.to_vec(), shape.to_vec()).unwrap()
}

fn t64<const N: usize>(data: [f64; N], shape: &[usize]) -> Tensor {
    Tensor::from_vec(data.to_vec(), shape.to_vec()).unwrap()
}

fn ints<const N: usize>(data: [i64; N], shape: &[usize]) -> Tensor {
    Tensor::from_vec(data.to_vec(), shape.to_vec()).unwrap()
}

/// The kind of the error and its message.
fn error<T: std::fmt::Debug>(r: Result<T>) -> (ErrorKind, String) {
    let err = r.unwrap_err();
    (err.kind(), err.to_string())
}

fn assert_close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{got:?} against {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g.is_nan() && w.is_nan()) || (g - w).abs() <= tol, "{got:?} against {want:?}");
    }
}

// ---- linear algebra -------------------------------------------------------------------------

#[test]
fn batched_matrix_vector_and_vector_products() {
    // Two batches: [[1, 2]] @ [[1], [1]] = 3 and [[3, 4]] @ [[2], [0.5]] = 8.
    let a = t32([1.0, 2.0, 3.0, 4.0], &[2, 1, 2]);
    let b = t32([1.0, 1.0, 2.0, 0.5], &[2, 2, 1]);
    let c = torchfn::bmm(&a, &b).unwrap();
    assert_eq!(c.shape().unwrap(), [2, 1, 1]);
    assert_eq!(f32s(&c), [3.0, 8.0]);
    assert_eq!(f32s(&a.bmm(&b).unwrap()), [3.0, 8.0]);

    let m = ints([1, 2, 3, 4, 5, 6], &[2, 3]);
    let v = ints([1, 0, -1], &[3]);
    assert_eq!(torchfn::mv(&m, &v).unwrap().to_vec::<i64>().unwrap(), [-2, -2]);
    assert_eq!(m.mv(&v).unwrap().shape().unwrap(), [2]);

    let d = torchfn::dot(&ints([1, 2, 3], &[3]), &ints([4, -5, 6], &[3])).unwrap();
    assert_eq!(d.shape().unwrap(), [0usize; 0]);
    assert_eq!(d.item().unwrap(), Scalar::Int(12));
    assert_eq!(t64([0.5, 2.0], &[2]).dot(&t64([4.0, 0.25], &[2])).unwrap().item().unwrap(), Scalar::Float(2.5));

    // outer promotes: int64 with float32 gives float32; bools multiply as logical and.
    let o = torchfn::outer(&ints([1, 2], &[2]), &t32([0.5, 1.0, 2.0], &[3])).unwrap();
    assert_eq!(o.dtype().unwrap(), DType::Float32);
    assert_eq!(o.shape().unwrap(), [2, 3]);
    assert_eq!(f32s(&o), [0.5, 1.0, 2.0, 1.0, 2.0, 4.0]);
    let mask = torchfn::tensor([true, false]).unwrap();
    assert_eq!(mask.outer(&mask).unwrap().to_vec::<bool>().unwrap(), [true, false, false, false]);
}

#[test]
fn linear_algebra_refuses_wrong_shapes_and_dtypes() {
    let m = t32([1.0; 6], &[2, 3]);
    let v = t32([1.0; 3], &[3]);
    let (kind, msg) = error(torchfn::bmm(&m, &m));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("bmm(): batch1 (input) must be a 3D tensor"), "{msg}");
    let (kind, msg) = error(torchfn::bmm(&t32([1.0; 6], &[2, 1, 3]), &t32([1.0; 6], &[3, 2, 1])));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("batch2 tensor to be: [2, 3] but got: [3, 2]"), "{msg}");
    let (kind, msg) = error(torchfn::bmm(&t32([1.0; 2], &[1, 1, 2]), &t64([1.0; 2], &[1, 2, 1])));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("same dtype"), "{msg}");

    assert_eq!(error(torchfn::mv(&v, &v)).0, ErrorKind::Runtime);
    let (kind, msg) = error(torchfn::mv(&m, &t32([1.0; 2], &[2])));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("size mismatch"), "{msg}");

    let (kind, msg) = error(torchfn::dot(&m, &v));
    assert_eq!(kind, ErrorKind::Runtime);
    assert_eq!(msg, "dot(): 1D tensors expected, but got 2D and 1D tensors");
    let (kind, msg) = error(torchfn::dot(&v, &t64([1.0; 3], &[3])));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("same dtype, but found torch.float32 and torch.float64"), "{msg}");
    assert_eq!(error(torchfn::dot(&v, &t32([1.0; 2], &[2]))).0, ErrorKind::Runtime);

    let (kind, msg) = error(torchfn::outer(&m, &v));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("expected 1-D argument input, but got 2-D"), "{msg}");
}

// ---- softmax --------------------------------------------------------------------------------

#[test]
fn softmax_and_log_softmax_follow_their_definitions() {
    // exp(0), exp(ln 2), exp(ln 3) are 1, 2, 3: the softmax is [1/6, 2/6, 3/6].
    let x = t64([0.0, 2f64.ln(), 3f64.ln()], &[3]);
    assert_close(&f64s(&torchfn::softmax(&x, 0, None).unwrap()), &[1.0 / 6.0, 2.0 / 6.0, 0.5], 1e-15);
    let want = [(1.0f64 / 6.0).ln(), (2.0f64 / 6.0).ln(), 0.5f64.ln()];
    assert_close(&f64s(&torchfn::log_softmax(&x, -1, None).unwrap()), &want, 1e-15);
    // Stable: shifting by 1000 changes nothing (a naive exp would overflow to inf / inf).
    let shifted = t64([1000.0, 1000.0 + 2f64.ln(), 1000.0 + 3f64.ln()], &[3]);
    assert_close(&f64s(&shifted.softmax(0, None).unwrap()), &[1.0 / 6.0, 2.0 / 6.0, 0.5], 1e-12);
    assert_close(&f64s(&shifted.log_softmax(0, None).unwrap()), &want, 1e-12);

    // Along dimension 0 of a matrix: each column sums to one.
    let m = t32([0.0, 1.0, 0.0, 1.0], &[2, 2]);
    assert_eq!(f32s(&torchfn::softmax(&m, 0, None).unwrap()), [0.5, 0.5, 0.5, 0.5]);
    // Integers need a floating-point dtype to compute in.
    let i = ints([0, 0], &[2]);
    let (kind, msg) = error(torchfn::softmax(&i, 0, None));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.starts_with("softmax(): not implemented for torch.int64 inputs"), "{msg}");
    let p = torchfn::softmax(&i, 0, DType::Float64).unwrap();
    assert_eq!(p.dtype().unwrap(), DType::Float64);
    assert_eq!(f64s(&p), [0.5, 0.5]);
    // A zero-dimensional tensor is a lane of one; NaN and +inf poison their lane only.
    assert_eq!(f32s(&torchfn::softmax(&torchfn::tensor(3.0f32).unwrap(), 0, None).unwrap()), [1.0]);
    assert_eq!(f32s(&torchfn::log_softmax(&torchfn::tensor(3.0f32).unwrap(), -1, None).unwrap()), [0.0]);
    let poisoned = t32([f32::NAN, 1.0, f32::INFINITY, 1.0, 0.0, 0.0], &[3, 2]);
    let got: Vec<f64> = f32s(&poisoned.softmax(1, None).unwrap()).into_iter().map(f64::from).collect();
    assert_close(&got, &[f64::NAN, f64::NAN, f64::NAN, f64::NAN, 0.5, 0.5], 0.0);
    assert_eq!(error(torchfn::softmax(&m, 2, None)).0, ErrorKind::Index);
}

#[test]
fn functional_softmax_takes_the_legacy_implicit_dimension() {
    let m = t32([0.0, 2f32.ln(), 0.0, 2f32.ln()], &[2, 2]);
    // Two dimensions: dim=None means 1 (rows), as PyTorch's _get_softmax_dim.
    let rows = F::softmax(&m, None, 3, None).unwrap();
    assert_close(
        &f32s(&rows).into_iter().map(f64::from).collect::<Vec<_>>(),
        &[1.0 / 3.0, 2.0 / 3.0, 1.0 / 3.0, 2.0 / 3.0],
        1e-6,
    );
    // Three dimensions: dim=None means 0.
    let cube = t32([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], &[2, 2, 2]);
    assert_eq!(f32s(&F::softmax(&cube, None, 3, None).unwrap()), [0.5; 8]);
    let logs = F::log_softmax(&m, 0, 3, DType::Float64).unwrap();
    assert_eq!(logs.dtype().unwrap(), DType::Float64);
    assert_close(&f64s(&logs), &[0.5f64.ln(); 4], 1e-15);
    // By name, with PyTorch's keywords.
    let out = F::SOFTMAX.call(&[m.clone().into()], &Kwargs::from([("dim", Value::Int(0))])).unwrap();
    assert_eq!(f32s(out.as_tensor().unwrap()), [0.5; 4]);
}

// ---- activations ----------------------------------------------------------------------------

#[test]
fn activations_follow_their_formulas() {
    let x = t64([-1.0, 0.0, 1.0, 3.0], &[4]);
    assert_eq!(f64s(&F::relu(&x, false).unwrap()), [0.0, 0.0, 1.0, 3.0]);
    assert_eq!(F::relu(&ints([-2, 5], &[2]), false).unwrap().to_vec::<i64>().unwrap(), [0, 5]);
    assert!(f32s(&F::relu(&t32([f32::NAN], &[1]), false).unwrap())[0].is_nan());

    // gelu(x) = x * Φ(x); Φ(1) = 0.841344746068542948..., Φ(3) = 0.998650101968369905...
    let phi1 = 0.841_344_746_068_542_9;
    let phi3 = 0.998_650_101_968_369_9;
    assert_close(&f64s(&F::gelu(&x, "none").unwrap()), &[-(1.0 - phi1), 0.0, phi1, 3.0 * phi3], 1e-15);
    // The tanh approximation, from its documented formula.
    let tanh_gelu =
        |v: f64| 0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v.powi(3))).tanh());
    let want: Vec<f64> = [-1.0, 0.0, 1.0, 3.0].into_iter().map(tanh_gelu).collect();
    assert_close(&f64s(&F::gelu(&x, "tanh").unwrap()), &want, 1e-15);
    // Far out in the left tail the exact form is tiny, not a cancelled zero: -10 * Φ(-10).
    let tail = f64s(&F::gelu(&t64([-10.0], &[1]), "none").unwrap())[0];
    assert!((tail - -10.0 * 7.619_853_024_160_527e-24).abs() < 1e-35, "{tail}");

    // silu(x) = x * sigmoid(x) = x / (1 + exp(-x)).
    let want = [-1.0 / (1.0 + 1f64.exp()), 0.0, 1.0 / (1.0 + (-1f64).exp()), 3.0 / (1.0 + (-3f64).exp())];
    assert_close(&f64s(&F::silu(&x, false).unwrap()), &want, 1e-15);
    assert_eq!(f32s(&F::silu(&t32([-1000.0], &[1]), false).unwrap()), [-0.0]);
}

#[test]
fn activations_refuse_what_pytorch_refuses() {
    let x = t32([1.0], &[1]);
    let (kind, msg) = error(F::gelu(&x, "fast"));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("approximate argument must be either none or tanh"), "{msg}");
    assert_eq!(error(F::gelu(&ints([1], &[1]), "none")).0, ErrorKind::Runtime);
    assert_eq!(error(F::silu(&ints([1], &[1]), false)).0, ErrorKind::Runtime);
    assert_eq!(error(F::relu(&torchfn::tensor([true]).unwrap(), false)).0, ErrorKind::Runtime);
    let (kind, msg) = error(F::relu(&x, true));
    assert_eq!(kind, ErrorKind::NotImplemented);
    assert!(msg.contains("inplace=True is not supported"), "{msg}");
}

// ---- layers ---------------------------------------------------------------------------------

#[test]
fn linear_is_a_matrix_product_with_the_weight_transposed_plus_bias() {
    // [1, 2] @ [[1, 1, 0], [0, 1, -1]] + [0.5, 0.5, 0.5]
    let x = t32([1.0, 2.0], &[1, 2]);
    let w = t32([1.0, 0.0, 1.0, 1.0, 0.0, -1.0], &[3, 2]);
    let b = t32([0.5, 0.5, 0.5], &[3]);
    assert_eq!(f32s(&F::linear(&x, &w, Some(&b)).unwrap()), [1.5, 3.5, -1.5]);
    assert_eq!(f32s(&F::linear(&x, &w, None).unwrap()), [1.0, 3.0, -2.0]);
    // Leading dimensions are kept; a vector weight drops the last dimension.
    let batch = t32([1.0, 2.0, 3.0, 4.0], &[2, 1, 2]);
    assert_eq!(F::linear(&batch, &w, None).unwrap().shape().unwrap(), [2, 1, 3]);
    let v = F::linear(&batch, &t32([1.0, -1.0], &[2]), Some(&t32([10.0], &[]))).unwrap();
    assert_eq!(v.shape().unwrap(), [2, 1]);
    assert_eq!(f32s(&v), [9.0, 9.0]);

    let (kind, msg) = error(F::linear(&x, &t32([1.0; 3], &[3, 1]), None));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("mat1 and mat2 shapes cannot be multiplied (1x2 and 1x3)"), "{msg}");
    assert_eq!(error(F::linear(&x, &t32([1.0; 4], &[1, 2, 2]), None)).0, ErrorKind::Runtime);
    assert_eq!(error(F::linear(&x, &w, Some(&t64([0.0; 3], &[3])))).0, ErrorKind::Runtime);
    assert_eq!(error(F::linear(&x, &w, Some(&t32([0.0; 2], &[2])))).0, ErrorKind::Runtime);
}

#[test]
fn layer_norm_normalizes_the_trailing_dimensions() {
    // Rows [1, 3] and [4, 8]: means 2 and 6, variances 1 and 4.
    let x = t64([1.0, 3.0, 4.0, 8.0], &[2, 2]);
    assert_eq!(f64s(&F::layer_norm(&x, [2], None, None, 0.0).unwrap()), [-1.0, 1.0, -1.0, 1.0]);
    // eps joins the variance: (x - 2) / sqrt(1 + 3) and (x - 6) / sqrt(4 + 3).
    let r7 = 7f64.sqrt();
    assert_close(&f64s(&F::layer_norm(&x, [2], None, None, 3.0).unwrap()), &[-0.5, 0.5, -2.0 / r7, 2.0 / r7], 1e-15);
    let w = t64([2.0, 3.0], &[2]);
    let b = t64([1.0, -1.0], &[2]);
    assert_eq!(f64s(&F::layer_norm(&x, [2], Some(&w), Some(&b), 0.0).unwrap()), [-1.0, 2.0, -1.0, 2.0]);
    // Over both dimensions: the mean is 4, the variance (9 + 1 + 0 + 16) / 4 = 6.5.
    let all = f64s(&F::layer_norm(&x, [2, 2], None, None, 0.0).unwrap());
    let s = 6.5f64.sqrt();
    assert_close(&all, &[-3.0 / s, -1.0 / s, 0.0, 4.0 / s], 1e-15);
    // A constant row is all zeros with the default eps (0 / 0 is NaN with eps = 0, as in PyTorch).
    assert_eq!(f32s(&F::layer_norm(&t32([5.0; 3], &[3]), [3], None, None, 1e-5).unwrap()), [0.0; 3]);
    // By name, with the shape as a list.
    let out = F::LAYER_NORM
        .call(&[x.clone().into(), Value::List(vec![2.into()])], &Kwargs::from([("eps", Value::Float(0.0))]))
        .unwrap();
    assert_eq!(f64s(out.as_tensor().unwrap()), [-1.0, 1.0, -1.0, 1.0]);

    let (kind, msg) = error(F::layer_norm(&x, [3], None, None, 1e-5));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("expected input with shape [*, 3], but got input of size [2, 2]"), "{msg}");
    assert_eq!(error(F::layer_norm(&x, [1, 2, 2], None, None, 1e-5)).0, ErrorKind::Runtime);
    assert_eq!(error(F::layer_norm(&x, [2], Some(&t64([1.0; 3], &[3])), None, 1e-5)).0, ErrorKind::Runtime);
    assert_eq!(error(F::layer_norm(&x, [2], None, Some(&t32([1.0; 2], &[2])), 1e-5)).0, ErrorKind::Runtime);
    assert_eq!(error(F::layer_norm(&ints([1, 2], &[2]), [2], None, None, 1e-5)).0, ErrorKind::Runtime);
}

#[test]
fn embedding_looks_up_rows() {
    let weight = t32([0.0, 0.5, 1.0, 1.5, 2.0, 2.5], &[3, 2]);
    let idx = ints([2, 0, 1, 2], &[2, 2]);
    let out = F::embedding(&idx, &weight, None, None, 2.0, false, false).unwrap();
    assert_eq!(out.shape().unwrap(), [2, 2, 2]);
    assert_eq!(f32s(&out), [2.0, 2.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);
    let small = Tensor::from_vec(vec![1i32], Vec::<usize>::new()).unwrap();
    assert_eq!(f32s(&F::embedding(&small, &weight, Some(-1), None, 2.0, false, false).unwrap()), [1.0, 1.5]);

    for bad in [3, -1] {
        let (kind, msg) = error(F::embedding(&ints([0, bad], &[2]), &weight, None, None, 2.0, false, false));
        assert_eq!(kind, ErrorKind::Index);
        assert!(msg.contains(&format!("index {bad} is out of range")), "{msg}");
    }
    assert_eq!(error(F::embedding(&t32([0.0], &[1]), &weight, None, None, 2.0, false, false)).0, ErrorKind::Runtime);
    assert_eq!(error(F::embedding(&idx, &t32([0.0; 3], &[3]), None, None, 2.0, false, false)).0, ErrorKind::Runtime);
    assert_eq!(error(F::embedding(&idx, &weight, Some(3), None, 2.0, false, false)).0, ErrorKind::Value);
    assert_eq!(error(F::embedding(&idx, &weight, None, Some(1.0), 2.0, false, false)).0, ErrorKind::NotImplemented);
}

#[test]
fn dropout_is_the_identity_outside_training_and_honest_inside() {
    let x = t32([1.0, f32::NAN, -2.0], &[3]);
    let same = F::dropout(&x, 0.5, false, false).unwrap();
    assert_eq!(same.data_ptr().unwrap(), x.data_ptr().unwrap(), "the input itself, not a copy");
    assert_eq!(F::dropout(&x, 0.0, true, false).unwrap().data_ptr().unwrap(), x.data_ptr().unwrap());
    // p = 1 multiplies by zero: NaN stays NaN.
    let zeroed = f32s(&F::dropout(&x, 1.0, true, false).unwrap());
    assert_eq!(zeroed[0], 0.0);
    assert!(zeroed[1].is_nan());
    assert_eq!(zeroed[2], 0.0);

    let (kind, msg) = error(F::dropout(&x, 0.5, true, false));
    assert_eq!(kind, ErrorKind::NotImplemented);
    assert!(msg.contains("needs a random number generator"), "{msg}");
    for p in [-0.1, 1.5, f64::NAN] {
        let (kind, msg) = error(F::dropout(&x, p, false, false));
        assert_eq!(kind, ErrorKind::Value);
        assert!(msg.contains("dropout probability has to be between 0 and 1"), "{msg}");
    }
    assert_eq!(error(F::dropout(&x, 1.0, true, true)).0, ErrorKind::NotImplemented);
    // By name, PyTorch's defaults: p=0.5, training=True.
    assert_eq!(error(F::DROPOUT.call(&[x.into()], &Kwargs::new())).0, ErrorKind::NotImplemented);
}

// ---- losses ---------------------------------------------------------------------------------

/// Logits whose softmax is [1/4, 3/4] (exp(0) = 1, exp(ln 3) = 3).
fn quarter_logits(rows: usize) -> Tensor {
    let data: Vec<f64> = (0..rows).flat_map(|_| [0.0, 3f64.ln()]).collect();
    Tensor::from_vec(data, [rows, 2]).unwrap()
}

#[test]
fn cross_entropy_with_class_indices() {
    let (q1, q3) = (-(0.25f64.ln()), -(0.75f64.ln()));
    let logits = quarter_logits(3);
    let target = ints([1, 0, 1], &[3]);
    let ce = |target: &Tensor, weight: Option<&Tensor>, ignore: i64, reduction: &str, smoothing: f64| {
        f64s(&F::cross_entropy(&logits, target, weight, None, ignore, None, reduction, smoothing).unwrap())
    };
    assert_close(&ce(&target, None, -100, "none", 0.0), &[q3, q1, q3], 1e-15);
    assert_close(&ce(&target, None, -100, "sum", 0.0), &[2.0 * q3 + q1], 1e-15);
    assert_close(&ce(&target, None, -100, "mean", 0.0), &[(2.0 * q3 + q1) / 3.0], 1e-15);
    // Weights: the mean divides by the weights of the targets, 2 + 10 + 2.
    let w = t64([10.0, 2.0], &[2]);
    assert_close(&ce(&target, Some(&w), -100, "mean", 0.0), &[(4.0 * q3 + 10.0 * q1) / 14.0], 1e-15);
    // Ignored targets count for nothing; all ignored gives NaN.
    assert_close(&ce(&target, None, 0, "none", 0.0), &[q3, 0.0, q3], 1e-15);
    assert_close(&ce(&target, None, 0, "mean", 0.0), &[q3], 1e-15);
    assert!(ce(&ints([0, 0, 0], &[3]), None, 0, "mean", 0.0)[0].is_nan());
    // Label smoothing 0.2 over 2 classes: 0.8 * nll + 0.1 * (q1 + q3), the same as the
    // probability target [0.1, 0.9].
    let smoothed = 0.8 * q3 + 0.1 * (q1 + q3);
    assert_close(&ce(&ints([1, 1, 1], &[3]), None, -100, "mean", 0.2), &[smoothed], 1e-15);
    let probs = t64([0.1, 0.9, 0.1, 0.9, 0.1, 0.9], &[3, 2]);
    assert_close(&ce(&probs, None, -100, "mean", 0.0), &[smoothed], 1e-15);
    // The deprecated flags override `reduction`: size_average=False sums.
    let legacy = F::cross_entropy(&logits, &target, None, Some(false), -100, None, "mean", 0.0).unwrap();
    assert_close(&f64s(&legacy), &[2.0 * q3 + q1], 1e-15);
    // An unbatched input and a 0-dimensional target; the float32 result stays float32.
    let single = F::cross_entropy(&t32([0.0, 0.0], &[2]), &ints([1], &[]), None, None, -100, None, "mean", 0.0);
    let single = single.unwrap();
    assert_eq!((single.dtype().unwrap(), single.shape().unwrap().len()), (DType::Float32, 0));
    assert!((f64::from(f32s(&single)[0]) - 2f64.ln()).abs() < 1e-7);
}

#[test]
fn cross_entropy_over_positions() {
    // [N=1, C=2, 2 positions]: position 0 has logits (0, ln 3), position 1 (ln 3, 0).
    let logits = t64([0.0, 3f64.ln(), 3f64.ln(), 0.0], &[1, 2, 2]);
    let out = F::cross_entropy(&logits, &ints([1, 1], &[1, 2]), None, None, -100, None, "none", 0.0).unwrap();
    assert_eq!(out.shape().unwrap(), [1, 2]);
    assert_close(&f64s(&out), &[-(0.75f64.ln()), -(0.25f64.ln())], 1e-15);
}

#[test]
fn cross_entropy_errors_are_pytorchs() {
    let logits = quarter_logits(3);
    let ce =
        |target: &Tensor, reduction: &str| F::cross_entropy(&logits, target, None, None, -100, None, reduction, 0.0);
    let (kind, msg) = error(ce(&ints([1, 2, 0], &[3]), "mean"));
    assert_eq!(kind, ErrorKind::Index);
    assert!(msg.contains("Target 2 is out of bounds"), "{msg}");
    assert_eq!(error(ce(&ints([-1, 0, 0], &[3]), "mean")).0, ErrorKind::Index);
    let (kind, msg) = error(ce(&ints([1, 0], &[2]), "mean"));
    assert_eq!(kind, ErrorKind::Value);
    assert!(msg.contains("expected input batch_size (3) to match target batch_size (2)"), "{msg}");
    let (kind, msg) = error(ce(&ints([1, 0, 1], &[3]), "average"));
    assert_eq!(kind, ErrorKind::Value);
    assert!(msg.contains("average is not a valid value for reduction"), "{msg}");
    let int32 = Tensor::from_vec(vec![1i32, 0, 1], [3]).unwrap();
    assert_eq!(error(ce(&int32, "mean")).0, ErrorKind::Runtime);
    assert_eq!(error(ce(&ints([1, 0, 1, 0, 1, 0], &[3, 2]), "mean")).0, ErrorKind::Runtime);
    assert_eq!(error(ce(&ints([1, 0, 1, 0, 1, 0], &[3, 1, 2]), "mean")).0, ErrorKind::Runtime);
    let weight = t64([1.0; 3], &[3]);
    let r = F::cross_entropy(&logits, &ints([1, 0, 1], &[3]), Some(&weight), None, -100, None, "mean", 0.0);
    assert_eq!(error(r).0, ErrorKind::Runtime);
    let r = F::cross_entropy(&logits, &ints([1, 0, 1], &[3]), None, None, -100, None, "mean", 1.5);
    assert_eq!(error(r).0, ErrorKind::Runtime);
    let r = F::cross_entropy(&ints([1, 0], &[1, 2]), &ints([1], &[1]), None, None, -100, None, "mean", 0.0);
    assert_eq!(error(r).0, ErrorKind::Runtime);
}

#[test]
fn mse_loss_averages_sums_or_keeps_the_squared_errors() {
    let a = t32([1.0, 2.0, 3.0], &[3]);
    let b = t32([1.0, 0.0, 0.0], &[3]);
    assert_eq!(f32s(&F::mse_loss(&a, &b, None, None, "none").unwrap()), [0.0, 4.0, 9.0]);
    assert_eq!(f32s(&F::mse_loss(&a, &b, None, None, "sum").unwrap()), [13.0]);
    let mean = F::mse_loss(&a, &b, None, None, "mean").unwrap();
    assert_eq!(mean.shape().unwrap().len(), 0);
    assert_eq!(f32s(&mean), [13.0 / 3.0]);
    // Broadcast, and promoted: a float64 target makes a float64 loss.
    let m = F::mse_loss(&t32([1.0, 2.0, 3.0, 4.0], &[2, 2]), &t64([1.0, 2.0], &[2]), None, None, "none").unwrap();
    assert_eq!(m.dtype().unwrap(), DType::Float64);
    assert_eq!(f64s(&m), [0.0, 0.0, 4.0, 4.0]);
    assert_eq!(f32s(&F::mse_loss(&a, &b, None, Some(false), "mean").unwrap()), [0.0, 4.0, 9.0]);
    let empty = t32([], &[0]);
    assert!(f32s(&F::mse_loss(&empty, &empty, None, None, "mean").unwrap())[0].is_nan());

    assert_eq!(error(F::mse_loss(&ints([1], &[1]), &ints([1], &[1]), None, None, "mean")).0, ErrorKind::Runtime);
    assert_eq!(error(F::mse_loss(&a, &b, None, None, "max")).0, ErrorKind::Value);
    assert_eq!(error(F::mse_loss(&a, &t32([1.0; 2], &[2]), None, None, "mean")).0, ErrorKind::Runtime);
}

// ---- convolution and pooling ----------------------------------------------------------------

fn counting(n: usize, shape: &[usize]) -> Tensor {
    Tensor::from_vec((1..=n).map(|v| v as f32).collect(), shape.to_vec()).unwrap()
}

#[test]
fn conv2d_cross_correlates() {
    // 1..9 in a 3x3 image; the kernel [[1, 0], [0, -1]] gives x[i][j] - x[i+1][j+1] = -4.
    let x = counting(9, &[1, 1, 3, 3]);
    let k = t32([1.0, 0.0, 0.0, -1.0], &[1, 1, 2, 2]);
    let y = F::conv2d(&x, &k, None, 1, 0, 1, 1).unwrap();
    assert_eq!(y.shape().unwrap(), [1, 1, 2, 2]);
    assert_eq!(f32s(&y), [-4.0; 4]);
    assert_eq!(f32s(&F::conv2d(&x, &k, Some(&t32([1.0], &[1])), 1, 0, 1, 1).unwrap()), [-3.0; 4]);
    // Dilation 2 spreads a 2x2 kernel of ones over the corners: 1 + 3 + 7 + 9.
    let ones = t32([1.0; 4], &[1, 1, 2, 2]);
    assert_eq!(f32s(&F::conv2d(&x, &ones, None, 1, 0, 2, 1).unwrap()), [20.0]);
    // Padding 1 and stride 2: the windows see [1], [2, 3], [4, 7], [5, 6, 8, 9].
    assert_eq!(f32s(&F::conv2d(&x, &ones, None, 2, 1, 1, 1).unwrap()), [1.0, 5.0, 11.0, 28.0]);
    // Per-dimension stride and padding: (1, 2) and (0, 1).
    let y = F::conv2d(&x, &ones, None, [1, 2], [0, 1], 1, 1).unwrap();
    assert_eq!(y.shape().unwrap(), [1, 1, 2, 2]);
    assert_eq!(f32s(&y), [5.0, 16.0, 11.0, 28.0]);

    // Two input channels are summed; two output channels each see both.
    let two = t32([1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0], &[1, 2, 2, 2]);
    let w = t32([1.0, 1.0, 1.0, -1.0], &[2, 2, 1, 1]);
    let y = F::conv2d(&two, &w, Some(&t32([0.0, 10.0], &[2])), 1, 0, 1, 1).unwrap();
    assert_eq!(f32s(&y), [3.0, 3.0, 3.0, 3.0, 9.0, 9.0, 9.0, 9.0]);
    // Groups: each output channel sees only its own input channel.
    let w = t32([3.0, 5.0], &[2, 1, 1, 1]);
    assert_eq!(f32s(&F::conv2d(&two, &w, None, 1, 0, 1, 2).unwrap()), [3.0, 3.0, 3.0, 3.0, 10.0, 10.0, 10.0, 10.0]);
    // Unbatched input gives an unbatched result; float64 stays float64.
    let x64 = Tensor::from_vec((1..=9).map(f64::from).collect(), [1, 3, 3]).unwrap();
    let y = F::conv2d(&x64, &t64([1.0, 0.0, 0.0, -1.0], &[1, 1, 2, 2]), None, 1, 0, 1, 1).unwrap();
    assert_eq!(y.shape().unwrap(), [1, 2, 2]);
    assert_eq!(f64s(&y), [-4.0; 4]);
    // By name, with PyTorch's int-or-tuple keywords.
    let kwargs = Kwargs::from([("stride", Value::Tuple(vec![2.into(), 2.into()])), ("padding", Value::Int(1))]);
    let out = F::CONV2D.call(&[x.into(), ones.into()], &kwargs).unwrap();
    assert_eq!(f32s(out.as_tensor().unwrap()), [1.0, 5.0, 11.0, 28.0]);
}

#[test]
fn conv2d_errors_are_pytorchs() {
    let x = counting(9, &[1, 1, 3, 3]);
    let k = t32([1.0; 4], &[1, 1, 2, 2]);
    let conv = |x: &Tensor, w: &Tensor, b: Option<&Tensor>, s: Dims, p: Dims, d: Dims, g: i64| {
        error(F::conv2d(x, w, b, s, p, d, g))
    };
    let one = || Dims::from(1);
    let zero = || Dims::from(0);
    let (kind, msg) = conv(&t32([1.0; 9], &[3, 3]), &k, None, one(), zero(), one(), 1);
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(
        msg.contains("expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [3, 3]"),
        "{msg}"
    );
    let (kind, msg) = conv(&counting(18, &[1, 2, 3, 3]), &k, None, one(), zero(), one(), 1);
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("to have 1 channels, but got 2 channels instead"), "{msg}");
    let (kind, msg) = conv(&x, &t32([1.0; 16], &[1, 1, 4, 4]), None, one(), zero(), one(), 1);
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("Kernel size can't be greater than actual input size"), "{msg}");
    assert_eq!(conv(&x, &k, Some(&t32([1.0; 2], &[2])), one(), zero(), one(), 1).0, ErrorKind::Runtime);
    assert_eq!(conv(&x, &k, None, zero(), zero(), one(), 1).0, ErrorKind::Runtime);
    assert_eq!(conv(&x, &k, None, one(), Dims::from(-1), one(), 1).0, ErrorKind::Runtime);
    assert_eq!(conv(&x, &k, None, one(), zero(), zero(), 1).0, ErrorKind::Runtime);
    assert_eq!(conv(&x, &k, None, Dims::from([1, 1, 1]), zero(), one(), 1).0, ErrorKind::Runtime);
    assert_eq!(conv(&x, &k, None, one(), zero(), one(), 0).0, ErrorKind::Runtime);
    assert_eq!(conv(&x, &k, None, one(), zero(), one(), 2).0, ErrorKind::Runtime);
    assert_eq!(conv(&x, &t32([1.0; 4], &[1, 4]), None, one(), zero(), one(), 1).0, ErrorKind::Runtime);
    assert_eq!(conv(&x, &t32([], &[1, 1, 0, 2]), None, one(), zero(), one(), 1).0, ErrorKind::Runtime);
    assert_eq!(conv(&x, &t64([1.0; 4], &[1, 1, 2, 2]), None, one(), zero(), one(), 1).0, ErrorKind::Runtime);
    let xi = ints([1; 9], &[1, 1, 3, 3]);
    assert_eq!(conv(&xi, &ints([1; 4], &[1, 1, 2, 2]), None, one(), zero(), one(), 1).0, ErrorKind::Runtime);
    // Sizes that cannot exist are errors, not aborts.
    assert_eq!(conv(&x, &k, None, one(), Dims::from(i64::MAX), one(), 1).0, ErrorKind::Runtime);
    assert_eq!(conv(&x, &k, None, one(), Dims::from(1i64 << 40), one(), 1).0, ErrorKind::Runtime);
    assert_eq!(conv(&x, &k, None, one(), zero(), Dims::from(i64::MAX), 1).0, ErrorKind::Runtime);
}

#[test]
fn max_pool2d_takes_the_largest_of_each_window() {
    let x = counting(16, &[1, 1, 4, 4]);
    let y = F::max_pool2d(&x, 2, None, 0, 1, false, false).unwrap();
    assert_eq!(y.shape().unwrap(), [1, 1, 2, 2]);
    assert_eq!(f32s(&y), [6.0, 8.0, 14.0, 16.0]);
    let (values, indices) = F::max_pool2d_with_indices(&x, 2, None, 0, 1, false).unwrap();
    assert_eq!(f32s(&values), [6.0, 8.0, 14.0, 16.0]);
    assert_eq!(indices.to_vec::<i64>().unwrap(), [5, 7, 13, 15]);
    // Padding counts as -inf: windows of 1..9 padded by one, stride 2.
    let nine = counting(9, &[1, 3, 3]);
    let y = F::max_pool2d(&nine, 2, Dims::from(2), 1, 1, false, false).unwrap();
    assert_eq!(y.shape().unwrap(), [1, 2, 2]);
    assert_eq!(f32s(&y), [1.0, 3.0, 7.0, 9.0]);
    // Stride 1, a 2x1 window; dilation 2 takes the corners of 3x3 windows.
    assert_eq!(
        f32s(&F::max_pool2d(&nine, [2, 1], Dims::from(1), 0, 1, false, false).unwrap()),
        [4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    );
    assert_eq!(f32s(&F::max_pool2d(&x, 2, Dims::from(1), 0, 2, false, false).unwrap()), [11.0, 12.0, 15.0, 16.0]);
    // ceil_mode keeps the partial last window: 5x5 with 2x2 windows gives 3x3, not 2x2.
    let five = counting(25, &[1, 1, 5, 5]);
    assert_eq!(F::max_pool2d(&five, 2, None, 0, 1, false, false).unwrap().shape().unwrap(), [1, 1, 2, 2]);
    let y = F::max_pool2d(&five, 2, None, 0, 1, true, false).unwrap();
    assert_eq!(y.shape().unwrap(), [1, 1, 3, 3]);
    assert_eq!(f32s(&y), [7.0, 9.0, 10.0, 17.0, 19.0, 20.0, 22.0, 24.0, 25.0]);
    // NaN wins, as in PyTorch.
    let nan = t64([1.0, f64::NAN, 3.0, 2.0], &[1, 2, 2]);
    let (values, indices) = F::max_pool2d_with_indices(&nan, 2, None, 0, 1, false).unwrap();
    assert!(f64s(&values)[0].is_nan());
    assert_eq!(indices.to_vec::<i64>().unwrap(), [1]);
}

#[test]
fn max_pool2d_errors_are_pytorchs() {
    let x = counting(16, &[1, 1, 4, 4]);
    let pool = |k: Dims, s: Option<Dims>, p: Dims, d: Dims| error(F::max_pool2d(&x, k, s, p, d, false, false));
    let (kind, msg) = pool(Dims::from(0), None, Dims::from(0), Dims::from(1));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("kernel size should be greater than zero"), "{msg}");
    let (kind, msg) = pool(Dims::from(2), None, Dims::from(2), Dims::from(1));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("at most half of effective kernel size"), "{msg}");
    assert_eq!(pool(Dims::from(5), None, Dims::from(0), Dims::from(1)).0, ErrorKind::Runtime);
    assert_eq!(pool(Dims::from([2, 2, 2]), None, Dims::from(0), Dims::from(1)).0, ErrorKind::Runtime);
    assert_eq!(pool(Dims::from(2), Some(Dims::from(0)), Dims::from(0), Dims::from(1)).0, ErrorKind::Runtime);
    assert_eq!(pool(Dims::from(2), None, Dims::from(-1), Dims::from(1)).0, ErrorKind::Runtime);
    assert_eq!(pool(Dims::from(2), None, Dims::from(0), Dims::from(0)).0, ErrorKind::Runtime);
    assert_eq!(pool(Dims::from(i64::MAX), None, Dims::from(i64::MAX / 2), Dims::from(1)).0, ErrorKind::Runtime);
    let flat = counting(4, &[2, 2]);
    assert_eq!(error(F::max_pool2d(&flat, 1, None, 0, 1, false, false)).0, ErrorKind::Runtime);
    assert_eq!(error(F::max_pool2d(&ints([1; 4], &[1, 2, 2]), 1, None, 0, 1, false, false)).0, ErrorKind::Runtime);
    let (kind, msg) = error(F::max_pool2d(&x, 2, None, 0, 1, false, true));
    assert_eq!(kind, ErrorKind::NotImplemented);
    assert!(msg.contains("max_pool2d_with_indices"), "{msg}");
}

// ---- the protocol ---------------------------------------------------------------------------

#[derive(TensorSubclass)]
struct Tagged;

#[test]
fn functional_operations_are_registered_and_keep_subclasses() {
    let names = [
        "torchfn.nn.functional.conv2d",
        "torchfn.nn.functional.cross_entropy",
        "torchfn.nn.functional.max_pool2d_with_indices",
        "torchfn.softmax",
        "Tensor.log_softmax",
        "torchfn.outer",
        "Tensor.dot",
    ];
    for name in names {
        assert!(torchfn::overrides::find_function(name).is_some(), "{name} is not registered");
    }
    assert_eq!(F::CONV2D.qualified_name(), "torchfn.nn.functional.conv2d");
    let x = t32([1.0, -2.0], &[1, 2]).as_subclass(Tagged).unwrap();
    let w = t32([1.0, 1.0], &[1, 2]);
    assert!(F::linear(&x, &w, None).unwrap().is_instance::<Tagged>());
    assert!(F::relu(&x, false).unwrap().is_instance::<Tagged>());
    assert!(torchfn::softmax(&x, 1, None).unwrap().is_instance::<Tagged>());
}

/// Every operation of this family on every dtype and a range of shapes: results or errors,
/// never a panic.
#[test]
fn no_bad_input_panics() {
    let shapes: [&[usize]; 7] = [&[], &[0], &[3], &[2, 3], &[0, 2, 2], &[2, 1, 3, 3], &[1, 2, 0, 3]];
    let mut outcomes = 0;
    for dtype in DType::ALL {
        for &sa in &shapes {
            for &sb in &shapes {
                let a = torchfn::ones(sa, dtype).unwrap();
                let b = torchfn::ones(sb, dtype).unwrap();
                let calls: [Result<Tensor>; 21] = [
                    torchfn::bmm(&a, &b),
                    torchfn::mv(&a, &b),
                    torchfn::dot(&a, &b),
                    torchfn::outer(&a, &b),
                    torchfn::softmax(&a, -1, None),
                    F::log_softmax(&a, None, 3, None),
                    F::relu(&a, false),
                    F::gelu(&a, "tanh"),
                    F::silu(&a, false),
                    F::linear(&a, &b, Some(&b)),
                    F::layer_norm(&a, sb.to_vec(), Some(&b), None, 1e-5),
                    F::embedding(&a, &b, None, None, 2.0, false, false),
                    F::dropout(&a, 1.0, true, false),
                    F::cross_entropy(&a, &b, Some(&b), None, -100, None, "mean", 0.1),
                    F::cross_entropy(&b, &a, None, None, 0, None, "none", 0.0),
                    F::mse_loss(&a, &b, None, None, "sum"),
                    F::conv2d(&a, &b, None, 1, 1, 1, 1),
                    F::conv2d(&a, &b, Some(&b), [2, 1], 0, 2, 2),
                    F::max_pool2d(&a, 2, None, 1, 1, true, false),
                    F::max_pool2d(&a, [3, 1], Dims::from(2), 0, 1, false, false),
                    F::max_pool2d_with_indices(&a, 1, None, 0, 1, true).map(|(v, _)| v),
                ];
                outcomes += calls.len();
            }
        }
    }
    assert_eq!(outcomes, 5 * 7 * 7 * 21);
}
