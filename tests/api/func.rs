//! torch.func: vmap with its batching rules, grad, jacrev, jacfwd, hessian, functional_call
//! and stack_module_state, alone and composed.

use std::collections::BTreeMap;

use torchfn::func::{
    self, ARG0, ARG1, Randomness, VmapOptions, grad, grad_and_value, hessian, jacfwd, jacrev, vmap, vmap_with,
};
use torchfn::nn::{Layer, Linear, Module};
use torchfn::testing::samples;
use torchfn::{Generator, Result, Tensor, Value};

fn t(values: &[f64], shape: &[i64]) -> Tensor {
    torchfn::tensor(values.to_vec()).unwrap().reshape(shape).unwrap()
}

fn close(a: &Tensor, b: &Tensor, tol: f64) {
    assert_eq!(a.shape().unwrap(), b.shape().unwrap(), "shapes");
    let (x, y) = (a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
    for (i, (p, q)) in x.iter().zip(&y).enumerate() {
        assert!((p - q).abs() <= tol * (1.0 + q.abs()), "element {i}: {p} vs {q}\n{a}\n{b}");
    }
}

/// `f` on each example (slices along dim 0 of every argument), stacked.
fn looped(f: impl Fn(&[Tensor]) -> Result<Tensor>, args: &[Tensor]) -> Tensor {
    let n = args[0].shape().unwrap()[0];
    let outs: Vec<Tensor> =
        (0..n).map(|i| f(&args.iter().map(|a| a.select(0, i as i64).unwrap()).collect::<Vec<_>>()).unwrap()).collect();
    torchfn::stack(&outs, 0).unwrap()
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    let g = Generator::new().manual_seed(seed);
    torchfn::randn(shape, g, torchfn::DType::Float64, None).unwrap()
}

#[test]
fn vmap_pointwise_reductions_matmul_views_match_a_loop() {
    let x = randn(&[4, 3, 5], 1);
    let w = randn(&[5, 2], 2);
    let f = |a: &[Tensor]| -> Result<Tensor> {
        let h = (&a[0].matmul(&a[1])?.tanh()? * 2.0)?;
        let s = h.softmax(-1, None)?;
        (&s.t()?.sum_dim(1, false)? + &h.mean_dim(0, false)?)?.exp()
    };
    let mapped = vmap(|(x, w): (Tensor, Tensor)| f(&[x, w]), (0, None), 0)((x.clone(), w.clone())).unwrap();
    let expected = looped(|a| f(&[a[0].clone(), w.clone()]), &[x]);
    close(&mapped, &expected, 1e-6);
}

#[test]
fn in_dims_not_first_out_dims_and_nesting() {
    let x = randn(&[3, 4, 2], 3); // mapped over dimension 1 (size 4)
    let f = |x: Tensor| -> Result<Tensor> { (&torchfn::cumsum(&x, 0, None)? * &x.sigmoid()?)?.transpose(0, 1) };
    let mapped = vmap(f, 1, 2)(x.clone()).unwrap();
    let expected = looped(|a| f(a[0].clone()), &[x.permute([1, 0, 2]).unwrap()]).permute([1, 2, 0]).unwrap();
    close(&mapped, &expected, 1e-12);
    // vmap of vmap: an outer product of each pair of rows
    let (a, b) = (randn(&[2, 3], 4), randn(&[2, 5], 5));
    let outer = |(u, v): (Tensor, Tensor)| &u * &v;
    let inner = vmap(outer, (None, 0), 0);
    let both = vmap(inner, (0, 0), 0)((a.clone(), b.clone())).unwrap();
    assert_eq!(both.shape().unwrap(), [2, 5, 3]);
    let expected = (&a.unsqueeze(1).unwrap() * &b.unsqueeze(2).unwrap()).unwrap();
    close(&both, &expected, 1e-12);
}

#[test]
fn per_sample_gradients_of_a_module_equal_a_loop() {
    let g = Generator::new().manual_seed(0);
    let mut model = torchfn::nn::Sequential(vec![
        Box::new(Linear::new(6, 5, true, &g).unwrap()),
        Box::new(torchfn::nn::ReLU::new(false)),
        Box::new(Linear::new(5, 3, true, &g).unwrap()),
    ]);
    let params: BTreeMap<String, Tensor> =
        model.named_parameters().into_iter().map(|(n, p)| (n, p.tensor().detach().unwrap())).collect();
    let x = randn(&[8, 6], 7).to(torchfn::DType::Float32, false, false).unwrap();
    let y = torchfn::tensor(vec![0i64, 1, 2, 0, 1, 2, 0, 1]).unwrap();
    let mut loss = |(params, x, y): (BTreeMap<String, Tensor>, Tensor, Tensor)| -> Result<Tensor> {
        let out = func::functional_call(&mut model, &params, &x.unsqueeze(0)?)?;
        torchfn::nn::functional::cross_entropy(&out, &y.unsqueeze(0)?, None, None, -100, None, "mean", 0.0)
    };
    let per_sample = vmap(grad(&mut loss, ARG0), (None, 0, 0), 0)((params.clone(), x.clone(), y.clone())).unwrap();
    for i in 0..8 {
        let g = grad(&mut loss, ARG0)((params.clone(), x.select(0, i).unwrap(), y.select(0, i).unwrap())).unwrap();
        for (name, expected) in &g {
            let got = per_sample[name].select(0, i).unwrap().to(torchfn::DType::Float64, false, false).unwrap();
            close(&got, &expected.to(torchfn::DType::Float64, false, false).unwrap(), 1e-5);
        }
    }
    // the module has its own parameters back
    for (name, p) in model.named_parameters() {
        assert_eq!(p.tensor().to_vec::<f32>().unwrap(), params[&name].to_vec::<f32>().unwrap(), "{name}");
    }
}

#[test]
fn grad_argnums_aux_and_grad_of_vmap() {
    let (a, b) = (t(&[1.0, 2.0], &[2]), t(&[3.0, 4.0], &[2]));
    let f = |(a, b): (Tensor, Tensor)| -> Result<(Tensor, Tensor)> {
        let y = (&a * &b)?.sum()?;
        Ok((y, (&a + &b)?))
    };
    let ((ga, gb), aux) = grad(f, (ARG0, ARG1))((a.clone(), b.clone())).unwrap();
    close(&ga, &b, 0.0);
    close(&gb, &a, 0.0);
    close(&aux, &t(&[4.0, 6.0], &[2]), 0.0);
    let (gb, value) =
        grad_and_value(|(a, b): (Tensor, Tensor)| (&a * &b)?.sum(), ARG1)((a.clone(), b.clone())).unwrap();
    close(&gb, &a, 0.0);
    close(&value, &t(&[11.0], &[]), 0.0);
    // grad through a vmap: d/dx sum_i (x_i)^3 computed by mapping the cube
    let x = t(&[1.0, -2.0, 3.0], &[3]);
    let g = grad(|x: Tensor| vmap(|e: Tensor| &(&e * &e)? * &e, 0, 0)(x)?.sum(), ARG0)(x.clone()).unwrap();
    close(&g, &(&x.square().unwrap() * 3.0).unwrap(), 1e-12);
    // a scalar output only
    let err = grad(|x: Tensor| x.exp(), ARG0)(x).unwrap_err().to_string();
    assert!(err.contains("Expected f(*args) to return a scalar Tensor, got tensor with 1 dims"), "{err}");
}

#[test]
fn jacobians_agree_with_each_other_and_hessians_with_jacrev_of_jacrev() {
    let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
    let f = |x: Tensor| -> Result<Tensor> {
        let m = t(&[1.0, 2.0, 0.5, -1.0, 3.0, 0.25], &[2, 3]);
        &m.matmul(&x.sin()?)? * &x.select(0, 0)?
    };
    let x = t(&[0.3, -1.2, 2.0], &[3]);
    let jr = jacrev(f, ARG0)(x.clone()).unwrap();
    let jf = jacfwd(f, ARG0)(x.clone()).unwrap();
    assert_eq!(jr.shape().unwrap(), [2, 3]);
    close(&jr, &jf, 1e-12);
    // against a numerical Jacobian
    let eps = 1e-6;
    for j in 0..3 {
        let mut plus = x.to_vec::<f64>().unwrap();
        let mut minus = plus.clone();
        plus[j] += eps;
        minus[j] -= eps;
        let d = (&(&f(t(&plus, &[3])).unwrap() - &f(t(&minus, &[3])).unwrap()).unwrap() / (2.0 * eps)).unwrap();
        close(&jr.select(1, j as i64).unwrap(), &d, 1e-6);
    }
    let g = |x: Tensor| -> Result<Tensor> { (&x.sin()? * &x.roll(1, Some(vec![0i64].into()))?)?.sum()?.exp() };
    let h = hessian(g, ARG0)(x.clone()).unwrap();
    let hh = jacrev(jacrev(g, ARG0), ARG0)(x.clone()).unwrap();
    assert_eq!(h.shape().unwrap(), [3, 3]);
    close(&h, &hh, 1e-10);
    close(&h, &h.t().unwrap(), 1e-10);
    // vmap of jacfwd: a Jacobian per example
    let xs = randn(&[4, 3], 9);
    let per = vmap(jacfwd(f, ARG0), 0, 0)(xs.clone()).unwrap();
    for i in 0..4 {
        close(&per.select(0, i).unwrap(), &jacrev(f, ARG0)(xs.select(0, i).unwrap()).unwrap(), 1e-12);
    }
}

#[test]
fn randomness_chunks_and_errors() {
    // Draws from the default generator, which other tests seed.
    let _seeded = crate::seeded();
    let x = torchfn::zeros([4, 3], torchfn::DType::Float64, None).unwrap();
    let noisy = |x: Tensor| -> Result<Tensor> { &x + &torchfn::rand([3], None, torchfn::DType::Float64, None)? };
    let err = vmap(noisy, 0, 0)(x.clone()).unwrap_err().to_string();
    assert!(err.contains("called random operation while in randomness error mode"), "{err}");
    let options = |randomness| VmapOptions { randomness, ..VmapOptions::default() };
    let different = vmap_with(noisy, options(Randomness::Different))(x.clone()).unwrap();
    assert_ne!(
        different.select(0, 0).unwrap().to_vec::<f64>().unwrap(),
        different.select(0, 1).unwrap().to_vec::<f64>().unwrap()
    );
    let same = vmap_with(noisy, options(Randomness::Same))(x.clone()).unwrap();
    assert_eq!(
        same.select(0, 0).unwrap().to_vec::<f64>().unwrap(),
        same.select(0, 3).unwrap().to_vec::<f64>().unwrap()
    );
    let dropped = |x: Tensor| torchfn::nn::functional::dropout(&(&x + 1.0)?, 0.5, true, false);
    let err = vmap(dropped, 0, 0)(x.clone()).unwrap_err().to_string();
    assert!(err.contains("randomness error mode"), "{err}");
    vmap_with(dropped, options(Randomness::Different))(x.clone()).unwrap();
    // chunks give the same result as one pass
    let y = randn(&[7, 3], 11);
    let f = |y: Tensor| (&y.softmax(0, None)? * &y)?.sum();
    let whole = vmap(f, 0, 0)(y.clone()).unwrap();
    let chunked = vmap_with(f, VmapOptions { chunk_size: Some(3), ..VmapOptions::default() })(y.clone()).unwrap();
    close(&whole, &chunked, 0.0);
    // reading a value, and writing a batched value into an unbatched tensor
    let err = vmap(|y: Tensor| torchfn::tensor([y.sum()?.item()?.to_f64()]), 0, 0)(y.clone()).unwrap_err().to_string();
    assert!(err.contains("calling .item() on a Tensor"), "{err}");
    let buffer = torchfn::zeros([3], torchfn::DType::Float64, None).unwrap();
    let err = vmap(|y: Tensor| buffer.copy_(&y), 0, 0)(y.clone()).unwrap_err().to_string();
    assert!(err.contains("vmapped over but `self` not being vmapped"), "{err}");
    let err = vmap(|y: Tensor| buffer.add_(&y, 1), 0, 0)(y.clone()).unwrap_err().to_string();
    assert!(err.contains("vmapped over but `self` not being vmapped"), "{err}");
    // in place into a batched tensor: each example's own row, by the batching rule
    let rows = (&y * 1.0).unwrap();
    let twice =
        vmap(|r: Tensor| r.mul_(&torchfn::tensor(2.0f64)?)?.add_(&buffer, 1)?.abs_(), 0, 0)(rows.clone()).unwrap();
    let y = y.abs().unwrap();
    close(&twice, &(&y * 2.0).unwrap(), 0.0);
    close(&rows, &(&y * 2.0).unwrap(), 0.0);
    let err = vmap(|(a, b): (Tensor, Tensor)| &a + &b, 0, 0)((y.clone(), randn(&[5, 3], 1))).unwrap_err().to_string();
    assert!(err.contains("Expected all tensors to have the same size in the mapped dimension"), "{err}");
}

#[test]
fn ensembles_through_stack_module_state() {
    let g = Generator::new().manual_seed(3);
    let models: Vec<Linear> = (0..3).map(|_| Linear::new(4, 2, true, &g).unwrap()).collect();
    let (params, buffers) = func::stack_module_state(&models).unwrap();
    assert!(buffers.is_empty());
    assert_eq!(params["weight"].shape().unwrap(), [3, 2, 4]);
    let x = randn(&[5, 4], 2).to(torchfn::DType::Float32, false, false).unwrap();
    let mut base = Linear::new(4, 2, true, &g).unwrap();
    let out =
        vmap(|(p, x): (BTreeMap<String, Tensor>, Tensor)| func::functional_call(&mut base, &p, &x), (0, None), 0)((
            params,
            x.clone(),
        ))
        .unwrap();
    assert_eq!(out.shape().unwrap(), [3, 5, 2]);
    for (i, m) in models.iter().enumerate() {
        assert_eq!(
            out.select(0, i as i64).unwrap().to_vec::<f32>().unwrap(),
            m.call(&x).unwrap().to_vec::<f32>().unwrap()
        );
    }
}

#[test]
fn batched_indices_and_operators_without_a_rule() {
    // index_select with a batched index (each example's own positions), into a batched table
    // and into a shared one, along the first and the last dimension
    let x = randn(&[3, 5, 2], 4);
    let idx = torchfn::tensor(vec![vec![0i64, 4], vec![1, 1], vec![3, 2]]).unwrap();
    let picked = vmap(|(x, i): (Tensor, Tensor)| x.index_select(0, &i), 0, 0)((x.clone(), idx.clone())).unwrap();
    close(&picked, &looped(|a| a[0].index_select(0, &a[1]), &[x.clone(), idx.clone()]), 0.0);
    let table = randn(&[6, 5], 5);
    let shared = vmap(|(t, i): (Tensor, Tensor)| t.index_select(1, &i), (None, 0), 0)((table.clone(), idx.clone()));
    close(&shared.unwrap(), &looped(|a| table.index_select(1, &a[0]), std::slice::from_ref(&idx)), 0.0);
    // and the gradient of an embedding lookup per example
    let lookup = |(t, i): (Tensor, Tensor)| t.index_select(0, &i)?.square()?.sum();
    let per_example = vmap(grad(lookup, ARG0), (None, 0), 0)((table.clone(), idx.clone())).unwrap();
    close(&per_example, &looped(|a| grad(lookup, ARG0)((table.clone(), a[0].clone())), &[idx]), 0.0);
    // a convolution with batched weights (an ensemble): each example's weights as a group
    let images = randn(&[1, 2, 5, 5], 6);
    let weights = randn(&[3, 4, 2, 3, 3], 7);
    let conv = |w: Tensor| torchfn::nn::functional::conv2d(&images, &w, None, 1, 0, 1, 1);
    close(&vmap(conv, 0, 0)(weights.clone()).unwrap(), &looped(|a| conv(a[0].clone()), &[weights]), 1e-12);
    let coverage = func::vmap_coverage();
    let of = |name: &str| coverage.iter().find(|(op, _)| op.name() == name).map(|(_, c)| *c);
    assert_eq!(of("aten::convolution_backward"), Some(func::Coverage::Rule));
    assert_eq!(of("aten::index_select"), Some(func::Coverage::Rule));
    assert_eq!(of("aten::_local_scalar_dense"), Some(func::Coverage::Refused));
}

/// Example `i` of a batch made from a sample: its float tensors shifted by `i / 8` (integer
/// and bool tensors, and everything else, as they are).
fn example(value: &Value, i: usize) -> Value {
    match value {
        Value::Tensor(t) if !t.is_duck() && t.dtype().unwrap().is_floating_point() => {
            Value::Tensor((t + (i as f64) / 8.0).unwrap())
        }
        // A copy of its own: in-place operations write into each example.
        Value::Tensor(t) if !t.is_duck() => Value::Tensor(torchfn::clone(t).unwrap()),
        Value::List(items) => Value::List(items.iter().map(|v| example(v, i)).collect()),
        Value::Tuple(items) => Value::Tuple(items.iter().map(|v| example(v, i)).collect()),
        other => other.clone(),
    }
}

/// Whether `a` and `b` agree within the dtype's tolerance (bit for bit for integers and bools).
fn agree(a: &Value, b: &Value) -> std::result::Result<(), String> {
    match (a, b) {
        (Value::Tensor(x), Value::Tensor(y)) => {
            let (dx, dy) = (x.dtype().unwrap(), y.dtype().unwrap());
            if dx != dy || x.shape().unwrap() != y.shape().unwrap() {
                return Err(format!(
                    "{dx} {:?} by vmap, {dy} {:?} by the loop",
                    x.shape().unwrap(),
                    y.shape().unwrap()
                ));
            }
            let tol = if dx == torchfn::DType::Float32 { 1e-5 } else { 1e-12 };
            let as_f64 = |t: &Tensor| {
                t.cpu().unwrap().to(torchfn::DType::Float64, false, false).unwrap().to_vec::<f64>().unwrap()
            };
            for (p, q) in as_f64(x).iter().zip(as_f64(y)) {
                let same = (p.is_nan() && q.is_nan()) || p == &q || (p - q).abs() <= tol * (1.0 + q.abs());
                if !same {
                    return Err(format!("{x} by vmap, {y} by the loop"));
                }
            }
            Ok(())
        }
        (Value::List(p) | Value::Tuple(p), Value::List(q) | Value::Tuple(q)) if p.len() == q.len() => {
            p.iter().zip(q).try_for_each(|(p, q)| agree(p, q))
        }
        (a, b) if a.to_string() == b.to_string() => Ok(()),
        (a, b) => Err(format!("{a} by vmap, {b} by the loop")),
    }
}

/// Every sample of every operation: `vmap` over a batch of 3 (mapped along dimension
/// `in_dim` of each tensor argument, the results put at `out_dim`) against the operation on
/// each example, stacked. Returns the number compared and the differences.
fn vmap_conformance(in_dim: i64, out_dim: i64, prepare: &dyn Fn(&Value) -> Value) -> (usize, Vec<String>) {
    let (mut compared, mut differences) = (0, Vec::new());
    for func in crate::coverage::computing_operations() {
        if crate::dispatch::INCOMPARABLE.contains(&func.qualified_name().as_str()) {
            continue;
        }
        for (k, sample) in samples(func).iter().enumerate() {
            let examples: Vec<Vec<Value>> =
                (0..3).map(|i| sample.args.iter().map(|v| example(&prepare(v), i)).collect()).collect();
            // The batch: each tensor argument stacked along `in_dim`.
            let batched: Vec<Value> = (0..sample.args.len())
                .map(|a| {
                    let column: Vec<Value> = examples.iter().map(|e| e[a].clone()).collect();
                    stack_values(&column, in_dim)
                })
                .collect();
            // The loop runs second: in-place operations write into the examples' tensors.
            torchfn::manual_seed(0);
            let mapped = vmap(|args: Value| func.call(args.as_slice().unwrap(), &sample.kwargs), in_dim, out_dim)(
                Value::List(batched),
            );
            torchfn::manual_seed(0);
            let looped: std::result::Result<Vec<Value>, String> =
                examples.iter().map(|args| func.call(args, &sample.kwargs).map_err(|e| e.to_string())).collect();
            compared += 1;
            let outcome = match (mapped, looped) {
                (Ok(m), Ok(l)) => agree(&m, &stacked_results(&l, out_dim)),
                (Err(_), Err(_)) => Ok(()),
                (Ok(m), Err(e)) => Err(format!("vmap gave {m}, the loop failed: {e}")),
                (Err(e), Ok(_)) => Err(format!("vmap failed: {e}")),
            };
            if let Err(e) = outcome {
                differences
                    .push(format!("{func} sample {k}: {}", e.replace('\n', " ").chars().take(160).collect::<String>()));
            }
        }
    }
    (compared, differences)
}

/// The examples' values of one argument stacked along `dim` (a tensor), or the first (not a
/// tensor: shared by the examples).
fn stack_values(column: &[Value], dim: i64) -> Value {
    match &column[0] {
        Value::Tensor(t) if !t.is_duck() => {
            let pieces: Vec<Tensor> = column.iter().map(|v| v.as_tensor().unwrap().clone()).collect();
            let dim = if dim < 0 { t.ndim().unwrap() as i64 + 1 + dim } else { dim };
            Value::Tensor(torchfn::stack(&pieces, dim).unwrap())
        }
        Value::List(items) | Value::Tuple(items) => {
            let stacked = (0..items.len())
                .map(|i| {
                    stack_values(&column.iter().map(|v| v.as_slice().unwrap()[i].clone()).collect::<Vec<_>>(), dim)
                })
                .collect();
            if matches!(column[0], Value::List(_)) { Value::List(stacked) } else { Value::Tuple(stacked) }
        }
        other => other.clone(),
    }
}

/// The loop's results stacked along `dim`, output by output.
fn stacked_results(results: &[Value], dim: i64) -> Value {
    match &results[0] {
        Value::Tensor(_) => stack_values(results, dim),
        Value::List(items) | Value::Tuple(items) => Value::Tuple(
            (0..items.len())
                .map(|i| {
                    let column: Vec<Value> = results.iter().map(|r| r.as_slice().unwrap()[i].clone()).collect();
                    stacked_results(&column, dim)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What vmap refuses as PyTorch's does: reading a value, a result whose shape depends on
/// values, a random operation under `randomness='error'`, writing a batch into an unbatched
/// tensor (an `out=` argument, embedding's `max_norm` into a shared weight); and a gap of
/// torchfn's own: an integer division's check for zero divisors reads values above the
/// dispatch layer.
const REFUSED: &[&str] = &[
    "calling .item() on a Tensor",
    "batching operators that can output dynamic shape",
    "randomness error mode",
    "is not possible because there exists a Tensor `other`",
];

#[test]
fn vmap_of_every_sample_equals_the_loop() {
    // Draws from the default generator, which other tests seed.
    let _seeded = crate::seeded();
    for (in_dim, out_dim) in [(0, 0), (-1, -1)] {
        let (compared, differences) = vmap_conformance(in_dim, out_dim, &Value::clone);
        assert_only_refusals(&format!("in_dims={in_dim}, out_dims={out_dim}"), compared, &differences);
    }
}

/// Every difference is one of PyTorch's refusals, and there are not many.
fn assert_only_refusals(run: &str, compared: usize, differences: &[String]) {
    let refused = differences.iter().filter(|d| REFUSED.iter().any(|r| d.contains(r))).count();
    println!("{run}: {compared} samples, {refused} refused as PyTorch's vmap does");
    let wrong: Vec<&str> =
        differences.iter().filter(|d| !REFUSED.iter().any(|r| d.contains(r))).map(String::as_str).collect();
    assert!(wrong.is_empty(), "{} samples differ:\n{}", wrong.len(), wrong.join("\n"));
    // The refusals are the data-dependent operations (item, nonzero, masked_select, unique...)
    // and random ones in error mode, each sample twice (two placements of the batch).
    assert!(compared > 450 && refused < 80, "{compared} compared, {refused} refused");
}

/// PyTorch 2.15's torch.func results (`bench/func_golden.py`).
fn golden() -> torchfn::nn::StateDict {
    torchfn::safetensors::load_file(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/func.safetensors")).unwrap()
}

fn part(state: &torchfn::nn::StateDict, prefix: &str) -> BTreeMap<String, Tensor> {
    state.iter().filter_map(|(k, v)| k.strip_prefix(prefix).map(|name| (name.to_string(), v.clone()))).collect()
}

#[test]
fn per_sample_gradients_and_ensembles_equal_pytorchs() {
    let state = golden();
    let g = Generator::new().manual_seed(0);
    let mut mlp = torchfn::nn::Sequential(vec![
        Box::new(Linear::new(12, 16, true, &g).unwrap()),
        Box::new(torchfn::nn::ReLU::new(false)),
        Box::new(Linear::new(16, 5, true, &g).unwrap()),
    ]);
    let params = part(&state, "mlp.params.");
    let (x, y) = (state.get("mlp.x").unwrap().clone(), state.get("mlp.y").unwrap().clone());
    let loss = |(p, x, y): (BTreeMap<String, Tensor>, Tensor, Tensor)| -> Result<Tensor> {
        let out = func::functional_call(&mut mlp, &p, &x.unsqueeze(0)?)?;
        torchfn::nn::functional::cross_entropy(&out, &y.unsqueeze(0)?, None, None, -100, None, "mean", 0.0)
    };
    let grads = vmap(grad(loss, ARG0), (None, 0, 0), 0)((params, x, y)).unwrap();
    let expected = part(&state, "mlp.grads.");
    assert_eq!(grads.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>());
    for (name, e) in &expected {
        close(&grads[name], e, 1e-12);
    }
    // an ensemble: the three models' state stacked (as stack_module_state stacks it), run in one
    // call
    let stacked: BTreeMap<String, Tensor> = ["weight", "bias"]
        .iter()
        .map(|name| {
            let each: Vec<Tensor> =
                (0..3).map(|i| state.get(&format!("ensemble.{i}.{name}")).unwrap().clone()).collect();
            (name.to_string(), torchfn::stack(&each, 0).unwrap())
        })
        .collect();
    let mut base = Linear::new(4, 5, true, &g).unwrap();
    let xe = state.get("ensemble.x").unwrap().clone();
    let out =
        vmap(|(p, x): (BTreeMap<String, Tensor>, Tensor)| func::functional_call(&mut base, &p, &x), (0, None), 0)((
            stacked, xe,
        ))
        .unwrap();
    close(&out, state.get("ensemble.out").unwrap(), 1e-12);
}

#[test]
fn hessians_and_jacobians_equal_pytorchs() {
    let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
    let state = golden();
    let get = |k: &str| state.get(k).unwrap().clone();
    let (x, a, m) = (get("x"), get("a"), get("m"));
    let h = hessian(|v: Tensor| (&v.sin()? * &v.roll(1, Some(vec![0i64].into()))?)?.sum()?.exp(), ARG0)(x.clone());
    close(&h.unwrap(), &get("hessian.exp_sin_roll"), 1e-12);
    let quadratic = |v: Tensor| v.matmul(&a)?.matmul(&v);
    close(&hessian(quadratic, ARG0)(x.clone()).unwrap(), &get("hessian.quadratic"), 1e-12);
    let lse = |v: Tensor| torchfn::logsumexp(&(&v * &v)?, 0, false);
    close(&hessian(lse, ARG0)(x.clone()).unwrap(), &get("hessian.logsumexp"), 1e-12);
    let f = |v: Tensor| &m.matmul(&v.tanh()?)? * &v.select(0, 0)?;
    close(&jacrev(f, ARG0)(x.clone()).unwrap(), &get("jacrev.tanh"), 1e-12);
    close(&jacfwd(f, ARG0)(x.clone()).unwrap(), &get("jacfwd.tanh"), 1e-12);
}

#[test]
fn misuse_gives_pytorchs_errors() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/func.json")).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
    let xb = randn(&[3, 4], 5);
    let err = |r: Result<Tensor>| r.unwrap_err();
    let ours = [
        ("item", err(vmap(|v: Tensor| torchfn::tensor([v.sum()?.item()?.to_f64()]), 0, 0)(xb.clone()))),
        (
            "random",
            err(vmap(|v: Tensor| &v + &torchfn::rand([4], None, torchfn::DType::Float64, None)?, 0, 0)(xb.clone())),
        ),
        (
            "inplace",
            err(vmap(|v: Tensor| torchfn::zeros([4], torchfn::DType::Float64, None)?.copy_(&v), 0, 0)(xb.clone())),
        ),
        ("sizes", err(vmap(|(p, q): (Tensor, Tensor)| &p + &q, 0, 0)((xb.clone(), randn(&[5, 4], 6))))),
        ("in_dim_range", err(vmap(|v: Tensor| Ok(v), 2, 0)(xb.clone()))),
        ("no_mapped", err(vmap(|(v,): (Tensor,)| Ok(v), (None::<i64>,), 0)((xb.clone(),)))),
        ("grad_scalar", err(grad(|v: Tensor| v.exp(), ARG0)(xb.select(0, 0).unwrap()))),
        ("nonzero", err(vmap(|v: Tensor| v.nonzero(), 0, 0)(xb.clone()))),
        ("chunk", err(vmap_with(|v: Tensor| Ok(v), VmapOptions { chunk_size: Some(0), ..VmapOptions::default() })(xb))),
    ];
    for (name, e) in ours {
        let want = &expected[name];
        let kind = want["type"].as_str().unwrap();
        // PyTorch names its function `<lambda>`; a Rust closure has no name, torchfn says `f`.
        let message = want["message"].as_str().unwrap().replace("<lambda>", "f");
        assert_eq!(e.kind().python_name(), kind, "{name}: {e}");
        assert_eq!(e.to_string(), message, "{name}");
    }
}

#[cfg(feature = "wgpu")]
#[test]
fn vmap_of_every_sample_equals_the_loop_on_the_gpu() {
    // Draws from the default generator, which other tests seed.
    let _seeded = crate::seeded();
    let Some(device) = crate::gpu::gpu() else { return };
    let (compared, differences) = vmap_conformance(0, 0, &|v| crate::gpu::prepared(v, device));
    assert_only_refusals(&format!("on {device}"), compared, &differences);
}

#[test]
fn per_sample_gradients_of_a_convolutional_network_equal_a_loop() {
    let g = Generator::new().manual_seed(2);
    let mut model = torchfn::nn::Sequential(vec![
        Box::new(torchfn::nn::Conv2d::new(2, 4, [3, 3], [1, 1], [1, 1], [1, 1], 1, true, &g).unwrap()),
        Box::new(torchfn::nn::ReLU::new(false)),
        Box::new(torchfn::nn::Conv2d::new(4, 4, [3, 3], [2, 2], [0, 0], [1, 1], 2, true, &g).unwrap()),
    ]);
    let params: BTreeMap<String, Tensor> =
        model.named_parameters().into_iter().map(|(n, p)| (n, p.tensor().detach().unwrap())).collect();
    let x = randn(&[5, 2, 7, 7], 3).to(torchfn::DType::Float32, false, false).unwrap();
    let mut loss = |(p, x): (BTreeMap<String, Tensor>, Tensor)| -> Result<Tensor> {
        func::functional_call(&mut model, &p, &x.unsqueeze(0)?)?.square()?.sum()
    };
    let per_sample = vmap(grad(&mut loss, ARG0), (None, 0), 0)((params.clone(), x.clone())).unwrap();
    for i in 0..5 {
        let one = grad(&mut loss, ARG0)((params.clone(), x.select(0, i).unwrap())).unwrap();
        for (name, expected) in &one {
            let got = per_sample[name].select(0, i).unwrap().to(torchfn::DType::Float64, false, false).unwrap();
            close(&got, &expected.to(torchfn::DType::Float64, false, false).unwrap(), 1e-5);
        }
    }
}

#[test]
fn an_ensemble_of_convolutional_networks_in_one_call() {
    let g = Generator::new().manual_seed(4);
    let make = || torchfn::nn::Conv2d::new(2, 3, [3, 3], [1, 1], [1, 1], [1, 1], 1, true, &g).unwrap();
    let models: Vec<torchfn::nn::Conv2d> = (0..3).map(|_| make()).collect();
    let (params, _) = func::stack_module_state(&models).unwrap();
    let x = randn(&[2, 2, 5, 5], 8).to(torchfn::DType::Float32, false, false).unwrap();
    let mut base = make();
    let mut run = |(p, x): (BTreeMap<String, Tensor>, Tensor)| func::functional_call(&mut base, &p, &x);
    let out = vmap(&mut run, (0, None), 0)((params.clone(), x.clone())).unwrap();
    for (i, m) in models.iter().enumerate() {
        let expected = m.call(&x).unwrap().to(torchfn::DType::Float64, false, false).unwrap();
        close(&out.select(0, i as i64).unwrap().to(torchfn::DType::Float64, false, false).unwrap(), &expected, 1e-5);
    }
    // and the ensemble's gradients, one per model
    let mut loss =
        |(p, x): (BTreeMap<String, Tensor>, Tensor)| func::functional_call(&mut base, &p, &x)?.square()?.sum();
    let grads = vmap(grad(&mut loss, ARG0), (0, None), 0)((params.clone(), x.clone())).unwrap();
    for (i, m) in models.iter().enumerate() {
        let own: BTreeMap<String, Tensor> =
            m.named_parameters().into_iter().map(|(n, p)| (n, p.tensor().detach().unwrap())).collect();
        for (name, g) in grad(&mut loss, ARG0)((own, x.clone())).unwrap() {
            let got = grads[&name].select(0, i as i64).unwrap().to(torchfn::DType::Float64, false, false).unwrap();
            close(&got, &g.to(torchfn::DType::Float64, false, false).unwrap(), 1e-4);
        }
    }
}

#[test]
fn bad_arguments_are_errors_that_say_what_was_wrong() {
    let x = randn(&[3, 4], 1);
    let id = |v: Tensor| Ok(v);
    let message = |r: Result<Tensor>| r.unwrap_err().to_string();
    // in_dims that do not match the arguments' structure
    let pair = |(a, _b): (Tensor, Tensor)| Ok(a);
    let e = vmap(pair, (0, 0, 0), 0)((x.clone(), x.clone())).unwrap_err().to_string();
    assert!(e.contains("in_dims is not compatible with the structure of the inputs"), "{e}");
    let e = message(vmap(id, (0, 1), 0)(x.clone()));
    assert!(e.contains("nested structure"), "{e}");
    // an out_dim beyond the output's dimensions, and a batched output with out_dims None
    let e = message(vmap(id, 0, 5)(x.clone()));
    assert!(e.contains("out_dim=5 is out of range"), "{e}");
    let e = message(vmap(id, 0, None::<i64>)(x.clone()));
    assert!(e.contains("can not return a BatchedTensor when out_dim is None"), "{e}");
    // a zero-dimensional input cannot be mapped
    let e = message(vmap(id, 0, 0)(torchfn::tensor(1.0f64).unwrap()));
    assert!(e.contains("Got in_dim=0 for some input, but that input is a Tensor of dimensionality 0"), "{e}");
    // grad of integers, and of a function of no tensor argument
    let e = message(grad(|v: Tensor| v.sum(), ARG0)(torchfn::tensor(vec![1i64, 2]).unwrap()));
    assert!(e.contains("floating point"), "{e}");
    let e = grad(|(_s,): (String,)| torchfn::tensor(1.0f64), ARG0)(("x".to_string(),)).unwrap_err().to_string();
    assert!(e.contains("hold no tensor"), "{e}");
    // functional_call with a name the module does not have; stack_module_state of nothing
    let g = Generator::new().manual_seed(0);
    let mut layer = Linear::new(4, 2, true, &g).unwrap();
    let state = BTreeMap::from([("wieght".to_string(), x.clone())]);
    let e = func::functional_call(&mut layer, &state, &x).unwrap_err().to_string();
    assert!(e.contains("Unexpected key(s): 'wieght'") && e.contains("\"weight\""), "{e}");
    assert!(func::stack_module_state::<Linear>(&[]).unwrap_err().to_string().contains("at least one model"));
    // the module's own weight is back after a failing call
    let before = layer.named_parameters()[0].1.tensor().to_vec::<f32>().unwrap();
    let wrong = BTreeMap::from([("weight".to_string(), torchfn::zeros([3, 3], None, None).unwrap())]);
    assert!(func::functional_call(&mut layer, &wrong, &x.to(torchfn::DType::Float32, false, false).unwrap()).is_err());
    assert_eq!(layer.named_parameters()[0].1.tensor().to_vec::<f32>().unwrap(), before);
}

#[test]
fn auxiliary_outputs_nested_out_dims_and_argnums_of_the_jacobians() {
    let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
    let (x, y) = (t(&[0.5, -1.0, 2.0], &[3]), t(&[1.5, 0.25, -0.5], &[3]));
    // jacrev and jacfwd with an auxiliary output, with respect to the second argument
    let f = |(x, y): (Tensor, Tensor)| -> Result<(Tensor, Tensor)> { Ok(((&x * &y.sin()?)?, x.sum()?)) };
    let (jr, aux) = jacrev(f, ARG1)((x.clone(), y.clone())).unwrap();
    let (jf, aux_f) = jacfwd(f, ARG1)((x.clone(), y.clone())).unwrap();
    let expected = diag(&(&x * &y.cos().unwrap()).unwrap());
    close(&jr, &expected, 1e-12);
    close(&jf, &expected, 1e-12);
    close(&aux, &t(&[1.5], &[]), 0.0);
    close(&aux_f, &t(&[1.5], &[]), 0.0);
    // both arguments at once
    let g = |(x, y): (Tensor, Tensor)| &x * &y;
    let (jx, jy) = jacrev(g, (ARG0, ARG1))((x.clone(), y.clone())).unwrap();
    close(&jx, &diag(&y), 0.0);
    close(&jy, &diag(&x), 0.0);
    // the Hessian with respect to the second argument: d²/dy² sum(x * sin y) = diag(-x sin y)
    let h = hessian(|(x, y): (Tensor, Tensor)| (&x * &y.sin()?)?.sum(), ARG1)((x.clone(), y.clone())).unwrap();
    close(&h, &diag(&(&(&x * &y.sin().unwrap()).unwrap() * -1.0).unwrap()), 1e-12);
    // out_dims per output: the sums stacked first, the products last
    let xs = randn(&[4, 3], 12);
    let two = |v: Tensor| -> Result<(Tensor, Tensor)> { Ok((v.sum()?, (&v * 2.0)?)) };
    let (sums, doubled) = vmap(two, 0, (0, 1))(xs.clone()).unwrap();
    close(&sums, &xs.sum_dim(1, false).unwrap(), 1e-12);
    close(&doubled, &(&xs.t().unwrap() * 2.0).unwrap(), 0.0);
}

/// The square matrix with `v` on its diagonal.
fn diag(v: &Tensor) -> Tensor {
    let n = v.shape().unwrap()[0];
    (&torchfn::eye(n, None, torchfn::DType::Float64, None).unwrap() * &v.unsqueeze(1).unwrap()).unwrap()
}

/// A float32 LSTM under vmap with shared weights: its fused layer's batching rule folds the
/// batch into the layer's own, forward and backward (per-example gradients of the input and
/// the weights), equal to the loop over examples.
#[test]
fn vmap_of_a_fused_lstm_layer_with_shared_weights_equals_the_loop() {
    let g = Generator::new().manual_seed(5);
    let r = |shape: &[usize]| torchfn::randn(shape.to_vec(), g.clone(), None, None).unwrap();
    let params: Vec<Tensor> = [vec![12, 2], vec![12, 3], vec![12], vec![12]].iter().map(|s| r(s)).collect();
    let (x, h0) = (r(&[4, 5, 2, 2]), r(&[4, 1, 2, 3]));
    // Per example: the sum of the outputs, differentiated with respect to the input and weight_hh.
    let step = |(x, h0, params): (Tensor, Tensor, Vec<Tensor>)| -> Result<Vec<Tensor>> {
        let loss = |(x, w_hh): (Tensor, Tensor)| -> Result<Tensor> {
            let p = [params[0].clone(), w_hh, params[2].clone(), params[3].clone()];
            let (out, _, c) = torchfn::lstm(&x, &[h0.clone(), h0.clone()], &p, true, 1, 0.0, false, false, false)?;
            &out.sum()? + &c.sum()?
        };
        let (gx, gw) = grad(loss, (ARG0, ARG1))((x, params[1].clone()))?;
        Ok(vec![gx, gw])
    };
    let batched = vmap(step, (0, 0, None), 0)((x.clone(), h0.clone(), params.clone())).unwrap();
    for k in 0..4 {
        let one = step((x.select(0, k).unwrap(), h0.select(0, k).unwrap(), params.clone())).unwrap();
        for (b, o) in batched.iter().zip(&one) {
            close(
                &b.select(0, k).unwrap().to(torchfn::DType::Float64, false, false).unwrap(),
                &o.to(torchfn::DType::Float64, false, false).unwrap(),
                1e-5,
            );
        }
    }
}
