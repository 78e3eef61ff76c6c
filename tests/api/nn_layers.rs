//! `torch.nn.functional`'s activations and layers: values computed by hand or from PyTorch's
//! documented formulas, `inplace=True` writing into the input and returning it, dropout's
//! statistics, `embedding`'s `max_norm` renormalizing `weight` in place, and the errors
//! PyTorch raises.

use torchfn::ErrorKind;
use torchfn::nn::functional as F;
use torchfn::prelude::*;

use super::nn::{assert_close, error, f32s, f64s, ints, t32, t64};

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

/// `hardswish` and `hardsigmoid` at their special points, against PyTorch 2.15 (scratch run):
/// NaN stays NaN, `hardswish(-inf)` is NaN (`-inf * 0`), and the gradients at ±3, ±inf and
/// NaN are PyTorch's one-sided choices.
#[test]
fn hard_activations_match_pytorch_at_their_special_points() {
    let points = [f32::NAN, -3.0, 3.0, f32::INFINITY, f32::NEG_INFINITY];
    let x = t32(points, &[5]).requires_grad_(true).unwrap();
    let same = |got: Vec<f32>, want: [f32; 5]| {
        let ok = got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()));
        assert!(ok, "{got:?}\n{want:?}");
    };
    let y = F::hardswish(&x, false).unwrap();
    same(f32s(&y), [f32::NAN, -0.0, 3.0, f32::INFINITY, f32::NAN]);
    y.sum().unwrap().backward().unwrap();
    same(f32s(&x.grad().unwrap().unwrap()), [1.0, 0.0, 1.0, 1.0, 0.0]);
    x.set_grad(None).unwrap();
    let y = F::hardsigmoid(&x, false).unwrap();
    same(f32s(&y), [f32::NAN, 0.0, 1.0, 1.0, 0.0]);
    y.sum().unwrap().backward().unwrap();
    same(f32s(&x.grad().unwrap().unwrap()), [0.0; 5]);
}

#[test]
fn activations_refuse_what_pytorch_refuses() {
    let x = t32([1.0], &[1]);
    let (kind, msg) = error(F::gelu(&x, "fast"));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("approximate argument must be either none or tanh"), "{msg}");
    // Integers: PyTorch's NotImplementedError ("silu_cpu" not implemented for 'Long').
    assert_eq!(error(F::gelu(&ints([1], &[1]), "none")).0, ErrorKind::NotImplemented);
    let (kind, msg) = error(F::silu(&ints([1], &[1]), false));
    assert_eq!(kind, ErrorKind::NotImplemented);
    assert!(msg.contains("\"silu_cpu\" not implemented for 'Long'"), "{msg}");
    assert_eq!(error(F::hardswish(&ints([1], &[1]), false)).0, ErrorKind::NotImplemented);
    assert_eq!(error(F::relu(&torchfn::tensor([true]).unwrap(), false)).0, ErrorKind::Runtime);
}

#[derive(TensorSubclass)]
struct Marked;

