//! Checks the ViT port (`examples/models/vit.rs`, transformers' `ViTForImageClassification`)
//! against a PyTorch 2.15 training reference (`tests/golden/workloads/vit_tiny` unless told
//! otherwise): the module tree, state_dict keys and parameter order, the logits, loss and every
//! gradient of one training step, then three AdamW steps on the CPU, each within `meta.json`'s
//! tolerances (the checks are `examples/models/reference.rs`). Prints the worst errors, as
//! fractions of their tolerances (≤ 1 passes), with the time of a training step, and exits
//! non-zero when a check fails.
//!
//! Run it with `cargo run --release --example vit`; `-- --device wgpu` checks the first step on
//! the GPU as well, `-- --workload NAME_OR_PATH` another reference of the same format (a folder
//! of `tests/golden/workloads` or a path).

use serde_json::Value as Json;
use torchfn::nn::Forward;
use torchfn::prelude::*;

/// The model (`examples/models/vit.rs`).
#[allow(dead_code)]
#[path = "models/vit.rs"]
pub mod vit;

/// PyTorch's references and the checks against them (`examples/models/reference.rs`).
#[allow(dead_code)]
#[path = "models/reference.rs"]
pub mod reference;

use reference::Batch;
use vit::{ViTConfig, ViTForImageClassification};

/// The reference folder this example checks by default.
pub const WORKLOAD: &str = "vit_tiny";

/// A model of the reference's config (initialised with its own seed; the checks load `init`).
pub fn model(config: &Json) -> Result<ViTForImageClassification> {
    ViTForImageClassification::new(&ViTConfig::from_json(config)?, &Generator::new().manual_seed(0))
}

/// The logits and the loss of the model on the batch (`pixel_values`, class `labels`).
pub fn forward_loss(model: &ViTForImageClassification, batch: &Batch) -> Result<(Tensor, Tensor)> {
    let logits = model.forward(batch.get("pixel_values")?)?;
    let loss = ViTForImageClassification::loss(&logits, batch.get("labels")?)?;
    Ok((logits, loss))
}

reference::entry_points!();
