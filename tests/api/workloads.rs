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

// Its `entry_points!` serves the examples, not this crate.
#[allow(dead_code, unused_macros, unused_imports)]
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
    Reference::load(name).unwrap().meta
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
    let reference = Reference::load("gpt_tiny").unwrap();
    let model = gpt::GPT2LMHeadModel::new(gpt_config(&reference.meta), &Generator::new().manual_seed(0)).unwrap();
    reference.check_structure_and_load(&model).unwrap();
    assert!(model.lm_head.weight.is(&model.transformer.wte.weight), "the head stays tied");
    let (got, want) = (&model.transformer.wte.weight, reference.init.get("transformer.wte.weight").unwrap());
    assert_eq!(reference::rel_l2(got, want, "transformer.wte.weight").unwrap(), 0.0);
}

#[test]
fn gpt_tiny_gives_pytorch_s_logits_loss_and_gradients() {
    let reference = Reference::load("gpt_tiny").unwrap();
    let model = gpt_model(&reference);
    model.train(true);
    let logits = model.forward(reference.input("input_ids").unwrap()).unwrap();
    let loss = gpt::GPT2LMHeadModel::loss(&logits, reference.input("targets").unwrap()).unwrap();
    println!("{}", reference.check_first_step(&model, &logits, loss).unwrap());
}

#[test]
fn resnet_tiny_has_pytorch_s_structure_and_gives_its_logits_loss_gradients_and_running_stats() {
    let reference = Reference::load("resnet_tiny").unwrap();
    let model = resnet(&reference.meta);
    reference.check_structure_and_load(&model).unwrap();
    model.train(true);
    let logits = model.forward(reference.input("images").unwrap()).unwrap();
    let loss = resnet::NarrowResNet::loss(&logits, reference.input("labels").unwrap()).unwrap();
    println!("{}", reference.check_first_step(&model, &logits, loss).unwrap());
    println!("worst running statistic: {:?}", reference.check_buffers(&model, "step1").unwrap());
}

#[test]
fn gpt_tiny_trains_like_pytorch_for_three_adamw_steps() {
    let reference = Reference::load("gpt_tiny").unwrap();
    let model = gpt_model(&reference);
    let forward_loss = || {
        let logits = model.forward(reference.input("input_ids").unwrap())?;
        gpt::GPT2LMHeadModel::loss(&logits, reference.input("targets").unwrap())
    };
    println!("{}", reference.train_three_steps(&model, &forward_loss).unwrap());
}

#[test]
fn resnet_tiny_trains_like_pytorch_for_three_adamw_steps() {
    let reference = Reference::load("resnet_tiny").unwrap();
    let model = resnet_model(&reference);
    let forward_loss = || {
        let logits = model.forward(reference.input("images").unwrap())?;
        resnet::NarrowResNet::loss(&logits, reference.input("labels").unwrap())
    };
    println!("{}", reference.train_three_steps(&model, &forward_loss).unwrap());
    println!("worst running statistic: {:?}", reference.check_buffers(&model, "step3").unwrap());
}

/// On the GPU: both models moved there (`to_device`), their batch too; logits, loss and every
/// gradient within the same float32 tolerances, computed on the device.
#[test]
#[cfg(feature = "wgpu")]
fn both_models_give_pytorch_s_first_step_on_the_gpu() {
    let Some(device) = crate::gpu::gpu() else { return };
    let reference = Reference::load("gpt_tiny").unwrap();
    let mut model = gpt_model(&reference);
    model.to_device(device).unwrap();
    let on = |key: &str| reference.input_on(key, device).unwrap();
    let logits = model.forward(&on("input_ids")).unwrap();
    let loss = gpt::GPT2LMHeadModel::loss(&logits, &on("targets")).unwrap();
    assert_eq!(logits.device().unwrap(), device);
    println!("{}", reference.check_first_step(&model, &logits, loss).unwrap());

    let reference = Reference::load("resnet_tiny").unwrap();
    let mut model = resnet_model(&reference);
    model.to_device(device).unwrap();
    let on = |key: &str| reference.input_on(key, device).unwrap();
    let logits = model.forward(&on("images")).unwrap();
    let loss = resnet::NarrowResNet::loss(&logits, &on("labels")).unwrap();
    assert_eq!(logits.device().unwrap(), device);
    println!("{}", reference.check_first_step(&model, &logits, loss).unwrap());
}

