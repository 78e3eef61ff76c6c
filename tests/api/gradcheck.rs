//! gradcheck over every operation's samples (`torchfn::testing`): for each sample whose result
//! is differentiable, the Jacobian autograd gives (one vector-Jacobian product per output
//! element) must match central differences in float64. A new differentiable operation is
//! checked as soon as it registers samples; one whose backward is wrong fails here.

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
];

fn skipped(func: &Func) -> bool {
    let name = func.qualified_name();
    let writes = name.ends_with('_') || func.signature().params().iter().any(|p| p.name() == "out");
    writes || SKIPPED.iter().any(|(n, _)| *n == name)
}

/// Distinct values away from ties, zeros and half-integers (where `max`, `relu`, `abs` and
/// friends are not differentiable), different for each input.
fn smooth_values(n: usize, input: usize) -> Vec<f64> {
    (0..n).map(|i| ((i as f64 * 0.618_034 + input as f64 * 0.271_828 + 0.137).fract() - 0.5) * 4.0 + 0.013).collect()
}

/// A sample with its floating-point tensors as float64 data to perturb.
struct Inputs {
    sample: Sample,
    data: Vec<(Vec<f64>, Vec<usize>)>,
}

fn floats_in(value: &Value, out: &mut Vec<(Vec<f64>, Vec<usize>)>) {
    match value {
        Value::Tensor(t) if !t.is_duck() && t.dtype().unwrap().is_floating_point() => {
            let shape = t.shape().unwrap().to_vec();
            out.push((smooth_values(shape.iter().product(), out.len()), shape));
        }
        Value::List(items) | Value::Tuple(items) => items.iter().for_each(|v| floats_in(v, out)),
        _ => {}
    }
}

/// `value` with its floating-point tensors replaced, in order, by `leaves`.
fn rebuilt(value: &Value, leaves: &mut std::slice::Iter<'_, Tensor>) -> Value {
    match value {
        Value::Tensor(t) if !t.is_duck() && t.dtype().unwrap().is_floating_point() => {
            Value::Tensor(leaves.next().unwrap().clone())
        }
        Value::List(items) => Value::List(items.iter().map(|v| rebuilt(v, leaves)).collect()),
        Value::Tuple(items) => Value::Tuple(items.iter().map(|v| rebuilt(v, leaves)).collect()),
        other => other.clone(),
    }
}

/// Float64 data of each perturbable input, with its shape.
type Data = Vec<(Vec<f64>, Vec<usize>)>;

impl Inputs {
    fn new(sample: Sample) -> Inputs {
        let mut data = Vec::new();
        sample.args.iter().chain(sample.kwargs.iter().map(|(_, v)| v)).for_each(|v| floats_in(v, &mut data));
        Inputs { sample, data }
    }

    /// Calls `func` with `data` as float64 leaves that require grad: the leaves and the
    /// float64 outputs that require grad.
    fn call(&self, func: &'static Func, data: &Data) -> torchfn::Result<(Vec<Tensor>, Vec<Tensor>)> {
        let leaves: Vec<Tensor> = data
            .iter()
            .map(|(d, s)| Tensor::from_vec(d.clone(), s.clone())?.requires_grad_(true))
            .collect::<torchfn::Result<_>>()?;
        let mut it = leaves.iter();
        let args: Vec<Value> = self.sample.args.iter().map(|v| rebuilt(v, &mut it)).collect();
        let mut kwargs = Kwargs::new();
        for (k, v) in self.sample.kwargs.iter() {
            kwargs.insert(k, rebuilt(v, &mut it));
        }
        let out = func.call(&args, &kwargs)?;
        let mut outputs = Vec::new();
        collect_outputs(&out, &mut outputs);
        Ok((leaves, outputs))
    }

    /// The first-order gradients of `Σ outputs · w` (fixed weights `w`) with respect to the
    /// inputs, recorded: a function whose Jacobian holds the second derivatives.
    fn call_gradient(&self, func: &'static Func, data: &Data) -> torchfn::Result<(Vec<Tensor>, Vec<Tensor>)> {
        let (leaves, outputs) = self.call(func, data)?;
        let mut total: Option<Tensor> = None;
        for (o, out) in outputs.iter().enumerate() {
            let shape = out.shape()?.to_vec();
            let w = Tensor::from_vec(smooth_values(shape.iter().product(), 7 + o), shape)?;
            let term = (out * &w)?.sum()?;
            total = Some(match total {
                Some(t) => (&t + &term)?,
                None => term,
            });
        }
        let Some(total) = total else { return Ok((leaves, Vec::new())) };
        let grads = torchfn::autograd::grad(&[total], &leaves, None, None, true, true)?;
        let outputs = grads.into_iter().flatten().filter(|g| g.requires_grad().unwrap_or(false)).collect();
        Ok((leaves, outputs))
    }
}

