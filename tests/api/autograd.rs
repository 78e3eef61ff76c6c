//! Autograd as a user meets it: leaves and their gradients, the graph's nodes, hooks, grad
//! mode, in-place rules and version counters, higher order, subclasses and modes.

use torchfn::autograd::{self, no_grad};
use torchfn::prelude::*;

fn leaf(values: &[f64]) -> Tensor {
    torchfn::tensor(values.to_vec()).unwrap().requires_grad_(true).unwrap()
}

fn grad_of(t: &Tensor) -> Vec<f64> {
    t.grad().unwrap().expect("a gradient").to_vec::<f64>().unwrap()
}

#[test]
fn backward_accumulates_into_leaves() {
    let x = leaf(&[1.0, 2.0, 3.0]);
    let y = (&x * &x).unwrap().sum().unwrap();
    y.backward().unwrap();
    assert_eq!(grad_of(&x), [2.0, 4.0, 6.0]);
    // A second graph adds to the same grad.
    (&x * 3.0).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), [5.0, 7.0, 9.0]);
    x.set_grad(None).unwrap();
    assert!(x.grad().unwrap().is_none());
}

/// As PyTorch's `AccumulateGrad`: a later gradient is added into the gradient's memory (a handle
/// taken before sees the sum, and the write counts as a version), except under `create_graph`,
/// which makes a new tensor; the first gradient never aliases a tensor the caller holds.
#[test]
fn accumulation_adds_into_the_gradient_in_place_except_under_create_graph() {
    let x = leaf(&[1.0, 1.0, 1.0]);
    (&x * 2.0).unwrap().sum().unwrap().backward().unwrap();
    let first = x.grad().unwrap().unwrap();
    let (ptr, version) = (first.data_ptr().unwrap(), first.array().unwrap().storage.version());
    (&x * 3.0).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(first.to_vec::<f64>().unwrap(), [5.0, 5.0, 5.0], "the earlier handle sees the sum");
    assert_eq!(x.grad().unwrap().unwrap().data_ptr().unwrap(), ptr, "the same memory");
    assert_eq!(first.array().unwrap().storage.version(), version + 1);

    let x = leaf(&[1.0, 1.0, 1.0]);
    (&x * 2.0).unwrap().sum().unwrap().backward_with(None, None, true, None).unwrap();
    let first = x.grad().unwrap().unwrap();
    (&x * 3.0).unwrap().sum().unwrap().backward_with(None, None, true, None).unwrap();
    assert_eq!(first.to_vec::<f64>().unwrap(), [2.0, 2.0, 2.0], "create_graph adds out of place");
    assert_eq!(grad_of(&x), [5.0, 5.0, 5.0]);

    // The gradient handed to backward reaches the leaf unchanged through `clone`, but the leaf
    // gets its own copy while the caller holds it.
    let x = leaf(&[1.0, 1.0, 1.0]);
    let g = torchfn::ones([3], DType::Float64, None).unwrap();
    x.clone().backward_with(Some(&g), None, false, None).unwrap();
    g.add_(&g, 1).unwrap();
    assert_eq!(grad_of(&x), [1.0, 1.0, 1.0]);
    assert_ne!(x.grad().unwrap().unwrap().data_ptr().unwrap(), g.data_ptr().unwrap());
}

#[test]
fn nodes_are_named_like_pytorch_and_link_to_their_inputs() {
    let (a, b) = (leaf(&[1.0]), leaf(&[2.0]));
    let y = (&a * &b).unwrap();
    assert!(!y.is_leaf().unwrap() && a.is_leaf().unwrap());
    let node = y.grad_fn().unwrap().unwrap();
    assert_eq!(node.name(), "MulBackward0");
    let next = node.next_functions();
    assert_eq!(next.len(), 2);
    let (acc, nr) = next[0].clone().unwrap();
    assert_eq!((acc.name().as_ref(), nr), ("AccumulateGrad", 0));
    assert!(acc.variable().unwrap().is(&a));
    assert_eq!(torchfn::exp(&a).unwrap().grad_fn().unwrap().unwrap().name(), "ExpBackward0");
    assert!(a.grad_fn().unwrap().is_none());
}

