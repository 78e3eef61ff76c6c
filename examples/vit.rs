//! Checks the ViT port (`examples/models/vit.rs`, transformers' `ViTForImageClassification`)
//! against PyTorch's reference `tests/golden/workloads/vit_tiny`: the module tree and state_dict
//! keys, loading `init.safetensors`, the logits, loss and every gradient of one training step,
//! and three AdamW steps on the CPU, each within `meta.json`'s tolerances. Prints the worst errors
//! as fractions of their tolerances (≤ 1 passes) and exits non-zero when a check fails.
//!
//! Run it with `cargo run --release --example vit`; `-- --device wgpu` also runs the first step
//! on the GPU.

use torchfn::Device;
use torchfn::nn::{Forward, Module};
use torchfn::prelude::*;

/// The model.
#[allow(dead_code)]
#[path = "models/vit.rs"]
pub mod vit;

/// PyTorch's references and the checks against them.
#[allow(dead_code)]
#[path = "models/reference.rs"]
pub mod reference;

use reference::Reference;
use vit::{ViTConfig, ViTForImageClassification};

/// The reference's folder.
const NAME: &str = "vit_tiny";

/// The model of the reference's config, checked against PyTorch's structure and loaded with its
/// initial state.
fn loaded(reference: &Reference) -> Result<ViTForImageClassification, String> {
    let config = ViTConfig::from_json(reference.config()).map_err(|e| e.to_string())?;
    let model = ViTForImageClassification::new(&config, &Generator::new().manual_seed(0)).map_err(|e| e.to_string())?;
    reference.check_structure_and_load(&model)?;
    model.train(true);
    Ok(model)
}

/// Checks the port on `device`: structure and loading, then one training step's logits, loss
/// and gradients computed there; with `train`, three AdamW steps of a fresh model on the CPU.
/// A short report of the worst errors (fractions of their tolerances), or what failed.
pub fn check(device: Device, train: bool) -> Result<String, String> {
    let reference = Reference::load(NAME);
    let mut model = loaded(&reference)?;
    model.to_device(device).map_err(|e| e.to_string())?;
    // Labels as the device's integer type (wgpu has no int64).
    let on = |t: &Tensor| -> Result<Tensor, String> {
        let dtype = (t.dtype().map_err(|e| e.to_string())? == DType::Int64).then(|| device.index_dtype());
        t.to_device(device, dtype, false, false).map_err(|e| e.to_string())
    };
    let (pixels, labels) = (on(reference.input("pixel_values"))?, on(reference.input("labels"))?);
    let logits = model.forward(&pixels).map_err(|e| e.to_string())?;
    let loss = ViTForImageClassification::loss(&logits, &labels).map_err(|e| e.to_string())?;
    let step = reference.check_first_step(&model, &logits, loss)?;
    let mut report = format!(
        "{NAME} on {} ({}): logits {:.2e}, loss {:.2e}, worst gradient {:.2e} ({})",
        device.kind(),
        device.describe(),
        step.logits,
        step.loss,
        step.worst_grad.0,
        step.worst_grad.1
    );
    if train {
        let model = loaded(&reference)?;
        let (pixels, labels) = (reference.input("pixel_values"), reference.input("labels"));
        let forward_loss = || {
            let logits = model.forward(pixels)?;
            ViTForImageClassification::loss(&logits, labels)
        };
        let training = reference.train_three_steps(&model, &forward_loss)?;
        report += &format!("\n{NAME} training on cpu: losses {:.2e}", training.losses);
        for (step, (error, name)) in &training.parameters {
            report += &format!(", step {step} parameters {error:.2e} ({name})");
        }
    }
    Ok(report)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let gpu = match args.iter().position(|a| a == "--device").map(|i| args.get(i + 1).map(String::as_str)) {
        None | Some(Some("cpu")) => false,
        Some(Some("wgpu")) => true,
        Some(other) => {
            eprintln!("--device {other:?}: expected cpu or wgpu");
            std::process::exit(2);
        }
    };
    let mut runs = vec![(Ok(Device::CPU), true)];
    if gpu {
        runs.push((Device::wgpu().map_err(|e| e.to_string()), false));
    }
    for (device, train) in runs {
        match device.and_then(|device| check(device, train)) {
            Ok(report) => println!("{report}"),
            Err(e) => {
                eprintln!("{NAME} check failed: {e}");
                std::process::exit(1);
            }
        }
    }
}
