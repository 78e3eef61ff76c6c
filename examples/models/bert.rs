//! BERT with its masked-language-model head (transformers' `BertForMaskedLM`, eager attention)
//! written with torchfn's modules, as a PyTorch user ports it: the same module tree, parameter
//! names and forward, so PyTorch's `state_dict` (safetensors) loads by key. Word, position and
//! token type embeddings (the word embeddings with `padding_idx`), post-norm encoder layers with
//! any of transformers' activations (exact, erf GELU by default), the padding mask added to the
//! scores (float32's lowest value where a key is padding), and the head whose decoder weight is
//! the word embeddings and whose decoder bias is `cls.predictions.bias` (both its own with
//! `tie_word_embeddings: false`). Any size: layers, heads, widths, vocabulary, context, token
//! types.

use std::fmt;

use torchfn::nn::{
    self, Buffer, Dropout, Embedding, Forward, Layer, LayerNorm, Linear, Module, ModuleField, Parameter, Visitor,
    VisitorMut,
};
use torchfn::prelude::*;

/// transformers' activations (`examples/models/activations.rs`).
#[path = "activations.rs"]
pub mod activations;

/// What the ports share (`examples/models/common.rs`).
#[path = "common.rs"]
pub mod common;

/// The typed config reader (`examples/models/config.rs`).
#[path = "config.rs"]
pub mod config;

use activations::Activation;
use common::{eager_attention, heads, normal_embedding, normal_linear};
use config::Config;

/// The model's sizes and settings (`BertConfig`).
#[derive(Clone, Debug)]
pub struct BertConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Width of the hidden states.
    pub hidden_size: usize,
    /// Encoder layers.
    pub num_hidden_layers: usize,
    /// Attention heads per layer.
    pub num_attention_heads: usize,
    /// Width of the feed-forward part.
    pub intermediate_size: usize,
    /// Longest input.
    pub max_position_embeddings: usize,
    /// Token types (segments).
    pub type_vocab_size: usize,
    /// Dropout probability on the embeddings and the layers' outputs.
    pub hidden_dropout_prob: f64,
    /// Dropout probability on the attention weights.
    pub attention_probs_dropout_prob: f64,
    /// The layer norms' epsilon.
    pub layer_norm_eps: f64,
    /// The activation (a name of transformers' `ACT2FN`, see `activations.rs`).
    pub hidden_act: String,
    /// The word embedding row of the padding token (`pad_token_id`, 0 by default).
    pub pad_token_id: Option<usize>,
    /// The standard deviation of the initial weights (`initializer_range`).
    pub initializer_range: f64,
    /// Whether the decoder's weight is the word embeddings and its bias `cls.predictions.bias`.
    pub tie_word_embeddings: bool,
}

impl BertConfig {
    /// The config from a JSON object of `BertConfig`'s fields (`meta.json`'s `config`), with
    /// transformers' defaults for those missing (`pad_token_id: null` means none).
    pub fn from_json(json: &serde_json::Value) -> Result<BertConfig> {
        let c = Config::new("BertConfig", json)?;
        let pad_token_id = if c.contains("pad_token_id") { c.opt_usize("pad_token_id")? } else { Some(0) };
        Ok(BertConfig {
            vocab_size: c.usize_or("vocab_size", 30522)?,
            hidden_size: c.usize_or("hidden_size", 768)?,
            num_hidden_layers: c.usize_or("num_hidden_layers", 12)?,
            num_attention_heads: c.usize_or("num_attention_heads", 12)?,
            intermediate_size: c.usize_or("intermediate_size", 3072)?,
            max_position_embeddings: c.usize_or("max_position_embeddings", 512)?,
            type_vocab_size: c.usize_or("type_vocab_size", 2)?,
            hidden_dropout_prob: c.f64_or("hidden_dropout_prob", 0.1)?,
            attention_probs_dropout_prob: c.f64_or("attention_probs_dropout_prob", 0.1)?,
            layer_norm_eps: c.f64_or("layer_norm_eps", 1e-12)?,
            hidden_act: c.string_or("hidden_act", "gelu")?,
            pad_token_id,
            initializer_range: c.f64_or("initializer_range", 0.02)?,
            tie_word_embeddings: c.bool_or("tie_word_embeddings", true)?,
        })
    }
}

