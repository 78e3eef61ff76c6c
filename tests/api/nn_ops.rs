//! The operations GPT-2 and ResNet training need beyond the others: gradient clipping against
//! PyTorch's results (the `clip_grad` section of `tests/golden/nn_ops.json`; the other
//! operations' cases run in `grads`), and what the golden cases cannot show: in-place rules,
//! gradients through masked-out attention rows, the method and by-name forms.

use serde_json::Value as Json;
use torchfn::nn::functional as F;
use torchfn::nn::utils::{clip_grad_norm_, clip_grad_value_};
use torchfn::overrides::find_function;
use torchfn::prelude::*;

use crate::golden::{Place, compare, number, value};

/// The case's parameters, with their gradients set.
fn parameters(case: &Json) -> Vec<Tensor> {
    let grads = case["grads"].as_array().unwrap();
    case["params"]
        .as_array()
        .unwrap()
        .iter()
        .zip(grads)
        .map(|(p, g)| {
            let p = value(p).as_tensor().unwrap().requires_grad_(true).unwrap();
            if !g.is_null() {
                p.set_grad(Some(value(g).as_tensor().unwrap())).unwrap();
            }
            p
        })
        .collect()
}

fn run_clip(case: &Json) -> Result<(), String> {
    let params = parameters(case);
    let (max_norm, norm_type) = (number(&case["max_norm"]), number(&case["norm_type"]));
    let error_if_nonfinite = case["error_if_nonfinite"].as_bool().unwrap();
    let result = clip_grad_norm_(&params, max_norm, norm_type, error_if_nonfinite, None);
    let want_grads = if case.get("error").is_some() { &case["grads"] } else { &case["expect_grads"] };
    match (case.get("error").and_then(Json::as_str), result) {
        (Some(want), Err(e)) if e.kind().python_name() == want => {}
        (Some(want), other) => return Err(format!("expected a {want}, got {other:?}")),
        (None, Err(e)) => return Err(format!("raised {e:?}")),
        (None, Ok(total)) => compare(&case["expect_total"], &Value::Tensor(total), None, Place::Cpu)?,
    }
    for (i, (p, want)) in params.iter().zip(want_grads.as_array().unwrap()).enumerate() {
        match (p.grad().unwrap(), want.is_null()) {
            (None, true) => {}
            (Some(g), false) => {
                compare(want, &Value::Tensor(g), None, Place::Cpu).map_err(|e| format!("grad {i}: {e}"))?
            }
            (got, _) => return Err(format!("grad {i}: {got:?}, expected {want}")),
        }
    }
    Ok(())
}

#[test]
fn clip_grad_norm_matches_pytorch() {
    let cases = crate::grads::golden_file("nn_ops.json")["clip_grad"].as_array().unwrap().clone();
    let failures: Vec<String> =
        cases.iter().enumerate().filter_map(|(i, c)| run_clip(c).err().map(|e| format!("case {i}: {e}"))).collect();
    println!("clip_grad_norm_ golden cases: {} of {} pass", cases.len() - failures.len(), cases.len());
    assert!(cases.len() >= 8);
    assert!(failures.is_empty(), "{} of {} fail:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn gradient_clipping_is_overridable_and_refuses_foreach() {
    let w = torchfn::zeros([2], None, None).unwrap().requires_grad_(true).unwrap();
    w.set_grad(Some(&torchfn::tensor([3.0f32, 4.0]).unwrap())).unwrap();
    let func = find_function("torchfn.nn.utils.clip_grad_norm_").unwrap();
    let mut kwargs = Kwargs::new();
    kwargs.insert("norm_type", Value::Float(f64::INFINITY));
    let total = func.call(&[Value::List(vec![w.clone().into()]), Value::Float(2.0)], &kwargs).unwrap();
    assert_eq!(total.as_tensor().unwrap().item().unwrap(), Scalar::Float(4.0));
    let g = w.grad().unwrap().unwrap().to_vec::<f32>().unwrap();
    assert!((g[0] - 1.5).abs() < 1e-5 && (g[1] - 2.0).abs() < 1e-5, "{g:?}");
    let err = clip_grad_norm_(std::slice::from_ref(&w), 1.0, 2.0, false, Some(true)).unwrap_err();
    assert!(err.to_string().contains("foreach=True"), "{err}");
    assert!(clip_grad_norm_(std::slice::from_ref(&w), 1.0, f64::NAN, false, None).is_err());
    clip_grad_value_(std::slice::from_ref(&w), 1.25, Some(false)).unwrap();
    assert_eq!(w.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), [1.25, 1.25]);
    // Nothing recorded: the gradient is no graph's output.
    assert!(w.grad().unwrap().unwrap().grad_fn().unwrap().is_none());
}

