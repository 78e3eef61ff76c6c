//! What the benches share: reading criterion's results back to print their tables, PyTorch's
//! times for the same measurements, and the processor's name. Each bench uses part of it.
#![allow(dead_code)]

/// The mean time per call of a benchmark, in nanoseconds, from criterion's estimates (NaN when
/// the benchmark has not run).
pub fn mean_ns(id: &str) -> f64 {
    let dir = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let estimates = std::fs::read_to_string(format!("{dir}/criterion/{id}/new/estimates.json")).ok();
    let json: Option<serde_json::Value> = estimates.and_then(|text| serde_json::from_str(&text).ok());
    json.and_then(|j| j["mean"]["point_estimate"].as_f64()).unwrap_or(f64::NAN)
}

/// PyTorch's times for the same measurements, in the same sitting: runs `script` (a path from
/// the repository's root) with the Python that `PYTORCH_PYTHON` names and reads the JSON it
/// prints. `None`, with a line saying why, when the variable is unset or the script fails.
pub fn pytorch(script: &str) -> Option<serde_json::Value> {
    let Ok(python) = std::env::var("PYTORCH_PYTHON") else {
        println!("(PYTORCH_PYTHON is not set: no PyTorch column)");
        return None;
    };
    let script = format!("{}/{script}", env!("CARGO_MANIFEST_DIR"));
    let output = std::process::Command::new(&python).arg(&script).output();
    match output {
        Ok(out) if out.status.success() => serde_json::from_slice(&out.stdout).ok(),
        Ok(out) => {
            println!("({python} {script} failed: {})", String::from_utf8_lossy(&out.stderr).trim());
            None
        }
        Err(e) => {
            println!("(could not run {python}: {e})");
            None
        }
    }
}

/// The processor the figures come from: `lscpu`'s model name and the widest vector
/// instructions it has.
pub fn processor() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info.lines().find_map(|l| l.strip_prefix("model name")).map(|l| l.trim_start_matches([' ', '\t', ':']));
    let flags = info.lines().find_map(|l| l.strip_prefix("flags")).unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    let widest = if has("avx512f") {
        "AVX-512"
    } else if has("avx2") {
        "AVX2"
    } else {
        "no AVX2"
    };
    format!("{} ({widest})", model.unwrap_or("unknown processor"))
}
