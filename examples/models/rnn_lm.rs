//! PyTorch's word-language-model example (`examples/word_language_model/model.py`, `RNNModel`,
//! batch first) written with torchfn's modules, as a PyTorch user ports it: an embedding, a
//! multi-layer LSTM or GRU, and a linear decoder, with dropout on the embeddings and on the
//! recurrent output. The same module tree (`encoder`, `rnn`, `decoder`) and parameter names
//! (`rnn.weight_ih_l0`...), so PyTorch's `state_dict` (safetensors) loads by key. Any size:
//! vocabulary, embedding and hidden widths, layers.

use serde_json::Value as Json;
use torchfn::nn::{self, Dropout, Embedding, Forward, GRU, LSTM, Layer, Linear, Module, Visitor, VisitorMut};
use torchfn::prelude::*;

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
    /// Whether inputs are `[B, T]` (`true`, this model's) or `[T, B]`.
    pub batch_first: bool,
}

impl RnnConfig {
    /// The settings of a JSON object of `RNNModel`'s arguments (`meta.json`'s `config`):
    /// `rnn_type`, `ntoken`, `ninp`, `nhid` and `nlayers` are required; `dropout` defaults to 0
    /// and `batch_first` to true.
    pub fn from_json(config: &Json) -> Result<RnnConfig> {
        let bad = |key: &str, want: &str| Error::value_error(format!("RNNModel config: {key} must be {want}"));
        let count = |key: &str| -> Result<usize> {
            config.get(key).and_then(Json::as_u64).map(|n| n as usize).ok_or_else(|| bad(key, "a whole number"))
        };
        let rnn_type = match config.get("rnn_type").and_then(Json::as_str) {
            Some("LSTM") => RnnType::Lstm,
            Some("GRU") => RnnType::Gru,
            Some(other) => {
                return Err(Error::not_implemented(format!(
                    "RNNModel: rnn_type {other:?} is not supported (LSTM or GRU)"
                )));
            }
            None => return Err(bad("rnn_type", "\"LSTM\" or \"GRU\"")),
        };
        let dropout = match config.get("dropout") {
            None => 0.0,
            Some(v) => v.as_f64().ok_or_else(|| bad("dropout", "a number"))?,
        };
        let batch_first = match config.get("batch_first") {
            None => true,
            Some(v) => v.as_bool().ok_or_else(|| bad("batch_first", "true or false"))?,
        };
        Ok(RnnConfig {
            rnn_type,
            ntoken: count("ntoken")?,
            ninp: count("ninp")?,
            nhid: count("nhid")?,
            nlayers: count("nlayers")?,
            dropout,
            batch_first,
        })
    }
}

/// The recurrent module: an `nn.LSTM` or an `nn.GRU` (PyTorch's `getattr(nn, rnn_type)(...)`),
/// shown and saved as the module it holds.
pub enum Recurrent {
    /// An LSTM.
    Lstm(LSTM),
    /// A GRU.
    Gru(GRU),
}

impl Recurrent {
    fn inner(&self) -> &dyn Module {
        match self {
            Recurrent::Lstm(m) => m,
            Recurrent::Gru(m) => m,
        }
    }

    /// The network on `input` from zero states, as one call of the module (its hooks see it):
    /// the output and the final states (`[h_n, c_n]` for an LSTM, `[h_n]` for a GRU).
    pub fn call(&self, input: &Tensor) -> Result<(Tensor, Vec<Tensor>)> {
        let mut out: Vec<Tensor> = nn::call_module(self, input.clone(), |x| match self {
            Recurrent::Lstm(m) => m.forward(&x, None).map(|(y, (h, c))| vec![y, h, c]),
            Recurrent::Gru(m) => m.forward(&x, None).map(|(y, h)| vec![y, h]),
        })?;
        let output = out.remove(0);
        Ok((output, out))
    }
}

impl Module for Recurrent {
    fn visit<'m>(&'m self, visitor: &mut dyn Visitor<'m>) {
        match self {
            Recurrent::Lstm(m) => m.visit(visitor),
            Recurrent::Gru(m) => m.visit(visitor),
        }
    }
    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut) {
        match self {
            Recurrent::Lstm(m) => m.visit_mut(visitor),
            Recurrent::Gru(m) => m.visit_mut(visitor),
        }
    }
    fn type_name(&self) -> &'static str {
        self.inner().type_name()
    }
    fn extra_repr(&self) -> String {
        self.inner().extra_repr()
    }
    fn as_dyn(&self) -> &dyn Module {
        self
    }
}

impl std::fmt::Display for Recurrent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.repr())
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
    /// The output layer (`nn.Linear(nhid, ntoken)`).
    pub decoder: Linear,
}

impl RNNModel {
    /// A model of `config`'s sizes with PyTorch's default initialisations (embedding normal(0,
    /// 1), recurrent weights uniform on `±1/√nhid`, decoder Kaiming uniform).
    pub fn new(config: &RnnConfig, g: &Generator) -> Result<RNNModel> {
        let c = config;
        if c.ntoken == 0 || c.ninp == 0 || c.nhid == 0 || c.nlayers == 0 {
            return Err(Error::value_error(format!("RNNModel: sizes must be positive, got {c:?}")));
        }
        let rnn = match c.rnn_type {
            RnnType::Lstm => {
                Recurrent::Lstm(LSTM::new(c.ninp, c.nhid, c.nlayers, true, c.batch_first, c.dropout, false, g)?)
            }
            RnnType::Gru => {
                Recurrent::Gru(GRU::new(c.ninp, c.nhid, c.nlayers, true, c.batch_first, c.dropout, false, g)?)
            }
        };
        Ok(RNNModel {
            drop: Dropout::new(c.dropout)?,
            encoder: Embedding::new(c.ntoken, c.ninp, g)?,
            rnn,
            decoder: Linear::new(c.nhid, c.ntoken, true, g)?,
        })
    }

    /// The mean cross-entropy of `logits` `[.., ntoken]` against `targets` of the same leading
    /// shape (`F.cross_entropy(logits.reshape(-1, ntoken), targets.reshape(-1))`).
    pub fn loss(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
        let shape = logits.shape()?;
        let Some(&ntoken) = shape.last() else {
            return Err(Error::value_error("RNNModel::loss: logits must have a vocabulary dimension"));
        };
        nn::functional::cross_entropy(
            &logits.reshape(&[-1, ntoken as i64])?,
            &targets.reshape(&[-1])?,
            None,
            None,
            -100,
            None,
            "mean",
            0.0,
        )
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
