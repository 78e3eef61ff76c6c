//! Counting the FLOPs of a GPT-2 124M training step (8 x 1024 tokens: forward, loss,
//! backward) on shapes alone: the model is built on the meta device, `FakeTensorMode` keeps
//! every tensor fake, and `FlopCounterMode` above it counts each operator with PyTorch's
//! formulas. Nothing is computed and no tensor data is allocated.
//!
//! Run it with `cargo run --release --example flop_counter`.

use std::time::Instant;

use torchfn::Device;
use torchfn::dispatch::push_dispatch_mode;
use torchfn::fake_tensor::FakeTensorMode;
use torchfn::nn::Layer;
use torchfn::prelude::*;
use torchfn::utils::flop_counter::FlopCounterMode;

#[allow(dead_code)]
#[path = "models/gpt.rs"]
pub mod gpt;

/// What one step of a GPT of `config` on a batch of `batch` x `tokens` counts: the total, the
/// table (`get_table(2)`) and the peak bytes the step's tensors would hold.
pub fn count(config: gpt::GptConfig, batch: usize, tokens: usize) -> Result<(u64, String, usize)> {
    let fake = push_dispatch_mode(FakeTensorMode::new());
    let model = {
        let _meta = torchfn::default_device(Device::META);
        gpt::GPT2LMHeadModel::new(config, &Generator::new().manual_seed(0))?
    };
    let ids = torchfn::zeros([batch, tokens], DType::Int64, Device::META)?;
    let counter = push_dispatch_mode(FlopCounterMode::new());
    let logits = model.call(&ids)?;
    gpt::GPT2LMHeadModel::loss(&logits, &ids)?.backward()?;
    Ok((counter.get_total_flops(), counter.get_table(Some(2)), fake.peak_bytes()))
}

fn main() -> Result<()> {
    let gpt2 =
        gpt::GptConfig { n_layer: 12, n_head: 12, n_embd: 768, vocab_size: 50257, n_positions: 1024, dropout: 0.0 };
    let start = Instant::now();
    let (total, table, peak) = count(gpt2, 8, 1024)?;
    let elapsed = start.elapsed();
    println!("GPT-2 124M, one training step on 8 x 1024 tokens (forward, loss, backward), on fake tensors:\n");
    println!("{table}\n");
    println!("{:.2} TFLOP in all; the step's tensors would peak at {:.1} GB.", total as f64 / 1e12, peak as f64 / 1e9);
    println!("Counted in {:.0} ms, building the model included.", elapsed.as_secs_f64() * 1e3);
    Ok(())
}