#[test]
fn masked_fill_in_place_follows_autograd_s_rules() {
    let mask = torchfn::tensor([true, false, true]).unwrap();
    let leaf = torchfn::ones([3], None, None).unwrap().requires_grad_(true).unwrap();
    assert!(leaf.masked_fill_(&mask, &0.0.into()).is_err(), "a leaf that requires grad");
    // Through a non-leaf: the filled positions get no gradient.
    let y = (&leaf * 2.0).unwrap();
    y.masked_fill_(&mask, &0.0.into()).unwrap();
    y.sum().unwrap().backward().unwrap();
    assert_eq!(leaf.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), [0.0, 2.0, 0.0]);
    // Overwriting a tensor that backward needs is caught by the version counter.
    let x = torchfn::ones([3], None, None).unwrap().requires_grad_(true).unwrap();
    let e = x.exp().unwrap();
    let out = (&e * &e).unwrap().sum().unwrap();
    e.masked_fill_(&mask, &1.0.into()).unwrap();
    assert!(out.backward().is_err());
    // The mask broadcasts to self, never self to the mask.
    let t = torchfn::zeros([3], None, None).unwrap();
    assert!(t.masked_fill_(&torchfn::tensor([[true], [false]]).unwrap(), &1.0.into()).is_err());
}

#[test]
fn attention_rows_masked_out_entirely_give_zeros_and_finite_gradients() {
    let q = torchfn::randn([3, 2], None, Some(DType::Float64), None).unwrap();
    let (k, v) = (
        torchfn::randn([4, 2], None, Some(DType::Float64), None).unwrap(),
        torchfn::randn([4, 3], None, Some(DType::Float64), None).unwrap(),
    );
    let mask =
        torchfn::tensor([[true, false, true, true], [false, false, false, false], [true, true, true, false]]).unwrap();
    let leaves: Vec<Tensor> = [&q, &k, &v].iter().map(|t| t.requires_grad_(true).unwrap()).collect();
    let out =
        F::scaled_dot_product_attention(&leaves[0], &leaves[1], &leaves[2], Some(&mask), 0.0, false, None).unwrap();
    assert_eq!(out.get(1).unwrap().to_vec::<f64>().unwrap(), [0.0, 0.0, 0.0]);
    out.sum().unwrap().backward().unwrap();
    for leaf in &leaves {
        assert!(leaf.grad().unwrap().unwrap().to_vec::<f64>().unwrap().iter().all(|g| g.is_finite()));
    }
    let options = torchfn::autograd::GradcheckOptions::new().eps(1e-6).atol(1e-5).rtol(1e-3);
    let f = |x: &[Tensor]| {
        F::scaled_dot_product_attention(&x[0], &x[1], &x[2], Some(&mask), 0.0, false, None).map(Value::Tensor)
    };
    assert!(torchfn::autograd::gradcheck(f, &leaves, &options).unwrap());
}

#[test]
fn attention_dropout_draws_from_the_default_generator() {
    let _seeded = crate::seeded();
    let q = torchfn::randn([2, 4, 3], None, None, None).unwrap();
    let draw = || {
        torchfn::manual_seed(7);
        F::scaled_dot_product_attention(&q, &q, &q, None, 0.5, true, None).unwrap().to_vec::<f32>().unwrap()
    };
    assert_eq!(draw(), draw(), "the same seed, the same draw");
    let plain = F::scaled_dot_product_attention(&q, &q, &q, None, 0.0, true, None).unwrap().to_vec::<f32>().unwrap();
    assert_ne!(draw(), plain);
    let err = F::scaled_dot_product_attention(&q, &q, &q, None, -0.1, false, None).unwrap_err();
    assert!(err.to_string().contains("dropout"), "{err}");
}

