//! Autograd conformance: every case of `tests/golden/grads.json` (PyTorch 2.15's gradients,
//! second-order gradients and autograd misuse errors; see `tests/golden/GRADS.md`) through the
//! by-name call: first-order gradients, `gradgrad`, misuse and `backward_error` cases; and the
//! `jvp` entries through forward-mode AD. The same harness runs `tests/golden/nn_ops.json` (the
//! operations of GPT-2 and ResNet training, written by `bench/golden/gen_nn_ops.py`), whose
//! `error` cases go through `golden`'s harness.

use serde_json::Value as Json;
use torchfn::overrides::find_function;
use torchfn::prelude::*;

use crate::golden::{Place, compare, torchfn_name, value};

/// The golden file `name` of `tests/golden`, parsed.
pub(crate) fn golden_file(name: &str) -> Json {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The cases of the golden file `name`.
fn cases(name: &str) -> Vec<Json> {
    golden_file(name)["cases"].as_array().unwrap().clone()
}

/// The case's arguments, with the `wrt` inputs made leaves that require grad; the leaves in
/// `wrt` order.
fn arguments(case: &Json, place: Place) -> Result<(Vec<Value>, Kwargs, Vec<Tensor>), String> {
    marked(case, place, |t, _| t.detach()?.requires_grad_(true))
}

/// The case's arguments, with the `wrt` inputs replaced by what `make` makes of them (and
/// their position in `wrt`); those in `wrt` order.
fn marked(
    case: &Json,
    place: Place,
    make: impl Fn(&Tensor, usize) -> torchfn::Result<Tensor>,
) -> Result<(Vec<Value>, Kwargs, Vec<Tensor>), String> {
    let mut args: Vec<Value> = case["args"].as_array().unwrap().iter().map(|v| place.argument(value(v))).collect();
    let mut kwargs = Kwargs::new();
    for (k, v) in case["kwargs"].as_object().unwrap() {
        kwargs.insert(k, place.argument(value(v)));
    }
    let mut leaves = Vec::new();
    let mark = |v: &mut Value, position: usize| -> Result<Tensor, String> {
        let Value::Tensor(t) = v else { return Err("a wrt path that is not a tensor".into()) };
        let leaf = make(t, position).map_err(|e| e.to_string())?;
        *v = Value::Tensor(leaf.clone());
        Ok(leaf)
    };
    for (position, path) in case["wrt"].as_array().unwrap().iter().enumerate() {
        let leaf = match path {
            Json::Number(i) => mark(&mut args[i.as_u64().unwrap() as usize], position)?,
            Json::Array(p) => {
                let (i, j) = (p[0].as_u64().unwrap() as usize, p[1].as_u64().unwrap() as usize);
                match &mut args[i] {
                    Value::List(items) | Value::Tuple(items) => mark(&mut items[j], position)?,
                    _ => return Err("a wrt path into something that is not a list".into()),
                }
            }
            Json::String(name) => {
                let mut v = kwargs.get(name).cloned().ok_or("a wrt keyword that is missing")?;
                let leaf = mark(&mut v, position)?;
                kwargs.insert(name, v);
                leaf
            }
            other => return Err(format!("unknown wrt path {other}")),
        };
        leaves.push(leaf);
    }
    Ok((args, kwargs, leaves))
}

fn call(case: &Json, args: &[Value], kwargs: &Kwargs) -> torchfn::Result<Value> {
    let name = torchfn_name(case["func"].as_str().unwrap());
    let func = find_function(&name).unwrap_or_else(|| panic!("{name} is not registered"));
    func.call(args, kwargs)
}

/// The outputs backward starts from and their gradients (`None`: the implicit one).
fn roots(out: &Value, grad_output: &Json, place: Place) -> Result<(Vec<Tensor>, Option<Vec<Tensor>>), String> {
    let value = |v: &Json| place.argument(value(v));
    match grad_output {
        Json::Null => Ok((vec![out.as_tensor().ok_or("the output is not a tensor")?.clone()], None)),
        Json::Array(items) => {
            let (Value::Tuple(outs) | Value::List(outs)) = out else { return Err("the output is not a tuple".into()) };
            let (mut ts, mut gs) = (Vec::new(), Vec::new());
            for (o, g) in outs.iter().zip(items) {
                if g.is_null() {
                    continue;
                }
                ts.push(o.as_tensor().ok_or("an output is not a tensor")?.clone());
                let Value::Tensor(g) = value(g) else { return Err("a gradient is not a tensor".into()) };
                gs.push(g);
            }
            Ok((ts, Some(gs)))
        }
        g => {
            let Value::Tensor(g) = value(g) else { return Err("the gradient is not a tensor".into()) };
            Ok((vec![out.as_tensor().ok_or("the output is not a tensor")?.clone()], Some(vec![g])))
        }
    }
}

/// Compares a gradient with PyTorch's: `null` accepts none or zeros.
fn check_grad(i: usize, want: &Json, got: Option<Tensor>, tol: Option<f64>, place: Place) -> Result<(), String> {
    match (want.is_null(), got) {
        (true, None) => Ok(()),
        (true, Some(g)) => {
            if crate::golden::elements(&g).iter().all(|&x| x == 0.0) {
                Ok(())
            } else {
                Err(format!("grad {i}: expected none, got {g}"))
            }
        }
        (false, None) => Err(format!("grad {i}: expected a gradient, got none")),
        (false, Some(g)) => compare(want, &Value::Tensor(g), tol, place).map_err(|e| format!("grad {i}: {e}")),
    }
}

fn kind(e: &torchfn::Error) -> &'static str {
    e.kind().python_name()
}

