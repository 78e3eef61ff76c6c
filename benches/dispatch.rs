//! The cost of the dispatch layer below autograd (`torchfn::dispatch`): a one-element `add`
//! and a 100-operation chain forward and backward on one-element float32 tensors, plain and
//! under a pass-through `TorchDispatchMode`; and one gpt_tiny step (forward, loss, backward),
//! plain, under a pass-through mode and under `FlopCounterMode`.
//!
//! `cargo bench --bench dispatch` runs the criterion benchmarks, then prints a table from
//! criterion's estimates beside the targets and PyTorch 2.15's figures (`python
//! bench/dispatch.py`, PyTorch from PyPI in a scratch venv, timed in the same sitting). Compare
//! numbers from one run only: the machines are noisy.

mod common;
use common::mean_ns;

use std::hint::black_box;

use criterion::Criterion;
use torchfn::Device;
use torchfn::dispatch::{Operator, TorchDispatchMode, push_dispatch_mode};
use torchfn::fake_tensor::FakeTensorMode;
use torchfn::nn::{Layer, Module, StateDict};
use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
use torchfn::prelude::*;
use torchfn::utils::flop_counter::FlopCounterMode;

#[allow(dead_code)]
#[path = "../examples/models/gpt.rs"]
mod gpt;

fn golden(file: &str) -> StateDict {
    let path = format!("{}/tests/golden/workloads/gpt_tiny/{file}.safetensors", env!("CARGO_MANIFEST_DIR"));
    torchfn::safetensors::load_file(path).unwrap()
}

/// gpt_tiny and its batch: one call is one step as PyTorch's FLOP counts measure it (forward,
/// loss, backward; no optimizer), the model called as a module (so a FLOP counter's module
/// tracker sees every module call, as PyTorch's does).
struct GptStep {
    model: gpt::GPT2LMHeadModel,
    inputs: StateDict,
}

impl GptStep {
    fn new() -> GptStep {
        let config =
            gpt::GptConfig { n_layer: 2, n_head: 4, n_embd: 64, vocab_size: 128, n_positions: 32, dropout: 0.0 };
        let model = gpt::GPT2LMHeadModel::new(config, &Generator::new().manual_seed(0)).unwrap();
        model.load_state_dict(&golden("init"), true).unwrap();
        GptStep { model, inputs: golden("inputs") }
    }

    fn step(&self) {
        let logits = self.model.call(self.inputs.get("input_ids").unwrap()).unwrap();
        let loss = gpt::GPT2LMHeadModel::loss(&logits, self.inputs.get("targets").unwrap()).unwrap();
        loss.backward().unwrap();
        self.model.zero_grad().unwrap();
    }
}

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
    let gpt = GptStep::new();
    group.sample_size(30);
    group.bench_function("gpt_tiny_plain", |x| x.iter(|| gpt.step()));
    {
        let _mode = push_dispatch_mode(PassThrough);
        group.bench_function("gpt_tiny_mode", |x| x.iter(|| gpt.step()));
    }
    {
        let _counter = push_dispatch_mode(FlopCounterMode::new());
        group.bench_function("gpt_tiny_flops", |x| x.iter(|| gpt.step()));
    }
    for (name, config) in [("gpt2_124m_fake", gpt2(12, 12, 768)), ("gpt2_medium_fake", gpt2(24, 16, 1024))] {
        let mut step = FakeStep::new(config);
        group.sample_size(10);
        group.bench_function(name, |x| x.iter(|| step.step()));
    }
    group.finish();
}

/// GPT-2's configuration with `n_layer` blocks of `n_head` heads and width `n_embd`.
fn gpt2(n_layer: usize, n_head: usize, n_embd: usize) -> gpt::GptConfig {
    gpt::GptConfig { n_layer, n_head, n_embd, vocab_size: 50257, n_positions: 1024, dropout: 0.0 }
}

/// A GPT-2 built on the meta device with its AdamW: one call is one training step (batch
/// 8 x 1024 tokens: forward, loss, backward, AdamW) under `FakeTensorMode`.
struct FakeStep {
    model: gpt::GPT2LMHeadModel,
    optimizer: AdamW,
    ids: Tensor,
}

impl FakeStep {
    fn new(config: gpt::GptConfig) -> FakeStep {
        let model = {
            let _meta = torchfn::default_device(Device::META);
            gpt::GPT2LMHeadModel::new(config, &Generator::new().manual_seed(0)).unwrap()
        };
        let optimizer = AdamW::new(model.parameters(), AdamWOptions::new(6e-4)).unwrap();
        let ids = torchfn::zeros([8, 1024], DType::Int64, Device::META).unwrap();
        FakeStep { model, optimizer, ids }
    }

    fn step(&mut self) -> usize {
        let fake = push_dispatch_mode(FakeTensorMode::new());
        self.optimizer.zero_grad(true).unwrap();
        let logits = self.model.call(&self.ids).unwrap();
        gpt::GPT2LMHeadModel::loss(&logits, &self.ids).unwrap().backward().unwrap();
        self.optimizer.step().unwrap();
        fake.peak_bytes()
    }
}

fn print_table() {
    let ns = |id: &str| mean_ns(&format!("dispatch/{id}"));
    let (add, add_mode) = (ns("add_plain"), ns("add_mode"));
    let (chain, chain_mode) = (ns("chain_plain") / CHAIN as f64, ns("chain_mode") / CHAIN as f64);
    let (gpt, gpt_mode, gpt_flops) = (ns("gpt_tiny_plain"), ns("gpt_tiny_mode"), ns("gpt_tiny_flops"));
    // PyTorch's figures: `python bench/dispatch.py`, this machine, in the sitting of the README's
    // table (2026-11-28).
    let rows = [
        ("1-element `add`", format!("{add:.0} ns"), "", "1,343 ns"),
        (
            "the same under a pass-through dispatch mode",
            format!("+{:.0} ns", add_mode - add),
            "under +50 ns",
            "+3,532 ns",
        ),
        ("100-op chain forward + backward, per op", format!("{chain:.0} ns"), "", "5,576 ns"),
        ("the same under a pass-through dispatch mode", format!("+{:.0} ns", chain_mode - chain), "", "+13,317 ns"),
        (
            "gpt_tiny step (forward, loss, backward), the model called as a module",
            format!("{:.2} ms", gpt / 1e6),
            "",
            "3.75 ms",
        ),
        ("the same under a pass-through dispatch mode", format!("{:.2}x", gpt_mode / gpt), "", ""),
        (
            "the same under `FlopCounterMode` (module tracker included)",
            format!("{:.2}x", gpt_flops / gpt),
            "<= 1.2x",
            PYTORCH_FLOPS,
        ),
        (
            "GPT-2 124M training step (8 x 1024 tokens) under `FakeTensorMode`",
            format!("{:.1} ms", ns("gpt2_124m_fake") / 1e6),
            "< 20 ms",
            "392 ms",
        ),
        ("GPT-2 medium, the same", format!("{:.1} ms", ns("gpt2_medium_fake") / 1e6), "< 50 ms", "743 ms"),
    ];
    println!("\n| measurement | torchfn | target | PyTorch 2.15 |");
    println!("|---|---:|---|---:|");
    for (what, ours, target, pytorch) in rows {
        println!("| {what} | {ours} | {target} | {pytorch} |");
    }
}

/// PyTorch's `FlopCounterMode` on its gpt_tiny step (`python bench/dispatch.py`), against the
/// plain step.
const PYTORCH_FLOPS: &str = "4.99x";

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    print_table();
}