#[test]
fn grad_returns_instead_of_accumulating_and_reports_unused_inputs() {
    let (x, unused) = (leaf(&[2.0]), leaf(&[5.0]));
    let y = (&x * &x).unwrap();
    let g = autograd::grad(std::slice::from_ref(&y), std::slice::from_ref(&x), None, Some(true), false, false).unwrap();
    assert_eq!(g[0].as_ref().unwrap().to_vec::<f64>().unwrap(), [4.0]);
    assert!(x.grad().unwrap().is_none());
    let err = autograd::grad(std::slice::from_ref(&y), std::slice::from_ref(&unused), None, Some(true), false, false)
        .unwrap_err();
    assert!(err.to_string().contains("allow_unused"), "{err}");
    let g = autograd::grad(&[y], &[unused], None, None, false, true).unwrap();
    assert!(g[0].is_none());
}

#[test]
fn grad_gives_an_input_passed_twice_its_gradient_twice() {
    let x = leaf(&[2.0, 3.0]);
    let y = (&x * &x).unwrap().sum().unwrap();
    let g = autograd::grad(&[y], &[x.clone(), x], None, None, false, false).unwrap();
    for g in g {
        assert_eq!(g.unwrap().to_vec::<f64>().unwrap(), [4.0, 6.0]);
    }
}

#[test]
fn higher_order_gradients_come_from_create_graph() {
    let x = leaf(&[2.0]);
    let y = torchfn::sin(&x).unwrap();
    let dy = autograd::grad(&[y], std::slice::from_ref(&x), None, None, true, false).unwrap()[0].clone().unwrap();
    let d2y = autograd::grad(&[dy], &[x], None, None, false, false).unwrap()[0].clone().unwrap();
    assert!((d2y.to_vec::<f64>().unwrap()[0] + 2.0f64.sin()).abs() < 1e-12);
}

#[test]
fn no_grad_records_nothing_and_is_per_thread() {
    let x = leaf(&[1.0]);
    {
        let _guard = no_grad();
        assert!(!autograd::is_grad_enabled());
        assert!(!(&x * 2.0).unwrap().requires_grad().unwrap());
        // Another thread starts with grad mode on, the kernels' workers too.
        std::thread::spawn(|| assert!(autograd::is_grad_enabled())).join().unwrap();
        // A kernel's calls run on this thread (grad mode off) and on the workers (on).
        let seen = torchfn_kernels::cpu::threads::map(0..64, |_| {
            let worker = std::thread::current().name().is_some_and(|n| n.starts_with("torchfn-cpu"));
            (worker, autograd::is_grad_enabled())
        });
        assert!(seen.into_iter().all(|(worker, on)| worker == on));
        let _on = autograd::enable_grad();
        assert!((&x * 2.0).unwrap().requires_grad().unwrap());
    }
    assert!(autograd::is_grad_enabled());
}

#[test]
fn misuse_gives_errors_not_panics() {
    let x = leaf(&[1.0, 2.0]);
    let y = (&x * 2.0).unwrap();
    let err = y.backward().unwrap_err();
    assert!(err.to_string().contains("implicitly created only for scalar outputs"), "{err}");
    let wrong = torchfn::tensor([1.0f64, 2.0, 3.0]).unwrap();
    let err = y.backward_with(Some(&wrong), None, false, None).unwrap_err();
    assert!(err.to_string().contains("Mismatch in shape"), "{err}");
    let err = torchfn::tensor([1i64]).unwrap().requires_grad_(true).unwrap_err();
    assert!(err.to_string().contains("floating point"), "{err}");
    let err = torchfn::tensor([1.0f64]).unwrap().backward().unwrap_err();
    assert!(err.to_string().contains("does not require grad"), "{err}");
    // Saved tensors are freed by the first backward.
    let e = torchfn::exp(&x).unwrap().sum().unwrap();
    e.backward_with(None, None, false, None).unwrap();
    let err = e.backward().unwrap_err();
    assert!(err.to_string().contains("backward through the graph a second time"), "{err}");
    // Integer results are not differentiable.
    let flags = torchfn::gt(&x, &Tensor::scalar(1.0)).unwrap();
    assert!(!flags.requires_grad().unwrap());
}

