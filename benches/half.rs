//! Half precision on the CPU (issue 26): elementwise operations on 1e7 elements and square
//! matmuls in float32, bfloat16 and float16, and a gpt_small training step in float32 and
//! under bfloat16 autocast, with the step's peak memory.
//!
//! `cargo bench --bench half` runs the criterion benchmarks, then prints a table: each
//! operation's rate, its ratio to float32's in the same run, and (with `PYTORCH_PYTHON` naming
//! a Python that has torch and transformers) PyTorch's figures from `bench/pytorch_half.py`,
//! run right after on the same data. The peak memory is how far five steps raise the process's
//! peak resident size above what it held before them, each configuration in a fresh process
//! (this bench, started again with `TORCHFN_HALF_PEAK=f32|bf16`).

mod common;
use common::{mean_ns, pytorch};

use std::hint::black_box;

use criterion::Criterion;
use torchfn::nn::functional as F;
use torchfn::nn::{Forward, Module};
use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
use torchfn::prelude::*;

#[allow(dead_code)]
#[path = "../examples/models/gpt.rs"]
mod gpt;

const N: usize = 10_000_000;
const DTYPES: [(&str, DType); 3] = [("f32", DType::Float32), ("bf16", DType::BFloat16), ("f16", DType::Float16)];

fn ramp(shape: &[usize], dtype: DType, scale: f32, shift: f32) -> Tensor {
    let n = shape.iter().product();
    let t = Tensor::from_vec((0..n).map(|i| (i % 1000) as f32 * scale - shift).collect::<Vec<f32>>(), shape).unwrap();
    t.to(dtype, false, false).unwrap()
}

/// gpt_small (the training bench's: 4 layers, 128 wide, 4 heads, vocab 128, batch 4 × 32), its
/// optimizer and batch.
fn gpt_small() -> (gpt::GPT2LMHeadModel, AdamW, Tensor, Tensor) {
    let g = Generator::new().manual_seed(0);
    let config = gpt::GptConfig { n_layer: 4, n_head: 4, n_embd: 128, vocab_size: 128, n_positions: 32, dropout: 0.0 };
    let model = gpt::GPT2LMHeadModel::new(config, &g).unwrap();
    let options = AdamWOptions::new(1e-3).weight_decay(0.01);
    let optimizer = AdamW::new(model.parameters(), options).unwrap();
    let ids = torchfn::randint(128, [4, 32], g.clone(), None, None).unwrap();
    let targets = torchfn::randint(128, [4, 32], g, None, None).unwrap();
    (model, optimizer, ids, targets)
}

/// One training step, its forward pass and loss under bfloat16 autocast when `bf16`.
fn step(model: &gpt::GPT2LMHeadModel, optimizer: &mut AdamW, ids: &Tensor, targets: &Tensor, bf16: bool) {
    optimizer.zero_grad(true).unwrap();
    let loss = {
        let _autocast = bf16.then(|| torchfn::autocast("cpu", DType::BFloat16).unwrap());
        gpt::GPT2LMHeadModel::loss(&model.forward(ids).unwrap(), targets).unwrap()
    };
    loss.backward().unwrap();
    optimizer.step().unwrap();
}

/// A field of `/proc/self/status`, in bytes.
fn status_bytes(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status.lines().find_map(|l| l.strip_prefix(field)).and_then(|v| v.split_whitespace().next()?.parse().ok());
    kb.map_or(f64::NAN, |kb: f64| kb * 1024.0)
}