/// The sum of word, position and token type embeddings, layer-normed (`BertEmbeddings`).
#[derive(Module)]
#[allow(non_snake_case)] // PyTorch's attribute name `LayerNorm`
pub struct BertEmbeddings {
    /// Word embeddings (the padding row gets no gradient from the lookup).
    pub word_embeddings: Embedding,
    /// Position embeddings.
    pub position_embeddings: Embedding,
    /// Token type (segment) embeddings.
    pub token_type_embeddings: Embedding,
    /// The norm of the sum.
    pub LayerNorm: LayerNorm,
    /// Dropout on the normed sum.
    pub dropout: Dropout,
    /// `[[0, 1, ..., max_position_embeddings - 1]]`, left out of the state_dict.
    pub position_ids: Buffer,
    /// Zeros, `[1, max_position_embeddings]`: the token types when none are given.
    pub token_type_ids: Buffer,
}

impl BertEmbeddings {
    /// The embeddings `[B, T, hidden]` of `input_ids` `[B, T]` at positions `0..T`, with
    /// `token_type_ids` (`[B, T]`; all 0 when `None`): one call of the module, whose hooks see
    /// the ids.
    pub fn call(&self, input_ids: &Tensor, token_type_ids: Option<&Tensor>) -> Result<Tensor> {
        nn::call_module(self, input_ids.clone(), |ids| self.forward(&ids, token_type_ids))
    }

    fn forward(&self, input_ids: &Tensor, token_type_ids: Option<&Tensor>) -> Result<Tensor> {
        let shape = input_ids.shape()?;
        if shape.len() != 2 {
            return Err(Error::value_error(format!("BertEmbeddings: input_ids must be [B, T], got {:?}", &shape[..])));
        }
        let (b, t) = (shape[0] as i64, shape[1] as i64);
        let positions = self.position_ids.shape()?[1] as i64;
        if t > positions {
            return Err(Error::value_error(format!(
                "BertEmbeddings: {t} tokens, but max_position_embeddings is {positions}"
            )));
        }
        let position_ids = self.position_ids.narrow(1, 0, t)?;
        let token_type_ids = match token_type_ids {
            Some(ids) => ids.clone(),
            None => self.token_type_ids.narrow(1, 0, t)?.expand(vec![b, t])?,
        };
        let inputs_embeds = self.word_embeddings.call(input_ids)?;
        let embeddings = (&inputs_embeds + &self.token_type_embeddings.call(&token_type_ids)?)?;
        let embeddings = (&embeddings + &self.position_embeddings.call(&position_ids)?)?;
        self.dropout.call(&self.LayerNorm.call(&embeddings)?)
    }
}

/// The attention's heads (`BertSelfAttention`), eager: scores, additive mask, softmax, dropout,
/// weights times values.
#[derive(Module)]
pub struct BertSelfAttention {
    /// Queries.
    pub query: Linear,
    /// Keys.
    pub key: Linear,
    /// Values.
    pub value: Linear,
    /// Dropout on the attention weights (applied functionally at its probability).
    pub dropout: Dropout,
    #[module(skip)]
    attention_head_size: usize,
    #[module(skip)]
    scaling: f64,
}

impl BertSelfAttention {
    /// The heads' outputs, `[B, T, hidden]`, and the attention weights `[B, H, T, T]` for
    /// `hidden_states` `[B, T, hidden]` and an additive mask broadcasting to `[B, H, T, T]`:
    /// one call of the module, whose hooks see the hidden states.
    pub fn call(&self, hidden_states: &Tensor, attention_mask: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        nn::call_module(self, hidden_states.clone(), |h| self.forward(&h, attention_mask))
    }

    fn forward(&self, hidden_states: &Tensor, attention_mask: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        let split = |proj: &Linear| heads(proj, hidden_states, self.attention_head_size, "BertSelfAttention");
        let (q, k, v) = (split(&self.query)?, split(&self.key)?, split(&self.value)?);
        // transformers' eager attention drops weights with the functional dropout at the
        // module's probability: not a call of the module.
        let dropout = |w: &Tensor| self.dropout.forward(w);
        eager_attention(&q, &k, &v, attention_mask, self.scaling, None, &dropout)
    }
}

/// The attention's projection, added to its input and normed (`BertSelfOutput`).
#[derive(Module)]
#[allow(non_snake_case)] // PyTorch's attribute name `LayerNorm`
pub struct BertSelfOutput {
    /// The output projection.
    pub dense: Linear,
    /// The norm of the residual sum.
    pub LayerNorm: LayerNorm,
    /// Dropout on the projection.
    pub dropout: Dropout,
}

