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
use torchfn::nn::{Layer, Module, StateDict};
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

fn adamw(params: Vec<Tensor>) -> AdamW {
    AdamW::new(params, AdamWOptions::new(1e-3).betas((0.9, 0.999)).eps(1e-8).weight_decay(0.01)).unwrap()
}

/// The forward pass and the loss of a model on a batch.
type LossFn = fn(&dyn Layer, &StateDict) -> Tensor;

/// A model, its optimizer and batch: [`Workload::step`] is one training step.
struct Workload {
    model: Box<dyn Layer>,
    /// The forward pass and the loss, from the model and the batch.
    loss: LossFn,
    optimizer: AdamW,
    inputs: StateDict,
}

impl Workload {
    /// The two reference workloads of `tests/golden/workloads` (`gpt_tiny`, `resnet_tiny`),
    /// and the larger two: `gpt_small` (GPT-2 with 4 layers, 128 wide, 4 heads, vocab
    /// 128, batch 4 × 32) and `resnet18` (full widths, 10 classes, batch 8 × 3×32×32).
    fn new(name: &str) -> Workload {
        let g = Generator::new().manual_seed(0);
        let gpt_loss: LossFn = |m, inputs| {
            let logits = m.forward(inputs.get("input_ids").unwrap()).unwrap();
            gpt::GPT2LMHeadModel::loss(&logits, inputs.get("targets").unwrap()).unwrap()
        };
        let resnet_loss: LossFn = |m, inputs| {
            let logits = m.forward(inputs.get("images").unwrap()).unwrap();
            resnet::NarrowResNet::loss(&logits, inputs.get("labels").unwrap()).unwrap()
        };
        let gpt = |n_layer, n_embd| {
            let config = gpt::GptConfig { n_layer, n_head: 4, n_embd, vocab_size: 128, n_positions: 32, dropout: 0.0 };
            Box::new(gpt::GPT2LMHeadModel::new(config, &g).unwrap()) as Box<dyn Layer>
        };
        let tokens = |shape: [usize; 2]| {
            let mut inputs = StateDict::new();
            for key in ["input_ids", "targets"] {
                inputs.insert(key, torchfn::randint(128, shape, g.clone(), None, None).unwrap());
            }
            inputs
        };
        let (model, loss, inputs): (Box<dyn Layer>, LossFn, StateDict) = match name {
            "gpt_tiny" => {
                let model = gpt(2, 64);
                model.load_state_dict(&golden(name, "init"), true).unwrap();
                (model, gpt_loss, golden(name, "inputs"))
            }
            "gpt_small" => (gpt(4, 128), gpt_loss, tokens([4, 32])),
            "resnet_tiny" => {
                let model = resnet::NarrowResNet::new([1, 1, 1, 1], [16, 32, 64, 128], 10, &g).unwrap();
                model.load_state_dict(&golden(name, "init"), true).unwrap();
                (Box::new(model), resnet_loss, golden(name, "inputs"))
            }
            _ => {
                let model = resnet::NarrowResNet::new([2, 2, 2, 2], [64, 128, 256, 512], 10, &g).unwrap();
                let mut inputs = StateDict::new();
                inputs.insert("images", torchfn::randn([8, 3, 32, 32], g.clone(), None, None).unwrap());
                inputs.insert("labels", torchfn::randint(10, [8], g.clone(), None, None).unwrap());
                (Box::new(model), resnet_loss, inputs)
            }
        };
        let optimizer = adamw(model.parameters());
        Workload { model, loss, optimizer, inputs }
    }

    /// The loss of a forward pass, with the gradients cleared first.
    fn forward(&mut self) -> Tensor {
        self.optimizer.zero_grad(true).unwrap();
        (self.loss)(&*self.model, &self.inputs)
    }

    fn step(&mut self) {
        self.forward().backward().unwrap();
        self.optimizer.step().unwrap();
    }
}

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
        let mut workload = Workload::new(name);
        group.bench_function(format!("{name}_step"), |b| b.iter(|| workload.step()));
        group.bench_function(format!("{name}_backward"), |b| {
            b.iter_batched(|| workload.forward(), |loss| loss.backward().unwrap(), BatchSize::PerIteration)
        });
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
    println!("\n| float32 matmul | time | GFLOP/s |");
    println!("|---|---:|---:|");
    for (name, [n, k, m]) in MATMULS {
        let t = ns(&format!("matmul_{name}"));
        let batch = if name.starts_with("attention") { 16.0 } else { 1.0 };
        let flops = 2.0 * batch * (n * k * m) as f64;
        println!("| {name} | {:.1} us | {:.1} |", t / 1e3, flops / t);
    }
    let mut step = Workload::new("gpt_tiny");
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

/// The growth of the resident size over resnet18's first 20 training steps, in MiB, measured
/// first thing in the process (as `bench/pytorch_training.py` measures PyTorch's).
fn resnet18_growth() -> f64 {
    let mut workload = Workload::new("resnet18");
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
