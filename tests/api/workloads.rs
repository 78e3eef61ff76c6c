//! The real models of `tests/golden/workloads` (PyTorch 2.15's training references, see the
//! README there), ported with torchfn's modules as their examples do: the module tree, parameter
//! names and state_dict keys as PyTorch's; loading `init.safetensors` by key; the logits, loss
//! and every gradient of one training step, and three AdamW steps, within `meta.json`'s
//! tolerances (the checks are `examples/models/reference.rs`).

use serde_json::Value as Json;
use torchfn::nn::{Forward, Module, StateDict};
use torchfn::prelude::*;

use crate::examples::train_gpt::gpt;

#[allow(dead_code)]
#[path = "../../examples/models/resnet.rs"]
pub(crate) mod resnet;

#[allow(dead_code)]
#[path = "../../examples/models/reference.rs"]
pub(crate) mod reference;

use reference::Reference;

// The five model examples: each checks its port against its reference and reports the worst
// errors. They include `models/reference.rs` themselves, as this file does, and four name their
// model module after themselves (`llama::llama`), which clippy's `module_inception` flags.
#[allow(dead_code, clippy::duplicate_mod, clippy::module_inception)]
#[path = "../../examples/llama.rs"]
mod llama;

#[allow(dead_code, clippy::duplicate_mod, clippy::module_inception)]
#[path = "../../examples/bert.rs"]
mod bert;

#[allow(dead_code, clippy::duplicate_mod, clippy::module_inception)]
#[path = "../../examples/vit.rs"]
mod vit;

#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../../examples/lstm_lm.rs"]
mod lstm_lm;

#[allow(dead_code, clippy::duplicate_mod, clippy::module_inception)]
#[path = "../../examples/unet.rs"]
mod unet;

pub(crate) fn meta(name: &str) -> Json {
    Reference::load(name).meta
}

pub(crate) fn file(name: &str, which: &str) -> StateDict {
    torchfn::safetensors::load_file(Reference::dir(name).join(format!("{which}.safetensors"))).unwrap()
}

pub(crate) fn gpt_config(meta: &Json) -> gpt::GptConfig {
    let c = &meta["config"];
    let n = |k: &str| c[k].as_u64().unwrap() as usize;
    gpt::GptConfig {
        n_layer: n("n_layer"),
        n_head: n("n_head"),
        n_embd: n("n_embd"),
        vocab_size: n("vocab_size"),
        n_positions: n("n_positions"),
        dropout: c["resid_pdrop"].as_f64().unwrap(),
    }
}

pub(crate) fn resnet(meta: &Json) -> resnet::NarrowResNet {
    let c = &meta["config"];
    let four = |k: &str| -> [usize; 4] {
        let v: Vec<usize> = c[k].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
        [v[0], v[1], v[2], v[3]]
    };
    let classes = c["num_classes"].as_u64().unwrap() as usize;
    resnet::NarrowResNet::new(four("layers"), four("widths"), classes, &Generator::new().manual_seed(0)).unwrap()
}

fn gpt_model(reference: &Reference) -> gpt::GPT2LMHeadModel {
    let model = gpt::GPT2LMHeadModel::new(gpt_config(&reference.meta), &Generator::new().manual_seed(0)).unwrap();
    model.load_state_dict(&reference.init, true).unwrap();
    model
}

fn resnet_model(reference: &Reference) -> resnet::NarrowResNet {
    let model = resnet(&reference.meta);
    model.load_state_dict(&reference.init, true).unwrap();
    model
}

#[test]
fn gpt_tiny_has_pytorch_s_structure_and_loads_its_state_dict() {
    let reference = Reference::load("gpt_tiny");
    let model = gpt::GPT2LMHeadModel::new(gpt_config(&reference.meta), &Generator::new().manual_seed(0)).unwrap();
    reference.check_structure_and_load(&model).unwrap();
    assert!(model.lm_head.weight.is(&model.transformer.wte.weight), "the head stays tied");
    let (got, want) = (&model.transformer.wte.weight, reference.init.get("transformer.wte.weight").unwrap());
    assert_eq!(reference::rel_l2(got, want), 0.0);
}

#[test]
fn gpt_tiny_gives_pytorch_s_logits_loss_and_gradients() {
    let reference = Reference::load("gpt_tiny");
    let model = gpt_model(&reference);
    model.train(true);
    let logits = model.forward(reference.input("input_ids")).unwrap();
    let loss = gpt::GPT2LMHeadModel::loss(&logits, reference.input("targets")).unwrap();
    println!("{:?}", reference.check_first_step(&model, &logits, loss).unwrap());
}

#[test]
fn resnet_tiny_has_pytorch_s_structure_and_gives_its_logits_loss_gradients_and_running_stats() {
    let reference = Reference::load("resnet_tiny");
    let model = resnet(&reference.meta);
    reference.check_structure_and_load(&model).unwrap();
    model.train(true);
    let logits = model.forward(reference.input("images")).unwrap();
    let loss = resnet::NarrowResNet::loss(&logits, reference.input("labels")).unwrap();
    println!("{:?}", reference.check_first_step(&model, &logits, loss).unwrap());
    println!("worst running statistic: {:?}", reference.check_buffers(&model, "step1").unwrap());
}

