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
