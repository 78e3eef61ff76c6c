//! The catalogue in float16, bfloat16, uint8, int8 and int16: every case of
//! `tests/golden/dtypes.json` (each case of `ops.json` again in each of those dtypes, with
//! PyTorch 2.15's result or error class; `bench/golden/gen_dtypes.py` writes it) through the
//! registry's by-name call, on the CPU. Half-precision results are compared with PyTorch's
//! `assert_close` tolerances; integer results exactly.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::golden::{Place, load, run_at};

/// The dtype a case is about: the last part of its id (`torch.add/3/float16`).
fn dtype_of(case: &Json) -> &str {
    case["id"].as_str().unwrap().rsplit('/').next().unwrap()
}

#[test]
fn every_catalogue_case_matches_pytorch_in_each_new_dtype() {
    let file = load("dtypes.json");
    let cases = file["cases"].as_array().unwrap();
    let mut passed: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    for case in cases {
        let counts = passed.entry(dtype_of(case)).or_default();
        counts.1 += 1;
        match run_at(case, Place::Cpu) {
            Ok(()) => counts.0 += 1,
            Err(why) => failures.push(format!("{}: {why}", case["id"].as_str().unwrap())),
        }
    }
    let summary: Vec<String> = passed.iter().map(|(d, (p, n))| format!("{d} {p}/{n}")).collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases fail ({}):\n{}",
        failures.len(),
        cases.len(),
        summary.join(", "),
        failures.join("\n")
    );
    // Every new dtype is there, with the catalogue's cases.
    assert_eq!(passed.len(), 5, "{summary:?}");
    assert!(passed.values().all(|&(_, n)| n >= 200), "{summary:?}");
}

#[test]
fn new_dtypes_print_as_pytorch_prints_them() {
    use torchfn::{DType, Tensor};
    let t = |data: &[f64], shape: &[usize], dtype: DType| {
        Tensor::from_vec(data.to_vec(), shape.to_vec()).unwrap().to(dtype, false, false).unwrap().to_string()
    };
    // PyTorch 2.15's repr of each.
    let cases = [
        (t(&[1.0, 2.5, 1.0 / 3.0], &[3], DType::Float16), "tensor([1.0000, 2.5000, 0.3333], dtype=torch.float16)"),
        (t(&[1.0, 2.0], &[2], DType::BFloat16), "tensor([1., 2.], dtype=torch.bfloat16)"),
        (t(&[1e-5, 1e4], &[2], DType::Float16), "tensor([1.0014e-05, 1.0000e+04], dtype=torch.float16)"),
        (t(&[1.0, -2.0], &[2], DType::Int8), "tensor([ 1, -2], dtype=torch.int8)"),
        (t(&[1.0, 200.0], &[2], DType::UInt8), "tensor([  1, 200], dtype=torch.uint8)"),
        (t(&[1.0, -300.0], &[2], DType::Int16), "tensor([   1, -300], dtype=torch.int16)"),
        (t(&[2.5], &[], DType::BFloat16), "tensor(2.5000, dtype=torch.bfloat16)"),
        (t(&[], &[0], DType::Float16), "tensor([], dtype=torch.float16)"),
        (t(&[f64::NAN, f64::INFINITY], &[2], DType::Float16), "tensor([nan, inf], dtype=torch.float16)"),
        (t(&[0.1, 100.0], &[1, 2], DType::BFloat16), "tensor([[  0.1001, 100.0000]], dtype=torch.bfloat16)"),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
}
