//! The cost of the dispatch layer below autograd (`torchfn::dispatch`): a one-element `add`
//! and a 100-operation chain forward and backward on one-element float32 tensors, plain and
//! under a pass-through `TorchDispatchMode`.
//!
//! `cargo bench --bench dispatch` runs the criterion benchmarks, then prints a table from
//! criterion's estimates beside the targets and PyTorch 2.15's figures (`python
//! bench/dispatch.py`, PyTorch from PyPI in a scratch venv, timed in the same sitting). Compare
//! numbers from one run only: the machines are noisy.

mod common;
use common::mean_ns;

use std::hint::black_box;

use criterion::Criterion;
use torchfn::dispatch::{Operator, TorchDispatchMode, push_dispatch_mode};
use torchfn::prelude::*;

/// A dispatch mode that passes every call through.
struct PassThrough;

impl TorchDispatchMode for PassThrough {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        func.call(args, kwargs)
    }
}

/// Operations in the chain.
const CHAIN: usize = 100;

/// `CHAIN` alternating multiplications and additions of `a` by `b`.
fn chain(a: &Tensor, b: &Tensor) -> Tensor {
    let mut t = a.clone();
    for i in 0..CHAIN {
        t = if i % 2 == 0 { (&t * b).unwrap() } else { (&t + b).unwrap() };
    }
    t
}

fn benches(c: &mut Criterion) {
    let (a, b) = (torchfn::tensor([1.0f32]).unwrap(), torchfn::tensor([0.5f32]).unwrap());
    let ga = a.detach().unwrap().requires_grad_(true).unwrap();
    let gb = b.detach().unwrap().requires_grad_(true).unwrap();
    let mut group = c.benchmark_group("dispatch");
    let cases = |group: &mut criterion::BenchmarkGroup<'_, _>, suffix: &str| {
        group.bench_function(format!("add{suffix}"), |x| x.iter(|| black_box(&a).add(black_box(&b), 1).unwrap()));
        group.bench_function(format!("chain{suffix}"), |x| {
            x.iter(|| {
                chain(black_box(&ga), black_box(&gb)).backward().unwrap();
                ga.set_grad(None).unwrap();
                gb.set_grad(None).unwrap();
            })
        });
    };
    cases(&mut group, "_plain");
    {
        let _mode = push_dispatch_mode(PassThrough);
        cases(&mut group, "_mode");
    }
    group.finish();
}

fn print_table() {
    let ns = |id: &str| mean_ns(&format!("dispatch/{id}"));
    let (add, add_mode) = (ns("add_plain"), ns("add_mode"));
    // Forward: 100 operators; backward: each multiplication's gradient is one `mul`, each
    // addition's passes through, and the two leaves' gradients are accumulated (100 + 50
    // operator calls, and a few more for the leaves), so the per-operator cost of the mode is
    // the difference over the calls it saw.
    let (chain, chain_mode) = (ns("chain_plain") / CHAIN as f64, ns("chain_mode") / CHAIN as f64);
    println!("\n| measurement | torchfn | target | PyTorch 2.15 |");
    println!("|---|---:|---|---:|");
    println!("| 1-element `add` | {add:.0} ns |  | 2,830 ns |");
    println!(
        "| the same under a pass-through dispatch mode | {add_mode:.0} ns (+{:.0}) | under +50 ns | +3,550 ns |",
        add_mode - add
    );
    println!("| 100-op chain forward + backward, per op | {chain:.0} ns |  | 9,000 ns |");
    println!(
        "| the same under a pass-through dispatch mode | {chain_mode:.0} ns (+{:.0}) |  | 20,800 ns |",
        chain_mode - chain
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    print_table();
}
