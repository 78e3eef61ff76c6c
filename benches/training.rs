//! One training step (zero_grad, forward, loss, backward, AdamW) and the backward pass alone of
//! four models: the two reference workloads (gpt_tiny, resnet_tiny) and the CPU speed issue's
//! larger two (gpt_small, resnet18); float32 matmul throughput; and memory over many steps.
//!
//! `cargo bench --bench training` runs the criterion benchmarks, then prints a table with the
//! issue's targets. With `PYTORCH_PYTHON` naming a Python that has torch, transformers and
//! torchvision, it runs `bench/pytorch_training.py` right after (the same models and batch
//! sizes, 2 threads) and prints PyTorch's times beside torchfn's. First thing in the process it
//! measures the resident size's growth over resnet18's first 20 steps (PyTorch's too). Then the resident size over
//! 1,000 gpt_tiny steps. Compare numbers from one run only: the machines are noisy.

mod common;
use common::{mean_ns, pytorch};

use std::hint::black_box;

use criterion::{BatchSize, Criterion};
use torchfn::Device;
use torchfn::optim::{AdamW, AdamWOptions, Optimizer, SGD, SgdOptions};
use torchfn::prelude::*;

#[path = "common/workloads.rs"]
mod workloads;
use workloads::Workload;

/// The workloads, with the criterion samples each gets (the larger take longer per step) and
/// the target of the issue for their step time against PyTorch's.
const WORKLOADS: [(&str, usize, &str); 4] = [
    ("gpt_tiny", 20, "<= 0.5x"),
    ("resnet_tiny", 20, "<= 1.0x"),
    ("gpt_small", 10, "<= 0.8x"),
    ("resnet18", 10, "<= 1.0x"),
];

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("training");
    for (name, samples, _) in WORKLOADS {
        group.sample_size(samples);
        let mut workload = Workload::new(name, Device::CPU);
        group.bench_function(format!("{name}_step"), |b| b.iter(|| workload.step()));
        group.bench_function(format!("{name}_backward"), |b| {
            b.iter_batched(|| workload.forward(), |loss| loss.backward().unwrap(), BatchSize::PerIteration)
        });
    }
    // The optimizer steps alone over resnet18's parameters (11.2 million), default and fused:
    // AdamW, and SGD with momentum.
    let params = Workload::new("resnet18", Device::CPU).parameters_with_gradients();
    for fused in [false, true] {
        let suffix = if fused { "_fused" } else { "" };
        let options = AdamWOptions::new(1e-3).weight_decay(0.01).fused(fused);
        let mut adamw = AdamW::new(params.clone(), options).unwrap();
        group.bench_function(format!("adamw_resnet18{suffix}"), |b| b.iter(|| adamw.step().unwrap()));
        let options = SgdOptions::new(0.01).momentum(0.9).weight_decay(1e-4).fused(fused);
        let mut sgd = SGD::new(params.clone(), options).unwrap();
        group.bench_function(format!("sgd_resnet18{suffix}"), |b| b.iter(|| sgd.step().unwrap()));
    }
    group.sample_size(20);
    for (name, [n, k, m]) in MATMULS {
        let g = Generator::new().manual_seed(1);
        let a = torchfn::randn(batch_shape(name, n, k), g.clone(), None, None).unwrap();
        let b = torchfn::randn(batch_shape(name, k, m), g, None, None).unwrap();
        group.bench_function(format!("matmul_{name}"), |bench| {
            bench.iter(|| black_box(&a).matmul(black_box(&b)).unwrap())
        });
    }
    group.finish();
}

/// The matmuls of the table: big squares, and the models' own shapes (`[n, k] @ [k, m]`).
const MATMULS: [(&str, [usize; 3]); 5] = [
    ("1024", [1024, 1024, 1024]),
    ("2048", [2048, 2048, 2048]),
    ("64x64x64", [64, 64, 64]),
    ("16x64x64", [16, 64, 64]),
    ("attention_16x16x16_x16", [16, 16, 16]),
];