#[test]
fn gpt_tiny_trains_like_pytorch_for_three_adamw_steps() {
    let reference = Reference::load("gpt_tiny");
    let model = gpt_model(&reference);
    let forward_loss = || {
        let logits = model.forward(reference.input("input_ids"))?;
        gpt::GPT2LMHeadModel::loss(&logits, reference.input("targets"))
    };
    println!("{:?}", reference.train_three_steps(&model, &forward_loss).unwrap());
}

#[test]
fn resnet_tiny_trains_like_pytorch_for_three_adamw_steps() {
    let reference = Reference::load("resnet_tiny");
    let model = resnet_model(&reference);
    let forward_loss = || {
        let logits = model.forward(reference.input("images"))?;
        resnet::NarrowResNet::loss(&logits, reference.input("labels"))
    };
    println!("{:?}", reference.train_three_steps(&model, &forward_loss).unwrap());
    println!("worst running statistic: {:?}", reference.check_buffers(&model, "step3").unwrap());
}

/// On the GPU: both models moved there (`to_device`), their batch too; logits, loss and every
/// gradient within the same float32 tolerances, computed on the device.
#[test]
#[cfg(feature = "wgpu")]
fn both_models_give_pytorch_s_first_step_on_the_gpu() {
    let Some(device) = crate::gpu::gpu() else { return };
    // Token ids and labels as the device's integer type (wgpu has no int64).
    let on = |t: &Tensor| {
        let dtype = (t.dtype().unwrap() == DType::Int64).then_some(DType::Int32);
        t.to_device(device, dtype, false, false).unwrap()
    };
    let reference = Reference::load("gpt_tiny");
    let mut model = gpt_model(&reference);
    model.to_device(device).unwrap();
    let logits = model.forward(&on(reference.input("input_ids"))).unwrap();
    let loss = gpt::GPT2LMHeadModel::loss(&logits, &on(reference.input("targets"))).unwrap();
    assert_eq!(logits.device().unwrap(), device);
    println!("{:?}", reference.check_first_step(&model, &logits, loss).unwrap());

    let reference = Reference::load("resnet_tiny");
    let mut model = resnet_model(&reference);
    model.to_device(device).unwrap();
    let logits = model.forward(&on(reference.input("images"))).unwrap();
    let loss = resnet::NarrowResNet::loss(&logits, &on(reference.input("labels"))).unwrap();
    assert_eq!(logits.device().unwrap(), device);
    println!("{:?}", reference.check_first_step(&model, &logits, loss).unwrap());
}

/// On the GPU: three AdamW steps of the tiny GPT, optimizer state on the device, against
/// PyTorch's parameters after steps 1 and 3 with the same tolerances.
#[cfg(feature = "wgpu")]
#[test]
fn gpt_tiny_trains_like_pytorch_on_the_gpu() {
    let Some(device) = crate::gpu::gpu() else { return };
    let reference = Reference::load("gpt_tiny");
    let mut model = gpt_model(&reference);
    model.to_device(device).unwrap();
    let on = |t: &Tensor| t.to_device(device, Some(DType::Int32), false, false).unwrap();
    let (ids, targets) = (on(reference.input("input_ids")), on(reference.input("targets")));
    let forward_loss = || {
        let logits = model.forward(&ids)?;
        assert_eq!(logits.device()?, device);
        gpt::GPT2LMHeadModel::loss(&logits, &targets)
    };
    println!("{:?}", reference.train_three_steps(&model, &forward_loss).unwrap());
}

/// LLaMA (`examples/llama.rs`): structure, first step and three AdamW steps against `llama_tiny`.
#[test]
fn llama_trains_like_pytorch_for_three_adamw_steps() {
    println!("{}", llama::check(torchfn::Device::CPU, true).unwrap());
}

/// BERT (`examples/bert.rs`): structure, first step and three AdamW steps against `bert_tiny`.
#[test]
fn bert_trains_like_pytorch_for_three_adamw_steps() {
    println!("{}", bert::check(torchfn::Device::CPU, true).unwrap());
}

/// ViT (`examples/vit.rs`): structure, first step and three AdamW steps against `vit_tiny`.
#[test]
fn vit_trains_like_pytorch_for_three_adamw_steps() {
    println!("{}", vit::check(torchfn::Device::CPU, true).unwrap());
}

/// The LSTM language model (`examples/lstm_lm.rs`): structure, first step and three AdamW steps
/// against `lstm_lm`.
#[test]
fn lstm_lm_trains_like_pytorch_for_three_adamw_steps() {
    println!("{}", lstm_lm::check(torchfn::Device::CPU, true).unwrap());
}

/// The UNet (`examples/unet.rs`): structure, first step and three AdamW steps against
/// `unet_tiny`.
#[test]
fn unet_trains_like_pytorch_for_three_adamw_steps() {
    println!("{}", unet::check(torchfn::Device::CPU, true).unwrap());
}

/// On the GPU: each of the five models moved there, its batch too; logits, loss and every
/// gradient of one training step within the reference's tolerances.
#[test]
#[cfg(feature = "wgpu")]
fn the_five_new_models_give_pytorch_s_first_step_on_the_gpu() {
    let Some(device) = crate::gpu::gpu() else { return };
    println!("{}", llama::check(device, false).unwrap());
    println!("{}", bert::check(device, false).unwrap());
    println!("{}", vit::check(device, false).unwrap());
    println!("{}", lstm_lm::check(device, false).unwrap());
    println!("{}", unet::check(device, false).unwrap());
}