#[test]
fn the_conversions_and_splits_training_code_uses_work_by_name() {
    let t = torchfn::tensor([[1.5f32, -2.5], [3.0, 4.0], [5.0, 6.0]]).unwrap();
    let converted = Tensor::TYPE.call(&[t.clone().into(), Value::DType(DType::Int64)], &Kwargs::new()).unwrap();
    assert_eq!(converted.as_tensor().unwrap().to_vec::<i64>().unwrap(), [1, -2, 3, 4, 5, 6]);
    let pieces = t.split([1, 2], 0).unwrap();
    assert_eq!(pieces.iter().map(|p| p.shape().unwrap()[0]).collect::<Vec<_>>(), [1, 2]);
    assert!(pieces[1].get((0, 0)).unwrap().fill_(9.0).is_ok());
    assert_eq!(t.to_vec::<f32>().unwrap()[2], 9.0, "split gives views");
    let err = t.split([1, 1], 0).unwrap_err();
    assert!(err.to_string().contains("sum exactly to 3"), "{err}");
    let err = torchfn::baddbmm(&t, &torchfn::ones([2, 3], None, None).unwrap(), &t, 1, 1).unwrap_err();
    assert!(err.to_string().contains("batch1"), "{err}");
}

/// `F.pad` in its four modes, values, errors and gradients as PyTorch 2.15 gives them for
/// `x = torch.arange(6.).reshape(1, 2, 3)`.
#[test]
fn pad_matches_pytorch_in_every_mode() {
    let x = torchfn::tensor([[[0.0f64, 1.0, 2.0], [3.0, 4.0, 5.0]]]).unwrap().requires_grad_(true).unwrap();
    let cases: [(&str, [f64; 12], [f64; 6]); 4] = [
        ("constant", [0., 0., 0., 1., 2., 0., 0., 0., 3., 4., 5., 0.], [1.; 6]),
        ("reflect", [2., 1., 0., 1., 2., 1., 5., 4., 3., 4., 5., 4.], [1., 3., 2., 1., 3., 2.]),
        ("replicate", [0., 0., 0., 1., 2., 2., 3., 3., 3., 4., 5., 5.], [3., 1., 2., 3., 1., 2.]),
        ("circular", [1., 2., 0., 1., 2., 0., 4., 5., 3., 4., 5., 3.], [2.; 6]),
    ];
    for (mode, values, grads) in cases {
        x.set_grad(None).unwrap();
        let y = F::pad(&x, vec![2, 1], mode, None).unwrap();
        assert_eq!(y.shape().unwrap().to_vec(), [1, 2, 6], "{mode}");
        assert_eq!(y.to_vec::<f64>().unwrap(), values, "{mode}");
        y.sum().unwrap().backward().unwrap();
        assert_eq!(x.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), grads, "{mode}");
    }
    let nines = F::pad(&x, vec![1, 1, 1, 0], "constant", Some(9.0)).unwrap();
    assert_eq!(nines.to_vec::<f64>().unwrap(), [9., 9., 9., 9., 9., 9., 0., 1., 2., 9., 9., 3., 4., 5., 9.]);
    assert_eq!(
        F::pad(&x, vec![-1, 2], "constant", None).unwrap().to_vec::<f64>().unwrap(),
        [1., 2., 0., 0., 4., 5., 0., 0.]
    );
    assert_eq!(F::pad(&x, vec![1, 1, 1, 1], "reflect", None).unwrap().shape().unwrap().to_vec(), [1, 4, 5]);
    assert_eq!(F::pad(&x, vec![-1, 0], "replicate", None).unwrap().shape().unwrap().to_vec(), [1, 2, 2]);
    let error = |pad: Vec<i64>, mode: &str| F::pad(&x, pad, mode, None).unwrap_err();
    assert!(error(vec![1], "constant").to_string().contains("Padding length must be divisible by 2"));
    assert!(error(vec![1; 8], "constant").to_string().contains("padding length 8 and input of dimension 3"));
    assert!(error(vec![3, 3], "reflect").to_string().contains("padding (3, 3) at dimension 2 of input [1, 2, 3]"));
    assert_eq!(error(vec![1, 1], "foo").kind(), torchfn::ErrorKind::NotImplemented);
    assert!(error(vec![4, 0], "circular").to_string().contains("wrapping around more than once"));
    let flat = torchfn::tensor([0.0f32, 1.0, 2.0]).unwrap();
    assert_eq!(F::pad(&flat, vec![1, 1], "reflect", None).unwrap_err().kind(), torchfn::ErrorKind::NotImplemented);
}