impl BertSelfOutput {
    /// `LayerNorm(dropout(dense(hidden_states)) + input_tensor)`: one call of the module,
    /// whose hooks see both inputs.
    pub fn call(&self, hidden_states: &Tensor, input_tensor: &Tensor) -> Result<Tensor> {
        nn::call_module(self, (hidden_states.clone(), input_tensor.clone()), |(h, i)| {
            self.LayerNorm.call(&(&self.dropout.call(&self.dense.call(&h)?)? + &i)?)
        })
    }
}

/// Self-attention and its output part (`BertAttention`). Its heads are the child named
/// `self`, which no Rust field can be called: `Module` is implemented here by hand, showing
/// the field `self_attention` under that name.
pub struct BertAttention {
    /// The heads (PyTorch's `attention.self`).
    pub self_attention: BertSelfAttention,
    /// The projection, residual and norm.
    pub output: BertSelfOutput,
}

impl Module for BertAttention {
    fn visit<'m>(&'m self, visitor: &mut dyn Visitor<'m>) {
        self.self_attention.visit_field("self", visitor);
        self.output.visit_field("output", visitor);
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut) {
        self.self_attention.visit_field_mut("self", visitor);
        self.output.visit_field_mut("output", visitor);
    }

    fn type_name(&self) -> &'static str {
        "BertAttention"
    }

    fn as_dyn(&self) -> &dyn Module {
        self
    }

    fn rust_path(&self) -> &'static str {
        module_path!()
    }
}

impl fmt::Display for BertAttention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr())
    }
}

impl BertAttention {
    /// The attention's output `[B, T, hidden]` (normed, with the residual) and its weights:
    /// one call of the module, whose hooks see the hidden states.
    pub fn call(&self, hidden_states: &Tensor, attention_mask: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        nn::call_module(self, hidden_states.clone(), |h| {
            let (attention, weights) = self.self_attention.call(&h, attention_mask)?;
            Ok((self.output.call(&attention, &h)?, weights))
        })
    }
}

/// The feed-forward part's widening projection and activation (`BertIntermediate`).
#[derive(Module)]
pub struct BertIntermediate {
    /// `hidden` to `intermediate_size`.
    pub dense: Linear,
    /// The activation.
    pub intermediate_act_fn: Activation,
}

impl Forward for BertIntermediate {
    fn forward(&self, hidden_states: &Tensor) -> Result<Tensor> {
        self.intermediate_act_fn.call(&self.dense.call(hidden_states)?)
    }
}

/// The feed-forward part's projection back, added to its input and normed (`BertOutput`).
#[derive(Module)]
#[allow(non_snake_case)] // PyTorch's attribute name `LayerNorm`
pub struct BertOutput {
    /// `intermediate_size` to `hidden`.
    pub dense: Linear,
    /// The norm of the residual sum.
    pub LayerNorm: LayerNorm,
    /// Dropout on the projection.
    pub dropout: Dropout,
}

impl BertOutput {
    /// `LayerNorm(dropout(dense(hidden_states)) + input_tensor)`: one call of the module,
    /// whose hooks see both inputs.
    pub fn call(&self, hidden_states: &Tensor, input_tensor: &Tensor) -> Result<Tensor> {
        nn::call_module(self, (hidden_states.clone(), input_tensor.clone()), |(h, i)| {
            self.LayerNorm.call(&(&self.dropout.call(&self.dense.call(&h)?)? + &i)?)
        })
    }
}

/// A post-norm encoder layer (`BertLayer`): attention, then the feed-forward part.
#[derive(Module)]
pub struct BertLayer {
    /// The attention.
    pub attention: BertAttention,
    /// The feed-forward part's first half.
    pub intermediate: BertIntermediate,
    /// Its second half.
    pub output: BertOutput,
}

impl BertLayer {
    /// The layer applied to `hidden_states` `[B, T, hidden]` with an additive mask: one call of
    /// the module, whose hooks see the hidden states.
    pub fn call(&self, hidden_states: &Tensor, attention_mask: Option<&Tensor>) -> Result<Tensor> {
        nn::call_module(self, hidden_states.clone(), |h| {
            let (attention_output, _) = self.attention.call(&h, attention_mask)?;
            self.output.call(&self.intermediate.call(&attention_output)?, &attention_output)
        })
    }
}

