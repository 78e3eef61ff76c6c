//! PyTorch's word-language-model example (`examples/word_language_model/model.py`, `RNNModel`,
//! batch first) written with torchfn's modules, as a PyTorch user ports it: an embedding, a
//! multi-layer LSTM or GRU, and a linear decoder (tied to the embedding with `tie_weights`), with
//! dropout on the embeddings and on the recurrent output. The same module tree (`encoder`,
//! `rnn`, `decoder`) and parameter names (`rnn.weight_ih_l0`...), so PyTorch's `state_dict`
//! (safetensors) loads by key. Any size: vocabulary, embedding and hidden widths, layers.
//! `RNN_TANH` and `RNN_RELU` (an `nn.RNN`) are errors: torchfn has no `nn.RNN`.

use serde_json::Value as Json;
use torchfn::nn::{self, Dropout, Embedding, Forward, GRU, LSTM, Layer, Linear, Module};
use torchfn::prelude::*;

/// What the ports share (`examples/models/common.rs`): the loss and `module_enum!`.
#[macro_use]
#[path = "common.rs"]
pub mod common;

/// The typed config reader (`examples/models/config.rs`).
#[path = "config.rs"]
pub mod config;

use config::Config;

/// The recurrent cell (`rnn_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RnnType {
    /// `nn.LSTM`.
    Lstm,
    /// `nn.GRU`.
    Gru,
}

/// The model's settings (`RNNModel`'s arguments).
#[derive(Clone, Debug, PartialEq)]
pub struct RnnConfig {
    /// `"LSTM"` or `"GRU"`.
    pub rnn_type: RnnType,
    /// Vocabulary size.
    pub ntoken: usize,
    /// Embedding width.
    pub ninp: usize,
    /// Hidden width.
    pub nhid: usize,
    /// Recurrent layers.
    pub nlayers: usize,
    /// Dropout probability (embeddings, between recurrent layers, recurrent output).
    pub dropout: f64,
    /// Whether the decoder's weight is the embedding's (`tie_weights`; `nhid` must be `ninp`).
    pub tie_weights: bool,
    /// Whether inputs are `[B, T]` (`true`, this model's) or `[T, B]`.
    pub batch_first: bool,
}

impl RnnConfig {
    /// The settings of a JSON object of `RNNModel`'s arguments (`meta.json`'s `config`):
    /// `rnn_type`, `ntoken`, `ninp`, `nhid` and `nlayers` are required; `dropout` defaults to
    /// 0, `tie_weights` to false and `batch_first` to true.
    pub fn from_json(json: &Json) -> Result<RnnConfig> {
        let c = Config::new("RNNModel config", json)?;
        let rnn_type = match c.opt_string("rnn_type")?.as_deref() {
            Some("LSTM") => RnnType::Lstm,
            Some("GRU") => RnnType::Gru,
            Some(other @ ("RNN_TANH" | "RNN_RELU")) => {
                return Err(Error::not_implemented(format!(
                    "RNNModel: rnn_type {other:?} needs nn.RNN, which torchfn does not have (LSTM and GRU are \
                     supported)"
                )));
            }
            Some(other) => {
                return Err(c.error("rnn_type", format!("{other:?} is not one of LSTM, GRU, RNN_TANH and RNN_RELU")));
            }
            None => return Err(c.error("rnn_type", "is missing (LSTM or GRU)")),
        };
        Ok(RnnConfig {
            rnn_type,
            ntoken: c.usize("ntoken")?,
            ninp: c.usize("ninp")?,
            nhid: c.usize("nhid")?,
            nlayers: c.usize("nlayers")?,
            dropout: c.f64_or("dropout", 0.0)?,
            tie_weights: c.bool_or("tie_weights", false)?,
            batch_first: c.bool_or("batch_first", true)?,
        })
    }
}