/// Attention's matmul is batched over 16 (4 sequences × 4 heads), the others are plain.
fn batch_shape(name: &str, rows: usize, cols: usize) -> Vec<usize> {
    if name.starts_with("attention") { vec![16, rows, cols] } else { vec![rows, cols] }
}

fn resident() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<usize>().ok()).unwrap_or(0) * 4096
}

fn print_table(resnet18_growth: f64) {
    let ns = |id: &str| mean_ns(&format!("training/{id}"));
    let pytorch = pytorch("bench/pytorch_training.py");
    let theirs = |key: &str| pytorch.as_ref().and_then(|p| p[key].as_f64()).unwrap_or(f64::NAN);
    println!("\n{}\n", common::processor());
    println!(
        "| training step | torchfn | PyTorch (same sitting) | ratio | target | backward | PyTorch backward | ratio |"
    );
    println!("|---|---:|---:|---:|---|---:|---:|---:|");
    for (name, _, target) in WORKLOADS {
        let (step, backward) = (ns(&format!("{name}_step")) / 1e6, ns(&format!("{name}_backward")) / 1e6);
        let (their_step, their_backward) = (theirs(&format!("{name}_step")), theirs(&format!("{name}_backward")));
        println!(
            "| {name} | {step:.2} ms | {their_step:.2} ms | {:.2}x | {target} | {backward:.2} ms | {their_backward:.2} ms | {:.2}x |",
            step / their_step,
            backward / their_backward
        );
    }
    println!(
        "\nResident size growth over resnet18's first 20 training steps: {resnet18_growth:.0} MiB (PyTorch: {:.0} MiB; target: at most PyTorch's).",
        theirs("resnet18_growth_mib")
    );
    println!("\n| optimizer step over resnet18's parameters | torchfn | PyTorch (same sitting) | ratio |");
    println!("|---|---:|---:|---:|");
    for optimizer in ["adamw", "sgd"] {
        for (label, ours, their_key) in [
            ("default (single-tensor)", "", ""),
            ("fused=True", "_fused", "_fused"),
            ("torchfn fused against PyTorch's default", "_fused", ""),
        ] {
            let t = ns(&format!("{optimizer}_resnet18{ours}")) / 1e6;
            let p = theirs(&format!("{optimizer}_resnet18{their_key}"));
            println!("| {optimizer}: {label} | {t:.2} ms | {p:.2} ms | {:.2}x |", t / p);
        }
    }
    println!("\n| float32 matmul | time | GFLOP/s |");
    println!("|---|---:|---:|");
    for (name, [n, k, m]) in MATMULS {
        let t = ns(&format!("matmul_{name}"));
        let batch = if name.starts_with("attention") { 16.0 } else { 1.0 };
        let flops = 2.0 * batch * (n * k * m) as f64;
        println!("| {name} | {:.1} us | {:.1} |", t / 1e3, flops / t);
    }
    // Resident size grows over the first few hundred steps (the buffer pool and the allocator's
    // arenas filling to the step's high-water mark) and is flat after: 500 steps warm up.
    let mut step = Workload::new("gpt_tiny", Device::CPU);
    for _ in 0..500 {
        step.step();
    }
    let start = resident();
    for _ in 0..1_000 {
        step.step();
    }
    println!(
        "\nResident size over 1,000 gpt_tiny steps (after 500 to warm up): {:.1} MiB at the start, {:.1} MiB at the end.",
        start as f64 / 1048576.0,
        resident() as f64 / 1048576.0
    );
}

/// The growth of the resident size over resnet18's first 20 training steps, in MiB, measured
/// first thing in the process (as `bench/pytorch_training.py` measures PyTorch's).
fn resnet18_growth() -> f64 {
    let mut workload = Workload::new("resnet18", Device::CPU);
    let start = resident();
    for _ in 0..20 {
        workload.step();
    }
    (resident() - start) as f64 / 1048576.0
}

fn main() {
    let growth = resnet18_growth();
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    print_table(growth);
}
