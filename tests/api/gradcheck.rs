//! gradcheck over every operation's samples (`torchfn::testing`): for each sample whose result
//! is differentiable, `torchfn::autograd::gradcheck` compares the Jacobian autograd gives with
//! central differences in float64, and `gradgradcheck` does the same for the gradients,
//! recorded with `create_graph`; gradcheck also compares the forward-mode Jacobian (tangents
//! through the same derivatives table). A new differentiable operation is checked as soon as it
//! registers samples (and `coverage` fails an operation without samples); one whose backward or
//! forward formula is wrong fails here.

use torchfn::autograd::{GradcheckOptions, gradcheck, gradgradcheck};
use torchfn::overrides::get_overridable_functions;
use torchfn::prelude::*;
use torchfn::testing::{Sample, samples};

/// Operations not checked, and why: random results, writes into an argument (in-place and
/// `out=`: finite differences would see their own writes), and piecewise-constant functions
/// whose derivative is zero wherever it exists while central differences straddle a jump.
const SKIPPED: &[(&str, &str)] = &[
    ("torchfn.nn.functional.dropout", "random"),
    ("torchfn.rand_like", "random"),
    ("torchfn.randn_like", "random"),
    ("torchfn.round", "piecewise constant"),
    ("Tensor.round", "piecewise constant"),
    ("torchfn.floor", "piecewise constant"),
    ("Tensor.floor", "piecewise constant"),
    ("torchfn.ceil", "piecewise constant"),
    ("Tensor.ceil", "piecewise constant"),
    ("torchfn.trunc", "piecewise constant"),
    ("Tensor.trunc", "piecewise constant"),
    ("torchfn.sign", "piecewise constant"),
    ("Tensor.sign", "piecewise constant"),
    // Their gradient is PyTorch's symmetric one, while they read one triangle of the input:
    // checked on symmetric inputs in linalg.rs.
    ("torchfn.linalg.cholesky", "PyTorch's gradient is symmetric; the function reads a triangle"),
    ("torchfn.linalg.eigh", "PyTorch's gradient is symmetric; the function reads a triangle"),
    ("torchfn.linalg.eigvalsh", "PyTorch's gradient is symmetric; the function reads a triangle"),
    // Checked through a log_softmax instead (nn_ops.rs), where it is the derivative.
    ("torchfn.nn.functional.ctc_loss", "PyTorch's log_probs gradient is its logits' (exp(lp) - posterior)"),
];

/// Samples whose gradient is deliberately not the derivative, as in PyTorch: embedding's
/// `padding_idx` row gets no gradient, and `max_norm` renormalizes rows in place, untracked;
/// and samples with random results (attention with dropout).
const SKIPPED_SAMPLES: &[(&str, &str, &str)] = &[
    ("torchfn.nn.functional.embedding", "padding_idx", "the padding row gets no gradient"),
    ("torchfn.nn.functional.embedding", "max_norm", "rows are renormalized in place, untracked"),
    ("torchfn.nn.functional.scaled_dot_product_attention", "dropout_p", "random"),
];

/// Functions checked at their samples' own values (as float64) rather than at smooth values:
/// the decompositions need well-conditioned matrices with distinct singular values, which
/// their samples are.
const OWN_VALUES: &[&str] = &[
    "torchfn.linalg.det",
    "torchfn.linalg.slogdet",
    "torchfn.linalg.inv",
    "torchfn.linalg.solve",
    "torchfn.linalg.qr",
    "torchfn.linalg.svd",
    "torchfn.linalg.svdvals",
    "torchfn.linalg.lstsq",
];

fn skipped(func: &Func) -> bool {
    let name = func.qualified_name();
    let writes = name.ends_with('_') || func.signature().params().iter().any(|p| p.name() == "out");
    writes || SKIPPED.iter().any(|(n, _)| *n == name)
}

/// PyTorch's defaults, which float64 needs and meets.
fn options() -> GradcheckOptions {
    GradcheckOptions::new().eps(1e-6).atol(1e-5).rtol(1e-3)
}

/// Distinct values away from ties, zeros and half-integers (where `max`, `relu`, `abs` and
/// friends are not differentiable), different for each input.
fn smooth_values(n: usize, input: usize) -> Vec<f64> {
    (0..n).map(|i| ((i as f64 * 0.618_034 + input as f64 * 0.271_828 + 0.137).fract() - 0.5) * 4.0 + 0.013).collect()
}

fn is_float(t: &Tensor) -> bool {
    !t.is_duck() && t.dtype().unwrap().is_floating_point()
}

/// A sample with its floating-point tensors replaced by float64 leaves of smooth values.
struct Inputs {
    sample: Sample,
    leaves: Vec<Tensor>,
}

