//! `torchfn::autograd::gradcheck` and `gradgradcheck` as a user meets them: right gradients
//! pass, wrong ones (made with hooks) are caught and shown, fast mode, reentrancy, second
//! derivatives, and bad input that must be an error rather than a panic.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use torchfn::ErrorKind;
use torchfn::autograd::{GradcheckOptions, gradcheck, gradgradcheck};
use torchfn::prelude::*;

/// A float64 leaf of `n` distinct values in [-2, 2].
fn leaf(n: usize) -> Tensor {
    let values: Vec<f64> = (0..n).map(|i| ((i as f64 * 0.618_034 + 0.137).fract() - 0.5) * 4.0 + 0.013).collect();
    Tensor::from_vec(values, [n]).unwrap().requires_grad_(true).unwrap()
}

/// `3 sin(x)`, whose backward doubles the gradient through `sin(x)`: a wrong gradient.
fn doubled(x: &Tensor) -> Result<Tensor> {
    let y = x.sin()?;
    y.register_hook(|g| Ok(Some((g * 2.0)?)))?;
    &y * 3.0
}

#[test]
fn a_correct_function_passes() {
    let x = torchfn::randn([3, 4], None, DType::Float64, None).unwrap().requires_grad_(true).unwrap();
    assert!(gradcheck(|x| x[0].sin(), &[x], &GradcheckOptions::new().eps(1e-6).atol(1e-4)).unwrap());
    // Several inputs (one an integer tensor, passed through) and several outputs, one integer.
    let (a, idx, b) = (leaf(4), torchfn::tensor([2i64, 0]).unwrap(), leaf(4));
    let f = |x: &[Tensor]| -> Result<Vec<Tensor>> {
        let prod = (&x[0] * &x[2])?;
        let (values, indices) = torchfn::max_dim(&prod, 0, false)?;
        Ok(vec![prod.index_select(0, &x[1])?, (&x[0] + &x[2].exp()?)?, values, indices])
    };
    assert!(gradcheck(f, &[a.clone(), idx, b], &GradcheckOptions::new()).unwrap());
    // A registered function's result, as a `Value`.
    let f = |x: &[Tensor]| torchfn::SUM.call(&[Value::from(&x[0])], &Kwargs::new());
    assert!(gradcheck(f, &[a], &GradcheckOptions::new()).unwrap());
}

#[test]
fn a_tensor_passed_twice_is_perturbed_everywhere() {
    let x = leaf(3);
    assert!(gradcheck(|x| &x[0] * &x[1], &[x.clone(), x], &GradcheckOptions::new()).unwrap());
}

#[test]
fn a_wrong_gradient_is_caught_and_both_jacobians_are_shown() {
    let (x, w) = (leaf(3), leaf(3));
    let f = |x: &[Tensor]| -> Result<(Tensor, Tensor)> { Ok((x[1].cos()?, doubled(&x[1])?)) };
    let err = gradcheck(f, &[x, w.clone()], &GradcheckOptions::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Runtime);
    let message = err.to_string();
    assert!(message.starts_with("Jacobian mismatch for output 1 with respect to input 1,\nnumerical:"), "{message}");
    // Both Jacobians, the analytical twice the numerical (3 cos x on the diagonal).
    let diagonal: Vec<f64> = w.cos().unwrap().to_vec::<f64>().unwrap().iter().map(|c| 3.0 * c).collect();
    let (numerical, analytical) = message.split_once("analytical:").unwrap();
    assert!(numerical.contains(&format!("{:.4}", diagonal[0])), "{message}");
    assert!(analytical.contains(&format!("{:.4}", 2.0 * diagonal[0])), "{message}");
    assert!(message.contains("The largest absolute difference is"), "{message}");
}

#[test]
fn without_raise_exception_a_failure_is_false_and_an_error_still_an_error() {
    let options = GradcheckOptions::new().raise_exception(false);
    assert!(!gradcheck(|x| doubled(&x[0]), &[leaf(3)], &options).unwrap());
    assert!(gradcheck(|x| x[0].sin(), &[leaf(3)], &options).unwrap());
    // The function's own error comes back as it is.
    let err = gradcheck(|x| x[0].reshape(&[3, 1])?.matmul(&x[0].reshape(&[3, 1])?), &[leaf(3)], &options).unwrap_err();
    assert!(!err.to_string().contains("Jacobian"), "{err}");
}

