//! The catalogue on degenerate inputs: every case of `tests/golden/edge_cases.json` (PyTorch
//! 2.15's results for creation functions, reductions, joins and splits on empty tensors and
//! lists, zero-dimensional tensors, single steps, out-of-range dimensions and NaN; see the
//! README beside it) through the registry's by-name call, on the CPU, and on the GPU for the
//! dtypes it holds (see `gpu.rs`). Random results are compared by dtype and shape. The file's
//! `skipped` section lists, with reasons, the calls where torchfn deliberately answers
//! differently: they are checked to still differ (by an error, not a panic), not to match.

use std::collections::BTreeSet;

use serde_json::Value as Json;

use crate::golden::{Place, load, run_at};
#[cfg(feature = "wgpu")]
use crate::gpu::{gpu, runs_on_the_gpu};

/// A short description of an argument: `f32[2, 0]`, `i64[] = 3`, `[f32[0], f32[0]]`, `2.5`.
fn describe(v: &Json) -> String {
    let (kind, inner) = v.as_object().unwrap().iter().next().unwrap();
    match kind.as_str() {
        "tensor" => {
            let dtype = match inner["dtype"].as_str().unwrap() {
                "float32" => "f32",
                "float64" => "f64",
                "int64" => "i64",
                "int32" => "i32",
                _ => "bool",
            };
            let shape: Vec<String> = inner["shape"].as_array().unwrap().iter().map(Json::to_string).collect();
            let data = inner["data"].as_array().unwrap();
            match data.as_slice() {
                [x] if shape.is_empty() => format!("{dtype}[] = {x}"),
                _ => format!("{dtype}[{}]", shape.join(", ")),
            }
        }
        "list" | "tuple" => {
            let items: Vec<String> = inner.as_array().unwrap().iter().map(describe).collect();
            if kind == "list" { format!("[{}]", items.join(", ")) } else { format!("({})", items.join(", ")) }
        }
        "none" => "None".into(),
        "dtype" => format!("torch.{}", inner.as_str().unwrap()),
        _ => inner.to_string(),
    }
}

/// The call a case makes, as Python would spell it.
fn call(case: &Json) -> String {
    let args = case["args"].as_array().unwrap().iter().map(describe);
    let kwargs = case["kwargs"].as_object().unwrap().iter().map(|(k, v)| format!("{k}={}", describe(v)));
    format!("{}({})", case["func"].as_str().unwrap(), args.chain(kwargs).collect::<Vec<_>>().join(", "))
}

#[test]
fn every_edge_case_matches_pytorch() {
    let file = load("edge_cases.json");
    let cases = file["cases"].as_array().unwrap();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let why = run_at(case, Place::Cpu).err()?;
            Some(format!("{} {}: {why}", case["id"].as_str().unwrap(), call(case)))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} edge cases differ from PyTorch:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn the_edge_case_file_is_broad_and_every_skip_has_a_reason() {
    let file = load("edge_cases.json");
    let cases = file["cases"].as_array().unwrap();
    let functions: BTreeSet<&str> = cases.iter().map(|c| c["func"].as_str().unwrap()).collect();
    assert!(functions.len() >= 40 && cases.len() >= 1000, "{} cases of {} functions", cases.len(), functions.len());
    let errors = cases.iter().filter(|c| c.get("error").is_some()).count();
    assert!(errors > 100, "{errors} error cases");
    // Each skip is still a difference (one that torchfn comes to match belongs among the cases),
    // and an error rather than a panic.
    for skipped in file["skipped"].as_array().unwrap() {
        let reason = skipped["reason"].as_str().unwrap_or_default();
        assert!(reason.len() > 20, "{} is skipped without a reason", skipped["id"]);
        assert!(run_at(skipped, Place::Cpu).is_err(), "{} {} now matches PyTorch", skipped["id"], call(skipped));
    }
}

#[cfg(feature = "wgpu")]
#[test]
fn every_edge_case_matches_pytorch_on_the_gpu_for_its_dtypes() {
    let Some(device) = gpu() else { return };
    let file = load("edge_cases.json");
    let eligible: Vec<&Json> = file["cases"].as_array().unwrap().iter().filter(|c| runs_on_the_gpu(c)).collect();
    let failures: Vec<String> = eligible
        .iter()
        .filter_map(|case| {
            let why = run_at(case, Place::Gpu(device)).err()?;
            Some(format!("{} {}: {why}", case["id"].as_str().unwrap(), call(case)))
        })
        .collect();
    assert!(eligible.len() > 1000, "only {} edge cases for the GPU", eligible.len());
    assert!(
        failures.is_empty(),
        "{} of {} edge cases differ from PyTorch on {device}:\n{}",
        failures.len(),
        eligible.len(),
        failures.join("\n")
    );
}

/// An empty tensor whose other dimensions multiply past what memory could hold (the fuzzing of
/// the readers found it in files) is refused by the constructors too, as PyTorch refuses it
/// ("Storage size calculation overflowed"), before anything overflows; one that fits is empty.
#[test]
fn empty_tensors_with_huge_dimensions_are_refused_or_empty() {
    for result in [
        torchfn::zeros([0, 1 << 62, 1 << 62], None, None),
        torchfn::full([1 << 62, 0, 8], 1.0, None, None),
        torchfn::rand([0, 1 << 63, 3], None, None, None),
    ] {
        let err = result.unwrap_err();
        assert!(err.to_string().contains("too large to allocate"), "{err}");
    }
    let empty = torchfn::zeros([0, 1 << 20, 1 << 20], None, None).unwrap();
    assert!(empty.to_vec::<f32>().unwrap().is_empty());
    assert_eq!(empty.transpose(0, 2).unwrap().sum().unwrap().item().unwrap(), torchfn::Scalar::Float(0.0));
}