#[test]
fn in_place_activations_write_into_the_input_and_return_it() {
    let x = t32([-1.0, 2.0, -3.0], &[3]);
    let ptr = x.data_ptr().unwrap();
    let y = F::relu(&x, true).unwrap();
    assert!(y.is(&x), "relu(inplace=True) returns the input itself");
    assert_eq!(y.data_ptr().unwrap(), ptr);
    assert_eq!(f32s(&x), [0.0, 2.0, 0.0]);

    // silu(x) = x / (1 + exp(-x)), written into x.
    let x = t64([0.0, 2.0], &[2]);
    let y = F::silu(&x, true).unwrap();
    assert!(y.is(&x));
    assert_close(&f64s(&x), &[0.0, 2.0 / (1.0 + (-2f64).exp())], 1e-15);

    // Through a view, the base changes (and only where the view looks).
    let base = t64([-1.0, 1.0, -2.0, 2.0], &[2, 2]);
    let row = base.get(1).unwrap();
    assert!(F::relu(&row, true).unwrap().is(&row));
    assert_eq!(f64s(&base), [-1.0, 1.0, 0.0, 2.0]);
    let column = base.t().unwrap().get(0).unwrap(); // strided: elements 0 and 2
    F::silu(&column, true).unwrap();
    assert_close(&f64s(&base), &[-1.0 / (1.0 + 1f64.exp()), 1.0, 0.0, 2.0], 1e-15);

    // Integers keep their dtype under relu; bool and (for silu) integers are refused, and the
    // input is left as it was.
    let n = ints([-2, 5], &[2]);
    assert!(F::relu(&n, true).unwrap().is(&n));
    assert_eq!((n.dtype().unwrap(), n.to_vec::<i64>().unwrap()), (DType::Int64, vec![0, 5]));
    let flags = torchfn::tensor([true, false]).unwrap();
    assert_eq!(error(F::relu(&flags, true)).0, ErrorKind::Runtime);
    assert_eq!(flags.to_vec::<bool>().unwrap(), [true, false]);
    let m = ints([-2, 5], &[2]);
    assert_eq!(error(F::silu(&m, true)).0, ErrorKind::NotImplemented);
    assert_eq!(m.to_vec::<i64>().unwrap(), [-2, 5]);

    // By name, and on a subclass instance: the very same object comes back.
    let x = t32([-1.0, 1.0], &[2]);
    let out = F::RELU.call(&[x.clone().into()], &Kwargs::from([("inplace", Value::Bool(true))])).unwrap();
    assert!(out.as_tensor().unwrap().is(&x));
    assert_eq!(f32s(&x), [0.0, 1.0]);
    let marked = t32([-1.0, 1.0], &[2]).as_subclass(Marked).unwrap();
    let y = F::relu(&marked, true).unwrap();
    assert!(y.is(&marked) && y.is_instance::<Marked>());
    // Without inplace, the input is untouched.
    let x = t32([-1.0], &[1]);
    assert!(!F::relu(&x, false).unwrap().is(&x));
    assert_eq!(f32s(&x), [-1.0]);
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
    // By name, with the shape as a list, a tuple or a bare int (PyTorch's `int or list`).
    let eps = Kwargs::from([("eps", Value::Float(0.0))]);
    for shape in [Value::List(vec![2.into()]), Value::Tuple(vec![2.into()]), Value::Int(2)] {
        let out = F::LAYER_NORM.call(&[x.clone().into(), shape], &eps).unwrap();
        assert_eq!(f64s(out.as_tensor().unwrap()), [-1.0, 1.0, -1.0, 1.0]);
    }
    assert_eq!(f64s(&F::layer_norm(&x, 2, None, None, 0.0).unwrap()), [-1.0, 1.0, -1.0, 1.0]);
    let (kind, msg) = error(F::layer_norm(&x, -2, None, None, 1e-5));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("given normalized_shape=[-2], expected input with shape [*, -2]"), "{msg}");
    let (kind, msg) = error(F::LAYER_NORM.call(&[x.clone().into(), Value::Float(2.0)], &eps));
    assert_eq!(kind, ErrorKind::Type);
    assert!(msg.contains("normalized_shape"), "{msg}");

    let (kind, msg) = error(F::layer_norm(&x, [3], None, None, 1e-5));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("expected input with shape [*, 3], but got input of size [2, 2]"), "{msg}");
    assert_eq!(error(F::layer_norm(&x, [1, 2, 2], None, None, 1e-5)).0, ErrorKind::Runtime);
    assert_eq!(error(F::layer_norm(&x, [2], Some(&t64([1.0; 3], &[3])), None, 1e-5)).0, ErrorKind::Runtime);
    assert_eq!(error(F::layer_norm(&x, [2], None, Some(&t32([1.0; 2], &[2])), 1e-5)).0, ErrorKind::Runtime);
    assert_eq!(error(F::layer_norm(&ints([1, 2], &[2]), [2], None, None, 1e-5)).0, ErrorKind::NotImplemented);
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
}

