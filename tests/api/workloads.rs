//! The two real models of `tests/golden/workloads` (PyTorch 2.15's `gpt_tiny` and
//! `resnet_tiny`, see the README there), ported with torchfn's modules: the module tree,
//! parameter names and state_dict keys as PyTorch's; loading `init.safetensors` by key; the
//! logits, loss and every gradient of one training step within `meta.json`'s tolerances.

use std::path::PathBuf;

use serde_json::Value as Json;
use torchfn::nn::{Forward, Module, StateDict};
use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
use torchfn::prelude::*;

use crate::examples::train_gpt::gpt;

#[allow(dead_code)]
#[path = "../../examples/models/resnet.rs"]
pub(crate) mod resnet;

pub(crate) fn dir(name: &str) -> PathBuf {
    PathBuf::from(format!("{}/tests/golden/workloads/{name}", env!("CARGO_MANIFEST_DIR")))
}

pub(crate) fn meta(name: &str) -> Json {
    serde_json::from_str(&std::fs::read_to_string(dir(name).join("meta.json")).unwrap()).unwrap()
}

pub(crate) fn file(name: &str, which: &str) -> StateDict {
    torchfn::safetensors::load_file(dir(name).join(format!("{which}.safetensors"))).unwrap()
}

fn values(t: &Tensor) -> Vec<f64> {
    let host = t.detach().unwrap().to_device(torchfn::Device::CPU, Some(DType::Float64), false, false).unwrap();
    host.contiguous().unwrap().to_vec::<f64>().unwrap()
}

/// The largest `|got - want| - rtol |want|` over `atol` (≤ 1 passes), per element.
fn elementwise(got: &Tensor, want: &Tensor, rtol: f64, atol: f64) -> f64 {
    let (g, w) = (values(got), values(want));
    assert_eq!(g.len(), w.len());
    g.iter().zip(&w).map(|(g, w)| (g - w).abs() - rtol * w.abs()).fold(0.0, f64::max) / atol
}