#[test]
fn in_place_changes_are_checked_by_version() {
    let x = leaf(&[1.0, 2.0]);
    let err = x.add_(&Tensor::scalar(1.0), 1).unwrap_err();
    assert!(err.to_string().contains("leaf Variable that requires grad"), "{err}");
    let y = torchfn::exp(&x).unwrap();
    y.mul_(&Tensor::scalar(2.0)).unwrap();
    let err = y.sum().unwrap().backward().unwrap_err();
    let text = err.to_string();
    assert!(text.contains("modified by an inplace operation") && text.contains("ExpBackward0"), "{text}");
    assert!(text.contains("version 1; expected version 0"), "{text}");
    // In place on a result whose node saved nothing of it is fine, and differentiates.
    let z = (&x * 3.0).unwrap();
    z.add_(&x, 1).unwrap();
    z.sum().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), [4.0, 4.0]);
}

#[test]
fn in_place_writes_through_a_view_reach_the_base() {
    let x = leaf(&[1.0, 2.0, 3.0]);
    let y = (&x * 2.0).unwrap();
    let first = y.get(0).unwrap();
    first.mul_(&Tensor::scalar(10.0)).unwrap(); // y[0] *= 10
    assert_eq!(y.to_vec::<f64>().unwrap(), [20.0, 4.0, 6.0]);
    y.sum().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), [20.0, 2.0, 2.0]);
}

#[test]
fn hooks_see_and_replace_gradients_and_retain_grad_keeps_them() {
    let x = leaf(&[1.0, 2.0]);
    let y = (&x * 2.0).unwrap();
    y.retain_grad().unwrap();
    y.register_hook(|g| Ok(Some((g * 10.0)?))).unwrap();
    y.sum().unwrap().backward().unwrap();
    assert_eq!(grad_of(&y), [1.0, 1.0]); // retained before the hook ran
    assert_eq!(grad_of(&x), [20.0, 20.0]);
}

#[test]
fn broadcasting_and_mixed_dtypes_give_gradients_of_the_inputs_shape_and_dtype() {
    let a = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]]).unwrap().requires_grad_(true).unwrap();
    let b = torchfn::tensor([10.0f64]).unwrap().requires_grad_(true).unwrap();
    (&a * &b).unwrap().sum().unwrap().backward().unwrap();
    let (ga, gb) = (a.grad().unwrap().unwrap(), b.grad().unwrap().unwrap());
    assert_eq!((ga.shape().unwrap().to_vec(), ga.dtype().unwrap()), (vec![2, 2], DType::Float32));
    assert_eq!((gb.shape().unwrap().to_vec(), gb.dtype().unwrap()), (vec![1], DType::Float64));
    assert_eq!(gb.to_vec::<f64>().unwrap(), [10.0]);
}

#[derive(TensorSubclass)]
struct Tagged;

#[test]
fn subclasses_keep_their_class_and_get_gradients() {
    let x = leaf(&[1.0, 2.0]).as_subclass(Tagged).unwrap();
    let y = (&x * &x).unwrap();
    assert!(y.is_instance::<Tagged>());
    assert_eq!(y.grad_fn().unwrap().unwrap().name(), "MulBackward0");
    y.sum().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), [2.0, 4.0]);
}