#[test]
fn embedding_max_norm_renormalizes_the_rows_looked_up_in_place() {
    // Row norms: 5, 0.5, 10 and sqrt(2); rows 0 (twice), 1 and 2 are looked up.
    let weight = t64([3.0, 4.0, 0.3, 0.4, 6.0, 8.0, 1.0, 1.0], &[4, 2]);
    let idx = ints([0, 1, 0, 2], &[2, 2]);
    let out = F::embedding(&idx, &weight, None, Some(1.0), 2.0, false, false).unwrap();
    let (s0, s2) = (1.0 / (5.0 + 1e-7), 1.0 / (10.0 + 1e-7)); // max_norm / (norm + 1e-7)
    let renormed = [3.0 * s0, 4.0 * s0, 0.3, 0.4, 6.0 * s2, 8.0 * s2, 1.0, 1.0];
    assert_eq!(f64s(&weight), renormed, "rows 0 and 2 scaled, row 1 (small) and row 3 (not looked up) kept");
    assert_eq!(out.shape().unwrap(), [2, 2, 2]);
    let got = f64s(&out);
    assert_eq!(got, [renormed[0], renormed[1], 0.3, 0.4, renormed[0], renormed[1], renormed[4], renormed[5]]);
    for (i, row) in got.chunks(2).enumerate() {
        let norm = row[0].hypot(row[1]);
        assert!(norm <= 1.0 && (i == 1 || (norm - 1.0).abs() < 1e-7), "row {i} has norm {norm}");
    }
    // Rows already within max_norm are not touched again.
    F::embedding(&idx, &weight, None, Some(1.0), 2.0, false, false).unwrap();
    assert_eq!(f64s(&weight), renormed);

    // Other norms: 1-norm |1| + |-3| = 4, inf-norm 3, 0-"norm" the count of non-zeros (2).
    let one = ints([0], &[1]);
    for (norm_type, norm) in [(1.0, 4.0), (f64::INFINITY, 3.0), (0.0, 2.0), (3.0, 28f64.cbrt())] {
        let w = t64([1.0, -3.0], &[1, 2]);
        F::embedding(&one, &w, None, Some(1.0), norm_type, false, false).unwrap();
        let scale = 1.0 / (norm + 1e-7);
        assert_close(&f64s(&w), &[scale, -3.0 * scale], 1e-15);
    }

    // float32: the scale is converted to float32 and multiplied in, as PyTorch's `row *= scale`.
    let w = t32([30.0, 40.0], &[1, 2]);
    F::embedding(&one, &w, None, Some(2.0), 2.0, false, false).unwrap();
    let scale = (2.0 / (50.0 + 1e-7)) as f32;
    assert_eq!(f32s(&w), [30.0 * scale, 40.0 * scale]);

    // Through a non-contiguous view of another tensor: the rows of weight.t() are the columns
    // of the base.
    let base = t64([3.0, 1.0, 4.0, 0.0], &[2, 2]); // columns [3, 4] (norm 5) and [1, 0]
    let w = base.t().unwrap();
    F::embedding(&ints([0, 1], &[2]), &w, None, Some(2.5), 2.0, false, false).unwrap();
    let s = 2.5 / (5.0 + 1e-7);
    assert_eq!(f64s(&base), [3.0 * s, 1.0, 4.0 * s, 0.0]);

    // A NaN row is left alone, as in PyTorch (NaN > max_norm is false).
    let w = t64([f64::NAN, 10.0], &[1, 2]);
    F::embedding(&one, &w, None, Some(1.0), 2.0, false, false).unwrap();
    assert!(f64s(&w)[0].is_nan() && f64s(&w)[1] == 10.0);
}

