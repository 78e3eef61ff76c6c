//! Per-sample gradients with `torch.func`: `vmap(grad(loss))` over a batch, the parameters
//! passed through `functional_call`, for a small MLP and for gpt_tiny's language-model loss.
//! Each is compared with a loop that differentiates one example at a time.
//!
//! Run it with `cargo run --release --example per_sample_grads`.

use std::collections::BTreeMap;
use std::time::Instant;

use torchfn::func::{ARG0, functional_call, grad, vmap};
use torchfn::nn::{Layer, Linear, Module, ReLU, Sequential};
use torchfn::prelude::*;

#[allow(dead_code)]
#[path = "models/gpt.rs"]
pub mod gpt;

/// A module's parameters by name, detached (what `functional_call` takes).
pub fn parameters(model: &dyn Module) -> Result<BTreeMap<String, Tensor>> {
    model.named_parameters().into_iter().map(|(n, p)| Ok((n, p.tensor().detach()?))).collect()
}

/// The per-sample gradients of `loss(model(x), y)` by `vmap(grad(...))`, and by a loop; both
/// by parameter name, each `[batch, *parameter.shape]`.
#[allow(clippy::type_complexity)]
pub fn per_sample<M: Layer>(
    model: &mut M,
    x: &Tensor,
    y: &Tensor,
    loss: fn(&Tensor, &Tensor) -> Result<Tensor>,
) -> Result<(BTreeMap<String, Tensor>, BTreeMap<String, Tensor>)> {
    let params = parameters(model.as_dyn())?;
    let mut compute_loss = |(params, x, y): (BTreeMap<String, Tensor>, Tensor, Tensor)| -> Result<Tensor> {
        let out = functional_call(&mut *model, &params, &x.unsqueeze(0)?)?;
        loss(&out, &y.unsqueeze(0)?)
    };
    let mapped = vmap(grad(&mut compute_loss, ARG0), (None, 0, 0), 0)((params.clone(), x.clone(), y.clone()))?;
    let n = x.shape()?[0];
    let mut each: BTreeMap<String, Vec<Tensor>> = BTreeMap::new();
    for i in 0..n as i64 {
        let g = grad(&mut compute_loss, ARG0)((params.clone(), x.select(0, i)?, y.select(0, i)?))?;
        for (name, t) in g {
            each.entry(name).or_default().push(t);
        }
    }
    let looped = each.into_iter().map(|(k, v)| Ok((k, torchfn::stack(&v, 0)?))).collect::<Result<_>>()?;
    Ok((mapped, looped))
}

/// The largest difference between two maps of tensors.
pub fn max_difference(a: &BTreeMap<String, Tensor>, b: &BTreeMap<String, Tensor>) -> Result<f64> {
    let mut worst = 0.0f64;
    for (name, x) in a {
        let d = torchfn::max(&(x - &b[name])?.abs()?)?.item()?.to_f64();
        worst = worst.max(d);
    }
    Ok(worst)
}

/// The MLP of the bench (784 → 256 → 10).
pub fn mlp(g: &Generator) -> Result<Sequential> {
    Ok(Sequential(vec![
        Box::new(Linear::new(784, 256, true, g)?),
        Box::new(ReLU::new(false)),
        Box::new(Linear::new(256, 10, true, g)?),
    ]))
}

fn cross_entropy(logits: &Tensor, y: &Tensor) -> Result<Tensor> {
    torchfn::nn::functional::cross_entropy(logits, y, None, None, -100, None, "mean", 0.0)
}

/// gpt_tiny (2 layers, 4 heads, 64 wide, 128 tokens of vocabulary).
pub fn gpt_tiny(g: &Generator) -> Result<gpt::GPT2LMHeadModel> {
    let config = gpt::GptConfig { n_layer: 2, n_head: 4, n_embd: 64, vocab_size: 128, n_positions: 32, dropout: 0.0 };
    gpt::GPT2LMHeadModel::new(config, g)
}

fn main() -> Result<()> {
    let g = Generator::new().manual_seed(0);
    let mut model = mlp(&g)?;
    let x = torchfn::randn([64, 784], g.clone(), None, None)?;
    let y = torchfn::randint(10, [64], g.clone(), None, None)?;
    let start = Instant::now();
    let (mapped, looped) = per_sample(&mut model, &x, &y, cross_entropy)?;
    println!(
        "MLP 784-256-10, batch 64: per-sample gradients {:?} (weight of the first layer), max difference from the \
         loop {:.2e} ({:.0} ms for both)",
        mapped["0.weight"].shape()?.to_vec(),
        max_difference(&mapped, &looped)?,
        start.elapsed().as_secs_f64() * 1e3
    );
    let mut gpt = gpt_tiny(&g)?;
    let ids = torchfn::randint(128, [8, 32], g.clone(), None, None)?;
    let (inputs, targets) = (ids.narrow(1, 0, 31)?, ids.narrow(1, 1, 31)?);
    let (mapped, looped) = per_sample(&mut gpt, &inputs, &targets, gpt::GPT2LMHeadModel::loss)?;
    println!(
        "gpt_tiny, batch 8 x 31 tokens: {} parameter tensors per example, max difference from the loop {:.2e}",
        mapped.len(),
        max_difference(&mapped, &looped)?
    );
    Ok(())
}
