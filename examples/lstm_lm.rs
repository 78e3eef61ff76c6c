//! Checks the word-language-model port (`examples/models/rnn_lm.rs`, PyTorch's `RNNModel` with
//! an `nn.LSTM` or `nn.GRU`) against a PyTorch 2.15 training reference
//! (`tests/golden/workloads/lstm_lm` unless told otherwise): the module tree, state_dict keys and
//! parameter order, the logits, loss and every gradient of one training step, then three AdamW
//! steps on the CPU, each within `meta.json`'s tolerances (the checks are
//! `examples/models/reference.rs`). Prints the worst errors, as fractions of their tolerances
//! (≤ 1 passes), with the time of a training step, and exits non-zero when a check fails.
//!
//! Run it with `cargo run --release --example lstm_lm`; `-- --device wgpu` checks the first step
//! on the GPU as well, `-- --workload NAME_OR_PATH` another reference of the same format (a
//! folder of `tests/golden/workloads` or a path, a GRU's too).

use serde_json::Value as Json;
use torchfn::nn::Forward;
use torchfn::prelude::*;

/// The model (`examples/models/rnn_lm.rs`).
#[allow(dead_code)]
#[path = "models/rnn_lm.rs"]
pub mod rnn_lm;

/// PyTorch's references and the checks against them (`examples/models/reference.rs`).
#[allow(dead_code)]
#[path = "models/reference.rs"]
pub mod reference;

use reference::Batch;
use rnn_lm::{RNNModel, RnnConfig};

/// The reference folder this example checks by default.
pub const WORKLOAD: &str = "lstm_lm";

/// A model of the reference's config (initialised with its own seed; the checks load `init`).
pub fn model(config: &Json) -> Result<RNNModel> {
    RNNModel::new(&RnnConfig::from_json(config)?, &Generator::new().manual_seed(0))
}

/// The logits and the loss of the model on the batch (`input_ids`, next-token `targets`).
pub fn forward_loss(model: &RNNModel, batch: &Batch) -> Result<(Tensor, Tensor)> {
    let logits = model.forward(batch.get("input_ids")?)?;
    let loss = RNNModel::loss(&logits, batch.get("targets")?)?;
    Ok((logits, loss))
}

reference::entry_points!();
