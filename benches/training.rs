//! One training step of the two reference models (zero_grad, forward, loss, backward, AdamW),
//! float32 matmul throughput, and memory over many steps.
//!
//! `cargo bench --bench training` runs the criterion benchmarks, then prints a table beside
//! PyTorch 2.15's `step_time` from each workload's `meta.json` (2 threads, this machine) and the
//! issue's targets, then the resident size over 1,000 gpt_tiny steps. Compare numbers from one
//! run only: the machines are noisy.

mod common;
use common::mean_ns;

use std::hint::black_box;

use criterion::Criterion;
use torchfn::nn::{Forward, Module, StateDict};
use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
use torchfn::prelude::*;

#[allow(dead_code)]
#[path = "../examples/models/gpt.rs"]
mod gpt;

#[allow(dead_code)]
#[path = "../examples/models/resnet.rs"]
mod resnet;

fn golden(name: &str, file: &str) -> StateDict {
    let path = format!("{}/tests/golden/workloads/{name}/{file}.safetensors", env!("CARGO_MANIFEST_DIR"));
    torchfn::safetensors::load_file(path).unwrap()
}

fn step_time_ms(name: &str) -> f64 {
    let path = format!("{}/tests/golden/workloads/{name}/meta.json", env!("CARGO_MANIFEST_DIR"));
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    meta["step_time"]["median_ms"].as_f64().unwrap()
}

fn adamw(params: Vec<Tensor>) -> AdamW {
    AdamW::new(params, AdamWOptions::new(1e-3).betas((0.9, 0.999)).eps(1e-8).weight_decay(0.01)).unwrap()
}

/// The GPT of the workload, its optimizer and batch: one call is one training step.
struct GptStep {
    model: gpt::GPT2LMHeadModel,
    optimizer: AdamW,
    inputs: StateDict,
}

impl GptStep {
    fn new() -> GptStep {
        let config =
            gpt::GptConfig { n_layer: 2, n_head: 4, n_embd: 64, vocab_size: 128, n_positions: 32, dropout: 0.0 };
        let model = gpt::GPT2LMHeadModel::new(config, &Generator::new().manual_seed(0)).unwrap();
        model.load_state_dict(&golden("gpt_tiny", "init"), true).unwrap();
        let optimizer = adamw(model.parameters());
        GptStep { model, optimizer, inputs: golden("gpt_tiny", "inputs") }
    }

    fn step(&mut self) {
        self.optimizer.zero_grad(true).unwrap();
        let logits = self.model.forward(self.inputs.get("input_ids").unwrap()).unwrap();
        let loss = gpt::GPT2LMHeadModel::loss(&logits, self.inputs.get("targets").unwrap()).unwrap();
        loss.backward().unwrap();
        self.optimizer.step().unwrap();
    }
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("training");
    group.sample_size(20);
    let mut gpt_step = GptStep::new();
    group.bench_function("gpt_tiny_step", |b| b.iter(|| gpt_step.step()));

    let model =
        resnet::NarrowResNet::new([1, 1, 1, 1], [16, 32, 64, 128], 10, &Generator::new().manual_seed(0)).unwrap();
    model.load_state_dict(&golden("resnet_tiny", "init"), true).unwrap();
    let mut optimizer = adamw(model.parameters());
    let inputs = golden("resnet_tiny", "inputs");
    group.bench_function("resnet_tiny_step", |b| {
        b.iter(|| {
            optimizer.zero_grad(true).unwrap();
            let logits = model.forward(inputs.get("images").unwrap()).unwrap();
            let loss = resnet::NarrowResNet::loss(&logits, inputs.get("labels").unwrap()).unwrap();
            loss.backward().unwrap();
            optimizer.step().unwrap();
        })
    });
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

fn print_table() {
    let ns = |id: &str| mean_ns(&format!("training/{id}"));
    let (gpt, resnet) = (ns("gpt_tiny_step") / 1e6, ns("resnet_tiny_step") / 1e6);
    let (pt_gpt, pt_resnet) = (step_time_ms("gpt_tiny"), step_time_ms("resnet_tiny"));
    println!("\n| measurement | torchfn | PyTorch 2.15 (meta.json, 2 threads) | ratio | target |");
    println!("|---|---:|---:|---:|---|");
    println!("| gpt_tiny training step | {gpt:.2} ms | {pt_gpt:.2} ms | {:.2}x | <= 0.5x |", gpt / pt_gpt);
    println!(
        "| resnet_tiny training step | {resnet:.2} ms | {pt_resnet:.2} ms | {:.2}x | <= 1.0x |",
        resnet / pt_resnet
    );
    println!("\n| float32 matmul | time | GFLOP/s |");
    println!("|---|---:|---:|");
    for (name, [n, k, m]) in MATMULS {
        let t = ns(&format!("matmul_{name}"));
        let batch = if name.starts_with("attention") { 16.0 } else { 1.0 };
        let flops = 2.0 * batch * (n * k * m) as f64;
        println!("| {name} | {:.1} us | {:.1} |", t / 1e3, flops / t);
    }
    let mut step = GptStep::new();
    for _ in 0..50 {
        step.step();
    }
    let start = resident();
    for _ in 0..1_000 {
        step.step();
    }
    println!(
        "\nResident size over 1,000 gpt_tiny steps (after 50 to warm up): {:.1} MiB at the start, {:.1} MiB at the end.",
        start as f64 / 1048576.0,
        resident() as f64 / 1048576.0
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    print_table();
}