#[test]
fn embedding_max_norm_errors_leave_weight_as_it_was() {
    let weight = t64([3.0, 4.0, 6.0, 8.0], &[2, 2]);
    // Every index is checked before any row changes.
    let (kind, msg) = error(F::embedding(&ints([0, 2], &[2]), &weight, None, Some(1.0), 2.0, false, false));
    assert_eq!(kind, ErrorKind::Index);
    assert!(msg.contains("index 2 is out of range"), "{msg}");
    assert_eq!(f64s(&weight), [3.0, 4.0, 6.0, 8.0]);
    // Integer weights have no norm to scale (they are looked up fine without max_norm).
    let iw = ints([3, 4], &[1, 2]);
    let (kind, msg) = error(F::embedding(&ints([0], &[1]), &iw, None, Some(1.0), 2.0, false, false));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("embedding(): max_norm") && msg.contains("floating point"), "{msg}");
    assert_eq!(iw.to_vec::<i64>().unwrap(), [3, 4]);
    assert_eq!(
        F::embedding(&ints([0], &[1]), &iw, None, None, 2.0, false, false).unwrap().to_vec::<i64>().unwrap(),
        [3, 4]
    );
    // An expanded weight shares memory between its rows: writing one would change all.
    let expanded = t64([3.0, 4.0], &[1, 2]).expand([3, 2]).unwrap();
    let (kind, msg) = error(F::embedding(&ints([0], &[1]), &expanded, None, Some(1.0), 2.0, false, false));
    assert_eq!(kind, ErrorKind::Runtime);
    assert!(msg.contains("single memory location"), "{msg}");
    assert_eq!(f64s(&expanded), [3.0, 4.0, 3.0, 4.0, 3.0, 4.0]);
    // By name.
    let w = t64([3.0, 4.0], &[1, 2]);
    let kwargs = Kwargs::from([("max_norm", Value::Float(1.0))]);
    F::EMBEDDING.call(&[ints([0], &[1]).into(), w.clone().into()], &kwargs).unwrap();
    assert_close(&f64s(&w), &[3.0 / (5.0 + 1e-7), 4.0 / (5.0 + 1e-7)], 1e-15);
}

#[test]
fn dropout_is_the_identity_outside_training() {
    let x = t32([1.0, f32::NAN, -2.0], &[3]);
    let same = F::dropout(&x, 0.5, false, false).unwrap();
    assert_eq!(same.data_ptr().unwrap(), x.data_ptr().unwrap(), "the input itself, not a copy");
    assert_eq!(F::dropout(&x, 0.0, true, false).unwrap().data_ptr().unwrap(), x.data_ptr().unwrap());
    assert!(F::dropout(&x, 0.5, false, true).unwrap().is(&x));
    assert_eq!(f32s(&x)[0], 1.0);
    // p = 1 multiplies by zero: NaN stays NaN.
    let zeroed = f32s(&F::dropout(&x, 1.0, true, false).unwrap());
    assert_eq!(zeroed[0], 0.0);
    assert!(zeroed[1].is_nan());
    assert_eq!(zeroed[2], 0.0);
    for p in [-0.1, 1.5, f64::NAN] {
        let (kind, msg) = error(F::dropout(&x, p, false, false));
        assert_eq!(kind, ErrorKind::Value);
        assert!(msg.contains("dropout probability has to be between 0 and 1"), "{msg}");
    }
}

/// The fraction of `values` that are exactly zero.
fn zero_fraction(values: &[f64]) -> f64 {
    values.iter().filter(|&&v| v == 0.0).count() as f64 / values.len() as f64
}