fn run(case: &Json, place: Place) -> Result<(), String> {
    if case.get("error").is_some() {
        return crate::golden::run_at(case, place);
    }
    let tol = case.get("tol").and_then(Json::as_f64);
    if let Some(misuse) = case.get("misuse").and_then(Json::as_str) {
        return run_misuse(case, misuse, tol);
    }
    let (args, kwargs, leaves) = arguments(case, place)?;
    let out = call(case, &args, &kwargs).map_err(|e| format!("forward: {e}"))?;
    compare(&case["expect"], &out, tol, place).map_err(|e| format!("forward: {e}"))?;
    if let Some(mutated) = case.get("mutated").and_then(Json::as_object) {
        for (i, want) in mutated {
            compare(want, &args[i.parse::<usize>().unwrap()], tol, place).map_err(|e| format!("arg {i}: {e}"))?;
        }
    }
    if leaves.is_empty() && case.get("backward_error").is_none() {
        return Ok(());
    }
    let (outs, grads) = roots(&out, &case["grad_output"], place)?;
    let result = torchfn::autograd::backward(&outs, grads.as_deref(), None, false, None);
    if let Some(error) = case.get("backward_error").and_then(Json::as_str) {
        return match result {
            Err(e) if kind(&e) == error => Ok(()),
            Err(e) => Err(format!("backward raised {} ({e}), expected {error}", kind(&e))),
            Ok(()) => Err(format!("backward succeeded, expected {error}")),
        };
    }
    result.map_err(|e| format!("backward: {e}"))?;
    for (i, (leaf, want)) in leaves.iter().zip(case["grads"].as_array().unwrap()).enumerate() {
        check_grad(i, want, leaf.grad().unwrap(), tol, place)?;
    }
    if let Some(gg) = case.get("gradgrad") {
        run_gradgrad(case, gg, tol, place)?;
    }
    if let Some(jvp) = case.get("jvp") {
        run_jvp(case, jvp, tol, place)?;
    }
    Ok(())
}

