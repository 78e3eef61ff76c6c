//! The catalogue in float16, bfloat16, uint8, int8 and int16: every case of
//! `tests/golden/dtypes.json` (each case of `ops.json` again in each of those dtypes, with
//! PyTorch 2.15's result or error class; `bench/golden/gen_dtypes.py` writes it) through the
//! registry's by-name call, on the CPU and on the GPU. Half-precision results are compared with PyTorch's
//! `assert_close` tolerances; integer results exactly.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::golden::{Place, load, run_at};

/// The dtype a case is about: the last part of its id (`torch.add/3/float16`).
fn dtype_of(case: &Json) -> &str {
    case["id"].as_str().unwrap().rsplit('/').next().unwrap()
}

/// Runs the cases of `tests/golden/dtypes.json` that `eligible` picks at `place`: how many
/// passed of how many, per dtype, and the failures.
fn run_cases(place: Place, eligible: impl Fn(&Json) -> bool) -> (BTreeMap<String, (usize, usize)>, Vec<String>) {
    let file = load("dtypes.json");
    let mut passed: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    for case in file["cases"].as_array().unwrap().iter().filter(|c| eligible(c)) {
        let counts = passed.entry(dtype_of(case).to_string()).or_default();
        counts.1 += 1;
        match run_at(case, place) {
            Ok(()) => counts.0 += 1,
            Err(why) => failures.push(format!("{}: {why}", case["id"].as_str().unwrap())),
        }
    }
    (passed, failures)
}

/// Asserts that no case failed and that each new dtype had at least `at_least` cases.
fn assert_all_pass(place: &str, (passed, failures): (BTreeMap<String, (usize, usize)>, Vec<String>), at_least: usize) {
    let summary: Vec<String> = passed.iter().map(|(d, (p, n))| format!("{d} {p}/{n}")).collect();
    assert!(
        failures.is_empty(),
        "{} cases fail on {place} ({}):\n{}",
        failures.len(),
        summary.join(", "),
        failures.join("\n")
    );
    // Every new dtype is there, with the catalogue's cases.
    assert_eq!(passed.len(), 5, "{summary:?}");
    assert!(passed.values().all(|&(_, n)| n >= at_least), "{summary:?}");
}

#[test]
fn every_catalogue_case_matches_pytorch_in_each_new_dtype() {
    assert_all_pass("the CPU", run_cases(Place::Cpu, |_| true), 200);
}

/// Whether every int64 result of `case` fits in an int32, which the GPU gives in its place.
#[cfg(feature = "wgpu")]
fn results_fit_int32(case: &Json) -> bool {
    fn walk(v: &Json) -> bool {
        match v {
            Json::Object(map) if map.get("dtype").and_then(Json::as_str) == Some("int64") => {
                map["data"].as_array().unwrap().iter().all(|x| x.as_i64().is_some_and(|x| i32::try_from(x).is_ok()))
            }
            Json::Object(map) => map.values().all(walk),
            Json::Array(items) => items.iter().all(walk),
            _ => true,
        }
    }
    walk(&case["expect"])
}