module_enum! {
    /// The recurrent module: an `nn.LSTM` or an `nn.GRU` (PyTorch's `getattr(nn, rnn_type)(...)`),
    /// shown and saved as the module it holds.
    pub enum Recurrent {
        /// An LSTM.
        Lstm(LSTM),
        /// A GRU.
        Gru(GRU),
    }
}

impl Recurrent {
    /// The network on `input` from zero states, as one call of the module (its hooks see it):
    /// the output and the final states (`[h_n, c_n]` for an LSTM, `[h_n]` for a GRU).
    pub fn call(&self, input: &Tensor) -> Result<(Tensor, Vec<Tensor>)> {
        let mut out: Vec<Tensor> = nn::call_module(self.inner(), input.clone(), |x| match self {
            Recurrent::Lstm(m) => m.forward(&x, None).map(|(y, (h, c))| vec![y, h, c]),
            Recurrent::Gru(m) => m.forward(&x, None).map(|(y, h)| vec![y, h]),
        })?;
        let output = out.remove(0);
        Ok((output, out))
    }
}

/// Embedding, recurrent network and decoder (the word-language-model example's `RNNModel`).
#[derive(Module)]
pub struct RNNModel {
    drop: Dropout,
    /// Token embeddings (`nn.Embedding(ntoken, ninp)`).
    pub encoder: Embedding,
    /// The recurrent network (`nn.LSTM` or `nn.GRU`, `nlayers` of `nhid`).
    pub rnn: Recurrent,
    /// The output layer (`nn.Linear(nhid, ntoken)`; its weight the encoder's with `tie_weights`).
    pub decoder: Linear,
}

impl RNNModel {
    /// A model of `config`'s sizes with PyTorch's default initialisations (embedding normal(0,
    /// 1), recurrent weights uniform on `±1/√nhid`, decoder Kaiming uniform); with
    /// `tie_weights`, the decoder's weight is the embedding's.
    pub fn new(config: &RnnConfig, g: &Generator) -> Result<RNNModel> {
        let c = config;
        if c.ntoken == 0 || c.ninp == 0 || c.nhid == 0 || c.nlayers == 0 {
            return Err(Error::value_error(format!("RNNModel: sizes must be positive, got {c:?}")));
        }
        if c.tie_weights && c.nhid != c.ninp {
            return Err(Error::value_error(format!(
                "RNNModel: When using the tied flag, nhid must be equal to emsize (nhid {}, ninp {})",
                c.nhid, c.ninp
            )));
        }
        let rnn = match c.rnn_type {
            RnnType::Lstm => {
                Recurrent::Lstm(LSTM::new(c.ninp, c.nhid, c.nlayers, true, c.batch_first, c.dropout, false, g)?)
            }
            RnnType::Gru => {
                Recurrent::Gru(GRU::new(c.ninp, c.nhid, c.nlayers, true, c.batch_first, c.dropout, false, g)?)
            }
        };
        let encoder = Embedding::new(c.ntoken, c.ninp, g)?;
        let mut decoder = Linear::new(c.nhid, c.ntoken, true, g)?;
        if c.tie_weights {
            decoder.weight = encoder.weight.clone();
        }
        Ok(RNNModel { drop: Dropout::new(c.dropout)?, encoder, rnn, decoder })
    }

    /// The mean cross-entropy of `logits` `[.., ntoken]` against `targets` of the same leading
    /// shape (`F.cross_entropy(logits.reshape(-1, ntoken), targets.reshape(-1))`):
    /// [`common::lm_loss`].
    pub fn loss(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
        common::lm_loss(logits, targets)
    }
}

impl Forward for RNNModel {
    /// The logits `[B, T, ntoken]` (`[T, B, ntoken]` unless batch first) for token ids, from
    /// zero initial states.
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let emb = self.drop.call(&self.encoder.call(input)?)?;
        let (output, _) = self.rnn.call(&emb)?;
        self.decoder.call(&self.drop.call(&output)?)
    }
}
