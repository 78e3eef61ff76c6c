//! What the benches share: reading criterion's results back to print their tables.

/// The mean time per call of a benchmark, in nanoseconds, from criterion's estimates (NaN when
/// the benchmark has not run).
pub fn mean_ns(id: &str) -> f64 {
    let dir = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let estimates = std::fs::read_to_string(format!("{dir}/criterion/{id}/new/estimates.json")).ok();
    let json: Option<serde_json::Value> = estimates.and_then(|text| serde_json::from_str(&text).ok());
    json.and_then(|j| j["mean"]["point_estimate"].as_f64()).unwrap_or(f64::NAN)
}