/// `F.group_norm` against PyTorch 2.15 (scratch run): `x = torch.arange(24.).reshape(2, 4, 3).sin()`
/// in float64, two groups, a weight and a bias, and the gradients of `(y * y).sum()`.
#[test]
fn group_norm_matches_pytorch() {
    let x = torchfn::arange(24, DType::Float64, None).unwrap().reshape(&[2, 4, 3]).unwrap().sin().unwrap();
    let x = x.requires_grad_(true).unwrap();
    let w = torchfn::tensor([1.0f64, 2.0, 3.0, 4.0]).unwrap().requires_grad_(true).unwrap();
    let b = torchfn::tensor([0.5f64, -0.5, 1.0, 0.0]).unwrap().requires_grad_(true).unwrap();
    let y = F::group_norm(&x, 2, Some(&w), Some(&b), 1e-5).unwrap();
    let close = |got: Vec<f64>, want: &[f64]| {
        assert!(got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-8), "{got:?}\n{want:?}");
    };
    close(
        y.to_vec::<f64>().unwrap()[..6].to_vec(),
        &[0.4587658258, 1.6405449892, 1.7358018399, -0.186084663, -2.708206338, -3.2759343088],
    );
    (&y * &y).unwrap().sum().unwrap().backward().unwrap();
    close(
        x.grad().unwrap().unwrap().to_vec::<f64>().unwrap()[..6].to_vec(),
        &[5.6373049139, -1.5619564332, -2.1422500988, 1.5392889885, -1.4048336292, -2.0675537413],
    );
    close(
        w.grad().unwrap().unwrap().to_vec::<f64>().unwrap(),
        &[14.810522261834477, 28.58224150673031, 38.80789734830123, 49.65171323594203],
    );
    close(
        b.grad().unwrap().unwrap().to_vec::<f64>().unwrap(),
        &[12.802841554973828, -19.60568310994766, 24.144543458544465, -16.192724611392627],
    );
    let err = F::group_norm(&x, 3, None, None, 1e-5).unwrap_err();
    assert!(err.to_string().contains("input of shape [2, 4, 3] and num_groups=3"), "{err}");
}

/// `F.binary_cross_entropy_with_logits` against PyTorch 2.15 (scratch run), with a weight, a
/// positive weight, logits of ±40 (which a naive `log(sigmoid(x))` loses) and gradients for
/// both the logits and the targets.
#[test]
fn binary_cross_entropy_with_logits_matches_pytorch() {
    let x = torchfn::tensor([[0.5f64, -1.0], [2.0, 0.0], [40.0, -40.0]]).unwrap().requires_grad_(true).unwrap();
    let t = torchfn::tensor([[1.0f64, 0.0], [0.0, 1.0], [0.0, 1.0]]).unwrap().requires_grad_(true).unwrap();
    let (w, pw) = (torchfn::tensor([1.0f64, 2.0]).unwrap(), torchfn::tensor([2.0f64, 0.5]).unwrap());
    let loss = F::binary_cross_entropy_with_logits(&x, &t, Some(&w), None, None, "sum", Some(&pw)).unwrap();
    let close = |got: Vec<f64>, want: &[f64]| {
        assert!(got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9), "{got:?}\n{want:?}");
    };
    close(vec![loss.item().unwrap().to_f64()], &[84.39475253499958]);
    loss.backward().unwrap();
    let dx = [-0.7550813375962908, 0.5378828427399902, 0.8807970779778823, -0.5, 1.0, -1.0];
    close(x.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), &dx);
    let dt = [-0.025923015819893314, 0.6867383124817771, -1.8730719889570278, -std::f64::consts::LN_2, -40.0, 40.0];
    close(t.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), &dt);
    let err = F::binary_cross_entropy_with_logits(&x, &w, None, None, None, "mean", None).unwrap_err();
    assert!(err.to_string().contains("Target size ([2]) must be the same as input size ([3, 2])"), "{err}");
}

