//! Checks the word-language-model port (`examples/models/rnn_lm.rs`, PyTorch's `RNNModel` with
//! an `nn.LSTM` or `nn.GRU`) against PyTorch's reference `tests/golden/workloads/lstm_lm`: the
//! module tree and state_dict keys, loading `init.safetensors`, the logits, loss and every
//! gradient of one training step, and three AdamW steps on the CPU, each within `meta.json`'s
//! tolerances; then times the training step. Prints the worst errors as fractions of their
//! tolerances (≤ 1 passes) and exits non-zero when a check fails.
//!
//! Run it with `cargo run --release --example lstm_lm`; `-- --device wgpu` also runs the first
//! step on the GPU.

use std::time::Instant;

use torchfn::Device;
use torchfn::nn::{Forward, Module};
use torchfn::optim::Optimizer;
use torchfn::prelude::*;

/// The model.
#[allow(dead_code)]
#[path = "models/rnn_lm.rs"]
pub mod rnn_lm;

/// PyTorch's references and the checks against them.
#[allow(dead_code)]
#[path = "models/reference.rs"]
pub mod reference;

use reference::Reference;
use rnn_lm::{RNNModel, RnnConfig};

/// The reference's folder.
const NAME: &str = "lstm_lm";

/// The model of the reference's config, checked against PyTorch's structure and loaded with its
/// initial state.
fn loaded(reference: &Reference) -> Result<RNNModel, String> {
    let config = RnnConfig::from_json(reference.config()).map_err(|e| e.to_string())?;
    let model = RNNModel::new(&config, &Generator::new().manual_seed(0)).map_err(|e| e.to_string())?;
    reference.check_structure_and_load(&model)?;
    model.train(true);
    Ok(model)
}

/// The median time of one training step (zero_grad, forward, loss, backward, AdamW step) over
/// `steps` steps after one warm-up step, in milliseconds, on a fresh model on the CPU.
fn step_time(reference: &Reference, steps: usize) -> Result<f64, String> {
    let model = loaded(reference)?;
    let mut optimizer = reference.adamw(model.parameters());
    let (ids, targets) = (reference.input("input_ids"), reference.input("targets"));
    let mut times = Vec::new();
    for step in 0..=steps {
        let start = Instant::now();
        optimizer.zero_grad(true).map_err(|e| e.to_string())?;
        let loss = model.forward(ids).and_then(|l| RNNModel::loss(&l, targets)).map_err(|e| e.to_string())?;
        loss.backward().map_err(|e| e.to_string())?;
        optimizer.step().map_err(|e| e.to_string())?;
        if step > 0 {
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// Checks the port on `device`: structure and loading, then one training step's logits, loss
/// and gradients computed there; with `train`, three AdamW steps of a fresh model on the CPU and
/// the time of a training step. A short report of the worst errors (fractions of their
/// tolerances), or what failed.
pub fn check(device: Device, train: bool) -> Result<String, String> {
    let reference = Reference::load(NAME);
    let mut model = loaded(&reference)?;
    model.to_device(device).map_err(|e| e.to_string())?;
    // Token ids as the device's integer type (wgpu has no int64).
    let on = |t: &Tensor| -> Result<Tensor, String> {
        let dtype = (t.dtype().map_err(|e| e.to_string())? == DType::Int64).then(|| device.index_dtype());
        t.to_device(device, dtype, false, false).map_err(|e| e.to_string())
    };
    let (ids, targets) = (on(reference.input("input_ids"))?, on(reference.input("targets"))?);
    let logits = model.forward(&ids).map_err(|e| e.to_string())?;
    let loss = RNNModel::loss(&logits, &targets).map_err(|e| e.to_string())?;
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
        let (ids, targets) = (reference.input("input_ids"), reference.input("targets"));
        let forward_loss = || {
            let logits = model.forward(ids)?;
            RNNModel::loss(&logits, targets)
        };
        let training = reference.train_three_steps(&model, &forward_loss)?;
        report += &format!("\n{NAME} training on cpu: losses {:.2e}", training.losses);
        for (step, (error, name)) in &training.parameters {
            report += &format!(", step {step} parameters {error:.2e} ({name})");
        }
        let ms = step_time(&reference, 5)?;
        let torch = reference.meta["step_time"]["median_ms"].as_f64().unwrap_or(f64::NAN);
        report += &format!("\n{NAME} training step on cpu: {ms:.1} ms (median of 5; PyTorch: {torch} ms)");
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
