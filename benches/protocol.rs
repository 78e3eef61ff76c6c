//! The cost of the override protocol per call (PROTOCOL.md section 8), on one-element tensors.
//!
//! `cargo bench --bench protocol` runs the criterion benchmarks, then prints a table of the
//! results from criterion's estimates, with the overheads and the targets. Compare numbers from
//! one run only: the machines are noisy.

use std::hint::black_box;
use std::sync::LazyLock;

use criterion::Criterion;
use torchfn::prelude::*;

/// A subclass with the default hook.
#[derive(TensorSubclass)]
struct Sub;
impl TorchFunction for Sub {}

/// A duck whose hook returns a ready value.
#[derive(Debug, DuckTensor)]
struct Ready;

static READY: LazyLock<Tensor> = LazyLock::new(|| torchfn::tensor([1.0f32]).unwrap());

impl TorchFunction for Ready {
    fn torch_function(_: &'static Class, _: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        Ok(Value::Tensor(READY.clone()))
    }
}

/// A mode that passes every call through.
struct PassThrough;
impl TorchFunctionMode for PassThrough {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        func.call(args, kwargs)
    }
}

/// The cases, in the order of the table: (criterion id, what it measures).
const CASES: [(&str, &str); 8] = [
    ("ndim/implementation", "`t.ndim()`: implementation called directly"),
    ("ndim/public_plain", "`t.ndim()`: public method, plain tensor (fast path)"),
    ("add/implementation", "`a.add(b)`: implementation called directly"),
    ("add/public_plain", "`a.add(b)`: public method, plain tensors (fast path)"),
    ("add/subclass_default_hook", "`a.add(b)`: subclass with the default hook"),
    ("add/duck_ready_value", "`torchfn::add(d, d)`: duck whose hook returns a ready value"),
    ("add/pass_through_mode", "`a.add(b)`: plain tensors under a pass-through mode"),
    ("add/operator_plain", "`&a + &b`: operator, plain tensors (fast path)"),
];

fn benches(c: &mut Criterion) {
    let a = torchfn::tensor([1.0f32]).unwrap();
    let b = torchfn::tensor([2.0f32]).unwrap();
    let s = a.as_subclass(Sub).unwrap();
    let d = Tensor::from_duck(Ready);

    let mut ndim = c.benchmark_group("ndim");
    // The hidden `__impl_*` items are the implementations `#[torch_function]` wraps.
    ndim.bench_function("implementation", |bench| bench.iter(|| Tensor::__impl_ndim(black_box(&a))));
    ndim.bench_function("public_plain", |bench| bench.iter(|| black_box(&a).ndim()));
    ndim.finish();

    let mut add = c.benchmark_group("add");
    add.bench_function("implementation", |bench| bench.iter(|| Tensor::__impl_add(black_box(&a), black_box(&b), 1)));
    add.bench_function("public_plain", |bench| bench.iter(|| black_box(&a).add(black_box(&b), 1)));
    add.bench_function("subclass_default_hook", |bench| bench.iter(|| black_box(&s).add(black_box(&s), 1)));
    add.bench_function("duck_ready_value", |bench| bench.iter(|| torchfn::add(black_box(&d), black_box(&d), 1)));
    {
        let _mode = push_mode(PassThrough);
        add.bench_function("pass_through_mode", |bench| bench.iter(|| black_box(&a).add(black_box(&b), 1)));
    }
    add.bench_function("operator_plain", |bench| bench.iter(|| black_box(&a) + black_box(&b)));
    add.finish();
}

/// The mean time per call of a benchmark, in nanoseconds, from criterion's estimates.
fn mean_ns(id: &str) -> Option<f64> {
    let dir = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let text = std::fs::read_to_string(format!("{dir}/criterion/{id}/new/estimates.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["mean"]["point_estimate"].as_f64()
}

fn print_table() {
    let ns = |id: &str| mean_ns(id).unwrap_or(f64::NAN);
    let fast = ns("add/public_plain");
    println!("\n| case | ns per call | protocol overhead | target | PyTorch 2.15 |");
    println!("|---|---:|---:|---|---:|");
    for (id, what) in CASES {
        let t = ns(id);
        let (overhead, target, pytorch) = match id {
            "ndim/public_plain" => (format!("{:+.1} ns", t - ns("ndim/implementation")), "within 2 ns of direct", ""),
            "add/public_plain" => {
                (format!("{:+.1} ns", t - ns("add/implementation")), "within 2 ns of direct", "2,100 ns")
            }
            "add/subclass_default_hook" => (format!("{:+.0} ns", t - fast), "under 100 ns of overhead", "+8,100 ns"),
            "add/duck_ready_value" => (format!("{t:.0} ns end to end"), "under 50 ns end to end", "1,300 ns"),
            "add/pass_through_mode" => (format!("{:+.0} ns", t - fast), "under 50 ns of overhead", "+2,200 ns"),
            "add/operator_plain" => (format!("{:+.1} ns", t - ns("add/implementation")), "", ""),
            _ => (String::new(), "", ""),
        };
        println!("| {what} | {t:.1} | {overhead} | {target} | {pytorch} |");
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    print_table();
}