/// Float64 leaves for the floating-point tensors of `value`: the sample's own values with
/// `own`, else smooth values, positive where the sample's are (the sample keeps to the
/// function's domain: `log`, `sqrt`, a variance).
fn floats_in(value: &Value, own: bool, out: &mut Vec<Tensor>) {
    match value {
        Value::Tensor(t) if is_float(t) => {
            let shape = t.shape().unwrap().to_vec();
            let mut data = smooth_values(shape.iter().product(), out.len());
            if own {
                data = values(t);
            } else if values(t).iter().all(|&v| v > 0.0) {
                data.iter_mut().for_each(|v| *v = v.abs() + 0.25);
            }
            out.push(Tensor::from_vec(data, shape).unwrap().requires_grad_(true).unwrap());
        }
        Value::List(items) | Value::Tuple(items) => items.iter().for_each(|v| floats_in(v, own, out)),
        _ => {}
    }
}

fn values(t: &Tensor) -> Vec<f64> {
    t.detach().unwrap().to(DType::Float64, false, false).unwrap().to_vec::<f64>().unwrap()
}

/// `value` with its floating-point tensors replaced, in order, by `leaves`.
fn rebuilt(value: &Value, leaves: &mut std::slice::Iter<'_, Tensor>) -> Value {
    match value {
        Value::Tensor(t) if is_float(t) => Value::Tensor(leaves.next().unwrap().clone()),
        Value::List(items) => Value::List(items.iter().map(|v| rebuilt(v, leaves)).collect()),
        Value::Tuple(items) => Value::Tuple(items.iter().map(|v| rebuilt(v, leaves)).collect()),
        other => other.clone(),
    }
}

impl Inputs {
    fn new(func: &Func, sample: Sample) -> Inputs {
        let own = OWN_VALUES.contains(&func.qualified_name().as_str());
        let mut leaves = Vec::new();
        sample.args.iter().chain(sample.kwargs.iter().map(|(_, v)| v)).for_each(|v| floats_in(v, own, &mut leaves));
        Inputs { sample, leaves }
    }

    /// Calls `func` with the sample's floating-point tensors replaced by `x`: the function
    /// gradcheck checks.
    fn call(&self, func: &'static Func, x: &[Tensor]) -> torchfn::Result<Value> {
        let mut it = x.iter();
        let args: Vec<Value> = self.sample.args.iter().map(|v| rebuilt(v, &mut it)).collect();
        let mut kwargs = Kwargs::new();
        for (k, v) in self.sample.kwargs.iter() {
            kwargs.insert(k, rebuilt(v, &mut it));
        }
        func.call(&args, &kwargs)
    }

    /// The outputs at the leaves that require grad, or `None` when there is nothing to check:
    /// no leaves, a call that fails (a sample that does not take float64), or outputs that are
    /// not finite (a sample outside the function's domain, as `pow(negative, 0.5)`).
    fn differentiable_outputs(&self, func: &'static Func) -> Option<Vec<Tensor>> {
        if self.leaves.is_empty() {
            return None;
        }
        let out = self.call(func, &self.leaves).ok()?;
        let mut outputs = Vec::new();
        collect_differentiable(&out, &mut outputs);
        outputs.iter().all(|o| values(o).iter().all(|v| v.is_finite())).then_some(outputs)
    }
}

/// The float64 tensors of a result that require grad.
fn collect_differentiable(value: &Value, out: &mut Vec<Tensor>) {
    match value {
        Value::Tensor(t) if !t.is_duck() && t.dtype().unwrap() == DType::Float64 && t.requires_grad().unwrap() => {
            out.push(t.clone())
        }
        Value::List(items) | Value::Tuple(items) => items.iter().for_each(|v| collect_differentiable(v, out)),
        _ => {}
    }
}

/// `gradcheck`'s verdict as the test reports it.
fn verdict(checked: torchfn::Result<bool>) -> Result<(), String> {
    match checked {
        Ok(true) => Ok(()),
        Ok(false) => Err("gradcheck returned false".to_string()),
        Err(e) => Err(format!("{e:?}")),
    }
}