/// The float64 tensors of a result that require grad.
fn collect_outputs(value: &Value, out: &mut Vec<Tensor>) {
    match value {
        Value::Tensor(t) if !t.is_duck() && t.dtype().unwrap() == DType::Float64 && t.requires_grad().unwrap() => {
            out.push(t.clone())
        }
        Value::List(items) | Value::Tuple(items) => items.iter().for_each(|v| collect_outputs(v, out)),
        _ => {}
    }
}

fn values(t: &Tensor) -> Vec<f64> {
    t.detach().unwrap().contiguous().unwrap().to_vec::<f64>().unwrap()
}

/// Compares the Jacobian autograd gives for `eval` at `data` (one vector-Jacobian product per
/// output element) with central differences; `None` when nothing differentiable comes out.
fn check(
    eval: impl Fn(&Data) -> torchfn::Result<(Vec<Tensor>, Vec<Tensor>)>,
    data: &Data,
) -> Option<Result<(), String>> {
    let (leaves, outputs) = eval(data).ok()?;
    if outputs.is_empty() || leaves.is_empty() {
        return None;
    }
    const EPS: f64 = 1e-6;
    let (atol, rtol) = (1e-5, 1e-3);
    let flat = |data: &Data| -> Option<Vec<f64>> {
        let (_, outs) = eval(data).ok()?;
        Some(outs.iter().flat_map(values).collect())
    };
    let mut offset = 0;
    for (o, out) in outputs.iter().enumerate() {
        let n_out = values(out).len();
        for j in 0..n_out {
            let mut one_hot = vec![0.0f64; n_out];
            one_hot[j] = 1.0;
            let g = Tensor::from_vec(one_hot, out.shape().unwrap()).unwrap();
            let grads = match torchfn::autograd::grad(
                std::slice::from_ref(out),
                &leaves,
                Some(&[g]),
                Some(true),
                false,
                true,
            ) {
                Ok(g) => g,
                Err(e) => return Some(Err(format!("backward of output {o}: {e}"))),
            };
            for (i, (d, _)) in data.iter().enumerate() {
                let analytic = grads[i].as_ref().map(values).unwrap_or_else(|| vec![0.0; d.len()]);
                for (k, &a) in analytic.iter().enumerate() {
                    let at = |delta: f64| {
                        let mut data = data.clone();
                        data[i].0[k] += delta;
                        flat(&data)
                    };
                    let (Some(plus), Some(minus)) = (at(EPS), at(-EPS)) else { continue };
                    if plus.len() != minus.len() || plus.len() <= offset + j {
                        continue;
                    }
                    let numerical = (plus[offset + j] - minus[offset + j]) / (2.0 * EPS);
                    if !numerical.is_finite() {
                        continue;
                    }
                    if (a - numerical).abs() > atol + rtol * numerical.abs() {
                        return Some(Err(format!(
                            "d output {o}[{j}] / d input {i}[{k}]: autograd gives {a}, central differences {numerical}"
                        )));
                    }
                }
            }
        }
        offset += n_out;
    }
    Some(Ok(()))
}

/// Runs `one` over every checkable sample of every torchfn operation; returns how many
/// functions had a differentiable sample, and the failures.
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
                match one(func, &Inputs::new(sample)) {
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

/// Samples whose gradient is deliberately not the derivative, as in PyTorch: embedding's
/// `padding_idx` row gets no gradient, and `max_norm` renormalizes rows in place, untracked.
const SKIPPED_SAMPLES: &[(&str, &str, &str)] = &[
    ("torchfn.nn.functional.embedding", "padding_idx", "the padding row gets no gradient"),
    ("torchfn.nn.functional.embedding", "max_norm", "rows are renormalized in place, untracked"),
];

#[test]
fn every_differentiable_operation_passes_gradcheck() {
    let (functions, failures) = over_every_sample(|func, inputs| check(|d| inputs.call(func, d), &inputs.data));
    println!("gradcheck: {functions} differentiable functions checked");
    assert!(functions > 100, "only {functions} functions were checked");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Second order: the gradients themselves, recorded with `create_graph`, differentiate right.
#[test]
fn every_differentiable_operation_passes_gradgradcheck() {
    let (functions, failures) =
        over_every_sample(|func, inputs| check(|d| inputs.call_gradient(func, d), &inputs.data));
    println!("gradgradcheck: {functions} functions with second derivatives checked");
    assert!(functions > 50, "only {functions} functions were checked");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
