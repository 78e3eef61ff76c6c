//! Checks the BERT port (`examples/models/bert.rs`, transformers' `BertForMaskedLM`) against a
//! PyTorch 2.15 training reference (`tests/golden/workloads/bert_tiny` unless told otherwise):
//! the module tree, state_dict keys and parameter order, the logits, loss and every gradient of
//! one training step, then three AdamW steps on the CPU, each within `meta.json`'s tolerances
//! (the checks are `examples/models/reference.rs`). Prints the worst errors, as fractions of
//! their tolerances (≤ 1 passes), with the time of a training step, and exits non-zero when a
//! check fails.
//!
//! Run it with `cargo run --release --example bert`; `-- --device wgpu` checks the first step
//! on the GPU as well, `-- --workload NAME_OR_PATH` another reference of the same format (a
//! folder of `tests/golden/workloads` or a path).

use serde_json::Value as Json;
use torchfn::prelude::*;

/// The model (`examples/models/bert.rs`).
#[allow(dead_code)]
#[path = "models/bert.rs"]
pub mod bert;

/// PyTorch's references and the checks against them (`examples/models/reference.rs`).
#[allow(dead_code)]
#[path = "models/reference.rs"]
pub mod reference;

use bert::{BertConfig, BertForMaskedLM};
use reference::Batch;

/// The reference folder this example checks by default.
pub const WORKLOAD: &str = "bert_tiny";

/// A model of the reference's config (initialised with its own seed; the checks load `init`).
pub fn model(config: &Json) -> Result<BertForMaskedLM> {
    BertForMaskedLM::new(&BertConfig::from_json(config)?, &Generator::new().manual_seed(0))
}

/// The logits and the loss of the model on the batch: token ids, token types, padding mask,
/// and the masked positions' `labels` (-100 elsewhere).
pub fn forward_loss(model: &BertForMaskedLM, batch: &Batch) -> Result<(Tensor, Tensor)> {
    let (token_types, mask) = (batch.get("token_type_ids")?, batch.get("attention_mask")?);
    let logits = model.call(batch.get("input_ids")?, Some(token_types), Some(mask))?;
    let loss = BertForMaskedLM::loss(&logits, batch.get("labels")?)?;
    Ok((logits, loss))
}

reference::entry_points!();