/// The same cases on the GPU, which holds the five dtypes packed and computes them in 32 bits:
/// each case whose tensors the GPU holds (no float64; int64 arguments as int32) and whose
/// int64 results fit the GPU's int32 (three integer products do not).
#[cfg(feature = "wgpu")]
#[test]
fn every_catalogue_case_matches_pytorch_in_each_new_dtype_on_the_gpu() {
    let Some(device) = crate::gpu::gpu() else { return };
    let eligible = |case: &Json| crate::gpu::runs_on_the_gpu(case) && results_fit_int32(case);
    assert_all_pass("the GPU", run_cases(Place::Gpu(device), eligible), 150);
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

/// `tests/golden/dtypes.safetensors`, written by PyTorch's safetensors (see
/// `bench/golden/gen_dtypes.py`).
fn pytorch_file() -> Vec<u8> {
    std::fs::read(format!("{}/tests/golden/dtypes.safetensors", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn safetensors_of_every_new_dtype_load_bit_exactly_and_save_pytorch_s_bytes() {
    use torchfn::half::{bf16, f16};
    use torchfn::{DType, safetensors};
    let bytes = pytorch_file();
    let state = safetensors::load(&bytes).unwrap();
    let get = |k: &str| state.get(k).unwrap();
    // The bits PyTorch wrote (printed by the generator), NaN, negative zero and subnormals included.
    let bits16 = |v: Vec<u16>| v.into_iter().map(|b| b as i16).collect::<Vec<i16>>();
    assert_eq!(get("float16").dtype().unwrap(), DType::Float16);
    let halves = get("float16").to_vec::<f16>().unwrap().into_iter().map(f16::to_bits).collect();
    assert_eq!(bits16(halves), [15360, -32768, 31743, 31744, -1024, 32256, 1, 13653]);
    assert_eq!(get("bfloat16").dtype().unwrap(), DType::BFloat16);
    let brains = get("bfloat16").to_vec::<bf16>().unwrap().into_iter().map(bf16::to_bits).collect();
    assert_eq!(bits16(brains), [16256, -32768, 32610, 32640, 32704, 1, 16043]);
    assert_eq!(get("int8").to_vec::<i8>().unwrap(), [-128, -1, 0, 1, 127]);
    assert_eq!(get("uint8").shape().unwrap(), [2, 2]);
    assert_eq!(get("uint8").to_vec::<u8>().unwrap(), [0, 1, 128, 255]);
    assert_eq!(get("int16").to_vec::<i16>().unwrap(), [-32768, -1, 0, 300, 32767]);
    // Written back by torchfn: byte for byte the file PyTorch wrote, so PyTorch reads it.
    assert_eq!(safetensors::save(&state).unwrap(), bytes);
}

#[test]
fn npy_holds_the_new_dtypes_numpy_has_and_refuses_bfloat16() {
    use torchfn::{DType, ErrorKind, Tensor, npy};
    for dtype in [DType::Float16, DType::UInt8, DType::Int8, DType::Int16] {
        let t = Tensor::from_vec(vec![1.0f64, -2.0, 3.5, 100.0], vec![2, 2]).unwrap().to(dtype, false, false).unwrap();
        let mut bytes = Vec::new();
        npy::write(&mut bytes, &t).unwrap();
        let back = npy::read(&bytes[..]).unwrap();
        assert_eq!(back.dtype().unwrap(), dtype);
        let v = |t: &Tensor| t.to(DType::Float64, false, false).unwrap().to_vec::<f64>().unwrap();
        assert_eq!(v(&back), v(&t), "{dtype}");
    }
    let header = |dtype: DType| {
        let mut bytes = Vec::new();
        npy::write(&mut bytes, &torchfn::zeros([1], dtype, None).unwrap()).unwrap();
        String::from_utf8_lossy(&bytes[10..40]).into_owned()
    };
    assert!(header(DType::Float16).starts_with("{'descr': '<f2'"), "{}", header(DType::Float16));
    assert!(header(DType::UInt8).starts_with("{'descr': '|u1'"));
    let err = npy::write(Vec::new(), &torchfn::zeros([1], DType::BFloat16, None).unwrap()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Type);
    assert!(err.to_string().contains("NumPy has no torch.bfloat16 type"), "{err}");
}

/// Autograd in half precision: gradients of float16 and bfloat16 leaves are of their dtype and
/// within their precision of float32's.
#[test]
fn gradients_flow_in_float16_and_bfloat16() {
    use torchfn::nn::functional as F;
    use torchfn::{DType, Generator, Tensor};
    let g = Generator::new().manual_seed(3);
    let x32 = torchfn::randn([4, 8], g.clone(), None, None).unwrap();
    let w32 = torchfn::randn([8, 8], g, None, None).unwrap();
    let grads = |dtype: DType| -> Vec<Vec<f64>> {
        let x = x32.to(dtype, false, true).unwrap().requires_grad_(true).unwrap();
        let w = w32.to(dtype, false, true).unwrap().requires_grad_(true).unwrap();
        let h = F::gelu(&x.matmul(&w).unwrap(), "tanh").unwrap();
        let y = F::layer_norm(&h, [8], None, None, 1e-5).unwrap().tanh().unwrap();
        (&y * &y).unwrap().sum().unwrap().backward().unwrap();
        [&x, &w]
            .iter()
            .map(|t| {
                let grad: Tensor = t.grad().unwrap().unwrap();
                assert_eq!(grad.dtype().unwrap(), dtype);
                grad.to(DType::Float64, false, false).unwrap().to_vec::<f64>().unwrap()
            })
            .collect()
    };
    let reference = grads(DType::Float32);
    for (dtype, tol) in [(DType::Float16, 2e-2), (DType::BFloat16, 1e-1)] {
        for (got, want) in grads(dtype).iter().zip(&reference) {
            let norm = want.iter().map(|w| w * w).sum::<f64>().sqrt();
            let diff = got.iter().zip(want).map(|(g, w)| (g - w).powi(2)).sum::<f64>().sqrt();
            assert!(diff / norm < tol, "{dtype}: relative error {}", diff / norm);
        }
    }
}

#[test]
fn half_precision_uses_float32_s_epsilon_and_draws_below_one() {
    use torchfn::nn::functional as F;
    use torchfn::{DType, Generator};
    // rms_norm's default eps is the epsilon of the dtype it computes in (float32), as PyTorch's:
    // half precision's own epsilon would swamp these small values (PyTorch 2.15 gives 0.7070,
    // 1.4141, -0.7070 in both dtypes).
    for dtype in [DType::Float16, DType::BFloat16] {
        let x = torchfn::tensor([[1e-2f32, 2e-2, -1e-2]]).unwrap().to(dtype, false, false).unwrap();
        let y = F::rms_norm(&x, [3], None, None).unwrap().to(DType::Float32, false, false).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), [0.70703125, 1.4140625, -0.70703125], "{dtype}");
    }
    // rand draws as many bits as the dtype's significand holds: never rounds up to 1.
    for dtype in [DType::Float16, DType::BFloat16] {
        let r = torchfn::rand([200_000], Generator::new().manual_seed(1), dtype, None).unwrap();
        let r = r.to(DType::Float32, false, false).unwrap().to_vec::<f32>().unwrap();
        assert!(r.iter().all(|&v| (0.0..1.0).contains(&v)), "{dtype}: a draw of 1.0");
    }
}