/// `F.interpolate` against PyTorch 2.15 (scratch run) on `x = torch.arange(12.).reshape(1, 1, 3,
/// 4).sin()` in float64: the first eight outputs of each mode, the linear gradient, and the
/// argument errors.
#[test]
fn interpolate_matches_pytorch() {
    let x = torchfn::arange(12, DType::Float64, None).unwrap().reshape(&[1, 1, 3, 4]).unwrap().sin().unwrap();
    let size = || Some(torchfn::IntList::from([5, 3]));
    /// (size, scale_factor, mode, align_corners, the output's plane, its first eight values)
    type Case =
        (Option<torchfn::IntList>, Option<torchfn::FloatList>, &'static str, Option<bool>, [usize; 2], [f64; 8]);
    let cases: [Case; 6] = [
        (
            size(),
            None,
            "nearest",
            None,
            [5, 3],
            [0.0, 0.8414709848, 0.9092974268, 0.0, 0.8414709848, 0.9092974268, -0.7568024953, -0.9589242747],
        ),
        (
            None,
            Some(2.0.into()),
            "nearest",
            None,
            [6, 8],
            [0.0, 0.0, 0.8414709848, 0.8414709848, 0.9092974268, 0.9092974268, 0.1411200081, 0.1411200081],
        ),
        (
            size(),
            None,
            "nearest-exact",
            None,
            [5, 3],
            [0.0, 0.9092974268, 0.1411200081, 0.0, 0.9092974268, 0.1411200081, -0.7568024953, -0.2794154982],
        ),
        (
            size(),
            None,
            "bilinear",
            None,
            [5, 3],
            [
                0.1402451641,
                0.8753842058,
                0.2691495779,
                -0.2320486849,
                0.2775625689,
                0.3618575797,
                -0.7904894585,
                -0.6191698864,
            ],
        ),
        (
            size(),
            None,
            "bilinear",
            Some(true),
            [5, 3],
            [0.0, 0.8753842058, 0.1411200081, -0.3784012477, 0.1281071597, 0.3990533034, -0.7568024953, -0.6191698864],
        ),
        (
            None,
            Some(1.5.into()),
            "bilinear",
            None,
            [4, 6],
            [0.0, 0.4207354924, 0.8527753918, 0.8979930198, 0.5252087174, 0.1411200081, -0.3784012477, -0.2185639463],
        ),
    ];
    for (size, scale, mode, align, out, want) in cases {
        let y = F::interpolate(&x, size, scale, mode, align).unwrap();
        assert_eq!(y.shape().unwrap().to_vec(), [1, 1, out[0], out[1]], "{mode}");
        let got = y.to_vec::<f64>().unwrap();
        assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() < 1e-9), "{mode} {align:?}: {got:?}");
    }
    let line =
        torchfn::arange(5, DType::Float64, None).unwrap().reshape(&[1, 1, 5]).unwrap().requires_grad_(true).unwrap();
    let y = F::interpolate(&line, Some(3.into()), None, "linear", None).unwrap();
    let got = y.to_vec::<f64>().unwrap();
    assert!(got.iter().zip([1.0 / 3.0, 2.0, 11.0 / 3.0]).all(|(g, w)| (g - w).abs() < 1e-12), "{got:?}");
    y.sum().unwrap().backward().unwrap();
    let grad = line.grad().unwrap().unwrap().to_vec::<f64>().unwrap();
    assert!(
        grad.iter().zip([2.0 / 3.0, 1.0 / 3.0, 1.0, 1.0 / 3.0, 2.0 / 3.0]).all(|(g, w)| (g - w).abs() < 1e-12),
        "{grad:?}"
    );
    let error = |size: Option<torchfn::IntList>, scale: Option<torchfn::FloatList>, mode: &str, align: Option<bool>| {
        F::interpolate(&x, size, scale, mode, align).unwrap_err().to_string()
    };
    assert!(error(Some([2, 2].into()), Some(2.0.into()), "nearest", None).contains("only one of size or scale_factor"));
    assert!(error(None, None, "nearest", None).contains("either size or scale_factor"));
    assert!(error(Some(3.into()), None, "linear", None).contains("Got 4D input, but linear mode needs 3D input"));
    assert!(error(Some([2, 2].into()), None, "nearest", Some(true)).contains("align_corners option can only be set"));
    assert!(error(Some([2, 2].into()), None, "bicubic2", None).contains("the bicubic2 mode is not available"));
}

