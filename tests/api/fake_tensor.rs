//! `torchfn::fake_tensor::FakeTensorMode`: a training step of each reference model under the
//! mode sees every intermediate with the shape and dtype of the real run, GPT-2 124M trains a
//! step on shapes alone, and what depends on values fails with PyTorch's error.

use std::cell::RefCell;
use std::rc::Rc;

use torchfn::Device;
use torchfn::dispatch::{Operator, TorchDispatchMode, push_dispatch_mode};
use torchfn::fake_tensor::FakeTensorMode;
use torchfn::nn::{Forward, Module};
use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
use torchfn::prelude::*;

use crate::examples::train_gpt::gpt;
use crate::workloads::{file, gpt_config, meta, resnet};

/// Records each operator call with the shapes and dtypes of its results.
#[derive(Default)]
struct Shapes(RefCell<Vec<String>>);

fn describe(value: &Value) -> String {
    match value {
        Value::Tensor(t) => format!("{}{:?}", t.dtype().unwrap(), t.shape().unwrap().to_vec()),
        Value::Tuple(items) | Value::List(items) => items.iter().map(describe).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

impl TorchDispatchMode for Shapes {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        let out = func.call(args, kwargs)?;
        self.0.borrow_mut().push(format!("{func} -> {}", describe(&out)));
        Ok(out)
    }
}

/// The operators of a step with their results' shapes and dtypes: run for real on a model
/// `make` builds, and under a fake tensor mode (the recorder above it) on another whose
/// parameters and buffers were moved to fakes, as PyTorch users build a model for fake runs.
fn real_and_fake<M: Module>(make: impl Fn() -> M, step: impl Fn(&M)) -> (Vec<String>, Vec<String>) {
    let model = make();
    let real = {
        let shapes = push_dispatch_mode(Shapes::default());
        step(&model);
        shapes.0.take()
    };
    let mut model = make();
    let fake = {
        // The model was built real: its tensors are converted as they come.
        let _fake = push_dispatch_mode(FakeTensorMode::new().allow_non_fake_inputs(true));
        model.to_device(Device::META).unwrap();
        let shapes = push_dispatch_mode(Shapes::default());
        step(&model);
        shapes.0.take()
    };
    (real, fake)
}

/// Whether a recorded call is part of a value check that only real tensors run (an index
/// range, a division by zero: the extremes, then their values read), not of the program.
fn checks_values(call: &str) -> bool {
    call.starts_with("aten._local_scalar_dense")
        || ["aten.amin.default -> ", "aten.amax.default -> ", "aten.all.dims -> "]
            .iter()
            .any(|op| call.starts_with(op) && call.ends_with("[]"))
}

/// Fails at the first call where the fake run differs from the real one (value checks left
/// out: fake tensors skip them).
fn same(real: &[String], fake: &[String]) {
    let real: Vec<String> = real.iter().filter(|c| !checks_values(c)).cloned().collect();
    assert!(fake.iter().all(|c| !checks_values(c)), "the fake run checked values");
    if let Some(i) = (0..real.len().max(fake.len())).find(|&i| real.get(i) != fake.get(i)) {
        panic!("call {i} of {}: real {:?}, fake {:?}", real.len(), real.get(i), fake.get(i));
    }
}

#[test]
fn every_intermediate_of_a_gpt_tiny_step_has_the_real_shape_and_dtype() {
    let meta = meta("gpt_tiny");
    let make = || {
        let model = gpt::GPT2LMHeadModel::new(gpt_config(&meta), &Generator::new().manual_seed(0)).unwrap();
        model.load_state_dict(&file("gpt_tiny", "init"), true).unwrap();
        model
    };
    let inputs = file("gpt_tiny", "inputs");
    let step = |model: &gpt::GPT2LMHeadModel| {
        let logits = model.forward(inputs.get("input_ids").unwrap()).unwrap();
        gpt::GPT2LMHeadModel::loss(&logits, inputs.get("targets").unwrap()).unwrap().backward().unwrap();
    };
    let (real, fake) = real_and_fake(make, step);
    assert!(real.len() > 200, "{} operator calls", real.len());
    same(&real, &fake);
}

#[test]
fn every_intermediate_of_a_resnet_tiny_step_has_the_real_shape_and_dtype() {
    let meta = meta("resnet_tiny");
    let make = || {
        let model = resnet(&meta);
        model.load_state_dict(&file("resnet_tiny", "init"), true).unwrap();
        model
    };
    let inputs = file("resnet_tiny", "inputs");
    let step = |model: &crate::workloads::resnet::NarrowResNet| {
        let logits = model.forward(inputs.get("images").unwrap()).unwrap();
        let loss = crate::workloads::resnet::NarrowResNet::loss(&logits, inputs.get("labels").unwrap()).unwrap();
        loss.backward().unwrap();
    };
    let (real, fake) = real_and_fake(make, step);
    assert!(real.len() > 100, "{} operator calls", real.len());
    same(&real, &fake);
}

/// GPT-2 124M's configuration.
fn gpt2_small() -> gpt::GptConfig {
    gpt::GptConfig { n_layer: 12, n_head: 12, n_embd: 768, vocab_size: 50257, n_positions: 1024, dropout: 0.0 }
}

#[test]
fn gpt2_124m_trains_a_step_on_shapes_alone() {
    let fake = push_dispatch_mode(FakeTensorMode::new());
    let model = {
        let _meta = torchfn::default_device(Device::META);
        gpt::GPT2LMHeadModel::new(gpt2_small(), &Generator::new().manual_seed(0)).unwrap()
    };
    let parameters: usize = model.parameters().iter().map(|p| p.shape().unwrap().iter().product::<usize>()).sum();
    assert_eq!(parameters, 124_439_808, "GPT-2 small's parameters (the head tied to the embedding)");
    let mut optimizer = AdamW::new(model.parameters(), AdamWOptions::new(6e-4)).unwrap();
    let ids = torchfn::zeros([8, 1024], DType::Int64, Device::META).unwrap();
    let logits = model.forward(&ids).unwrap();
    assert_eq!(logits.shape().unwrap(), [8, 1024, 50257]);
    let loss = gpt::GPT2LMHeadModel::loss(&logits, &ids).unwrap();
    loss.backward().unwrap();
    optimizer.step().unwrap();
    // The logits alone are 8 x 1024 x 50257 float32s: 1.65 GB; none of it was allocated.
    let peak = fake.peak_bytes();
    assert!(peak > 8 * 1024 * 50257 * 4, "peak {peak} bytes");
    println!("GPT-2 124M step under FakeTensorMode: peak {:.2} GB", peak as f64 / 1e9);
}

#[test]
fn what_depends_on_values_fails_with_pytorch_s_error() {
    let real = torchfn::tensor([1.0f32, 2.0]).unwrap();
    let fake = push_dispatch_mode(FakeTensorMode::new());
    let x = fake.from_tensor(&real).unwrap();
    let y = (&x * 2.0).unwrap();
    let err = y.sum().unwrap().item().unwrap_err();
    assert!(err.to_string().starts_with("DataDependentOutputException: aten._local_scalar_dense.default"), "{err}");
    // A bool mask's positions (aten.nonzero) make an output whose shape depends on values.
    let mask = y.gt(&torchfn::Tensor::scalar(2.0)).unwrap();
    let err = y.get(&mask).unwrap_err();
    assert!(err.to_string().starts_with("DynamicOutputShapeException: aten.nonzero.default"), "{err}");
}

#[test]
fn conversion_is_memoised_and_views_keep_aliasing() {
    let mode = FakeTensorMode::new();
    let base = torchfn::ones([4, 6], None, None).unwrap();
    let view = base.t().unwrap();
    let (fake_base, fake_view) = (mode.from_tensor(&base).unwrap(), mode.from_tensor(&view).unwrap());
    assert!(torchfn::ById::new(&mode.from_tensor(&base).unwrap()) == torchfn::ById::new(&fake_base));
    assert_eq!(fake_view.shape().unwrap(), [6, 4]);
    assert!(fake_view.base().unwrap().is_some_and(|b| torchfn::ById::new(&b) == torchfn::ById::new(&fake_base)));
    let _ = Rc::new(mode);
}

#[test]
fn fake_tensors_report_the_device_they_stand_for_and_refuse_real_ones() {
    let real = torchfn::ones([2, 3], None, None).unwrap();
    let fake = push_dispatch_mode(FakeTensorMode::new());
    let x = fake.from_tensor(&real).unwrap();
    assert_eq!(x.device().unwrap(), Device::CPU);
    let y = (&x * 2.0).unwrap().sum_dim(1, false).unwrap();
    assert_eq!((y.device().unwrap(), y.to_string()), (Device::CPU, "FakeTensor(..., size=(2,))".to_string()));
    // Made from data under the mode: fake from the start, standing for the CPU.
    let made = torchfn::tensor([1.0f32, 2.0, 3.0]).unwrap();
    assert_eq!(made.to_string(), "FakeTensor(..., size=(3,))");
    // PyTorch's refusal of a real tensor met as an argument.
    let err = (&real + &x).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "Please convert all Tensors to FakeTensors first or instantiate FakeTensorMode with \
             'allow_non_fake_inputs'. Found in aten.add.Tensor(tensor([[1., 1., 1.],"
        ),
        "{err}"
    );
    drop(fake);
    let lenient = push_dispatch_mode(FakeTensorMode::new().allow_non_fake_inputs(true));
    let z = (&real + &real).unwrap();
    assert_eq!((z.device().unwrap(), z.to_string()), (Device::CPU, "FakeTensor(..., size=(2, 3))".to_string()));
    drop(lenient);
}

