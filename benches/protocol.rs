//! The cost of the override protocol per call (docs/protocol.md section 8), on one-element tensors.
//!
//! `cargo bench --bench protocol` runs the criterion benchmarks, then prints a table of the
//! results from criterion's estimates, with the overheads and the targets. Each case is
//! measured twice: on `ndim()`, whose implementation costs a few nanoseconds, so the protocol's
//! own cost shows; and on `add`, a real operation. Compare numbers from one run only: the
//! machines are noisy.

mod common;
use common::mean_ns;

use std::hint::black_box;
use std::sync::LazyLock;

use criterion::Criterion;
use torchfn::prelude::*;

/// A subclass with the default hook.
#[derive(TensorSubclass)]
struct Sub;

/// A duck whose hook returns a ready value.
#[derive(Debug, DuckTensor)]
struct Ready;

static READY: LazyLock<Tensor> = LazyLock::new(|| torchfn::tensor([1.0f32]).unwrap());

impl TorchFunction for Ready {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, _: &[Value], _: &Kwargs) -> Outcome {
        Ok(if func == Tensor::NDIM { Value::Int(1) } else { Value::Tensor(READY.clone()) })
    }
}

/// A mode that passes every call through.
struct PassThrough;
impl TorchFunctionMode for PassThrough {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        func.call(args, kwargs)
    }
}

/// The operations measured: `ndim()` (the protocol alone) and `add` (a real operation).
const OPS: [&str; 2] = ["ndim", "add"];

/// The cases: (criterion id, what it measures).
const CASES: [(&str, &str); 5] = [
    ("implementation", "implementation called directly"),
    ("public_plain", "public method, plain tensors (fast path)"),
    ("subclass", "subclass with the default hook"),
    ("duck", "duck whose hook returns a ready value"),
    ("mode", "plain tensors under a pass-through mode"),
];

fn benches(c: &mut Criterion) {
    let a = torchfn::tensor([1.0f32]).unwrap();
    let b = torchfn::tensor([2.0f32]).unwrap();
    let s = a.as_subclass(Sub).unwrap();
    let d = Tensor::from_duck(Ready);

    let mut ndim = c.benchmark_group("ndim");
    // The hidden `__impl_*` items are the implementations `#[torch_function]` wraps.
    ndim.bench_function("implementation", |x| x.iter(|| Tensor::__impl_ndim(black_box(&a)).unwrap()));
    ndim.bench_function("public_plain", |x| x.iter(|| black_box(&a).ndim().unwrap()));
    ndim.bench_function("subclass", |x| x.iter(|| black_box(&s).ndim().unwrap()));
    ndim.bench_function("duck", |x| x.iter(|| black_box(&d).ndim().unwrap()));
    {
        let _mode = push_mode(PassThrough);
        ndim.bench_function("mode", |x| x.iter(|| black_box(&a).ndim().unwrap()));
    }
    ndim.finish();

    let mut add = c.benchmark_group("add");
    add.bench_function("implementation", |x| x.iter(|| Tensor::__impl_add(black_box(&a), black_box(&b), 1).unwrap()));
    add.bench_function("public_plain", |x| x.iter(|| black_box(&a).add(black_box(&b), 1).unwrap()));
    add.bench_function("subclass", |x| x.iter(|| black_box(&s).add(black_box(&s), 1).unwrap()));
    add.bench_function("duck", |x| x.iter(|| black_box(&d).add(black_box(&d), 1).unwrap()));
    {
        let _mode = push_mode(PassThrough);
        add.bench_function("mode", |x| x.iter(|| black_box(&a).add(black_box(&b), 1).unwrap()));
    }
    add.finish();

    // The protocol's last rows (issue 25): each new method's fast path against its
    // implementation, and Python's comparison operator against the `lt` method.
    let (i, j) = (torchfn::tensor([6i64]).unwrap(), torchfn::tensor([3i64]).unwrap());
    let mut rows = c.benchmark_group("rows");
    rows.bench_function("lt-implementation", |x| x.iter(|| Tensor::__impl_lt(black_box(&a), black_box(&b)).unwrap()));
    rows.bench_function("lt-public_plain", |x| x.iter(|| black_box(&a).lt(black_box(&b)).unwrap()));
    rows.bench_function("__lt__-implementation", |x| {
        x.iter(|| Tensor::__impl___lt__(black_box(&a), black_box(&b)).unwrap())
    });
    rows.bench_function("__lt__-public_plain", |x| x.iter(|| black_box(&a).__lt__(black_box(&b)).unwrap()));
    rows.bench_function("operator_lt-public_plain", |x| {
        x.iter(|| torchfn::operator::lt(black_box(&a), black_box(&b)).unwrap())
    });
    rows.bench_function("__and__-implementation", |x| {
        x.iter(|| Tensor::__impl___and__(black_box(&i), black_box(&j)).unwrap())
    });
    rows.bench_function("__and__-public_plain", |x| x.iter(|| (black_box(&i) & black_box(&j)).unwrap()));
    rows.bench_function("__len__-implementation", |x| x.iter(|| Tensor::__impl___len__(black_box(&a)).unwrap()));
    rows.bench_function("__len__-public_plain", |x| x.iter(|| black_box(&a).__len__().unwrap()));
    rows.bench_function("__bool__-implementation", |x| x.iter(|| Tensor::__impl___bool__(black_box(&a)).unwrap()));
    rows.bench_function("__bool__-public_plain", |x| x.iter(|| black_box(&a).__bool__().unwrap()));
    rows.finish();
}