/// `||got - want|| / ||want||`.
fn rel_l2(got: &Tensor, want: &Tensor) -> f64 {
    let (g, w) = (values(got), values(want));
    let diff: f64 = g.iter().zip(&w).map(|(g, w)| (g - w).powi(2)).sum::<f64>().sqrt();
    let norm: f64 = w.iter().map(|w| w * w).sum::<f64>().sqrt();
    if norm == 0.0 { diff } else { diff / norm }
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

#[test]
fn gpt_tiny_has_pytorch_s_structure_and_loads_its_state_dict() {
    let meta = meta("gpt_tiny");
    let model = gpt::GPT2LMHeadModel::new(gpt_config(&meta), &Generator::new().manual_seed(0)).unwrap();
    assert_eq!(model.to_string(), meta["module_tree"].as_str().unwrap());
    let keys: Vec<String> = model.state_dict().keys().map(String::from).collect();
    let want: Vec<String> =
        meta["state_dict_keys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().into()).collect();
    assert_eq!(keys, want);
    let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
    let want: Vec<String> =
        meta["parameters"].as_array().unwrap().iter().map(|p| p[0].as_str().unwrap().into()).collect();
    assert_eq!(names, want, "named_parameters lists the tied head once");
    let init = file("gpt_tiny", "init");
    let report = model.load_state_dict(&init, true).unwrap();
    assert!(report.missing_keys.is_empty() && report.unexpected_keys.is_empty());
    assert!(model.lm_head.weight.is(&model.transformer.wte.weight), "the head stays tied");
    assert_eq!(values(&model.transformer.wte.weight), values(init.get("transformer.wte.weight").unwrap()));
}

/// Checks one training step's forward and backward against PyTorch's: the logits per element,
/// the loss, and every parameter's gradient (relative L2), within `meta.json`'s tolerances.
fn check_first_step(name: &str, model: &dyn Module, logits: &Tensor, loss: Tensor) {
    let meta = meta(name);
    let tol = &meta["suggested_tolerances"];
    let expect = file(name, "expect");
    let logits_error = elementwise(
        logits,
        expect.get("logits").unwrap(),
        tol["logits"]["rtol"].as_f64().unwrap(),
        tol["logits"]["atol"].as_f64().unwrap(),
    );
    let loss_error = rel_l2(&loss, expect.get("loss").unwrap());
    loss.backward().unwrap();
    let mut worst_grad = (0.0f64, String::new());
    for (p_name, p) in model.named_parameters() {
        let g = p.grad().unwrap().unwrap_or_else(|| panic!("{p_name} has no gradient"));
        assert_eq!(g.device().unwrap(), logits.device().unwrap());
        let e = rel_l2(&g, expect.get(&format!("grad/{p_name}")).unwrap());
        if e > worst_grad.0 {
            worst_grad = (e, p_name);
        }
    }
    let device = logits.device().unwrap();
    println!(
        "{name} on {device}: logits error {logits_error:.3} of tolerance, loss rel {loss_error:.2e}, worst grad \
         rel_l2 {:.2e} ({})",
        worst_grad.0, worst_grad.1
    );
    assert!(logits_error <= 1.0, "logits differ: {logits_error} of tolerance");
    assert!(loss_error <= tol["loss"]["rtol"].as_f64().unwrap(), "loss differs: {loss_error}");
    let rel = tol["grads"]["rel_l2"].as_f64().unwrap();
    assert!(worst_grad.0 <= rel, "gradient of {} differs: {}", worst_grad.1, worst_grad.0);
}

#[test]
fn gpt_tiny_gives_pytorch_s_logits_loss_and_gradients() {
    let meta = meta("gpt_tiny");
    let model = gpt::GPT2LMHeadModel::new(gpt_config(&meta), &Generator::new().manual_seed(0)).unwrap();
    model.load_state_dict(&file("gpt_tiny", "init"), true).unwrap();
    model.train(true);
    let inputs = file("gpt_tiny", "inputs");
    let logits = model.forward(inputs.get("input_ids").unwrap()).unwrap();
    let loss = gpt::GPT2LMHeadModel::loss(&logits, inputs.get("targets").unwrap()).unwrap();
    check_first_step("gpt_tiny", &model, &logits, loss);
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

#[test]
fn resnet_tiny_has_pytorch_s_structure_and_gives_its_logits_loss_gradients_and_running_stats() {
    let meta = meta("resnet_tiny");
    let model = resnet(&meta);
    assert_eq!(model.to_string(), meta["module_tree"].as_str().unwrap());
    let keys: Vec<String> = model.state_dict().keys().map(String::from).collect();
    let want: Vec<String> =
        meta["state_dict_keys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().into()).collect();
    assert_eq!(keys, want);
    model.load_state_dict(&file("resnet_tiny", "init"), true).unwrap();
    model.train(true);
    let inputs = file("resnet_tiny", "inputs");
    let logits = model.forward(inputs.get("images").unwrap()).unwrap();
    let loss = resnet::NarrowResNet::loss(&logits, inputs.get("labels").unwrap()).unwrap();
    check_first_step("resnet_tiny", &model, &logits, loss);
    let expect = file("resnet_tiny", "expect");
    let mut worst_buffer = (0.0f64, String::new());
    for (name, b) in model.named_buffers() {
        let e = rel_l2(&b, expect.get(&format!("buffers_step1/{name}")).unwrap());
        if e > worst_buffer.0 {
            worst_buffer = (e, name);
        }
    }
    println!("resnet_tiny: worst running statistic rel_l2 {:.2e} ({})", worst_buffer.0, worst_buffer.1);
    let rel = meta["suggested_tolerances"]["buffers_step1"]["rel_l2"].as_f64().unwrap();
    assert!(worst_buffer.0 <= rel, "buffer {} differs: {}", worst_buffer.1, worst_buffer.0);
}

/// `meta.json`'s optimizer, as torchfn's AdamW.
fn adamw(meta: &Json, params: Vec<Tensor>) -> AdamW {
    let o = &meta["optimizer"];
    let betas = o["betas"].as_array().unwrap();
    let options = AdamWOptions::new(o["lr"].as_f64().unwrap())
        .betas((betas[0].as_f64().unwrap(), betas[1].as_f64().unwrap()))
        .eps(o["eps"].as_f64().unwrap())
        .weight_decay(o["weight_decay"].as_f64().unwrap());
    AdamW::new(params, options).unwrap()
}

/// Checks every parameter after a step against `expect`'s `{stage}/<name>`: per element within
/// `atol` (the looser `atol_where_tiny_grad` where the step-1 gradient is tiny, see the README),
/// and, when the stage has one, the update's relative L2. Returns the largest error over its
/// tolerance, and where.
fn check_parameters(
    model: &dyn Module,
    expect: &StateDict,
    init: &StateDict,
    stage: &str,
    tol: &Json,
) -> (f64, String) {
    let tol = &tol[stage];
    let (atol, tiny, loose) = (
        tol["atol"].as_f64().unwrap(),
        tol["tiny_grad"].as_f64().unwrap(),
        tol["atol_where_tiny_grad"].as_f64().unwrap(),
    );
    let mut worst = (0.0f64, String::new());
    for (name, p) in model.named_parameters() {
        let (got, want) = (values(&p), values(expect.get(&format!("{stage}/{name}")).unwrap()));
        let grad = values(expect.get(&format!("grad/{name}")).unwrap());
        for ((g, w), dg) in got.iter().zip(&want).zip(&grad) {
            let allowed = if dg.abs() < tiny { loose } else { atol };
            let e = (g - w).abs() / allowed;
            if e > worst.0 {
                worst = (e, name.clone());
            }
        }
        if let Some(rel) = tol["update_rel_l2"].as_f64() {
            let start = values(init.get(&name).unwrap());
            let (num, den): (f64, f64) = got
                .iter()
                .zip(&want)
                .zip(&start)
                .fold((0.0, 0.0), |(n, d), ((g, w), s)| (n + ((g - s) - (w - s)).powi(2), d + (w - s).powi(2)));
            let e = (num.sqrt() / den.sqrt().max(f64::MIN_POSITIVE)) / rel;
            if e > worst.0 {
                worst = (e, format!("{name} (update)"));
            }
        }
    }
    worst
}

/// Three AdamW steps of `forward_loss` on `model`: the losses and parameters after steps 1 and 3.
fn train_three_steps(name: &str, model: &dyn Module, forward_loss: &dyn Fn() -> Tensor) {
    let meta = meta(name);
    let tol = &meta["suggested_tolerances"];
    let (init, expect) = (file(name, "init"), file(name, "expect"));
    let mut optimizer = adamw(&meta, model.parameters());
    let mut losses = Vec::new();
    let mut worst = Vec::new();
    for step in 1..=3 {
        optimizer.zero_grad(true).unwrap();
        let loss = forward_loss();
        losses.push(loss.item().unwrap().to_f64());
        loss.backward().unwrap();
        optimizer.step().unwrap();
        if step == 1 || step == 3 {
            worst.push((step, check_parameters(model, &expect, &init, &format!("step{step}"), tol)));
        }
    }
    let want = values(expect.get("losses").unwrap());
    let loss_error = losses.iter().zip(&want).map(|(g, w)| (g - w).abs() / w.abs()).fold(0.0, f64::max);
    println!("{name}: 3 AdamW steps, losses rel error {loss_error:.2e}, parameters (fraction of tolerance): {worst:?}");
    assert!(loss_error <= tol["losses"]["rtol"].as_f64().unwrap(), "losses {losses:?} against {want:?}");
    for (step, (e, where_)) in worst {
        assert!(e <= 1.0, "after step {step}, {where_} is off by {e} of the tolerance");
    }
}

#[test]
fn gpt_tiny_trains_like_pytorch_for_three_adamw_steps() {
    let meta = meta("gpt_tiny");
    let model = gpt::GPT2LMHeadModel::new(gpt_config(&meta), &Generator::new().manual_seed(0)).unwrap();
    model.load_state_dict(&file("gpt_tiny", "init"), true).unwrap();
    let inputs = file("gpt_tiny", "inputs");
    let forward_loss = || {
        let logits = model.forward(inputs.get("input_ids").unwrap()).unwrap();
        gpt::GPT2LMHeadModel::loss(&logits, inputs.get("targets").unwrap()).unwrap()
    };
    train_three_steps("gpt_tiny", &model, &forward_loss);
}

#[test]
fn resnet_tiny_trains_like_pytorch_for_three_adamw_steps() {
    let meta = meta("resnet_tiny");
    let model = resnet(&meta);
    model.load_state_dict(&file("resnet_tiny", "init"), true).unwrap();
    let inputs = file("resnet_tiny", "inputs");
    let forward_loss = || {
        let logits = model.forward(inputs.get("images").unwrap()).unwrap();
        resnet::NarrowResNet::loss(&logits, inputs.get("labels").unwrap()).unwrap()
    };
    train_three_steps("resnet_tiny", &model, &forward_loss);
    let expect = file("resnet_tiny", "expect");
    for (name, b) in model.named_buffers() {
        let e = rel_l2(&b, expect.get(&format!("buffers_step3/{name}")).unwrap());
        assert!(e <= meta["suggested_tolerances"]["buffers_step3"]["rel_l2"].as_f64().unwrap(), "{name}: {e}");
    }
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
    let meta_gpt = meta("gpt_tiny");
    let mut model = gpt::GPT2LMHeadModel::new(gpt_config(&meta_gpt), &Generator::new().manual_seed(0)).unwrap();
    model.load_state_dict(&file("gpt_tiny", "init"), true).unwrap();
    model.to_device(device).unwrap();
    let inputs = file("gpt_tiny", "inputs");
    let logits = model.forward(&on(inputs.get("input_ids").unwrap())).unwrap();
    let loss = gpt::GPT2LMHeadModel::loss(&logits, &on(inputs.get("targets").unwrap())).unwrap();
    assert_eq!(logits.device().unwrap(), device);
    check_first_step("gpt_tiny", &model, &logits, loss);

    let mut model = resnet(&meta("resnet_tiny"));
    model.load_state_dict(&file("resnet_tiny", "init"), true).unwrap();
    model.to_device(device).unwrap();
    let inputs = file("resnet_tiny", "inputs");
    let logits = model.forward(&on(inputs.get("images").unwrap())).unwrap();
    let loss = resnet::NarrowResNet::loss(&logits, &on(inputs.get("labels").unwrap())).unwrap();
    assert_eq!(logits.device().unwrap(), device);
    check_first_step("resnet_tiny", &model, &logits, loss);
}

/// On the GPU: three AdamW steps of the tiny GPT, optimizer state on the device, against
/// PyTorch's parameters after steps 1 and 3 with the same tolerances.
#[cfg(feature = "wgpu")]
#[test]
fn gpt_tiny_trains_like_pytorch_on_the_gpu() {
    let Some(device) = crate::gpu::gpu() else { return };
    let meta = meta("gpt_tiny");
    let mut model = gpt::GPT2LMHeadModel::new(gpt_config(&meta), &Generator::new().manual_seed(0)).unwrap();
    model.load_state_dict(&file("gpt_tiny", "init"), true).unwrap();
    model.to_device(device).unwrap();
    let inputs = file("gpt_tiny", "inputs");
    let on = |t: &Tensor| t.to_device(device, Some(DType::Int32), false, false).unwrap();
    let (ids, targets) = (on(inputs.get("input_ids").unwrap()), on(inputs.get("targets").unwrap()));
    let forward_loss = || {
        let logits = model.forward(&ids).unwrap();
        assert_eq!(logits.device().unwrap(), device);
        gpt::GPT2LMHeadModel::loss(&logits, &targets).unwrap()
    };
    train_three_steps("gpt_tiny", &model, &forward_loss);
}