#[test]
fn backward_and_the_grad_getter_are_overridable_calls() {
    use std::sync::{Arc, Mutex};
    struct Log(Arc<Mutex<Vec<String>>>);
    impl TorchFunctionMode for Log {
        fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
            self.0.lock().unwrap().push(func.qualified_name().to_string());
            func.call(args, kwargs)
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let x = leaf(&[3.0]);
    {
        let _mode = push_mode(Log(seen.clone()));
        let y = (&x * &x).unwrap();
        y.backward().unwrap();
        assert_eq!(x.grad().unwrap().unwrap().to_vec::<f64>().unwrap(), [6.0]);
    }
    let seen = seen.lock().unwrap();
    assert!(seen.iter().any(|n| n == "Tensor.backward"), "{seen:?}");
    assert!(seen.iter().any(|n| n == "Tensor.grad.__get__"), "{seen:?}");
}

#[test]
fn backward_releases_the_saved_tensors_of_the_graph() {
    let x = leaf(&[1.0, 2.0]);
    let y = torchfn::exp(&x).unwrap();
    (&y * &y).unwrap().sum().unwrap().backward().unwrap();
    // The graph's saved tensors were released: a second backward through y's node fails.
    let err = y.sum().unwrap().backward().unwrap_err();
    assert!(err.to_string().contains("second time"), "{err}");
}

/// Counts storages in a child process (this test binary again, running this test alone), so
/// that no other test's tensors come and go meanwhile.
#[test]
fn backward_frees_every_saved_tensor() {
    const CHILD: &str = "TORCHFN_AUTOGRAD_MEMORY_CHILD";
    if std::env::var_os(CHILD).is_none() {
        let exe = std::env::current_exe().expect("the test binary");
        let out = std::process::Command::new(exe)
            .args(["--exact", "autograd::backward_frees_every_saved_tensor", "--test-threads", "1"])
            .env(CHILD, "1")
            .output()
            .expect("the test binary runs");
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    use torchfn::backend::live_storages;
    let x = leaf(&[0.5, -1.0, 2.0]);
    let before = live_storages();
    let loss = {
        let y = torchfn::exp(&x).unwrap(); // saves its output
        let z = torchfn::tanh(&(&y * &y).unwrap()).unwrap(); // mul saves y twice, tanh its output
        torchfn::sin(&z).unwrap().sum().unwrap() // sin saves z
    };
    assert!(live_storages() >= before + 3, "the graph keeps what its nodes saved");
    loss.backward().unwrap();
    // What is left: the loss and the leaf's gradient.
    assert_eq!(live_storages(), before + 2);
    drop(loss);
    x.set_grad(None).unwrap();
    assert_eq!(live_storages(), before);
}

/// Gradients at singular points are PyTorch 2.15's (a scratch run), not NaN: `atan2` at the
/// origin, the forward tangent of `std` on a constant lane, and cross-entropy when every target
/// is ignored (the loss is NaN, its gradient 0).
#[test]
fn gradients_at_singular_points_are_pytorchs() {
    use torchfn::autograd::forward_ad;
    let bits = |t: &Tensor| t.to_vec::<f32>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let (a, b) = (
        torchfn::tensor([0.0f32]).unwrap().requires_grad_(true).unwrap(),
        torchfn::tensor([0.0f32]).unwrap().requires_grad_(true).unwrap(),
    );
    torchfn::atan2(&a, &b).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(bits(&a.grad().unwrap().unwrap()), [0.0f32.to_bits()]);
    assert_eq!(bits(&b.grad().unwrap().unwrap()), [(-0.0f32).to_bits()]);
    {
        let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
        let _level = forward_ad::dual_level().unwrap();
        let lane = torchfn::tensor([[1.0f32, 1.0, 1.0]]).unwrap();
        let dual = forward_ad::make_dual(&lane, &torchfn::tensor([[1.0f32, 2.0, 3.0]]).unwrap()).unwrap();
        let std = torchfn::std(&dual, Some(1.into()), 1, false).unwrap();
        assert_eq!(forward_ad::unpack_dual(&std).unwrap().tangent.unwrap().to_vec::<f32>().unwrap(), [0.0]);
    }
    let logits = torchfn::tensor([[0.5f32, -1.0, 2.0], [1.0, 0.0, -0.5]]).unwrap().requires_grad_(true).unwrap();
    let targets = torchfn::tensor([-100i64, -100]).unwrap();
    let loss = torchfn::nn::functional::cross_entropy(&logits, &targets, None, None, -100, None, "mean", 0.0).unwrap();
    assert!(loss.item().unwrap().to_f64().is_nan());
    loss.backward().unwrap();
    assert_eq!(logits.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), [0.0; 6]);
}

/// More singular points, each PyTorch 2.15's gradient from a scratch run: ties share the
/// gradient, kinks take 0, products with zeros take the product of the others, and where
/// PyTorch gives inf or NaN (a log or a quotient at 0) so does torchfn.
#[test]
fn gradients_at_kinks_ties_and_zeros_are_pytorchs() {
    type F = fn(&[Tensor]) -> torchfn::Result<Tensor>;
    type Values = Vec<Vec<f64>>;
    let cases: Vec<(&str, F, Values, Values)> = vec![
        ("abs", |x| x[0].abs(), vec![vec![0.0, -1.0]], vec![vec![0.0, -1.0]]),
        ("relu", |x| x[0].relu(), vec![vec![0.0, 1.0]], vec![vec![0.0, 1.0]]),
        ("maximum tie", |x| torchfn::maximum(&x[0], &x[1]), vec![vec![1.0], vec![1.0]], vec![vec![0.5], vec![0.5]]),
        ("prod, one zero", |x| torchfn::prod(&x[0]), vec![vec![0.0, 2.0, 3.0]], vec![vec![6.0, 0.0, 0.0]]),
        ("prod, two zeros", |x| torchfn::prod(&x[0]), vec![vec![0.0, 0.0, 3.0]], vec![vec![0.0, 0.0, 0.0]]),
        ("cumprod", |x| torchfn::cumprod(&x[0], 0, None), vec![vec![2.0, 0.0, 3.0]], vec![vec![1.0, 8.0, 0.0]]),
        ("pow(0, 2)", |x| x[0].pow(&x[1]), vec![vec![0.0], vec![2.0]], vec![vec![0.0], vec![0.0]]),
        ("pow(0, 0)", |x| x[0].pow(&x[1]), vec![vec![0.0], vec![0.0]], vec![vec![0.0], vec![0.0]]),
        ("amax tie", |x| torchfn::amax(&x[0], 0, false), vec![vec![1.0, 1.0, 0.0]], vec![vec![0.5, 0.5, 0.0]]),
        ("sign", |x| x[0].sign(), vec![vec![0.0]], vec![vec![0.0]]),
        ("log(0)", |x| x[0].log(), vec![vec![0.0]], vec![vec![f64::INFINITY]]),
        ("0 / 0", |x| &x[0] / &x[1], vec![vec![0.0], vec![0.0]], vec![vec![f64::INFINITY], vec![f64::NAN]]),
        (
            "clamp at the bounds",
            |x| torchfn::clamp(&x[0], Some(0.0.into()), Some(1.0.into())),
            vec![vec![0.0, 1.0]],
            vec![vec![0.0, 0.0]],
        ),
    ];
    for (name, f, inputs, expected) in cases {
        let xs: Vec<Tensor> =
            inputs.iter().map(|v| torchfn::tensor(v.clone()).unwrap().requires_grad_(true).unwrap()).collect();
        f(&xs).unwrap().sum().unwrap().backward().unwrap();
        for (x, want) in xs.iter().zip(&expected) {
            let got = x.grad().unwrap().unwrap().to_vec::<f64>().unwrap();
            let same = got.iter().zip(want).all(|(g, w)| g == w || (g.is_nan() && w.is_nan()));
            assert!(same, "{name}: {got:?}, PyTorch {want:?}");
        }
    }
}
