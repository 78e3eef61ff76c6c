//! Linear algebra (`bmm`, `mv`, `dot`, `outer`), the softmax family and
//! `torch.nn.functional` (activations and layers are in `nn_layers`): values computed by hand or
//! from PyTorch's documented formulas, the errors PyTorch raises, and no panics on bad input.

use torchfn::nn::functional as F;
use torchfn::prelude::*;
use torchfn::{Dims, ErrorKind};

pub(super) fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

pub(super) fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

pub(super) fn t32<const N: usize>(data: [f32; N], shape: &[usize]) -> Tensor {
    Tensor::from_vec(data.to_vec(), shape.to_vec()).unwrap()
}

pub(super) fn t64<const N: usize>(data: [f64; N], shape: &[usize]) -> Tensor {
    Tensor::from_vec(data.to_vec(), shape.to_vec()).unwrap()
}

pub(super) fn ints<const N: usize>(data: [i64; N], shape: &[usize]) -> Tensor {
    Tensor::from_vec(data.to_vec(), shape.to_vec()).unwrap()
}

/// The kind of the error and its message.
pub(super) fn error<T: std::fmt::Debug>(r: Result<T>) -> (ErrorKind, String) {
    let err = r.unwrap_err();
    (err.kind(), err.to_string())
}

pub(super) fn assert_close(got: &[f64], want: &[f64], tol: f64) {
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
    // Integers need a floating-point dtype to compute in (PyTorch has no integer kernel).
    let i = ints([0, 0], &[2]);
    let (kind, msg) = error(torchfn::softmax(&i, 0, None));
    assert_eq!(kind, ErrorKind::NotImplemented);
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
    assert_eq!(error(r).0, ErrorKind::NotImplemented);
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

    assert_eq!(error(F::mse_loss(&ints([1], &[1]), &ints([1], &[1]), None, None, "mean")).0, ErrorKind::NotImplemented);
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
    // Integers convolve, as in PyTorch's CPU kernels; bools do not.
    let summed = F::conv2d(&xi, &ints([1; 4], &[1, 1, 2, 2]), None, 1, 0, 1, 1).unwrap();
    assert_eq!(summed.to_vec::<i64>().unwrap(), [4; 4]);
    let bools = xi.to(DType::Bool, false, false).unwrap();
    assert_eq!(conv(&bools, &bools, None, one(), zero(), one(), 1).0, ErrorKind::NotImplemented);
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
    let pooled = F::max_pool2d(&ints([1, 5, 3, 2], &[1, 2, 2]), 2, None, 0, 1, false, false).unwrap();
    assert_eq!(pooled.to_vec::<i64>().unwrap(), [5]);
    let bools = ints([1; 4], &[1, 2, 2]).to(DType::Bool, false, false).unwrap();
    assert_eq!(error(F::max_pool2d(&bools, 1, None, 0, 1, false, false)).0, ErrorKind::NotImplemented);
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
                let a = torchfn::ones(sa, dtype, None).unwrap();
                let b = torchfn::ones(sb, dtype, None).unwrap();
                let calls: [Result<Tensor>; 25] = [
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
                    F::layer_norm(&a, torchfn::Shape::from(sb), Some(&b), None, 1e-5),
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
                    F::dropout(&a, 0.5, true, false),
                    // The in-place ones last: they change `a` and `b`.
                    F::embedding(&a, &b, None, Some(1.0), 2.0, false, false),
                    F::relu(&a, true),
                    F::dropout(&a, 0.25, true, true),
                ];
                outcomes += calls.len();
            }
        }
    }
    assert_eq!(outcomes, DType::ALL.len() * 7 * 7 * 25);
}
