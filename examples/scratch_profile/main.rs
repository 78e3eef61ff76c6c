use std::time::Instant;
use torchfn::nn::{Forward, Module, StateDict};
use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
use torchfn::prelude::*;
#[allow(dead_code)]
#[path = "../models/resnet.rs"]
mod resnet;
#[allow(dead_code)]
#[path = "../models/gpt.rs"]
mod gpt;
fn main() {
    let which = std::env::args().nth(1).unwrap_or("resnet18".into());
    let g = Generator::new().manual_seed(0);
    let (model, x, y): (Box<dyn torchfn::nn::Layer>, Tensor, Tensor) = if which == "resnet18" {
        (Box::new(resnet::NarrowResNet::new([2, 2, 2, 2], [64, 128, 256, 512], 10, &g).unwrap()),
         torchfn::randn([8, 3, 32, 32], g.clone(), None, None).unwrap(), torchfn::randint(10, [8], g.clone(), None, None).unwrap())
    } else {
        let config = gpt::GptConfig { n_layer: 4, n_head: 4, n_embd: 128, vocab_size: 128, n_positions: 32, dropout: 0.0 };
        (Box::new(gpt::GPT2LMHeadModel::new(config, &g).unwrap()), torchfn::randint(128, [4, 32], g.clone(), None, None).unwrap(), torchfn::randint(128, [4, 32], g.clone(), None, None).unwrap())
    };
    let mut opt = AdamW::new(model.parameters(), AdamWOptions::new(1e-3).weight_decay(0.01)).unwrap();
    let _ = StateDict::new();
    let (mut tf, mut tb, mut to) = (0.0, 0.0, 0.0);
    let n = 20;
    for i in 0..n + 3 {
        let t0 = Instant::now();
        opt.zero_grad(true).unwrap();
        let logits = model.forward(&x).unwrap();
        let loss = if which == "resnet18" { resnet::NarrowResNet::loss(&logits, &y).unwrap() } else { gpt::GPT2LMHeadModel::loss(&logits, &y).unwrap() };
        let t1 = Instant::now();
        loss.backward().unwrap();
        let t2 = Instant::now();
        opt.step().unwrap();
        let t3 = Instant::now();
        if i >= 3 { tf += (t1 - t0).as_secs_f64(); tb += (t2 - t1).as_secs_f64(); to += (t3 - t2).as_secs_f64(); }
    }
    println!("{which}: forward {:.2} ms backward {:.2} ms optimizer {:.2} ms", tf / n as f64 * 1e3, tb / n as f64 * 1e3, to / n as f64 * 1e3);
}