/// On the GPU: three AdamW steps of the tiny GPT, optimizer state on the device, against
/// PyTorch's parameters after steps 1 and 3 with the same tolerances.
#[cfg(feature = "wgpu")]
#[test]
fn gpt_tiny_trains_like_pytorch_on_the_gpu() {
    let Some(device) = crate::gpu::gpu() else { return };
    let reference = Reference::load("gpt_tiny").unwrap();
    let mut model = gpt_model(&reference);
    model.to_device(device).unwrap();
    let ids = reference.input_on("input_ids", device).unwrap();
    let targets = reference.input_on("targets", device).unwrap();
    let forward_loss = || {
        let logits = model.forward(&ids)?;
        assert_eq!(logits.device()?, device);
        gpt::GPT2LMHeadModel::loss(&logits, &targets)
    };
    println!("{}", reference.train_three_steps(&model, &forward_loss).unwrap());
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

/// An example checks a reference given by path as well as by name (`--workload`), and says what
/// is wrong with a folder it cannot use instead of panicking.
#[test]
fn the_examples_take_a_reference_by_path_and_report_a_bad_one() {
    let path = Reference::dir("llama_tiny");
    println!("{}", llama::check_workload(path.to_str().unwrap(), torchfn::Device::CPU, false).unwrap());

    let missing = llama::check_workload("no_such_workload", torchfn::Device::CPU, false).unwrap_err();
    assert!(missing.contains("no_such_workload"), "{missing}");

    let dir = std::env::temp_dir().join(format!("torchfn_bad_workload_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("meta.json"), "{not json").unwrap();
    let bad = bert::check_workload(dir.to_str().unwrap(), torchfn::Device::CPU, false).unwrap_err();
    assert!(bad.contains("meta.json"), "{bad}");
    std::fs::write(dir.join("meta.json"), "{}").unwrap();
    let no_file = vit::check_workload(dir.to_str().unwrap(), torchfn::Device::CPU, false).unwrap_err();
    assert!(no_file.contains("init.safetensors"), "{no_file}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The ports' configs: a value of the wrong type is an error naming its key (never read as the
/// default), and so is an activation or rope type the port does not implement.
#[test]
fn the_ports_configs_name_a_wrong_key() {
    use serde_json::json;
    let err = |e: torchfn::Error| e.to_string();
    let wrong = llama::llama::LlamaConfig::from_json(&json!({"hidden_size": "64"})).map(drop).unwrap_err();
    assert!(err(wrong).contains("hidden_size"));
    let wrong = bert::bert::BertConfig::from_json(&json!({"tie_word_embeddings": 1})).map(drop).unwrap_err();
    assert!(err(wrong).contains("tie_word_embeddings"));
    let wrong = vit::vit::ViTConfig::from_json(&json!({"image_size": [16]})).map(drop).unwrap_err();
    assert!(err(wrong).contains("image_size"));
    let wrong = unet::unet::UNet2DConfig::from_json(&json!({"block_out_channels": [16, "32"]})).map(drop).unwrap_err();
    assert!(err(wrong).contains("block_out_channels"));
    let wrong = lstm_lm::rnn_lm::RnnConfig::from_json(&json!({"rnn_type": "GRU", "ntoken": 8})).map(drop).unwrap_err();
    assert!(err(wrong).contains("ninp"));
    let rope = json!({"rope_scaling": {"type": "yarn", "factor": 2.0}});
    let wrong = llama::llama::LlamaConfig::from_json(&rope).map(drop).unwrap_err();
    assert!(err(wrong).contains("yarn"));
    let rope = json!({"rope_scaling": {"type": "linear"}});
    let wrong = llama::llama::LlamaConfig::from_json(&rope).map(drop).unwrap_err();
    assert!(err(wrong).contains("rope_scaling.factor"));
    let rnn = json!({"rnn_type": "RNN_TANH", "ntoken": 8, "ninp": 4, "nhid": 4, "nlayers": 1});
    assert!(err(lstm_lm::rnn_lm::RnnConfig::from_json(&rnn).map(drop).unwrap_err()).contains("nn.RNN"));
    let tied = json!({"rnn_type": "GRU", "ntoken": 8, "ninp": 4, "nhid": 6, "nlayers": 1, "tie_weights": true});
    let config = lstm_lm::rnn_lm::RnnConfig::from_json(&tied).unwrap();
    let g = Generator::new();
    assert!(err(lstm_lm::rnn_lm::RNNModel::new(&config, &g).map(drop).unwrap_err()).contains("nhid"));
    let unknown = llama::llama::activations::Activation::new("gelu_99").unwrap_err();
    assert!(err(unknown).contains("gelu_99"));
}

/// transformers' activations print as `print(model)` shows them (transformers 5.24's
/// `ACT2FN[name]`), and compute their functions.
#[test]
fn transformers_activations_print_and_compute_as_transformers_does() {
    use llama::llama::activations::Activation;
    use torchfn::nn::Layer;
    let reprs = [
        ("gelu", "GELUActivation()"),
        ("gelu_new", "NewGELUActivation()"),
        ("gelu_pytorch_tanh", "GELUTanh()"),
        ("gelu_fast", "FastGELUActivation()"),
        ("gelu_10", "ClippedGELUActivation()"),
        ("quick_gelu", "QuickGELUActivation()"),
        ("relu", "ReLU()"),
        ("relu2", "ReLUSquaredActivation()"),
        ("relu6", "ReLU6()"),
        ("leaky_relu", "LeakyReLU(negative_slope=0.01)"),
        ("silu", "SiLUActivation()"),
        ("swish", "SiLU()"),
        ("tanh", "Tanh()"),
        ("sigmoid", "Sigmoid()"),
        ("mish", "MishActivation()"),
        ("hardswish", "Hardswish()"),
        ("laplace", "LaplaceActivation()"),
        ("linear", "LinearActivation()"),
    ];
    for (name, repr) in reprs {
        assert_eq!(Activation::new(name).unwrap().to_string(), repr, "{name}");
    }
    // PyTorch 2.15: [act(x) for x in (-2, -0.5, 0.5, 3)], float32.
    let x = torchfn::tensor([-2.0f32, -0.5, 0.5, 3.0]).unwrap();
    let values = [
        ("gelu", [-0.04550028, -0.1542688, 0.3457312, 2.99595]),
        ("gelu_new", [-0.04540229, -0.154286, 0.345714, 2.996363]),
        ("gelu_fast", [-0.04540229, -0.154286, 0.345714, 2.996363]),
        ("quick_gelu", [-0.06434137, -0.1496116, 0.3503884, 2.981929]),
        ("relu6", [0.0, 0.0, 0.5, 3.0]),
        ("leaky_relu", [-0.02, -0.005, 0.5, 3.0]),
        ("mish", [-0.2525015, -0.2207438, 0.3752452, 2.986535]),
        ("laplace", [0.0, 9.387732e-6, 0.2314211, 1.0]),
    ];
    for (name, want) in values {
        let got = Activation::new(name).unwrap().call(&x).unwrap().to_vec::<f32>().unwrap();
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-6 + 1e-5 * w.abs(), "{name}: {got:?}, PyTorch's {want:?}");
        }
    }
}
