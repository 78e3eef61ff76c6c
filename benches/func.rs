//! torch.func's per-sample gradients: `vmap(grad(loss))` through `functional_call`, against
//! one batched forward and backward of the same batch and against a loop of one example at a
//! time, for an MLP (784 → 256 → 10, batch 64) and gpt_tiny (batch 8 × 31 tokens).
//!
//! `cargo bench --bench func` runs the criterion benchmarks, then prints a table of the
//! ratios the torch.func issue sets targets for. PyTorch's figures for the same measurements
//! come from `python bench/func.py` (PyTorch from PyPI in a scratch venv), timed in the same
//! sitting. Compare numbers from one run only: the machines are noisy.

mod common;
use common::mean_ns;

use std::collections::BTreeMap;

use criterion::Criterion;
use torchfn::func::{ARG0, functional_call, grad, vmap};
use torchfn::nn::Layer;
use torchfn::prelude::*;

#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../examples/per_sample_grads.rs"]
mod per_sample_grads;
use per_sample_grads::{gpt, gpt_tiny, mlp, parameters};

type Loss = fn(&Tensor, &Tensor) -> Result<Tensor>;

fn cross_entropy(logits: &Tensor, y: &Tensor) -> Result<Tensor> {
    torchfn::nn::functional::cross_entropy(logits, y, None, None, -100, None, "mean", 0.0)
}

/// The three ways of one workload: a batched step, per-sample gradients by vmap, by a loop.
fn workload<M: Layer>(c: &mut Criterion, name: &str, model: &mut M, x: &Tensor, y: &Tensor, loss: Loss) {
    let params: BTreeMap<String, Tensor> = parameters(model.as_dyn()).unwrap();
    let leaves: BTreeMap<String, Tensor> =
        params.iter().map(|(k, v)| (k.clone(), v.detach().unwrap().requires_grad_(true).unwrap())).collect();
    let n = x.shape().unwrap()[0] as i64;
    let mut group = c.benchmark_group("func");
    group.bench_function(format!("{name}_batched"), |b| {
        b.iter(|| {
            let out = functional_call(model, &leaves, x).unwrap();
            loss(&out, y).unwrap().backward().unwrap();
        })
    });
    let mut compute_loss = |(p, x, y): (BTreeMap<String, Tensor>, Tensor, Tensor)| -> Result<Tensor> {
        let out = functional_call(&mut *model, &p, &x.unsqueeze(0)?)?;
        loss(&out, &y.unsqueeze(0)?)
    };
    group.bench_function(format!("{name}_vmap_grad"), |b| {
        b.iter(|| vmap(grad(&mut compute_loss, ARG0), (None, 0, 0), 0)((params.clone(), x.clone(), y.clone())).unwrap())
    });
    group.bench_function(format!("{name}_loop"), |b| {
        b.iter(|| {
            for i in 0..n {
                let xi = x.select(0, i).unwrap();
                let yi = y.select(0, i).unwrap();
                grad(&mut compute_loss, ARG0)((params.clone(), xi, yi)).unwrap();
            }
        })
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    let g = Generator::new().manual_seed(0);
    let mut model = mlp(&g).unwrap();
    let x = torchfn::randn([64, 784], g.clone(), None, None).unwrap();
    let y = torchfn::randint(10, [64], g.clone(), None, None).unwrap();
    workload(c, "mlp", &mut model, &x, &y, cross_entropy);
    let mut gpt = gpt_tiny(&g).unwrap();
    let ids = torchfn::randint(128, [8, 32], g.clone(), None, None).unwrap();
    let (inputs, targets) = (ids.narrow(1, 0, 31).unwrap(), ids.narrow(1, 1, 31).unwrap());
    workload(c, "gpt_tiny", &mut gpt, &inputs, &targets, gpt::GPT2LMHeadModel::loss);
}

fn print_table() {
    println!("\n| workload | batched fwd+bwd | vmap(grad) | loop | vmap / batched | loop / vmap |");
    println!("|---|---:|---:|---:|---:|---:|");
    for name in ["mlp", "gpt_tiny"] {
        let ms = |what: &str| mean_ns(&format!("func/{name}_{what}")) / 1e6;
        let (batched, mapped, looped) = (ms("batched"), ms("vmap_grad"), ms("loop"));
        println!(
            "| {name} | {batched:.2} ms | {mapped:.2} ms | {looped:.2} ms | {:.2}x | {:.1}x |",
            mapped / batched,
            looped / mapped
        );
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    print_table();
}