/// `multi_head_attention_forward`'s argument errors: heads that do not divide the embedding
/// (PyTorch's assertion), a wrong embedding size, and `static_k`, which torchfn does not take.
#[test]
fn multi_head_attention_refuses_bad_arguments() {
    let x = torchfn::zeros([3, 2, 4], None, None).unwrap();
    let (w, b) = (torchfn::zeros([12, 4], None, None).unwrap(), torchfn::zeros([12], None, None).unwrap());
    let ow = torchfn::zeros([4, 4], None, None).unwrap();
    let call = |embed: i64, heads: i64, static_k: Option<&Tensor>| {
        F::multi_head_attention_forward(
            &x,
            &x,
            &x,
            embed,
            heads,
            Some(&w),
            Some(&b),
            None,
            None,
            false,
            0.0,
            &ow,
            None,
            true,
            None,
            true,
            None,
            false,
            None,
            None,
            None,
            static_k,
            None,
            true,
            false,
        )
    };
    let err = call(4, 3, None).unwrap_err();
    assert!(err.to_string().contains("embed_dim 4 not divisible by num_heads 3"), "{err}");
    let err = call(8, 2, None).unwrap_err();
    assert!(err.to_string().contains("was expecting embedding dimension of 8, but got 4"), "{err}");
    assert_eq!(call(4, 2, Some(&x)).unwrap_err().kind(), torchfn::ErrorKind::NotImplemented);
    let (out, weights) = call(4, 2, None).unwrap();
    assert_eq!((out.shape().unwrap(), weights.unwrap().shape().unwrap()), ([3, 2, 4].into(), [2, 3, 3].into()));
}

/// `ctc_loss` after a `log_softmax` (how it is used) passes gradcheck and gradgradcheck: its
/// log_probs gradient is PyTorch's (the logits', checked against PyTorch in nn_ops.json), which
/// through the log_softmax is the derivative.
#[test]
fn ctc_loss_through_log_softmax_passes_gradcheck() {
    use torchfn::autograd::{GradcheckOptions, gradcheck, gradgradcheck};
    let logits = torchfn::randn([5, 2, 4], Generator::new().manual_seed(3), Some(DType::Float64), None).unwrap();
    let logits = logits.requires_grad_(true).unwrap();
    let targets = torchfn::tensor([[1i64, 2, 2], [3, 1, 0]]).unwrap();
    let (inputs, lengths) = (torchfn::tensor([5i64, 4]).unwrap(), torchfn::tensor([3i64, 2]).unwrap());
    let f = |x: &[Tensor]| {
        let lp = F::log_softmax(&x[0], -1, 3, None)?;
        F::ctc_loss(&lp, &targets, &inputs, &lengths, 0, "mean", false)
    };
    let options = GradcheckOptions::new().eps(1e-6).atol(1e-5).rtol(1e-3);
    assert!(gradcheck(f, std::slice::from_ref(&logits), &options).unwrap());
    assert!(gradgradcheck(f, std::slice::from_ref(&logits), None, &options).unwrap());
}