/// The encoder layers (`BertEncoder`).
#[derive(Module)]
pub struct BertEncoder {
    /// The layers.
    pub layer: Vec<BertLayer>,
}

impl BertEncoder {
    /// The layers applied in turn: one call of the module, whose hooks see the hidden states.
    pub fn call(&self, hidden_states: &Tensor, attention_mask: Option<&Tensor>) -> Result<Tensor> {
        nn::call_module(self, hidden_states.clone(), |mut h| {
            for layer in &self.layer {
                h = layer.call(&h, attention_mask)?;
            }
            Ok(h)
        })
    }
}

/// The embeddings and the encoder (`BertModel` without its pooler, as `BertForMaskedLM`
/// builds it).
#[derive(Module)]
pub struct BertModel {
    /// The embeddings.
    pub embeddings: BertEmbeddings,
    /// The encoder.
    pub encoder: BertEncoder,
}

/// The additive mask `[B, 1, 1, T]` of a padding mask `[B, T]` (1 for tokens, 0 for padding):
/// `(1 - mask) * float32's lowest value`, as transformers' eager attention adds it.
pub fn extended_attention_mask(attention_mask: &Tensor) -> Result<Tensor> {
    let keep = attention_mask.to(DType::Float32, false, false)?;
    let mask = (&(1.0 - &keep)? * f32::MIN as f64)?;
    mask.unsqueeze(1)?.unsqueeze(1)
}

impl BertModel {
    /// The last hidden states `[B, T, hidden]` of `input_ids` `[B, T]`, with token types and a
    /// padding mask (`[B, T]`, 1 for tokens, 0 for padding) when given: one call of the
    /// module, whose hooks see the ids.
    pub fn call(
        &self,
        input_ids: &Tensor,
        token_type_ids: Option<&Tensor>,
        attention_mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        nn::call_module(self, input_ids.clone(), |ids| {
            let embedding_output = self.embeddings.call(&ids, token_type_ids)?;
            let mask = attention_mask.map(extended_attention_mask).transpose()?;
            self.encoder.call(&embedding_output, mask.as_ref())
        })
    }
}

/// The head's dense layer, activation and norm (`BertPredictionHeadTransform`).
#[derive(Module)]
#[allow(non_snake_case)] // PyTorch's attribute name `LayerNorm`
pub struct BertPredictionHeadTransform {
    /// `hidden` to `hidden`.
    pub dense: Linear,
    /// The activation.
    pub transform_act_fn: Activation,
    /// The norm.
    pub LayerNorm: LayerNorm,
}

impl Forward for BertPredictionHeadTransform {
    fn forward(&self, hidden_states: &Tensor) -> Result<Tensor> {
        self.LayerNorm.call(&self.transform_act_fn.call(&self.dense.call(hidden_states)?)?)
    }
}

/// The prediction of every token (`BertLMPredictionHead`): the transform, then the decoder
/// (whose weight is the word embeddings and whose bias is this module's `bias` when tied).
#[derive(Module)]
pub struct BertLMPredictionHead {
    /// The transform.
    pub transform: BertPredictionHeadTransform,
    /// `hidden` to `vocab_size`: when tied, its weight is the word embeddings and its bias `bias`.
    pub decoder: Linear,
    /// The output bias, `[vocab_size]` (the decoder's bias when tied, else unused).
    pub bias: Parameter,
}

impl Forward for BertLMPredictionHead {
    fn forward(&self, hidden_states: &Tensor) -> Result<Tensor> {
        self.decoder.call(&self.transform.call(hidden_states)?)
    }
}

/// The masked-language-model head (`BertOnlyMLMHead`).
#[derive(Module)]
pub struct BertOnlyMLMHead {
    /// The prediction head.
    pub predictions: BertLMPredictionHead,
}

impl Forward for BertOnlyMLMHead {
    fn forward(&self, sequence_output: &Tensor) -> Result<Tensor> {
        self.predictions.call(sequence_output)
    }
}

/// BERT with its masked-language-model head (`BertForMaskedLM`).
#[derive(Module)]
pub struct BertForMaskedLM {
    /// The encoder model.
    pub bert: BertModel,
    /// The head.
    pub cls: BertOnlyMLMHead,
}

