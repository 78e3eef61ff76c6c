//! The training benches' workloads, shared by `training` (on the CPU) and `gpu_bench` (on the
//! GPU): a model, its AdamW optimizer and its batch, on one device.

use torchfn::Device;
use torchfn::nn::{Layer, Module, StateDict};
use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
use torchfn::prelude::*;

#[allow(dead_code)]
#[path = "../../examples/models/gpt.rs"]
mod gpt;

#[allow(dead_code)]
#[path = "../../examples/models/resnet.rs"]
mod resnet;

fn golden(name: &str, file: &str) -> StateDict {
    let path = format!("{}/tests/golden/workloads/{name}/{file}.safetensors", env!("CARGO_MANIFEST_DIR"));
    torchfn::safetensors::load_file(path).unwrap()
}

/// The forward pass and the loss of a model on a batch.
type LossFn = fn(&dyn Layer, &StateDict) -> Tensor;

/// A model, its optimizer and batch: [`Workload::step`] is one training step.
pub struct Workload {
    model: Box<dyn Layer>,
    /// The forward pass and the loss, from the model and the batch.
    loss: LossFn,
    optimizer: AdamW,
    inputs: StateDict,
}

impl Workload {
    /// The two reference workloads of `tests/golden/workloads` (`gpt_tiny`, `resnet_tiny`),
    /// and the CPU speed issue's larger two: `gpt_small` (GPT-2 with 4 layers, 128 wide, 4
    /// heads, vocab 128, batch 4 × 32) and `resnet18` (full widths, 10 classes, batch 8 ×
    /// 3×32×32), with the model and the batch on `device` (integer inputs in its index dtype).
    pub fn new(name: &str, device: Device) -> Workload {
        let g = Generator::new().manual_seed(0);
        let gpt_loss: LossFn = |m, inputs| {
            let logits = m.forward(inputs.get("input_ids").unwrap()).unwrap();
            gpt::GPT2LMHeadModel::loss(&logits, inputs.get("targets").unwrap()).unwrap()
        };
        let resnet_loss: LossFn = |m, inputs| {
            let logits = m.forward(inputs.get("images").unwrap()).unwrap();
            resnet::NarrowResNet::loss(&logits, inputs.get("labels").unwrap()).unwrap()
        };
        let gpt = |n_layer, n_embd| {
            let config = gpt::GptConfig { n_layer, n_head: 4, n_embd, vocab_size: 128, n_positions: 32, dropout: 0.0 };
            Box::new(gpt::GPT2LMHeadModel::new(config, &g).unwrap()) as Box<dyn Layer>
        };
        let tokens = |shape: [usize; 2]| {
            let mut inputs = StateDict::new();
            for key in ["input_ids", "targets"] {
                inputs.insert(key, torchfn::randint(128, shape, g.clone(), None, None).unwrap());
            }
            inputs
        };
        let (mut model, loss, inputs): (Box<dyn Layer>, LossFn, StateDict) = match name {
            "gpt_tiny" => {
                let model = gpt(2, 64);
                model.load_state_dict(&golden(name, "init"), true).unwrap();
                (model, gpt_loss, golden(name, "inputs"))
            }
            "gpt_small" => (gpt(4, 128), gpt_loss, tokens([4, 32])),
            "resnet_tiny" => {
                let model = resnet::NarrowResNet::new([1, 1, 1, 1], [16, 32, 64, 128], 10, &g).unwrap();
                model.load_state_dict(&golden(name, "init"), true).unwrap();
                (Box::new(model), resnet_loss, golden(name, "inputs"))
            }
            _ => {
                let model = resnet::NarrowResNet::new([2, 2, 2, 2], [64, 128, 256, 512], 10, &g).unwrap();
                let mut inputs = StateDict::new();
                inputs.insert("images", torchfn::randn([8, 3, 32, 32], g.clone(), None, None).unwrap());
                inputs.insert("labels", torchfn::randint(10, [8], g.clone(), None, None).unwrap());
                (Box::new(model), resnet_loss, inputs)
            }
        };
        model.to_device(device).unwrap();
        let mut moved = StateDict::new();
        for key in inputs.keys() {
            let t = inputs.get(key).unwrap();
            let dtype = (t.dtype().unwrap() == DType::Int64).then(|| device.index_dtype());
            moved.insert(key, t.to_device(device, dtype, false, false).unwrap());
        }
        let optimizer =
            AdamW::new(model.parameters(), AdamWOptions::new(1e-3).betas((0.9, 0.999)).eps(1e-8).weight_decay(0.01))
                .unwrap();
        Workload { model, loss, optimizer, inputs: moved }
    }

    /// The loss of a forward pass, with the gradients cleared first.
    pub fn forward(&mut self) -> Tensor {
        self.optimizer.zero_grad(true).unwrap();
        (self.loss)(&*self.model, &self.inputs)
    }

    /// The model's parameters, each with the gradient of one forward and backward pass.
    pub fn parameters_with_gradients(&mut self) -> Vec<Tensor> {
        self.forward().backward().unwrap();
        self.model.parameters()
    }

    /// One training step: forward, loss, backward, AdamW.
    pub fn step(&mut self) {
        self.forward().backward().unwrap();
        self.optimizer.step().unwrap();
    }
}