/// Runs `one` over every checkable sample of every torchfn operation; returns how many
/// functions had a checked sample, and the failures. `one` gives `None` for a sample with
/// nothing to check.
fn over_every_sample(one: impl Fn(&'static Func, &Inputs) -> Option<Result<(), String>>) -> (usize, Vec<String>) {
    let (mut functions, mut failures) = (0, Vec::new());
    for (ns, funcs) in get_overridable_functions() {
        if !(ns == "Tensor" || ns == "torchfn" || ns.starts_with("torchfn.")) {
            continue;
        }
        for func in funcs.into_iter().filter(|f| !skipped(f)) {
            let mut any = false;
            for (s, sample) in samples(func).into_iter().enumerate() {
                if SKIPPED_SAMPLES
                    .iter()
                    .any(|(f, kw, _)| *f == func.qualified_name() && sample.kwargs.get(kw).is_some())
                {
                    continue;
                }
                match one(func, &Inputs::new(func, sample)) {
                    Some(Ok(())) => any = true,
                    Some(Err(e)) => failures.push(format!("{} sample {s}: {e}", func.qualified_name())),
                    None => {}
                }
            }
            functions += usize::from(any);
        }
    }
    (functions, failures)
}

#[test]
fn every_differentiable_operation_passes_gradcheck_in_both_modes() {
    let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
    let options = options().check_forward_ad(true);
    let (functions, failures) = over_every_sample(|func, inputs| {
        if inputs.differentiable_outputs(func)?.is_empty() {
            return None;
        }
        Some(verdict(gradcheck(|x| inputs.call(func, x), &inputs.leaves, &options)))
    });
    println!("gradcheck (reverse and forward mode): {functions} differentiable functions checked");
    assert!(functions > 100, "only {functions} functions were checked");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Second order: the gradients themselves, recorded with `create_graph`, differentiate right.
/// Every differentiable sample is checked: where the gradients do not require grad,
/// gradgradcheck checks that they are indeed constant (a backward that is right but not
/// recorded fails there). Counted are the functions with second derivatives: gradients that
/// depend on the inputs.
#[test]
fn every_differentiable_operation_passes_gradgradcheck() {
    let (functions, failures) = over_every_sample(|func, inputs| {
        let outputs = inputs.differentiable_outputs(func)?;
        if outputs.is_empty() {
            return None;
        }
        if let Err(e) = verdict(gradgradcheck(|x| inputs.call(func, x), &inputs.leaves, None, &options())) {
            return Some(Err(e));
        }
        let ones: Vec<Tensor> = outputs.iter().map(|o| torchfn::ones_like(o, None).unwrap()).collect();
        let grads = torchfn::autograd::grad(&outputs, &inputs.leaves, Some(&ones), None, true, true).unwrap();
        grads.iter().flatten().any(|g| g.requires_grad().unwrap()).then_some(Ok(()))
    });
    println!("gradgradcheck: {functions} functions with second derivatives checked");
    assert!(functions > 50, "only {functions} functions were checked");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// `func::jacrev` and `func::jacfwd` (mapped by `vmap` over the identity's rows and columns)
/// agree with each other and with central differences, for the first differentiable output
/// of every checkable sample with respect to all its floating-point inputs.
#[test]
fn jacrev_and_jacfwd_agree_with_each_other_and_with_finite_differences() {
    use torchfn::func::{ARG0, jacfwd, jacrev};
    let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
    let (functions, failures) = over_every_sample(|func, inputs| {
        inputs.differentiable_outputs(func)?.first()?;
        let x: Vec<Tensor> = inputs.leaves.iter().map(|l| l.detach().unwrap()).collect();
        let first = |(x,): (Vec<Tensor>,)| -> torchfn::Result<Tensor> {
            let mut outputs = Vec::new();
            let out = inputs.call(func, &x)?;
            collect_float(&out, &mut outputs);
            outputs.into_iter().next().ok_or_else(|| torchfn::Error::runtime_error("no float output"))
        };
        let jr = match jacrev(first, ARG0)((x.clone(),)) {
            Ok(j) => j,
            Err(e) => return Some(Err(format!("jacrev: {e}"))),
        };
        let jf = match jacfwd(first, ARG0)((x.clone(),)) {
            Ok(j) => j,
            Err(e) => return Some(Err(format!("jacfwd: {e}"))),
        };
        let eps = 1e-6;
        for (i, (r, f)) in jr.iter().zip(&jf).enumerate() {
            let (r, f) = (values(r), values(f));
            if r.iter().zip(&f).any(|(a, b)| (a - b).abs() > 1e-8 * (1.0 + b.abs())) {
                return Some(Err(format!("input {i}: jacrev {r:?} and jacfwd {f:?} differ")));
            }
            // central differences, one column per element of input i
            let base = values(&x[i]);
            let shape = x[i].shape().unwrap().to_vec();
            let n = base.len();
            let m = r.len() / n.max(1);
            for k in 0..n {
                let at = |delta: f64| {
                    let mut moved = base.clone();
                    moved[k] += delta;
                    let mut xs = x.clone();
                    xs[i] = Tensor::from_vec(moved, shape.clone()).unwrap();
                    values(&first((xs,)).unwrap())
                };
                let (plus, minus) = (at(eps), at(-eps));
                for o in 0..m {
                    let numeric = (plus[o] - minus[o]) / (2.0 * eps);
                    let analytic = r[o * n + k];
                    if (numeric - analytic).abs() > 1e-5 + 1e-3 * numeric.abs() {
                        return Some(Err(format!(
                            "input {i}, element {k}, output {o}: jacrev {analytic}, finite differences {numeric}"
                        )));
                    }
                }
            }
        }
        Some(Ok(()))
    });
    println!("jacrev and jacfwd: {functions} differentiable functions checked");
    assert!(functions > 100, "only {functions} functions were checked");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The float64 tensors of a result.
fn collect_float(value: &Value, out: &mut Vec<Tensor>) {
    match value {
        Value::Tensor(t) if !t.is_duck() && t.dtype().unwrap() == DType::Float64 => out.push(t.clone()),
        Value::List(items) | Value::Tuple(items) => items.iter().for_each(|v| collect_float(v, out)),
        _ => {}
    }
}