impl BertForMaskedLM {
    /// A model of `config`'s sizes, initialised as transformers does: linear and embedding
    /// weights normal(0, `initializer_range`), biases zero, the padding row zero, norms one and
    /// zero; the decoder's weight is the word embeddings and its bias `cls.predictions.bias`
    /// when `tie_word_embeddings` (else a `Linear` of its own, and `cls.predictions.bias` takes
    /// no part in the forward, as in transformers).
    pub fn new(config: &BertConfig, g: &Generator) -> Result<BertForMaskedLM> {
        let c = config;
        let act = Activation::new(&c.hidden_act)?;
        let (e, h) = (c.hidden_size, c.num_attention_heads);
        if h == 0 || !e.is_multiple_of(h) {
            return Err(Error::value_error(format!(
                "The hidden size ({e}) is not a multiple of the number of attention heads ({h})"
            )));
        }
        let std = c.initializer_range;
        let linear = |i: usize, o: usize| normal_linear(i, o, true, std, g);
        let embedding = |n: usize| normal_embedding(n, e, std, g);
        let norm = || LayerNorm::new(&[e], c.layer_norm_eps);
        let dropout = || Dropout::new(c.hidden_dropout_prob);
        let d = e / h;
        let layer = || -> Result<BertLayer> {
            Ok(BertLayer {
                attention: BertAttention {
                    self_attention: BertSelfAttention {
                        query: linear(e, e)?,
                        key: linear(e, e)?,
                        value: linear(e, e)?,
                        dropout: Dropout::new(c.attention_probs_dropout_prob)?,
                        attention_head_size: d,
                        scaling: (d as f64).powf(-0.5),
                    },
                    output: BertSelfOutput { dense: linear(e, e)?, LayerNorm: norm()?, dropout: dropout()? },
                },
                intermediate: BertIntermediate { dense: linear(e, c.intermediate_size)?, intermediate_act_fn: act },
                output: BertOutput { dense: linear(c.intermediate_size, e)?, LayerNorm: norm()?, dropout: dropout()? },
            })
        };
        let mut word_embeddings = embedding(c.vocab_size)?;
        if let Some(pad) = c.pad_token_id {
            word_embeddings = word_embeddings.with_padding_idx(pad as i64)?;
        }
        let positions = c.max_position_embeddings as i64;
        let position_ids = torchfn::arange(positions, DType::Int64, torchfn::Device::CPU)?.unsqueeze(0)?;
        let token_type_ids = torchfn::zeros([1, c.max_position_embeddings], DType::Int64, None)?;
        let bias = Parameter::new(&torchfn::zeros([c.vocab_size], None, None)?)?;
        let decoder = if c.tie_word_embeddings {
            Linear { weight: word_embeddings.weight.clone(), bias: Some(bias.clone()) }
        } else {
            linear(e, c.vocab_size)?
        };
        Ok(BertForMaskedLM {
            bert: BertModel {
                embeddings: BertEmbeddings {
                    word_embeddings,
                    position_embeddings: embedding(c.max_position_embeddings)?,
                    token_type_embeddings: embedding(c.type_vocab_size)?,
                    LayerNorm: norm()?,
                    dropout: dropout()?,
                    position_ids: Buffer::non_persistent(position_ids),
                    token_type_ids: Buffer::non_persistent(token_type_ids),
                },
                encoder: BertEncoder { layer: (0..c.num_hidden_layers).map(|_| layer()).collect::<Result<_>>()? },
            },
            cls: BertOnlyMLMHead {
                predictions: BertLMPredictionHead {
                    transform: BertPredictionHeadTransform {
                        dense: linear(e, e)?,
                        transform_act_fn: act,
                        LayerNorm: norm()?,
                    },
                    decoder,
                    bias,
                },
            },
        })
    }

    /// The logits `[B, T, vocab]` of `input_ids` `[B, T]`, with token types and a padding mask
    /// (`[B, T]`, 1 for tokens, 0 for padding) when given: one call of the module, whose hooks
    /// see the ids.
    pub fn call(
        &self,
        input_ids: &Tensor,
        token_type_ids: Option<&Tensor>,
        attention_mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        nn::call_module(self, input_ids.clone(), |ids| {
            self.cls.call(&self.bert.call(&ids, token_type_ids, attention_mask)?)
        })
    }

    /// The mean cross-entropy of `logits` `[B, T, vocab]` against `labels` `[B, T]` over the
    /// positions whose label is not -100: [`common::lm_loss`].
    pub fn loss(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
        common::lm_loss(logits, labels)
    }
}
