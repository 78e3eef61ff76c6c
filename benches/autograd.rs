//! The cost of autograd on one-element float32 tensors (built-in operations and a custom
//! Function), and memory over many training steps.
//!
//! `cargo bench --bench autograd` runs the criterion benchmarks, then prints a table from
//! criterion's estimates beside the targets of the autograd issue and PyTorch 2.15's figures
//! on the same kind of machine (as the issue quotes them), then the resident memory over
//! 10,000 steps of a small MLP. Compare numbers from one run only: the machines are noisy.

mod common;
use common::mean_ns;

use std::hint::black_box;

use criterion::Criterion;
use torchfn::autograd::{Function, no_grad};
use torchfn::nn::functional as F;
use torchfn::prelude::*;

/// PyTorch 2.15's figures for the custom-Function rows, measured by `bench/mul_constant.py`
/// (PyTorch from PyPI in a scratch venv) on this machine in the sitting of the README's table.
const PYTORCH_MUL: &str = "34,400 ns";
const PYTORCH_MUL_CONSTANT: &str = "80,300 ns";
const PYTORCH_RATIO: &str = "2.33x";

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

/// Seed 001's `MulConstant`: one operation wrapped in a custom Function (the example's).
#[allow(dead_code)]
#[path = "../examples/mul_constant.rs"]
mod mul_constant;
use mul_constant::MulConstant;

/// A two-layer perceptron and its data: 8 samples of 16 features, 32 hidden units, 1 output.
struct Mlp {
    params: [Tensor; 4],
    x: Tensor,
    y: Tensor,
}

impl Mlp {
    fn new() -> Mlp {
        let g = torchfn::Generator::new().manual_seed(0);
        let p = |shape: &[usize]| {
            torchfn::randn(shape.to_vec(), g.clone(), None, None).unwrap().requires_grad_(true).unwrap()
        };
        let params = [p(&[32, 16]), p(&[32]), p(&[1, 32]), p(&[1])];
        let x = torchfn::randn([8, 16], g.clone(), None, None).unwrap();
        let y = torchfn::randn([8, 1], g, None, None).unwrap();
        Mlp { params, x, y }
    }

    /// One step: forward, loss, backward, SGD update, gradients cleared.
    fn step(&self) {
        let [w1, b1, w2, b2] = &self.params;
        let h = F::relu(&F::linear(&self.x, w1, Some(b1)).unwrap(), false).unwrap();
        let loss = F::mse_loss(&F::linear(&h, w2, Some(b2)).unwrap(), &self.y, None, None, "mean").unwrap();
        loss.backward().unwrap();
        let _no_grad = no_grad();
        for p in &self.params {
            let g = p.grad().unwrap().unwrap();
            p.sub_(&g, 0.01).unwrap();
            p.set_grad(None).unwrap();
        }
    }
}

fn benches(c: &mut Criterion) {
    let (a, b) = (torchfn::tensor([1.0f32]).unwrap(), torchfn::tensor([0.5f32]).unwrap());
    let (ga, gb) =
        (a.clone().detach().unwrap().requires_grad_(true).unwrap(), b.detach().unwrap().requires_grad_(true).unwrap());
    let mut group = c.benchmark_group("autograd");
    group.bench_function("add_no_grad", |bench| bench.iter(|| black_box(&a).add(black_box(&b), 1).unwrap()));
    group.bench_function("add_recording", |bench| bench.iter(|| black_box(&ga).add(black_box(&gb), 1).unwrap()));
    group.bench_function("chain_no_grad", |bench| bench.iter(|| chain(black_box(&a), black_box(&b))));
    group.bench_function("chain_forward_backward", |bench| {
        bench.iter(|| {
            chain(black_box(&ga), black_box(&gb)).backward().unwrap();
            ga.set_grad(None).unwrap();
            gb.set_grad(None).unwrap();
        })
    });
    group.bench_function("mul_forward_backward", |bench| {
        bench.iter(|| {
            (black_box(&ga) * 2.0).unwrap().backward().unwrap();
            ga.set_grad(None).unwrap();
        })
    });
    group.bench_function("mul_constant_forward_backward", |bench| {
        bench.iter(|| {
            MulConstant::apply((black_box(&ga).clone(), 2.0)).unwrap().backward().unwrap();
            ga.set_grad(None).unwrap();
        })
    });
    let mlp = Mlp::new();
    group.bench_function("mlp_step", |bench| bench.iter(|| mlp.step()));
    group.finish();
}

/// The resident set size of this process, in bytes.
fn resident() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<usize>().ok()).unwrap_or(0) * 4096
}

fn print_table() {
    let ns = |id: &str| mean_ns(&format!("autograd/{id}"));
    let (plain, recording) = (ns("add_no_grad"), ns("add_recording"));
    let (chain_plain, chain_grad) = (ns("chain_no_grad") / CHAIN as f64, ns("chain_forward_backward") / CHAIN as f64);
    println!("\n| measurement | torchfn | target | PyTorch 2.15 (issue) |");
    println!("|---|---:|---|---:|");
    println!("| 1-element `add`, nothing requires grad | {plain:.0} ns |  | 2,100 ns |");
    println!("| 1-element `add` recording the graph | {recording:.0} ns |  | 3,100 ns |");
    println!("| recording / not recording | {:.2}x | <= 1.5x | 1.48x |", recording / plain);
    println!("| 100-op chain without grad, per op | {chain_plain:.0} ns |  | 2,600 ns |");
    println!("| 100-op chain forward + backward, per op | {chain_grad:.0} ns | < 1,000 ns | 15,000 ns |");
    let (builtin, custom) = (ns("mul_forward_backward"), ns("mul_constant_forward_backward"));
    println!("| 1-element `x * 2` forward + backward | {builtin:.0} ns |  | {PYTORCH_MUL} |");
    println!("| the same through the custom Function `MulConstant` | {custom:.0} ns |  | {PYTORCH_MUL_CONSTANT} |");
    println!("| MulConstant / built-in | {:.2}x | <= 2x | {PYTORCH_RATIO} |", custom / builtin);
    println!("| MLP step (8x16 -> 32 -> 1, SGD) | {:.1} us |  |  |", ns("mlp_step") / 1e3);

    let mlp = Mlp::new();
    for _ in 0..100 {
        mlp.step();
    }
    let start = resident();
    for _ in 0..10_000 {
        mlp.step();
    }
    let end = resident();
    println!(
        "\nResident size over 10,000 MLP steps (after 100 to warm up): {:.1} MiB at the start, {:.1} MiB at the end.",
        start as f64 / 1048576.0,
        end as f64 / 1048576.0
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    print_table();
}