#[test]
fn fast_mode_calls_the_function_once_per_input_and_catches_the_wrong_gradient() {
    let calls = AtomicUsize::new(0);
    let f = |x: &[Tensor]| {
        calls.fetch_add(1, Ordering::Relaxed);
        (&x[0].tanh()? * &x[1])?.sum_dim([0], false)
    };
    let inputs = [torchfn::randn([200], None, DType::Float64, None).unwrap().requires_grad_(true).unwrap(), leaf(200)];
    let fast = GradcheckOptions::new().fast_mode(true);
    assert!(gradcheck(f, &inputs, &fast).unwrap());
    // One call at the inputs and two per input, not two per input element.
    assert_eq!(calls.swap(0, Ordering::Relaxed), 1 + 2 * 2);
    assert!(gradcheck(f, &inputs, &GradcheckOptions::new()).unwrap());
    assert_eq!(calls.load(Ordering::Relaxed), 1 + 2 * 400);

    let err = gradcheck(|x| doubled(&x[0]), &[leaf(200)], &fast).unwrap_err();
    let message = err.to_string();
    assert!(message.starts_with("Jacobian mismatch for output 0 with respect to input 0,\nnumerical:"), "{message}");
    assert!(message.contains("fast_mode(false)"), "{message}");
    // Another seed draws other vectors, and catches it as well.
    assert!(!gradcheck(|x| doubled(&x[0]), &[leaf(200)], &fast.clone().seed(7).raise_exception(false)).unwrap());
}

#[test]
fn a_backward_that_is_not_reentrant_is_caught() {
    // Each backward scales the gradient a little more than the last.
    let runs = Arc::new(AtomicUsize::new(0));
    let f = |x: &[Tensor]| {
        let y = x[0].exp()?;
        let runs = runs.clone();
        y.register_hook(move |g| Ok(Some((g * (1.0 + 1e-12 * runs.fetch_add(1, Ordering::Relaxed) as f64))?)))?;
        &y * 2.0
    };
    for fast_mode in [false, true] {
        let options = GradcheckOptions::new().fast_mode(fast_mode);
        let err = gradcheck(f, &[leaf(3)], &options).unwrap_err();
        assert!(err.to_string().starts_with("Backward is not reentrant"), "{err}");
        assert!(err.to_string().contains("The tolerance for nondeterminism was 0."), "{err}");
        // Within nondet_tol, it passes.
        assert!(gradcheck(f, &[leaf(3)], &options.nondet_tol(1e-9)).unwrap());
    }
}

#[test]
fn a_backward_not_multiplied_by_grad_output_is_caught() {
    // The hook adds 1 to every gradient: a zero grad_output gives a non-zero gradient (and the
    // Jacobian is off by one, which reports first).
    let f = |x: &[Tensor]| {
        let y = x[0].exp()?;
        y.register_hook(|g| Ok(Some((g + 1.0)?)))?;
        Ok(y)
    };
    let err = gradcheck(f, &[leaf(3)], &GradcheckOptions::new()).unwrap_err();
    assert!(err.to_string().starts_with("Jacobian mismatch"), "{err}");
    // Wrong only for a zero grad_output: only that check sees it.
    let f = |x: &[Tensor]| {
        let y = x[0].exp()?;
        y.register_hook(|g| {
            let zero = g.abs()?.sum()?.item()?.to_f64() == 0.0;
            Ok(zero.then(|| (g + 1.0).unwrap()))
        })?;
        Ok(y)
    };
    let err = gradcheck(f, &[leaf(3)], &GradcheckOptions::new()).unwrap_err();
    assert!(err.to_string().starts_with("backward not multiplied by grad_output"), "{err}");
}

#[test]
fn outputs_that_do_not_require_grad_must_not_change() {
    // No output requires grad: the numerical derivatives must be zero.
    let err = gradcheck(|x| x[0].detach()?.sin(), &[leaf(3)], &GradcheckOptions::new()).unwrap_err();
    assert!(err.to_string().starts_with("Numerical gradient for function expected to be zero"), "{err}");
    assert!(gradcheck(|x| torchfn::zeros_like(&x[0], None), &[leaf(3)], &GradcheckOptions::new()).unwrap());
    // Beside one that does, as in PyTorch, they are not checked.
    let f = |x: &[Tensor]| -> Result<(Tensor, Tensor)> { Ok((x[0].sin()?, x[0].detach()?.sin()?)) };
    assert!(gradcheck(f, &[leaf(3)], &GradcheckOptions::new()).unwrap());
}

