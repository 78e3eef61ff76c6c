//! The conformance suite: every case of `tests/golden/ops.json` (PyTorch 2.15's results; see
//! the README beside it) through the registry's by-name call.

use serde_json::Value as Json;
use torchfn::overrides::find_function;
use torchfn::prelude::*;

fn cases() -> Vec<Json> {
    let path = format!("{}/tests/golden/ops.json", env!("CARGO_MANIFEST_DIR"));
    let json: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    json["cases"].as_array().unwrap().clone()
}

/// PyTorch's name to torchfn's: `torch.X` is `torchfn.X`, `torch.Tensor.X` is `Tensor.X`.
fn torchfn_name(func: &str) -> String {
    match func.strip_prefix("torch.Tensor.") {
        Some(method) => format!("Tensor.{method}"),
        None => func.replacen("torch.", "torchfn.", 1),
    }
}

fn number(v: &Json) -> f64 {
    match v {
        Json::String(s) if s == "nan" => f64::NAN,
        Json::String(s) if s == "inf" => f64::INFINITY,
        Json::String(s) if s == "-inf" => f64::NEG_INFINITY,
        Json::Bool(b) => f64::from(u8::from(*b)),
        v => v.as_f64().unwrap(),
    }
}

fn tensor(spec: &Json) -> Tensor {
    let shape: Vec<usize> = spec["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data = spec["data"].as_array().unwrap();
    let dtype = DType::from_name(spec["dtype"].as_str().unwrap()).unwrap();
    let built = match dtype {
        DType::Float32 => Tensor::from_vec(data.iter().map(|v| number(v) as f32).collect(), shape),
        DType::Float64 => Tensor::from_vec(data.iter().map(number).collect(), shape),
        DType::Int64 => Tensor::from_vec(data.iter().map(|v| v.as_i64().unwrap()).collect(), shape),
        DType::Int32 => Tensor::from_vec(data.iter().map(|v| v.as_i64().unwrap() as i32).collect(), shape),
        DType::Bool => Tensor::from_vec(data.iter().map(|v| v.as_bool().unwrap()).collect(), shape),
    };
    built.unwrap()
}

fn value(v: &Json) -> Value {
    let (kind, inner) = v.as_object().unwrap().iter().next().unwrap();
    match kind.as_str() {
        "tensor" => Value::Tensor(tensor(inner)),
        "int" => Value::Int(inner.as_i64().unwrap()),
        "float" => Value::Float(number(inner)),
        "bool" => Value::Bool(inner.as_bool().unwrap()),
        "none" => Value::None,
        "str" => Value::Str(inner.as_str().unwrap().into()),
        "dtype" => Value::DType(DType::from_name(inner.as_str().unwrap()).unwrap()),
        "list" => Value::List(inner.as_array().unwrap().iter().map(value).collect()),
        "tuple" => Value::Tuple(inner.as_array().unwrap().iter().map(value).collect()),
        other => panic!("unknown value kind {other} in the golden file"),
    }
}

/// The elements of `t` as `f64`, whatever its dtype.
fn elements(t: &Tensor) -> Vec<f64> {
    match t.dtype().unwrap() {
        DType::Float32 => t.to_vec::<f32>().unwrap().into_iter().map(f64::from).collect(),
        DType::Float64 => t.to_vec::<f64>().unwrap(),
        DType::Int64 => t.to_vec::<i64>().unwrap().into_iter().map(|x| x as f64).collect(),
        DType::Int32 => t.to_vec::<i32>().unwrap().into_iter().map(f64::from).collect(),
        DType::Bool => t.to_vec::<bool>().unwrap().into_iter().map(|b| f64::from(u8::from(b))).collect(),
    }
}

fn compare(expect: &Json, got: &Value, tol: Option<f64>) -> Result<(), String> {
    let (kind, inner) = expect.as_object().unwrap().iter().next().unwrap();
    match (kind.as_str(), got) {
        ("tensor", Value::Tensor(t)) => {
            let want = tensor(inner);
            let (wd, gd) = (want.dtype().unwrap(), t.dtype().map_err(|e| e.to_string())?);
            if wd != gd {
                return Err(format!("dtype {gd}, expected {wd}"));
            }
            let (ws, gs) = (want.shape().unwrap(), t.shape().unwrap());
            if ws != gs {
                return Err(format!("shape {gs:?}, expected {ws:?}"));
            }
            let rtol = tol.unwrap_or(if wd == DType::Float64 { 1e-6 } else { 1e-5 });
            for (i, (w, g)) in elements(&want).into_iter().zip(elements(t)).enumerate() {
                let ok = if wd.is_floating_point() {
                    (w.is_nan() && g.is_nan()) || w == g || (g - w).abs() <= 1e-6 + rtol * w.abs()
                } else {
                    w == g
                };
                if !ok {
                    return Err(format!("element {i} is {g}, expected {w}:\n{t}"));
                }
            }
            Ok(())
        }
        ("tuple" | "list", Value::Tuple(items) | Value::List(items)) => {
            let wants = inner.as_array().unwrap();
            if wants.len() != items.len() {
                return Err(format!("{} items, expected {}", items.len(), wants.len()));
            }
            wants.iter().zip(items).try_for_each(|(w, g)| compare(w, g, tol))
        }
        ("int", v) if v.as_int() == inner.as_i64() => Ok(()),
        ("bool", Value::Bool(b)) if Some(*b) == inner.as_bool() => Ok(()),
        ("float", v) => match v.as_f64() {
            Some(g) if (g - number(inner)).abs() <= 1e-6 + 1e-5 * number(inner).abs() => Ok(()),
            _ => Err(format!("{v}, expected {}", number(inner))),
        },
        _ => Err(format!("{got}, expected {expect}")),
    }
}

/// Runs one case; `Err` says what went wrong.
fn run(case: &Json) -> Result<(), String> {
    let name = torchfn_name(case["func"].as_str().unwrap());
    let func = find_function(&name).ok_or_else(|| format!("{name} is not registered"))?;
    let args: Vec<Value> = case["args"].as_array().unwrap().iter().map(value).collect();
    let kwargs: Kwargs = case["kwargs"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), value(v))).collect();
    let result = func.call(&args, &kwargs);
    match (case.get("error").and_then(Json::as_str), result) {
        (Some(want), Err(e)) if e.kind().python_name() == want => Ok(()),
        (Some(want), Err(e)) => Err(format!("raised {:?}, expected a {want}", e)),
        (Some(want), Ok(v)) => Err(format!("returned {v}, expected a {want}")),
        (None, Err(e)) => Err(format!("raised {e:?}")),
        (None, Ok(v)) => compare(&case["expect"], &v, case.get("tol").and_then(Json::as_f64)),
    }
}

#[test]
fn every_golden_case_passes() {
    let cases = cases();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| run(case).err().map(|why| format!("{}: {why}", case["id"].as_str().unwrap())))
        .collect();
    assert!(failures.is_empty(), "{} of {} golden cases fail:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn the_golden_file_covers_every_function_it_should() {
    let cases = cases();
    let functions: std::collections::BTreeSet<&str> = cases.iter().map(|c| c["func"].as_str().unwrap()).collect();
    assert_eq!(functions.len(), 163, "the issue names 163 functions");
    assert!(cases.len() > functions.len(), "{} cases", cases.len());
}
