//! Checks the LLaMA port (`examples/models/llama.rs`, transformers' `LlamaForCausalLM`) against
//! PyTorch 2.15's training reference `tests/golden/workloads/llama_tiny`: the module tree,
//! state_dict keys and parameter order, the logits, loss and every gradient of one training step,
//! then three AdamW steps, each within `meta.json`'s tolerances. Prints the worst errors, as
//! fractions of their tolerances (≤ 1 passes).
//!
//! Run it with `cargo run --release --example llama`; `-- --device wgpu` checks the first step
//! on the GPU as well.

use torchfn::Device;
use torchfn::nn::{Forward, Module};
use torchfn::prelude::*;

/// The model (`examples/models/llama.rs`).
#[allow(dead_code)]
#[path = "models/llama.rs"]
pub mod llama;

/// PyTorch's reference and the checks against it (`examples/models/reference.rs`).
#[allow(dead_code)]
#[path = "models/reference.rs"]
pub mod reference;

use reference::Reference;

/// The reference folder this example checks.
pub const WORKLOAD: &str = "llama_tiny";

/// A model of the reference's config (initialised with its own seed; the checks load `init`).
pub fn model(reference: &Reference) -> Result<llama::LlamaForCausalLM, String> {
    let config = llama::LlamaConfig::from_json(reference.config()).map_err(|e| e.to_string())?;
    llama::LlamaForCausalLM::new(&config, &Generator::new().manual_seed(0)).map_err(|e| e.to_string())
}

/// `t` on `device`, integers as the device's index dtype (wgpu has no int64).
fn on(t: &Tensor, device: Device) -> Result<Tensor, String> {
    let dtype = (t.dtype().map_err(|e| e.to_string())? == DType::Int64).then(|| device.index_dtype());
    t.to_device(device, dtype, false, false).map_err(|e| e.to_string())
}

/// The logits and the loss of the model on the reference's batch.
fn forward_loss(model: &llama::LlamaForCausalLM, input_ids: &Tensor, targets: &Tensor) -> Result<(Tensor, Tensor)> {
    let logits = model.forward(input_ids)?;
    let loss = llama::LlamaForCausalLM::loss(&logits, targets)?;
    Ok((logits, loss))
}

/// Checks the port on `device`: structure and loading, then one training step's logits, loss
/// and gradients there; with `train`, three AdamW steps of a fresh model on the CPU. A short
/// report of the worst errors, or what differs.
pub fn check(device: Device, train: bool) -> Result<String, String> {
    let reference = Reference::load(WORKLOAD);
    let mut model = model(&reference)?;
    reference.check_structure_and_load(&model)?;
    model.to_device(device).map_err(|e| e.to_string())?;
    model.train(true);
    let (input_ids, targets) = (on(reference.input("input_ids"), device)?, on(reference.input("targets"), device)?);
    let (logits, loss) = forward_loss(&model, &input_ids, &targets).map_err(|e| e.to_string())?;
    if logits.device().map_err(|e| e.to_string())? != device {
        return Err(format!("{WORKLOAD}: the logits are not on {device}"));
    }
    let step = reference.check_first_step(&model, &logits, loss)?;
    let on_device = if device.is_cpu() { device.to_string() } else { format!("{device} ({})", device.describe()) };
    let mut report = format!(
        "{WORKLOAD} on {on_device}: module tree, state_dict keys and parameter order as PyTorch's; init loaded\n  \
         first step, worst errors as fractions of the tolerances: logits {:.1e}, loss {:.1e}, gradients {:.1e} ({})",
        step.logits, step.loss, step.worst_grad.0, step.worst_grad.1
    );
    if train {
        let model = self::model(&reference)?;
        model.load_state_dict(&reference.init, true).map_err(|e| e.to_string())?;
        model.train(true);
        let (input_ids, targets) = (reference.input("input_ids"), reference.input("targets"));
        let step = || -> Result<Tensor> {
            let (_, loss) = forward_loss(&model, input_ids, targets)?;
            Ok(loss)
        };
        let training = reference.train_three_steps(&model, &step)?;
        let parameters: Vec<String> =
            training.parameters.iter().map(|(s, (e, name))| format!("after step {s} {e:.1e} ({name})")).collect();
        report += &format!(
            "\n  three AdamW steps on the CPU, worst errors as fractions of the tolerances: losses {:.1e}, parameters \
             {}",
            training.losses,
            parameters.join(", ")
        );
    }
    Ok(report)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let gpu =
        args.windows(2).any(|w| w[0] == "--device" && w[1] == "wgpu") || args.iter().any(|a| a == "--device=wgpu");
    let mut runs = vec![(Ok(Device::CPU), true)];
    if gpu {
        runs.push((Device::wgpu().map_err(|e| format!("no wgpu device: {e}")), false));
    }
    for (device, train) in runs {
        match device.and_then(|d| check(d, train)) {
            Ok(report) => println!("{report}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
    }
}
