//! Checks the diffusers `UNet2DModel` port (`examples/models/unet.rs`) against a PyTorch 2.15
//! training reference (`tests/golden/workloads/unet_tiny` unless told otherwise): the module
//! tree, state_dict keys and parameter order, the output, loss and every gradient of one training
//! step, then three AdamW steps on the CPU, each within `meta.json`'s tolerances (the checks are
//! `examples/models/reference.rs`). Prints the worst errors, as fractions of their tolerances
//! (≤ 1 passes), with the time of a training step, and exits non-zero when a check fails.
//!
//! Run it with `cargo run --release --example unet`; `-- --device wgpu` checks the first step on
//! the GPU as well, `-- --workload NAME_OR_PATH` another reference of the same format (a folder
//! of `tests/golden/workloads` or a path, another block list's too).

use serde_json::Value as Json;
use torchfn::prelude::*;

/// The model (`examples/models/unet.rs`).
#[allow(dead_code)]
#[path = "models/unet.rs"]
pub mod unet;

/// PyTorch's references and the checks against them (`examples/models/reference.rs`).
#[allow(dead_code)]
#[path = "models/reference.rs"]
pub mod reference;

use reference::Batch;
use unet::{UNet2DConfig, UNet2DModel};

/// The reference folder this example checks by default.
pub const WORKLOAD: &str = "unet_tiny";

/// A model of the reference's config (initialised with its own seed; the checks load `init`).
pub fn model(config: &Json) -> Result<UNet2DModel> {
    UNet2DModel::new(&UNet2DConfig::from_json(config)?, &Generator::new().manual_seed(0))
}

/// The denoiser's output and its loss on the batch (`sample`, `timesteps`, the noise `target`).
pub fn forward_loss(model: &UNet2DModel, batch: &Batch) -> Result<(Tensor, Tensor)> {
    let output = model.call(batch.get("sample")?, batch.get("timesteps")?)?;
    let loss = UNet2DModel::loss(&output, batch.get("target")?)?;
    Ok((output, loss))
}

reference::entry_points!();