/// How far five gpt_small steps raise the peak resident size, measured in a fresh process.
fn peak_growth(which: &str) -> f64 {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe).env("TORCHFN_HALF_PEAK", which).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(f64::NAN)
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("half");
    for (name, dtype) in DTYPES {
        let (a, t) = (ramp(&[N], dtype, 1e-3, 0.0), ramp(&[N], dtype, 1e-2, 5.0));
        let (b, out) = (a.clone(), torchfn::zeros([N], dtype, None).unwrap());
        g.sample_size(20);
        g.bench_function(format!("add_out_{name}"), |x| x.iter(|| torchfn::add_out(&a, &b, &out, 1).unwrap()));
        g.bench_function(format!("mul_out_{name}"), |x| x.iter(|| torchfn::mul_out(&a, &b, &out).unwrap()));
        g.bench_function(format!("exp_out_{name}"), |x| x.iter(|| torchfn::exp_out(&t, &out).unwrap()));
        g.bench_function(format!("gelu_tanh_{name}"), |x| x.iter(|| F::gelu(&t, "tanh").unwrap()));
        g.sample_size(10);
        for n in [1024, 2048] {
            let m = ramp(&[n, n], dtype, 1e-3, 0.0);
            g.bench_function(format!("matmul_{n}_{name}"), |x| x.iter(|| black_box(&m).matmul(&m).unwrap()));
        }
    }
    let (model, mut optimizer, ids, targets) = gpt_small();
    for (name, bf16) in [("f32", false), ("bf16", true)] {
        g.bench_function(format!("gpt_small_{name}"), |x| {
            x.iter(|| step(&model, &mut optimizer, &ids, &targets, bf16))
        });
    }
    g.finish();
}

/// (criterion id without the dtype, what, bytes of float32 or flops per call, unit).
const ROWS: &[(&str, &str, f64, &str)] = &[
    ("add_out", "add into an output, 1e7", 3.0 * N as f64, "Gelem/s"),
    ("mul_out", "mul into an output, 1e7", 3.0 * N as f64, "Gelem/s"),
    ("exp_out", "exp into an output, 1e7", 2.0 * N as f64, "Gelem/s"),
    ("gelu_tanh", "gelu (tanh), allocating, 1e7", 2.0 * N as f64, "Gelem/s"),
    ("matmul_1024", "matmul 1024", 2.0 * 1024.0 * 1024.0 * 1024.0, "GFLOP/s"),
    ("matmul_2048", "matmul 2048", 2.0 * 2048.0 * 2048.0 * 2048.0, "GFLOP/s"),
];

fn print_table() {
    let theirs = pytorch("bench/pytorch_half.py");
    let pytorch_ns = |key: &str| theirs.as_ref().and_then(|p| p[key].as_f64()).unwrap_or(f64::NAN);
    let time = |t: f64| if t < 1e4 { format!("{t:.0} ns") } else { format!("{:.2} ms", t / 1e6) };
    println!("\n{} threads; {}\n", torchfn::get_num_threads(), common::processor());
    println!(
        "| operation | dtype | time | rate | of float32's | PyTorch (same sitting) | PyTorch's of float32's | torchfn / PyTorch time |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for &(id, what, amount, unit) in ROWS {
        let f32_ns = mean_ns(&format!("half/{id}_f32"));
        for (name, _) in DTYPES {
            let key = format!("{id}_{name}");
            let t = mean_ns(&format!("half/{key}"));
            let p = pytorch_ns(&key);
            println!(
                "| {what} | {name} | {} | {:.2} {unit} | {:.2}x | {} | {:.2}x | {:.2} |",
                time(t),
                amount / t,
                f32_ns / t,
                time(p),
                pytorch_ns(&format!("{id}_f32")) / p,
                t / p
            );
        }
    }
    for (name, _) in &DTYPES[..2] {
        let key = format!("gpt_small_{name}");
        let (t, p) = (mean_ns(&format!("half/{key}")), pytorch_ns(&key));
        let mine = peak_growth(name) / 1e6;
        let theirs = pytorch_ns(&format!("gpt_small_peak_{name}")) / 1e6;
        let what = if *name == "bf16" { "bf16 autocast" } else { "f32" };
        println!(
            "| gpt_small training step | {what} | {} | peak +{mine:.0} MB | {:.2}x | {} (peak +{theirs:.0} MB) | {:.2}x | {:.2} |",
            time(t),
            mean_ns("half/gpt_small_f32") / t,
            time(p),
            pytorch_ns("gpt_small_f32") / p,
            t / p
        );
    }
}

fn main() {
    if let Ok(which) = std::env::var("TORCHFN_HALF_PEAK") {
        let (model, mut optimizer, ids, targets) = gpt_small();
        let before = status_bytes("VmRSS:");
        for _ in 0..5 {
            step(&model, &mut optimizer, &ids, &targets, which == "bf16");
        }
        println!("{}", status_bytes("VmHWM:") - before);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    print_table();
}
