//! fx on the tiny GPT of the conformance suite: tracing it, and running the traced
//! GraphModule's forward (interpreted node by node through the protocol) against the eager
//! forward. Prints a table after criterion's output.

#[path = "common/mod.rs"]
mod common;

use std::hint::black_box;

use common::mean_ns;
use criterion::Criterion;
use torchfn::fx::Tracer;
use torchfn::nn::{Forward, Module, StateDict};
use torchfn::prelude::*;

#[allow(dead_code)]
#[path = "../examples/models/gpt.rs"]
mod gpt;

fn golden(file: &str) -> StateDict {
    let path = format!("{}/tests/golden/workloads/gpt_tiny/{file}.safetensors", env!("CARGO_MANIFEST_DIR"));
    torchfn::safetensors::load_file(path).unwrap()
}

fn model() -> gpt::GPT2LMHeadModel {
    let config = gpt::GptConfig { n_layer: 2, n_head: 4, n_embd: 64, vocab_size: 128, n_positions: 32, dropout: 0.0 };
    let model = gpt::GPT2LMHeadModel::new(config, &Generator::new().manual_seed(0)).unwrap();
    model.load_state_dict(&golden("init"), true).unwrap();
    model
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let ids = golden("inputs").get("input_ids").unwrap().clone();
    let eager = model();
    let traced = Tracer::new().example_inputs([ids.clone()]).trace(model()).unwrap();
    let _no_grad = torchfn::autograd::no_grad();
    c.bench_function("fx_gpt_tiny_forward_eager", |b| b.iter(|| black_box(eager.forward(&ids).unwrap())));
    c.bench_function("fx_gpt_tiny_forward_graph_module", |b| b.iter(|| black_box(traced.forward(&ids).unwrap())));
    c.bench_function("fx_gpt_tiny_trace", |b| {
        b.iter_batched(
            model,
            |m| black_box(Tracer::new().example_inputs([ids.clone()]).trace(m).unwrap()),
            criterion::BatchSize::LargeInput,
        )
    });
    c.final_summary();

    let (e, g, t) = (
        mean_ns("fx_gpt_tiny_forward_eager"),
        mean_ns("fx_gpt_tiny_forward_graph_module"),
        mean_ns("fx_gpt_tiny_trace"),
    );
    println!("\n| gpt_tiny ({} nodes) | time | ratio | target |", traced.graph().len());
    println!("|---|---:|---:|---|");
    println!("| eager forward (no grad) | {:.3} ms | 1.00x | |", e / 1e6);
    println!("| GraphModule forward (interpreted) | {:.3} ms | {:.2}x | <= 1.2x eager |", g / 1e6, g / e);
    println!("| symbolic trace (with example input) | {:.3} ms | | < 10 ms |", t / 1e6);
}