/// The new methods of the rows table: (criterion name, what it is).
const ROWS: [(&str, &str); 6] = [
    ("lt", "`t.lt(u)` (before issue 25)"),
    ("__lt__", "`t.__lt__(u)`"),
    ("operator_lt", "`operator::lt(t, u)` (Python's `t < u`)"),
    ("__and__", "`&t & &u` (int64)"),
    ("__len__", "`t.__len__()`"),
    ("__bool__", "`t.__bool__()`"),
];

fn print_rows() {
    println!("\n| call, one-element tensors | implementation ns | public ns | fast-path cost |");
    println!("|---|---:|---:|---:|");
    for (name, what) in ROWS {
        let public = mean_ns(&format!("rows/{name}-public_plain"));
        let direct = match name {
            "operator_lt" => mean_ns("rows/__lt__-implementation"),
            _ => mean_ns(&format!("rows/{name}-implementation")),
        };
        println!("| {what} | {direct:.1} | {public:.1} | {:+.1} |", public - direct);
    }
}

fn print_table() {
    println!("\n| case | `ndim()` ns | protocol cost | `add` ns | protocol cost | target | PyTorch 2.15 |");
    println!("|---|---:|---:|---:|---:|---|---:|");
    for (case, what) in CASES {
        let mut row = format!("| {what} |");
        for op in OPS {
            let t = mean_ns(&format!("{op}/{case}"));
            let direct = mean_ns(&format!("{op}/implementation"));
            let fast = mean_ns(&format!("{op}/public_plain"));
            let cost = match case {
                "implementation" => String::new(),
                "public_plain" => format!("{:+.1}", t - direct),
                "duck" => format!("{t:.0} in all"),
                _ => format!("{:+.0}", t - fast),
            };
            row.push_str(&format!(" {t:.1} | {cost} |"));
        }
        let (target, pytorch) = match case {
            // PyTorch's figures from `python bench/protocol.py`, this machine, 2026-11-24.
            "public_plain" => ("within 2 ns of direct", "1,467 (`torch.add`)"),
            "subclass" => ("under 100 ns", "+4,981"),
            "duck" => ("under 50 ns in all", "1,123"),
            "mode" => ("under 50 ns", "+1,477"),
            _ => ("", ""),
        };
        println!("{row} {target} | {pytorch} |");
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    print_table();
    print_rows();
}