#[test]
fn gradgradcheck_checks_second_derivatives() {
    let cube = |x: &[Tensor]| &(&x[0] * &x[0])? * &x[0];
    assert!(gradgradcheck(cube, &[leaf(4)], None, &GradcheckOptions::new()).unwrap());
    assert!(gradgradcheck(cube, &[leaf(4)], None, &GradcheckOptions::new().fast_mode(true)).unwrap());
    let g = torchfn::tensor([1.0f64, -2.0, 0.5, 3.0]).unwrap();
    assert!(gradgradcheck(cube, &[leaf(4)], Some(&[g]), &GradcheckOptions::new()).unwrap());
    // A linear function's gradients are constant: nothing to differentiate, and that passes.
    assert!(gradgradcheck(|x| &x[0] * 3.0, &[leaf(4)], None, &GradcheckOptions::new()).unwrap());

    // A backward that is right but cut from the graph: the hook gives the gradient through
    // x² back detached, so the first derivative, 3x², is right but differentiates as 2x·g
    // through the direct path only (4x where 6x is right). gradcheck cannot see it.
    let cut = |x: &[Tensor]| {
        let square = (&x[0] * &x[0])?;
        square.register_hook(|g| Ok(Some(g.detach()?)))?;
        &square * &x[0]
    };
    assert!(gradcheck(cut, &[leaf(4)], &GradcheckOptions::new()).unwrap());
    let err = gradgradcheck(cut, &[leaf(4)], None, &GradcheckOptions::new()).unwrap_err();
    assert!(err.to_string().starts_with("Jacobian mismatch for output 0 with respect to input 0"), "{err}");
    let options = GradcheckOptions::new().fast_mode(true).raise_exception(false);
    assert!(!gradgradcheck(cut, &[leaf(4)], None, &options).unwrap());
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let options = GradcheckOptions::new();
    // No input requires grad.
    let x = torchfn::tensor([1.0f64, 2.0]).unwrap();
    let err = gradcheck(|x| x[0].sin(), &[x.clone(), torchfn::tensor([1i64]).unwrap()], &options).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Value);
    assert!(err.to_string().starts_with("gradcheck expects at least one input tensor to require gradient"), "{err}");
    assert!(gradcheck(|_| Ok(Vec::new()), &[], &options).is_err());
    assert!(gradgradcheck(|x| x[0].sin(), &[x], None, &options).is_err());
    // A function that fails.
    let err = gradcheck(|_| -> Result<Tensor> { Err(Error::value_error("no")) }, &[leaf(2)], &options).unwrap_err();
    assert_eq!(err.to_string(), "no");
    // Outputs whose shape changes when an input is perturbed.
    let calls = AtomicUsize::new(0);
    let shifty = |x: &[Tensor]| x[0].sin()?.narrow(0, 0, 1 + calls.fetch_add(1, Ordering::Relaxed).min(1) as i64);
    let err = gradcheck(shifty, &[leaf(2)], &options.clone().raise_exception(false)).unwrap_err();
    assert!(err.to_string().contains("same shape"), "{err}");
    // gradgradcheck's grad_outputs: one per output that requires grad, of its shape.
    let two = [leaf(2).detach().unwrap(), leaf(2).detach().unwrap()];
    assert!(gradgradcheck(|x| x[0].exp(), &[leaf(2)], Some(&two), &options).is_err());
    let wrong_shape = [torchfn::tensor([1.0f64]).unwrap()];
    assert!(gradgradcheck(|x| x[0].exp(), &[leaf(2)], Some(&wrong_shape), &options).is_err());
}

#[test]
#[cfg(feature = "wgpu")]
fn gradcheck_runs_where_the_inputs_are() {
    let Some(gpu) = super::gpu::gpu() else { return };
    // Float32 on the GPU: central differences need a larger eps, and looser tolerances.
    let x = leaf(6).detach().unwrap().to_device(gpu, Some(DType::Float32), false, false).unwrap();
    let inputs = [x.requires_grad_(true).unwrap()];
    let options = GradcheckOptions::new().eps(1e-2).atol(1e-2).rtol(1e-2);
    let f = |x: &[Tensor]| &x[0].sin()? * &x[0];
    assert!(gradcheck(f, &inputs, &options).unwrap());
    assert!(gradcheck(f, &inputs, &options.clone().fast_mode(true)).unwrap());
    assert!(gradgradcheck(f, &inputs, None, &options).unwrap());
    assert!(!gradcheck(|x| doubled(&x[0]), &inputs, &options.raise_exception(false)).unwrap());
}

#[test]
fn options_build_like_pytorchs_keyword_arguments() {
    let o = GradcheckOptions::new();
    assert_eq!((o.eps, o.atol, o.rtol, o.nondet_tol), (1e-6, 1e-5, 1e-3, 0.0));
    assert!(o.raise_exception && o.check_undefined_grad && !o.fast_mode);
    assert_eq!(o.seed, torchfn::DEFAULT_SEED);
    let o = o.eps(1e-3).atol(1.0).rtol(2.0).nondet_tol(3.0).raise_exception(false);
    let o = o.check_undefined_grad(false).fast_mode(true).seed(9);
    assert_eq!((o.eps, o.atol, o.rtol, o.nondet_tol, o.seed), (1e-3, 1.0, 2.0, 3.0, 9));
    assert!(!o.raise_exception && !o.check_undefined_grad && o.fast_mode);
}