#[test]
fn index_put_and_embedding_s_max_norm_run_on_shapes_alone() {
    let fake = push_dispatch_mode(FakeTensorMode::new());
    let x = fake.from_tensor(&torchfn::zeros([5, 3], None, None).unwrap()).unwrap();
    let idx = torchfn::tensor([0i64, 2, 2]).unwrap();
    let v = torchfn::ones([3, 3], None, None).unwrap();
    let put = torchfn::index_put(&x, std::slice::from_ref(&idx), &v, false).unwrap();
    assert_eq!(
        (put.shape().unwrap().to_vec(), put.to_string()),
        (vec![5, 3], "FakeTensor(..., size=(5, 3))".to_string())
    );
    let rows = torchfn::nn::functional::embedding(&idx, &x, None, Some(1.0), 2.0, false, false).unwrap();
    assert_eq!(rows.shape().unwrap(), [3, 3]);
}

#[test]
fn lift_fresh_called_by_hand_under_the_mode_binds_its_arguments() {
    let _fake = push_dispatch_mode(FakeTensorMode::new());
    // A number where the tensor goes is bound as a wrapped number, as everywhere.
    let out = torchfn::dispatch::aten::LIFT_FRESH.call(&[Value::Int(1)], &Kwargs::new()).unwrap();
    assert_eq!(out.as_tensor().unwrap().shape().unwrap(), []);
    let err = torchfn::dispatch::aten::LIFT_FRESH.call(&[], &Kwargs::new()).unwrap_err();
    assert!(err.to_string().contains("lift_fresh"), "{err}");
}

#[cfg(feature = "wgpu")]
#[test]
fn fake_tensors_of_two_devices_do_not_mix() {
    let Some(gpu) = crate::gpu::gpu() else { return };
    let (a, b) = (torchfn::ones([2], None, None).unwrap(), torchfn::ones([2], None, gpu).unwrap());
    let fake = push_dispatch_mode(FakeTensorMode::new());
    let (fa, fb) = (fake.from_tensor(&a).unwrap(), fake.from_tensor(&b).unwrap());
    assert_eq!(fb.device().unwrap(), gpu);
    assert_eq!(fb.exp().unwrap().device().unwrap(), gpu);
    let err = (&fa + &fb).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("Unhandled FakeTensor Device Propagation for aten.add.Tensor, found two different devices cpu, {gpu}")
    );
}
