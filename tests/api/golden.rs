//! The conformance suite: every case of `tests/golden/ops.json` (PyTorch 2.15's results; see
//! the README beside it) through the registry's by-name call, on the CPU, and on the GPU for
//! the dtypes it holds (see `gpu.rs`).

use serde_json::Value as Json;
use torchfn::Device;
use torchfn::overrides::find_function;
use torchfn::prelude::*;

pub(crate) fn cases() -> Vec<Json> {
    load("ops.json")["cases"].as_array().unwrap().clone()
}

/// The golden file `name` of `tests/golden/`, parsed.
pub(crate) fn load(name: &str) -> Json {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// PyTorch's name to torchfn's: `torch.X` is `torchfn.X`, `torch.Tensor.X` is `Tensor.X`.
pub(crate) fn torchfn_name(func: &str) -> String {
    match func.strip_prefix("torch.Tensor.") {
        Some(method) => format!("Tensor.{method}"),
        None => func.replacen("torch.", "torchfn.", 1),
    }
}

pub(crate) fn number(v: &Json) -> f64 {
    match v {
        Json::String(s) if s == "nan" => f64::NAN,
        Json::String(s) if s == "inf" => f64::INFINITY,
        Json::String(s) if s == "-inf" => f64::NEG_INFINITY,
        Json::Bool(b) => f64::from(u8::from(*b)),
        v => v.as_f64().unwrap(),
    }
}

pub(crate) fn tensor(spec: &Json) -> Tensor {
    let shape: Vec<usize> = spec["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data = spec["data"].as_array().unwrap();
    let dtype = DType::from_name(spec["dtype"].as_str().unwrap()).unwrap();
    let built = match dtype {
        DType::Int64 => Tensor::from_vec(data.iter().map(|v| v.as_i64().unwrap()).collect(), shape),
        DType::Bool => Tensor::from_vec(data.iter().map(|v| v.as_bool().unwrap()).collect(), shape),
        // Every other dtype's values are exact in f64 (the fixtures print them so).
        _ => Tensor::from_vec(data.iter().map(number).collect(), shape).and_then(|t| t.to(dtype, false, false)),
    };
    built.unwrap()
}

pub(crate) fn value(v: &Json) -> Value {
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
        "slice" => {
            let part = |i: usize| inner[i].as_i64();
            Value::from(torchfn::Slice { start: part(0), stop: part(1), step: part(2) })
        }
        "ellipsis" => Value::Ellipsis,
        "view" => Value::Tensor(view(inner)),
        other => panic!("unknown value kind {other} in the golden file"),
    }
}

/// A non-contiguous argument: `base` built contiguous, then permuted, sliced or expanded.
fn view(spec: &Json) -> Tensor {
    let Value::Tensor(base) = value(&spec["base"]) else { panic!("a view's base is a tensor") };
    let ints = |v: &Json| -> Vec<i64> { v.as_array().unwrap().iter().map(|d| d.as_i64().unwrap()).collect() };
    if let Some(order) = spec.get("permute") {
        return base.permute(ints(order)).unwrap();
    }
    if let Some(sizes) = spec.get("expand") {
        return base.expand(ints(sizes)).unwrap();
    }
    let slices = spec["slice"].as_array().unwrap();
    let mut t = base;
    for (d, s) in slices.iter().enumerate() {
        let part = |i: usize| s[i].as_i64();
        let (start, stop, step) = (part(0).unwrap_or(0), part(1), part(2).unwrap_or(1));
        let size = t.shape().unwrap()[d] as i64;
        let stop = stop.unwrap_or(size).min(size);
        let index: Vec<torchfn::IndexItem> = (0..d)
            .map(|_| torchfn::IndexItem::slice(None, None, 1))
            .chain([torchfn::IndexItem::slice(Some(start), Some(stop), step)])
            .collect();
        t = t.get(index).unwrap();
    }
    t
}

/// The elements of `t` as `f64`, whatever its dtype.
pub(crate) fn elements(t: &Tensor) -> Vec<f64> {
    match t.dtype().unwrap() {
        DType::Int64 => t.to_vec::<i64>().unwrap().into_iter().map(|x| x as f64).collect(),
        DType::Bool => t.to_vec::<bool>().unwrap().into_iter().map(|b| f64::from(u8::from(b))).collect(),
        // The GPU's own dtypes (it has no float64).
        DType::Float32 => t.to_vec::<f32>().unwrap().into_iter().map(f64::from).collect(),
        DType::Int32 => t.to_vec::<i32>().unwrap().into_iter().map(f64::from).collect(),
        // The others through the host (the GPU has no float64).
        _ => t.to_device(Device::CPU, Some(DType::Float64), false, false).unwrap().to_vec::<f64>().unwrap(),
    }
}

/// Where a case runs: on the CPU as given, or on a GPU with its int64 tensors as int32 (the
/// GPU's integers), where results PyTorch gives as int64 are int32 too.
#[derive(Clone, Copy)]
pub(crate) enum Place {
    Cpu,
    #[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
    Gpu(Device),
}

impl Place {
    /// The dtype a result PyTorch gives as `dtype` has here.
    fn dtype(self, dtype: DType) -> DType {
        match (self, dtype) {
            (Place::Gpu(_), DType::Int64) => DType::Int32,
            _ => dtype,
        }
    }

    /// An argument moved here: tensors to the GPU (int64 as int32, and int64 dtype arguments
    /// likewise), the rest as it is.
    pub(crate) fn argument(self, value: Value) -> Value {
        let Place::Gpu(device) = self else { return value };
        match value {
            Value::DType(dtype) => Value::DType(self.dtype(dtype)),
            Value::Tensor(t) => {
                let dtype = self.dtype(t.dtype().unwrap());
                Value::Tensor(t.to_device(device, Some(dtype), false, false).unwrap())
            }
            Value::List(items) => Value::List(items.into_iter().map(|v| self.argument(v)).collect()),
            Value::Tuple(items) => Value::Tuple(items.into_iter().map(|v| self.argument(v)).collect()),
            other => other,
        }
    }
}

pub(crate) fn compare(expect: &Json, got: &Value, tol: Option<f64>, place: Place) -> Result<(), String> {
    let (kind, inner) = expect.as_object().unwrap().iter().next().unwrap();
    match (kind.as_str(), got) {
        ("tensor", Value::Tensor(t)) => {
            let want = tensor(inner);
            if let Place::Gpu(device) = place
                && t.device().map_err(|e| e.to_string())? != device
            {
                return Err(format!("the result is on {}, not on {device}", t.device().unwrap()));
            }
            let (wd, gd) = (place.dtype(want.dtype().unwrap()), t.dtype().map_err(|e| e.to_string())?);
            if wd != gd {
                return Err(format!("dtype {gd}, expected {wd}"));
            }
            let (ws, gs) = (want.shape().unwrap(), t.shape().unwrap());
            if ws != gs {
                return Err(format!("shape {gs:?}, expected {ws:?}"));
            }
            let rtol = tol.unwrap_or(if wd == DType::Float64 { 1e-6 } else { 1e-5 });
            // PyTorch's assert_close's absolute tolerance for half precision.
            let atol = if wd.is_reduced_float() { 1e-5 } else { 1e-6 };
            for (i, (w, g)) in elements(&want).into_iter().zip(elements(t)).enumerate() {
                let ok = if wd.is_floating_point() {
                    (w.is_nan() && g.is_nan()) || w == g || (g - w).abs() <= atol + rtol * w.abs()
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
            wants.iter().zip(items).try_for_each(|(w, g)| compare(w, g, tol, place))
        }
        ("int", v) if v.as_int() == inner.as_i64() => Ok(()),
        ("bool", Value::Bool(b)) if Some(*b) == inner.as_bool() => Ok(()),
        ("none", Value::None) => Ok(()),
        ("float", v) => match v.as_f64() {
            Some(g) if (g - number(inner)).abs() <= 1e-6 + 1e-5 * number(inner).abs() => Ok(()),
            _ => Err(format!("{v}, expected {}", number(inner))),
        },
        _ => Err(format!("{got}, expected {expect}")),
    }
}

/// As [`compare`], for results whose values are random (`"compare": "shape"` in a case):
/// tensors by dtype and shape only, the other values as `compare` does.
pub(crate) fn compare_shapes(expect: &Json, got: &Value, place: Place) -> Result<(), String> {
    let (kind, inner) = expect.as_object().unwrap().iter().next().unwrap();
    match (kind.as_str(), got) {
        ("tensor", Value::Tensor(t)) => {
            let (wd, gd) = (
                place.dtype(DType::from_name(inner["dtype"].as_str().unwrap()).unwrap()),
                t.dtype().map_err(|e| e.to_string())?,
            );
            let ws: Vec<usize> =
                inner["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
            let gs = t.shape().map_err(|e| e.to_string())?;
            match (wd == gd, gs.as_ref() == ws.as_slice()) {
                (false, _) => Err(format!("dtype {gd}, expected {wd}")),
                (_, false) => Err(format!("shape {gs:?}, expected {ws:?}")),
                _ => Ok(()),
            }
        }
        ("tuple" | "list", Value::Tuple(items) | Value::List(items)) => {
            let wants = inner.as_array().unwrap();
            if wants.len() != items.len() {
                return Err(format!("{} items, expected {}", items.len(), wants.len()));
            }
            wants.iter().zip(items).try_for_each(|(w, g)| compare_shapes(w, g, place))
        }
        _ => compare(expect, got, None, place),
    }
}

/// The dtypes of the tensors in a case's arguments and expected result.
#[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
pub(crate) fn dtypes(case: &Json) -> Vec<DType> {
    fn walk(v: &Json, out: &mut Vec<DType>) {
        match v {
            Json::Object(map) => {
                if let Some(spec) = map.get("tensor") {
                    out.push(DType::from_name(spec["dtype"].as_str().unwrap()).unwrap());
                }
                map.values().for_each(|v| walk(v, out));
            }
            Json::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for key in ["args", "kwargs", "expect"] {
        walk(&case[key], &mut out);
    }
    out
}

/// Runs one case on the CPU; `Err` says what went wrong.
fn run(case: &Json) -> Result<(), String> {
    run_at(case, Place::Cpu)
}

/// Runs one case at `place`; `Err` says what went wrong.
pub(crate) fn run_at(case: &Json, place: Place) -> Result<(), String> {
    let name = torchfn_name(case["func"].as_str().unwrap());
    let func = find_function(&name).ok_or_else(|| format!("{name} is not registered"))?;
    let args: Vec<Value> = case["args"].as_array().unwrap().iter().map(|v| place.argument(value(v))).collect();
    let kwargs: Kwargs =
        case["kwargs"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), place.argument(value(v)))).collect();
    let result = func.call(&args, &kwargs);
    match (case.get("error").and_then(Json::as_str), result) {
        (Some(want), Err(e)) if e.kind().python_name() == want => Ok(()),
        (Some(want), Err(e)) => Err(format!("raised {:?}, expected a {want}", e)),
        (Some(want), Ok(v)) => Err(format!("returned {v}, expected a {want}")),
        (None, Err(e)) => Err(format!("raised {e:?}")),
        (None, Ok(v)) if case.get("compare").and_then(Json::as_str) == Some("shape") => {
            compare_shapes(&case["expect"], &v, place)
        }
        (None, Ok(v)) => compare(&case["expect"], &v, case.get("tol").and_then(Json::as_f64), place),
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