// The default generator is shared by tests running on parallel threads, so these tests check
// statistics (within six standard errors: a false failure about once in 5e8 runs), never the
// exact draws.
#[test]
fn dropout_in_training_zeroes_a_fraction_p_and_scales_the_rest() {
    // It compares two draws of the default generator, which a seeded test could reset to the
    // same state before each.
    let _seeded = crate::seeded();
    const N: usize = 100_000;
    // float64, p = 0.75: kept elements are x / (1 - p) = 4x exactly.
    let data: Vec<f64> = (0..N).map(|i| (i % 7 + 1) as f64).collect();
    let x = Tensor::from_vec(data.clone(), [N]).unwrap();
    let y = f64s(&F::dropout(&x, 0.75, true, false).unwrap());
    assert_eq!(f64s(&x), data, "the input is unchanged");
    let se = (0.75f64 * 0.25 / N as f64).sqrt();
    assert!((zero_fraction(&y) - 0.75).abs() < 6.0 * se, "{} zeroed", zero_fraction(&y));
    assert!(y.iter().zip(&data).all(|(&y, &x)| y == 0.0 || y == x / 0.25));
    // The mean is preserved: E[y] = E[x] = 4, with var(y) = E[x^2] / (1 - p) - 16 = 64.
    let mean = y.iter().sum::<f64>() / N as f64;
    assert!((mean - 4.0).abs() < 6.0 * (64.0 / N as f64).sqrt(), "mean {mean}");
    // Neighbours are dropped independently: both of a pair with probability p^2.
    let pairs = y.chunks(2).filter(|p| p[0] == 0.0 && p[1] == 0.0).count() as f64 / (N / 2) as f64;
    let pair_se = (0.5625f64 * 0.4375 / (N / 2) as f64).sqrt();
    assert!((pairs - 0.5625).abs() < 6.0 * pair_se, "{pairs} of pairs both dropped");
    // Each call draws afresh.
    assert_ne!(f64s(&F::dropout(&x, 0.75, true, false).unwrap()), y);

    // float32, p = 0.3: the scale is 1 / 0.7 in float32, as PyTorch's noise.div_(1 - p).
    let x = torchfn::full([N], 3.0, DType::Float32, None).unwrap();
    let y = f32s(&F::dropout(&x, 0.3, true, false).unwrap());
    let kept = 3.0f32 * (1.0f32 / 0.7f32);
    assert!(y.iter().all(|&v| v == 0.0 || v == kept), "{:?}", &y[..4]);
    let zeroed = y.iter().filter(|&&v| v == 0.0).count() as f64 / N as f64;
    assert!((zeroed - 0.3).abs() < 6.0 * (0.3f64 * 0.7 / N as f64).sqrt(), "{zeroed} zeroed");

    // By name, PyTorch's defaults: p = 0.5, training = True.
    let x = torchfn::ones([1000], DType::Float64, None).unwrap();
    let out = F::DROPOUT.call(&[x.clone().into()], &Kwargs::new()).unwrap();
    let y = f64s(out.as_tensor().unwrap());
    assert!(y.iter().all(|&v| v == 0.0 || v == 2.0));
    assert!((0.35..0.65).contains(&zero_fraction(&y)), "{}", zero_fraction(&y));

    // A dropped NaN or infinity is NaN (it is multiplied by 0); a kept one stays itself.
    let x = Tensor::from_vec(vec![f64::INFINITY; 200], [200]).unwrap();
    let y = f64s(&F::dropout(&x, 0.5, true, false).unwrap());
    assert!(y.iter().all(|v| v.is_nan() || *v == f64::INFINITY));
    assert!(y.iter().any(|v| v.is_nan()) && y.iter().any(|v| v.is_infinite()));
}

#[test]
fn dropout_in_place_writes_into_the_input() {
    let x = torchfn::ones([1000], DType::Float64, None).unwrap();
    let y = F::dropout(&x, 0.5, true, true).unwrap();
    assert!(y.is(&x), "dropout(inplace=True) returns the input itself");
    let values = f64s(&x);
    assert!(values.iter().all(|&v| v == 0.0 || v == 2.0));
    assert!((0.35..0.65).contains(&zero_fraction(&values)), "{}", zero_fraction(&values));

    // Through a view: only the viewed row of the base changes.
    let base = torchfn::ones([2, 500], DType::Float64, None).unwrap();
    F::dropout(&base.get(1).unwrap(), 0.5, true, true).unwrap();
    let values = f64s(&base);
    assert!(values[..500].iter().all(|&v| v == 1.0));
    assert!(values[500..].iter().all(|&v| v == 0.0 || v == 2.0));
    assert!((0.3..0.7).contains(&zero_fraction(&values[500..])));

    // Integers and bools: p = 1 multiplies by zero in their own dtype; 0 < p < 1 would scale
    // by a float, which they cannot hold (PyTorch fails too), and leaves them as they were.
    let n = ints([3, -4], &[2]);
    assert!(F::dropout(&n, 1.0, true, true).unwrap().is(&n));
    assert_eq!((n.dtype().unwrap(), n.to_vec::<i64>().unwrap()), (DType::Int64, vec![0, 0]));
    let flags = torchfn::tensor([true, true]).unwrap();
    F::dropout(&flags, 1.0, true, true).unwrap();
    assert_eq!(flags.to_vec::<bool>().unwrap(), [false, false]);
    let n = ints([3, -4], &[2]);
    for inplace in [false, true] {
        let (kind, msg) = error(F::dropout(&n, 0.5, true, inplace));
        assert_eq!(kind, ErrorKind::Runtime);
        assert!(msg.contains("dropout()") && msg.contains("expected a floating point tensor"), "{msg}");
        assert_eq!(n.to_vec::<i64>().unwrap(), [3, -4]);
    }
    assert_eq!(error(F::dropout(&torchfn::tensor([true]).unwrap(), 0.5, true, false)).0, ErrorKind::Runtime);
}
