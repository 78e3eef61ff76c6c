//! Checks the diffusers `UNet2DModel` port (`examples/models/unet.rs`) against PyTorch 2.15's
//! training reference `tests/golden/workloads/unet_tiny`: the module tree, state_dict keys and
//! parameter names, the output, loss and every gradient of one training step, and three AdamW
//! steps, each within `meta.json`'s tolerances. Prints the worst errors as fractions of their
//! tolerances (≤ 1 passes).
//!
//! Run it with `cargo run --release --example unet`; add `-- --device wgpu` to run the first
//! step on the GPU as well (the three AdamW steps run on the CPU).

use torchfn::Device;
use torchfn::nn::Module;
use torchfn::prelude::*;

/// The model (`examples/models/unet.rs`).
#[allow(dead_code)]
#[path = "models/unet.rs"]
pub mod unet;

/// PyTorch's references and the checks against them (`examples/models/reference.rs`).
#[allow(dead_code)]
#[path = "models/reference.rs"]
pub mod reference;

use reference::Reference;
use unet::{UNet2DConfig, UNet2DModel};

/// A model of the reference's config, loaded with its `init.safetensors` after checking the
/// module tree, state_dict keys and parameter names against PyTorch's.
fn loaded_model(r: &Reference) -> Result<UNet2DModel, String> {
    let config = UNet2DConfig::from_json(r.config()).map_err(|e| e.to_string())?;
    let model = UNet2DModel::new(&config, &Generator::new().manual_seed(0)).map_err(|e| e.to_string())?;
    r.check_structure_and_load(&model)?;
    Ok(model)
}

/// Builds `unet_tiny` from its config, checks its structure and loads PyTorch's initial weights,
/// runs one training step's forward, loss and backward on `device` against PyTorch's, and, when
/// `train`, three AdamW steps on the CPU from a fresh model. A short report of the worst errors
/// (as fractions of their tolerances), or what differs.
pub fn check(device: Device, train: bool) -> Result<String, String> {
    check_workload("unet_tiny", device, train)
}

/// [`check`] for the reference `tests/golden/workloads/<name>` of another `UNet2DModel` config.
pub fn check_workload(name: &str, device: Device, train: bool) -> Result<String, String> {
    let r = Reference::load(name);
    let mut model = loaded_model(&r)?;
    model.train(true);
    model.to_device(device).map_err(|e| e.to_string())?;
    // Inputs on the device; int64 timesteps as the device's integer type (wgpu has no int64).
    let on = |key: &str| -> Result<Tensor, String> {
        let t = r.input(key);
        let dtype = (t.dtype().map_err(|e| e.to_string())? == DType::Int64).then(|| device.index_dtype());
        t.to_device(device, dtype, false, false).map_err(|e| e.to_string())
    };
    let (sample, timesteps, target) = (on("sample")?, on("timesteps")?, on("target")?);
    let forward_loss = |model: &UNet2DModel| -> torchfn::Result<(Tensor, Tensor)> {
        let output = model.call(&sample, &timesteps)?;
        let loss = UNet2DModel::loss(&output, &target)?;
        Ok((output, loss))
    };
    let (output, loss) = forward_loss(&model).map_err(|e| e.to_string())?;
    if output.device().map_err(|e| e.to_string())? != device {
        return Err("the output is not on the model's device".into());
    }
    let step = r.check_first_step(&model, &output, loss)?;
    let mut report = format!(
        "{name} on {device:?}: output {:.3}, loss {:.3}, worst gradient {:.3} ({}) of the tolerances",
        step.logits, step.loss, step.worst_grad.0, step.worst_grad.1
    );
    if train {
        let model = loaded_model(&r)?;
        model.train(true);
        let (sample, timesteps, target) = (r.input("sample"), r.input("timesteps"), r.input("target"));
        let forward_loss = || {
            let output = model.call(sample, timesteps)?;
            UNet2DModel::loss(&output, target)
        };
        let training = r.train_three_steps(&model, &forward_loss)?;
        report += &format!("\n{name}, three AdamW steps on the CPU: losses {:.3}", training.losses);
        for (stage, (error, name)) in &training.parameters {
            report += &format!(", step {stage} parameters {error:.3} ({name})");
        }
        report += " of the tolerances";
    }
    Ok(report)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| args.windows(2).find(|w| w[0] == flag).map(|w| w[1].clone());
    let workload = value("--workload").unwrap_or_else(|| "unet_tiny".into());
    let mut runs = vec![(Ok(Device::CPU), true)];
    match value("--device").as_deref() {
        None | Some("cpu") => {}
        Some("wgpu") => runs.push((Device::wgpu().map_err(|e| format!("no wgpu device: {e}")), false)),
        Some(other) => {
            eprintln!("unet: unknown device {other:?} (cpu or wgpu)");
            std::process::exit(2);
        }
    }
    for (device, train) in runs {
        match device.and_then(|device| check_workload(&workload, device, train)) {
            Ok(report) => println!("{report}"),
            Err(e) => {
                eprintln!("unet: {e}");
                std::process::exit(1);
            }
        }
    }
}