/// Forward mode: the call with each `wrt` input a dual tensor carrying its tangent; the output
/// tangents against PyTorch's (`null` for integer outputs; no tangent counts as zeros).
fn run_jvp(case: &Json, jvp: &Json, tol: Option<f64>, place: Place) -> Result<(), String> {
    use torchfn::autograd::forward_ad;
    let tangents: Vec<Tensor> = jvp["tangents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| place.argument(value(v)).as_tensor().cloned().ok_or("a tangent that is not a tensor"))
        .collect::<Result<_, _>>()?;
    let _serial = crate::FORWARD_AD.lock().unwrap_or_else(|e| e.into_inner());
    let _level = forward_ad::dual_level().map_err(|e| e.to_string())?;
    let (args, kwargs, _) = marked(case, place, |t, i| forward_ad::make_dual(&t.detach()?, &tangents[i]))?;
    let out = call(case, &args, &kwargs).map_err(|e| format!("jvp forward: {e}"))?;
    let check = |i: usize, want: &Json, out: &Value| -> Result<(), String> {
        // An output that is None (attention without its weights) has no tangent.
        if want.is_null() && matches!(out, Value::None) {
            return Ok(());
        }
        let Value::Tensor(out) = out else { return Err(format!("jvp output {i} is not a tensor")) };
        let tangent = forward_ad::unpack_dual(out).map_err(|e| e.to_string())?.tangent;
        if want.is_null() {
            return match tangent {
                None => Ok(()),
                Some(t) => Err(format!("jvp output {i}: expected no tangent, got {t}")),
            };
        }
        let tangent = match tangent {
            Some(t) => t,
            None => torchfn::zeros_like(out, None).map_err(|e| e.to_string())?,
        };
        compare(want, &Value::Tensor(tangent), tol, place).map_err(|e| format!("jvp output {i}: {e}"))
    };
    match (&jvp["expect"], &out) {
        (Json::Array(wants), Value::Tuple(outs) | Value::List(outs)) => {
            wants.iter().zip(outs).enumerate().try_for_each(|(i, (w, o))| check(i, w, o))
        }
        (want, out) => check(0, want, out),
    }
}

/// Second order: `d/d leaf_i Σ_j sum(grad_j * v_j)` with the first-order grads recorded.
fn run_gradgrad(case: &Json, gg: &Json, tol: Option<f64>, place: Place) -> Result<(), String> {
    let (args, kwargs, leaves) = arguments(case, place)?;
    let out = call(case, &args, &kwargs).map_err(|e| e.to_string())?;
    let (outs, grads) = roots(&out, &case["grad_output"], place)?;
    let first = torchfn::autograd::grad(&outs, &leaves, grads.as_deref(), None, true, true)
        .map_err(|e| format!("gradgrad first order: {e}"))?;
    let mut total: Option<Tensor> = None;
    for (g, v) in first.iter().zip(gg["v"].as_array().unwrap()) {
        let (Some(g), Value::Tensor(v)) = (g, place.argument(value(v))) else { continue };
        if !g.requires_grad().unwrap() {
            continue;
        }
        let term = (g * &v).and_then(|p| p.sum()).map_err(|e| e.to_string())?;
        total = Some(match total {
            Some(t) => (&t + &term).map_err(|e| e.to_string())?,
            None => term,
        });
    }
    let Some(total) = total else {
        // No first-order gradient depends on the inputs: the expected values are zeros.
        return gg["expect"].as_array().unwrap().iter().enumerate().try_for_each(|(i, w)| check_zeros(i, w));
    };
    let second = torchfn::autograd::grad(&[total], &leaves, None, None, false, true)
        .map_err(|e| format!("gradgrad second order: {e}"))?;
    for (i, (got, want)) in second.into_iter().zip(gg["expect"].as_array().unwrap()).enumerate() {
        match got {
            Some(g) => compare(want, &Value::Tensor(g), tol, place).map_err(|e| format!("gradgrad {i}: {e}"))?,
            None => check_zeros(i, want)?,
        }
    }
    Ok(())
}

fn check_zeros(i: usize, want: &Json) -> Result<(), String> {
    let Value::Tensor(w) = value(want) else { return Ok(()) };
    if crate::golden::elements(&w).iter().all(|&x| x == 0.0) {
        Ok(())
    } else {
        Err(format!("gradgrad {i}: expected {w}, got no dependence on the input"))
    }
}

fn run_misuse(case: &Json, misuse: &str, tol: Option<f64>) -> Result<(), String> {
    let expected = case.get("expect_error").and_then(Json::as_str);
    let outcome: torchfn::Result<Vec<Tensor>> = (|| {
        let (args, kwargs, leaves) = match arguments(case, Place::Cpu) {
            Ok(a) => a,
            Err(e) if misuse == "requires_grad_int" => return Err(torchfn::Error::runtime_error(e)),
            Err(e) => panic!("{e}"),
        };
        let out = if misuse == "no_grad" {
            let _guard = torchfn::autograd::no_grad();
            call(case, &args, &kwargs)?
        } else {
            call(case, &args, &kwargs)?
        };
        let out = out.as_tensor().cloned().expect("a tensor output");
        match misuse {
            "backward_nonscalar" => out.backward()?,
            "grad_output_shape" => {
                let Value::Tensor(g) = value(&case["grad_output"]) else { panic!("a gradient") };
                out.backward_with(Some(&g), None, false, None)?
            }
            "backward_twice" => {
                let (outs, grads) = roots(&Value::Tensor(out.clone()), &case["grad_output"], Place::Cpu).unwrap();
                torchfn::autograd::backward(&outs, grads.as_deref(), None, false, None)?;
                torchfn::autograd::backward(&outs, grads.as_deref(), None, false, None)?;
            }
            "inplace_saved" => {
                out.add_(&Tensor::scalar(1.0), 1)?;
                let (outs, grads) = roots(&Value::Tensor(out.clone()), &case["grad_output"], Place::Cpu).unwrap();
                torchfn::autograd::backward(&outs, grads.as_deref(), None, false, None)?;
            }
            "no_grad" | "inplace_leaf" | "requires_grad_int" => {
                let (outs, grads) = roots(&Value::Tensor(out.clone()), &case["grad_output"], Place::Cpu).unwrap();
                torchfn::autograd::backward(&outs, grads.as_deref(), None, false, None)?;
            }
            other => panic!("unknown misuse {other}"),
        }
        Ok(leaves)
    })();
    match (outcome, expected) {
        (Err(e), Some(want)) if kind(&e) == want => Ok(()),
        (Err(e), Some(want)) => Err(format!("{misuse}: raised {} ({e}), expected {want}", kind(&e))),
        (Err(e), None) => Err(format!("{misuse}: raised {e}, PyTorch did not")),
        (Ok(_), Some(want)) => Err(format!("{misuse}: succeeded, expected {want}")),
        (Ok(leaves), None) => {
            for (i, (leaf, want)) in leaves.iter().zip(case["grads"].as_array().unwrap()).enumerate() {
                check_grad(i, want, leaf.grad().unwrap(), tol, Place::Cpu)?;
            }
            Ok(())
        }
    }
}

/// Runs every case of the golden file `name` on the CPU; returns the cases and the failures.
fn run_file(name: &str) -> (Vec<Json>, Vec<String>) {
    let cases = cases(name);
    let mut failures = Vec::new();
    for case in &cases {
        let id = case["id"].as_str().unwrap();
        let name = torchfn_name(case["func"].as_str().unwrap());
        let outcome =
            if find_function(&name).is_none() { Err(format!("{name} is missing")) } else { run(case, Place::Cpu) };
        if let Err(e) = outcome {
            failures.push(format!("{id}: {e}"));
        }
    }
    (cases, failures)
}

#[test]
fn every_autograd_golden_case_passes() {
    let (cases, failures) = run_file("grads.json");
    let jvp = cases.iter().filter(|c| c.get("jvp").is_some()).count();
    println!(
        "autograd golden cases: {} of {} pass ({jvp} with forward-mode tangents)",
        cases.len() - failures.len(),
        cases.len()
    );
    assert!(failures.is_empty(), "{} of {} cases fail:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn every_nn_ops_golden_case_passes() {
    let (cases, failures) = run_file("nn_ops.json");
    let count = |key: &str| cases.iter().filter(|c| c.get(key).is_some()).count();
    println!(
        "nn_ops golden cases: {} of {} pass ({} errors, {} with gradients, {} with forward-mode tangents)",
        cases.len() - failures.len(),
        cases.len(),
        count("error"),
        count("grads"),
        count("jvp")
    );
    assert!(cases.len() >= 30 && count("jvp") >= 15, "{} cases", cases.len());
    assert!(failures.is_empty(), "{} of {} cases fail:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// Gradients and tangents at singular points (zeros, infinities, NaN, kinks, ties, quotients
/// and products with zeros, constant lanes, -inf in softmax and log-sum-exp) are PyTorch
/// 2.15's: `tests/golden/singular.json`, written by `bench/golden/gen_singular.py`.
#[test]
fn every_singular_point_case_passes() {
    let (cases, failures) = run_file("singular.json");
    println!("singular-point cases: {} of {} pass", cases.len() - failures.len(), cases.len());
    assert!(cases.len() >= 70, "{} cases", cases.len());
    assert!(failures.is_empty(), "{} of {} cases fail:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// The cases whose tensors the GPU holds (no float64) run there too: forward, first-order and
/// second-order gradients computed on the device, within the cases' float32 tolerances.
#[test]
#[cfg(feature = "wgpu")]
fn the_float32_autograd_cases_pass_on_the_gpu() {
    let Some(device) = crate::gpu::gpu() else { return };
    for (file, at_least) in [("grads.json", 30), ("nn_ops.json", 3)] {
        let cases = cases(file);
        let eligible: Vec<&Json> = cases
            .iter()
            .filter(|c| c.get("misuse").is_none() && !crate::golden::dtypes(c).contains(&DType::Float64))
            .collect();
        let failures: Vec<String> = eligible
            .iter()
            .filter_map(|case| {
                run(case, Place::Gpu(device)).err().map(|e| format!("{}: {e}", case["id"].as_str().unwrap()))
            })
            .collect();
        assert!(eligible.len() >= at_least, "only {} cases of {file} for the GPU", eligible.len());
        assert!(
            failures.is_empty(),
            "{} of {} cases of {file} fail on {device}:\n{}",
            failures.len(),
            eligible.len(),
            failures.join("\n")
        );
    }
}
