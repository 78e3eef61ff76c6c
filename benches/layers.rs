//! The layers and operations issue 29 added, at the sizes its speed targets name: `nn.LSTM`
//! forward and backward on a (batch 32, sequence 64, 256 features and hidden units) input, the
//! new elementwise activations (`hardswish`, `hardsigmoid`) beside an existing one (`silu`) on
//! 1e6 float32 elements, `sort` and `topk` on 1e6 float32, and the linear-algebra
//! decompositions (`faer` on the host) on a 256×256 float32 matrix.
//!
//! `cargo bench --bench layers` runs the criterion benchmarks, then prints a table. With
//! `PYTORCH_PYTHON` naming a Python that has torch, it runs `bench/pytorch_layers.py` right
//! after (same machine, 2 threads, the same sizes) and prints PyTorch's times beside torchfn's.

mod common;
use common::{mean_ns, pytorch};

use std::hint::black_box;

use criterion::Criterion;
use torchfn::nn::functional as F;
use torchfn::nn::{LSTM, Module};
use torchfn::prelude::*;

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("layers");
    group.sample_size(10);
    let g = Generator::new().manual_seed(0);
    let lstm = LSTM::new(256, 256, 1, true, true, 0.0, false, &g).unwrap();
    let x = torchfn::randn([32, 64, 256], g.clone(), None, None).unwrap().requires_grad_(true).unwrap();
    group.bench_function("lstm_forward_backward", |b| {
        b.iter(|| {
            lstm.zero_grad().unwrap();
            let (out, _) = lstm.forward(&x, None).unwrap();
            out.sum().unwrap().backward().unwrap();
            black_box(&out);
        })
    });
    group.bench_function("lstm_forward", |b| {
        b.iter(|| {
            let _guard = torchfn::autograd::no_grad();
            black_box(lstm.forward(&x, None).unwrap());
        })
    });
    let v = torchfn::randn([1_000_000], g.clone(), None, None).unwrap();
    group.bench_function("silu_1e6", |b| b.iter(|| black_box(F::silu(&v, false).unwrap())));
    group.bench_function("hardswish_1e6", |b| b.iter(|| black_box(F::hardswish(&v, false).unwrap())));
    group.bench_function("hardsigmoid_1e6", |b| b.iter(|| black_box(F::hardsigmoid(&v, false).unwrap())));
    group.bench_function("sort_1e6", |b| b.iter(|| black_box(torchfn::sort(&v, -1, false, false).unwrap())));
    group.bench_function("topk_1e6_k100", |b| b.iter(|| black_box(torchfn::topk(&v, 100, -1, true, true).unwrap())));
    // A symmetric positive-definite 256×256 matrix (so every decomposition applies) and 64
    // right-hand sides.
    let m = torchfn::randn([256, 256], g.clone(), None, None).unwrap();
    let eye = torchfn::eye(256, None, DType::Float32, None).unwrap();
    let a = (&m.matmul(&m.transpose(0, 1).unwrap()).unwrap() + &(&eye * 256.0).unwrap()).unwrap();
    let rhs = torchfn::randn([256, 64], g.clone(), None, None).unwrap();
    group.bench_function("linalg_inv_256", |b| b.iter(|| black_box(torchfn::linalg::inv(&a).unwrap())));
    group.bench_function("linalg_solve_256x64", |b| {
        b.iter(|| black_box(torchfn::linalg::solve(&a, &rhs, true).unwrap()))
    });
    group
        .bench_function("linalg_cholesky_256", |b| b.iter(|| black_box(torchfn::linalg::cholesky(&a, false).unwrap())));
    group.bench_function("linalg_qr_256", |b| b.iter(|| black_box(torchfn::linalg::qr(&a, "reduced").unwrap())));
    group.bench_function("linalg_eigh_256", |b| b.iter(|| black_box(torchfn::linalg::eigh(&a, "L").unwrap())));
    group.bench_function("linalg_svd_256", |b| b.iter(|| black_box(torchfn::linalg::svd(&a, false).unwrap())));
    group.finish();
}

fn table() {
    let pytorch = pytorch("bench/pytorch_layers.py");
    println!("\n{}\n", common::processor());
    println!("| measurement | torchfn | PyTorch 2.15 (same sitting) | torchfn / PyTorch time |");
    println!("|---|---:|---:|---:|");
    for (id, label) in [
        ("lstm_forward_backward", "nn.LSTM fwd+bwd (32 x 64 x 256, hidden 256)"),
        ("lstm_forward", "nn.LSTM forward, no grad"),
        ("silu_1e6", "silu, 1e6 float32"),
        ("hardswish_1e6", "hardswish, 1e6 float32"),
        ("hardsigmoid_1e6", "hardsigmoid, 1e6 float32"),
        ("sort_1e6", "sort, 1e6 float32"),
        ("topk_1e6_k100", "topk (k = 100), 1e6 float32"),
        ("linalg_inv_256", "linalg.inv, 256×256 float32"),
        ("linalg_solve_256x64", "linalg.solve, 256×256 and 64 right-hand sides"),
        ("linalg_cholesky_256", "linalg.cholesky, 256×256"),
        ("linalg_qr_256", "linalg.qr, 256×256"),
        ("linalg_eigh_256", "linalg.eigh, 256×256"),
        ("linalg_svd_256", "linalg.svd (full_matrices=False), 256×256"),
    ] {
        let ours = mean_ns(&format!("layers/{id}")) / 1e6;
        let theirs = pytorch.as_ref().and_then(|p| p[id].as_f64());
        let (theirs_text, ratio) = match theirs {
            Some(t) => (format!("{t:.3} ms"), format!("{:.2}", ours / t)),
            None => (String::new(), String::new()),
        };
        println!("| {label} | {ours:.3} ms | {theirs_text} | {ratio} |");
    }
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    benches(&mut criterion);
    criterion.final_summary();
    table();
}
