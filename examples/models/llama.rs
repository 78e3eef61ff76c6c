//! LLaMA (transformers' `LlamaForCausalLM`, eager attention) written with torchfn's modules, as a
//! PyTorch user ports it: the same module tree, parameter names and forward, so PyTorch's
//! `state_dict` (safetensors) loads by key. Rotary position embeddings (`rotate_half`; the
//! `default`, `linear` and `llama3` rope types), RMS norm computed in float32 with the weight
//! applied after, the gated MLP with any of transformers' activations (SwiGLU with `silu`),
//! grouped-query attention (`repeat_kv`) with the causal mask added to the scores. Any size:
//! layers, heads, key/value heads, head width, widths, vocabulary, context; the head tied to the
//! embeddings or not.

use torchfn::Device;
use torchfn::nn::{self, Buffer, Embedding, Forward, Layer, Linear, Module, Parameter, Training};
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
use common::{causal_mask, eager_attention, heads, normal_embedding, normal_linear};
use config::Config;

/// How the rotary embedding's inverse frequencies are made (`rope_parameters["rope_type"]`).
#[derive(Clone, Debug, PartialEq)]
pub enum RopeType {
    /// `1 / theta^(2i / D)`.
    Default,
    /// The default frequencies divided by `factor` (positions interpolated).
    Linear {
        /// The divisor.
        factor: f64,
    },
    /// Llama 3.1's: low frequencies divided by `factor`, high ones kept, those between
    /// interpolated.
    Llama3 {
        /// The divisor of the low frequencies.
        factor: f64,
        /// Wavelengths above `original_max_position_embeddings / low_freq_factor` are low.
        low_freq_factor: f64,
        /// Wavelengths below `original_max_position_embeddings / high_freq_factor` are high.
        high_freq_factor: f64,
        /// The context length of pretraining.
        original_max_position_embeddings: usize,
    },
}

/// The model's sizes and settings (`LlamaConfig`).
#[derive(Clone, Debug)]
pub struct LlamaConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the MLP's gate and up projections.
    pub intermediate_size: usize,
    /// Decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key and value heads (each serves `num_attention_heads / num_key_value_heads` query heads).
    pub num_key_value_heads: usize,
    /// Width of one head (`hidden_size / num_attention_heads` unless set otherwise).
    pub head_dim: usize,
    /// Longest context (the rotary embedding's cache length).
    pub max_position_embeddings: usize,
    /// The RMS norms' epsilon.
    pub rms_norm_eps: f64,
    /// The rotary embedding's base.
    pub rope_theta: f64,
    /// The rotary embedding's frequencies.
    pub rope_type: RopeType,
    /// Whether the head shares its weight with the token embeddings.
    pub tie_word_embeddings: bool,
    /// Whether the attention projections have biases.
    pub attention_bias: bool,
    /// Whether the MLP's projections have biases.
    pub mlp_bias: bool,
    /// The MLP's activation (a name of transformers' `ACT2FN`, see `activations.rs`).
    pub hidden_act: String,
    /// Dropout probability on the attention weights (in training).
    pub attention_dropout: f64,
    /// The embedding row of the padding token, if any (`pad_token_id`).
    pub pad_token_id: Option<usize>,
    /// The standard deviation of the initial weights (`initializer_range`).
    pub initializer_range: f64,
}

impl LlamaConfig {
    /// The config from a JSON object of `LlamaConfig`'s fields (`meta.json`'s `config`), with
    /// transformers' defaults for those missing. The rotary settings are read as transformers
    /// 5 standardizes them: `rope_scaling` (the legacy name) or else `rope_parameters`, its
    /// `rope_type` or legacy `type` (`default` when neither), and a `rope_theta` inside it
    /// before the top-level one.
    pub fn from_json(json: &serde_json::Value) -> Result<LlamaConfig> {
        let c = Config::new("LlamaConfig", json)?;
        let hidden_size = c.usize_or("hidden_size", 4096)?;
        let num_attention_heads = c.usize_or("num_attention_heads", 32)?;
        if num_attention_heads == 0 || !hidden_size.is_multiple_of(num_attention_heads) {
            return Err(c.error(
                "num_attention_heads",
                format!("({num_attention_heads}) must divide the hidden size ({hidden_size})"),
            ));
        }
        let max_position_embeddings = c.usize_or("max_position_embeddings", 2048)?;
        let rope = match c.object("rope_scaling")?.filter(|r| !r.is_empty()) {
            Some(r) => Some(r),
            None => c.object("rope_parameters")?,
        };
        let mut rope_theta = c.f64_or("rope_theta", 10000.0)?;
        let mut rope_type = RopeType::Default;
        if let Some(r) = rope {
            rope_theta = r.f64_or("rope_theta", rope_theta)?;
            if r.f64_or("partial_rotary_factor", c.f64_or("partial_rotary_factor", 1.0)?)? != 1.0 {
                return Err(c.error("partial_rotary_factor", "other than 1 is not supported"));
            }
            let name = match r.opt_string("rope_type")? {
                Some(name) => name,
                None => r.string_or("type", "default")?,
            };
            rope_type = match name.as_str() {
                "default" => RopeType::Default,
                "linear" => RopeType::Linear { factor: r.f64("factor")? },
                "llama3" => RopeType::Llama3 {
                    factor: r.f64("factor")?,
                    low_freq_factor: r.f64("low_freq_factor")?,
                    high_freq_factor: r.f64("high_freq_factor")?,
                    // A top-level value wins, as transformers' `standardize_rope_params` has it.
                    original_max_position_embeddings: match c.opt_usize("original_max_position_embeddings")? {
                        Some(n) => n,
                        None => r.usize_or("original_max_position_embeddings", max_position_embeddings)?,
                    },
                },
                other => {
                    return Err(c.error("rope_type", format!("{other:?} is not supported (default, linear, llama3)")));
                }
            };
        }
        Ok(LlamaConfig {
            vocab_size: c.usize_or("vocab_size", 32000)?,
            hidden_size,
            intermediate_size: c.usize_or("intermediate_size", 11008)?,
            num_hidden_layers: c.usize_or("num_hidden_layers", 32)?,
            num_attention_heads,
            num_key_value_heads: c.usize_or("num_key_value_heads", num_attention_heads)?,
            head_dim: c.usize_or("head_dim", hidden_size / num_attention_heads)?,
            max_position_embeddings,
            rms_norm_eps: c.f64_or("rms_norm_eps", 1e-6)?,
            rope_theta,
            rope_type,
            tie_word_embeddings: c.bool_or("tie_word_embeddings", false)?,
            attention_bias: c.bool_or("attention_bias", false)?,
            mlp_bias: c.bool_or("mlp_bias", false)?,
            hidden_act: c.string_or("hidden_act", "silu")?,
            attention_dropout: c.f64_or("attention_dropout", 0.0)?,
            pad_token_id: c.opt_usize("pad_token_id")?,
            initializer_range: c.f64_or("initializer_range", 0.02)?,
        })
    }
}

/// A float as Python's `repr` writes it (`1e-06`, `0.5`), for the modules' reprs.
// Local: torchfn's reprs use a private one, and the public `Scalar` display writes `0.000001`.
fn python_float(x: f64) -> String {
    if x != 0.0 && (x.abs() < 1e-4 || x.abs() >= 1e16) {
        let text = format!("{x:e}");
        match text.split_once('e') {
            Some((mantissa, exponent)) => {
                let e: i32 = exponent.parse().unwrap_or(0);
                format!("{mantissa}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
            }
            None => text,
        }
    } else {
        format!("{x:?}")
    }
}

/// RMS normalization as LLaMA computes it (`LlamaRMSNorm`): in float32,
/// `x * rsqrt(mean(x²) + eps)`, back to the input's dtype, then times the weight.
// Local: `nn::RMSNorm` prints `RMSNorm(..., elementwise_affine=True)`, not `LlamaRMSNorm(...)`.
#[derive(Module)]
#[module(extra_repr = describe)]
pub struct LlamaRMSNorm {
    /// Scale, `[hidden_size]` (ones).
    pub weight: Parameter,
    #[module(skip)]
    variance_epsilon: f64,
}

impl LlamaRMSNorm {
    /// A norm over the last dimension, of width `hidden_size`.
    pub fn new(hidden_size: usize, eps: f64) -> Result<LlamaRMSNorm> {
        Ok(LlamaRMSNorm { weight: Parameter::new(&torchfn::ones([hidden_size], None, None)?)?, variance_epsilon: eps })
    }

    fn describe(&self) -> String {
        let shape: Vec<String> = self.weight.shape().unwrap_or_default().iter().map(ToString::to_string).collect();
        let comma = if shape.len() == 1 { "," } else { "" };
        format!("({}{comma}), eps={}", shape.join(", "), python_float(self.variance_epsilon))
    }
}

impl Forward for LlamaRMSNorm {
    fn forward(&self, hidden_states: &Tensor) -> Result<Tensor> {
        let input_dtype = hidden_states.dtype()?;
        let h = hidden_states.to(DType::Float32, false, false)?;
        let variance = h.square()?.mean_dim(-1, true)?;
        let h = (&h * &(&variance + self.variance_epsilon)?.rsqrt()?)?;
        &*self.weight * &h.to(input_dtype, false, false)?
    }
}

/// The rotary position embedding's angles (`LlamaRotaryEmbedding`): the inverse frequencies of
/// the rope type as a buffer, and per position the cosines and sines of `position * inv_freq`,
/// each half repeated (`[.., T, D]`).
#[derive(Module)]
pub struct LlamaRotaryEmbedding {
    /// `[D / 2]`, float32, left out of the state_dict.
    pub inv_freq: Buffer,
    /// The same, kept unchanged (dynamic rope types rescale `inv_freq`).
    pub original_inv_freq: Buffer,
    #[module(skip)]
    attention_scaling: f64,
}

impl LlamaRotaryEmbedding {
    /// The rotary embedding of heads of `head_dim` with base `rope_theta` and `rope_type`'s
    /// frequencies, computed in float32 as transformers' `ROPE_INIT_FUNCTIONS` do.
    pub fn new(head_dim: usize, rope_theta: f64, rope_type: &RopeType) -> Result<LlamaRotaryEmbedding> {
        if head_dim == 0 || !head_dim.is_multiple_of(2) {
            return Err(Error::value_error(format!("LlamaRotaryEmbedding: head_dim ({head_dim}) must be even")));
        }
        // 1 / base ** (arange(0, dim, 2, float32) / dim)
        let exponents =
            (&torchfn::arange_range(0, head_dim as i64, 2, DType::Float32, Device::CPU)? / head_dim as f64)?;
        let inv_freq = (1.0 / &exponents.__rpow__(&Tensor::scalar(rope_theta))?)?;
        let inv_freq = match *rope_type {
            RopeType::Default => inv_freq,
            RopeType::Linear { factor } => (&inv_freq / factor)?,
            RopeType::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings } => {
                let old_context_len = original_max_position_embeddings as f64;
                let (low_freq_wavelen, high_freq_wavelen) =
                    (old_context_len / low_freq_factor, old_context_len / high_freq_factor);
                let wavelen = (2.0 * std::f64::consts::PI / &inv_freq)?;
                let is_low = torchfn::gt(&wavelen, &Tensor::scalar(low_freq_wavelen))?;
                let inv_freq_llama = torchfn::r#where(&is_low, &(&inv_freq / factor)?, &inv_freq)?;
                let smooth_factor =
                    (&(&(old_context_len / &wavelen)? - low_freq_factor)? / (high_freq_factor - low_freq_factor))?;
                let smoothed = (&(&(&(1.0 - &smooth_factor)? * &inv_freq_llama)? / factor)?
                    + &(&smooth_factor * &inv_freq_llama)?)?;
                let is_high = torchfn::lt(&wavelen, &Tensor::scalar(high_freq_wavelen))?;
                let is_medium =
                    torchfn::logical_and(&torchfn::logical_not(&is_high)?, &torchfn::logical_not(&is_low)?)?;
                torchfn::r#where(&is_medium, &smoothed, &inv_freq_llama)?
            }
        };
        Ok(LlamaRotaryEmbedding {
            original_inv_freq: Buffer::non_persistent(torchfn::clone(&inv_freq)?),
            inv_freq: Buffer::non_persistent(inv_freq),
            attention_scaling: 1.0,
        })
    }

    /// `(cos, sin)`, `[B or 1, T, D]`, for `position_ids` (`[B or 1, T]`), in the dtype of `x`:
    /// one call of the module, whose hooks see `x` and the positions.
    pub fn call(&self, x: &Tensor, position_ids: &Tensor) -> Result<(Tensor, Tensor)> {
        nn::call_module(self, (x.clone(), position_ids.clone()), |(x, p)| self.forward(&x, &p))
    }

    fn forward(&self, x: &Tensor, position_ids: &Tensor) -> Result<(Tensor, Tensor)> {
        let positions = position_ids.to(DType::Float32, false, false)?.unsqueeze(-1)?;
        let freqs = (&positions * &*self.inv_freq)?;
        let emb = torchfn::cat(&[freqs.clone(), freqs], -1)?;
        let cos = (&emb.cos()? * self.attention_scaling)?;
        let sin = (&emb.sin()? * self.attention_scaling)?;
        let dtype = x.dtype()?;
        Ok((cos.to(dtype, false, false)?, sin.to(dtype, false, false)?))
    }
}

/// The last dimension's halves swapped, the second negated: `cat([-x2, x1], -1)`.
fn rotate_half(x: &Tensor) -> Result<Tensor> {
    let d = *x.shape()?.last().unwrap_or(&0) as i64;
    let (x1, x2) = (x.narrow(-1, 0, d / 2)?, x.narrow(-1, d / 2, d - d / 2)?);
    torchfn::cat(&[(-&x2)?, x1], -1)
}

/// Queries and keys `[B, heads, T, D]` rotated by the angles `(cos, sin)` `[B or 1, T, D]`
/// (`apply_rotary_pos_emb`).
pub fn apply_rotary_pos_emb(q: &Tensor, k: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<(Tensor, Tensor)> {
    let (cos, sin) = (cos.unsqueeze(1)?, sin.unsqueeze(1)?);
    let q_embed = (&(q * &cos)? + &(&rotate_half(q)? * &sin)?)?;
    let k_embed = (&(k * &cos)? + &(&rotate_half(k)? * &sin)?)?;
    Ok((q_embed, k_embed))
}

/// Each key/value head repeated `n_rep` times in place (`[B, KV, T, D]` to
/// `[B, KV * n_rep, T, D]`, `repeat_interleave` on dimension 1), as `repeat_kv`.
pub fn repeat_kv(hidden_states: &Tensor, n_rep: usize) -> Result<Tensor> {
    let shape = hidden_states.shape()?;
    let [b, kv, t, d] = shape.iter().map(|&n| n as i64).collect::<Vec<_>>()[..] else {
        return Err(Error::value_error(format!("repeat_kv: expected [B, KV, T, D], got {:?}", &shape[..])));
    };
    if n_rep == 1 {
        return Ok(hidden_states.clone());
    }
    hidden_states.unsqueeze(2)?.expand(vec![b, kv, n_rep as i64, t, d])?.reshape(&[b, kv * n_rep as i64, t, d])
}

/// Multi-head attention with grouped keys and values (`LlamaAttention`), eager: scores, mask,
/// softmax in float32, dropout, weights times values.
#[derive(Module)]
pub struct LlamaAttention {
    /// Queries, `hidden_size` to `num_attention_heads * head_dim`.
    pub q_proj: Linear,
    /// Keys, to `num_key_value_heads * head_dim`.
    pub k_proj: Linear,
    /// Values, to `num_key_value_heads * head_dim`.
    pub v_proj: Linear,
    /// The output projection.
    pub o_proj: Linear,
    training: Training,
    #[module(skip)]
    head_dim: usize,
    #[module(skip)]
    num_key_value_groups: usize,
    #[module(skip)]
    scaling: f64,
    #[module(skip)]
    attention_dropout: f64,
}

impl LlamaAttention {
    /// The attention's output `[B, T, hidden_size]` and its weights `[B, H, T, T]` (after
    /// dropout) for `hidden_states` `[B, T, hidden_size]`, the rotary angles and an additive
    /// mask (`[T, T]` or broadcasting to `[B, H, T, T]`): one call of the module, whose hooks see
    /// the hidden states and both outputs.
    pub fn call(&self, hidden_states: &Tensor, cos: &Tensor, sin: &Tensor, mask: &Tensor) -> Result<(Tensor, Tensor)> {
        nn::call_module(self, hidden_states.clone(), |h| self.forward(&h, cos, sin, mask))
    }

    fn forward(&self, hidden_states: &Tensor, cos: &Tensor, sin: &Tensor, mask: &Tensor) -> Result<(Tensor, Tensor)> {
        let split = |proj: &Linear| heads(proj, hidden_states, self.head_dim, "LlamaAttention");
        let (q, k, v) = (split(&self.q_proj)?, split(&self.k_proj)?, split(&self.v_proj)?);
        let (q, k) = apply_rotary_pos_emb(&q, &k, cos, sin)?;
        let k = repeat_kv(&k, self.num_key_value_groups)?;
        let v = repeat_kv(&v, self.num_key_value_groups)?;
        let training = self.training.get();
        let p = if training { self.attention_dropout } else { 0.0 };
        let dropout = |w: &Tensor| nn::functional::dropout(w, p, training, false);
        let (out, weights) = eager_attention(&q, &k, &v, Some(mask), self.scaling, Some(DType::Float32), &dropout)?;
        Ok((self.o_proj.call(&out)?, weights))
    }
}

/// The gated feed-forward part of a layer (`LlamaMLP`): `down(act(gate(x)) * up(x))` (SwiGLU
/// with `silu`).
#[derive(Module)]
pub struct LlamaMLP {
    /// Gate projection, `hidden_size` to `intermediate_size`.
    pub gate_proj: Linear,
    /// Up projection, `hidden_size` to `intermediate_size`.
    pub up_proj: Linear,
    /// Down projection, back to `hidden_size`.
    pub down_proj: Linear,
    act_fn: Activation,
}

impl Forward for LlamaMLP {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let gated = (&self.act_fn.call(&self.gate_proj.call(x)?)? * &self.up_proj.call(x)?)?;
        self.down_proj.call(&gated)
    }
}

/// A pre-norm decoder layer (`LlamaDecoderLayer`): attention, then the MLP, each on the
/// RMS-normed stream and added back to it.
#[derive(Module)]
pub struct LlamaDecoderLayer {
    /// The attention.
    pub self_attn: LlamaAttention,
    /// The feed-forward part.
    pub mlp: LlamaMLP,
    /// The norm before the attention.
    pub input_layernorm: LlamaRMSNorm,
    /// The norm before the MLP.
    pub post_attention_layernorm: LlamaRMSNorm,
}

impl LlamaDecoderLayer {
    /// The layer applied to `hidden_states` `[B, T, hidden_size]` with the rotary angles and
    /// the additive mask: one call of the module, whose hooks see the hidden states.
    pub fn call(&self, hidden_states: &Tensor, cos: &Tensor, sin: &Tensor, mask: &Tensor) -> Result<Tensor> {
        nn::call_module(self, hidden_states.clone(), |h| self.forward(&h, cos, sin, mask))
    }

    fn forward(&self, hidden_states: &Tensor, cos: &Tensor, sin: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let normed = self.input_layernorm.call(hidden_states)?;
        let (attn, _) = self.self_attn.call(&normed, cos, sin, mask)?;
        let hidden_states = (hidden_states + &attn)?;
        let mlp = self.mlp.call(&self.post_attention_layernorm.call(&hidden_states)?)?;
        &hidden_states + &mlp
    }
}

/// Embeddings, decoder layers, the final norm and the rotary embedding (`LlamaModel`).
#[derive(Module)]
pub struct LlamaModel {
    /// Token embeddings.
    pub embed_tokens: Embedding,
    /// The decoder layers.
    pub layers: Vec<LlamaDecoderLayer>,
    /// The final norm.
    pub norm: LlamaRMSNorm,
    /// The rotary angles, shared by every layer.
    pub rotary_emb: LlamaRotaryEmbedding,
}

impl Forward for LlamaModel {
    /// The final hidden states `[B, T, hidden_size]` for token ids `[B, T]` (positions
    /// `0..T`, causal attention, no padding mask).
    fn forward(&self, input_ids: &Tensor) -> Result<Tensor> {
        let shape = input_ids.shape()?;
        let [_, t] = shape[..] else {
            return Err(Error::value_error(format!("LlamaModel: input_ids must be [B, T], got {:?}", &shape[..])));
        };
        let device = input_ids.device()?;
        let inputs_embeds = self.embed_tokens.call(input_ids)?;
        let position_ids = torchfn::arange(t as i64, input_ids.dtype()?, device)?.unsqueeze(0)?;
        let mask = causal_mask(t, device)?;
        let (cos, sin) = self.rotary_emb.call(&inputs_embeds, &position_ids)?;
        let mut hidden_states = inputs_embeds;
        for layer in &self.layers {
            hidden_states = layer.call(&hidden_states, &cos, &sin, &mask)?;
        }
        self.norm.call(&hidden_states)
    }
}

/// LLaMA with its language-model head (`LlamaForCausalLM`).
#[derive(Module)]
pub struct LlamaForCausalLM {
    /// The decoder.
    pub model: LlamaModel,
    /// The head, `hidden_size` to `vocab_size`, no bias (tied to `model.embed_tokens` when
    /// the config says so).
    pub lm_head: Linear,
}

impl LlamaForCausalLM {
    /// A model of `config`'s sizes, initialised as transformers does: linear and embedding
    /// weights normal(0, `initializer_range`), biases zero, the padding row zero, norms one.
    pub fn new(config: &LlamaConfig, g: &Generator) -> Result<LlamaForCausalLM> {
        let c = config;
        if c.num_key_value_heads == 0 || !c.num_attention_heads.is_multiple_of(c.num_key_value_heads) {
            return Err(Error::value_error(format!(
                "LlamaForCausalLM: num_attention_heads ({}) must be a multiple of num_key_value_heads ({})",
                c.num_attention_heads, c.num_key_value_heads
            )));
        }
        if !(0.0..=1.0).contains(&c.attention_dropout) {
            return Err(Error::value_error(format!(
                "LlamaForCausalLM: attention_dropout must be between 0 and 1, got {}",
                c.attention_dropout
            )));
        }
        let act_fn = Activation::new(&c.hidden_act)?;
        let std = c.initializer_range;
        let linear = |i: usize, o: usize, bias: bool| normal_linear(i, o, bias, std, g);
        let (e, d) = (c.hidden_size, c.head_dim);
        let layer = || -> Result<LlamaDecoderLayer> {
            Ok(LlamaDecoderLayer {
                self_attn: LlamaAttention {
                    q_proj: linear(e, c.num_attention_heads * d, c.attention_bias)?,
                    k_proj: linear(e, c.num_key_value_heads * d, c.attention_bias)?,
                    v_proj: linear(e, c.num_key_value_heads * d, c.attention_bias)?,
                    o_proj: linear(c.num_attention_heads * d, e, c.attention_bias)?,
                    training: Training::default(),
                    head_dim: d,
                    num_key_value_groups: c.num_attention_heads / c.num_key_value_heads,
                    scaling: (d as f64).powf(-0.5),
                    attention_dropout: c.attention_dropout,
                },
                mlp: LlamaMLP {
                    gate_proj: linear(e, c.intermediate_size, c.mlp_bias)?,
                    up_proj: linear(e, c.intermediate_size, c.mlp_bias)?,
                    down_proj: linear(c.intermediate_size, e, c.mlp_bias)?,
                    act_fn,
                },
                input_layernorm: LlamaRMSNorm::new(e, c.rms_norm_eps)?,
                post_attention_layernorm: LlamaRMSNorm::new(e, c.rms_norm_eps)?,
            })
        };
        let mut embed_tokens = normal_embedding(c.vocab_size, e, std, g)?;
        if let Some(pad) = c.pad_token_id {
            embed_tokens = embed_tokens.with_padding_idx(pad as i64)?;
        }
        let lm_head = if c.tie_word_embeddings {
            Linear { weight: embed_tokens.weight.clone(), bias: None }
        } else {
            linear(e, c.vocab_size, false)?
        };
        Ok(LlamaForCausalLM {
            model: LlamaModel {
                embed_tokens,
                layers: (0..c.num_hidden_layers).map(|_| layer()).collect::<Result<_>>()?,
                norm: LlamaRMSNorm::new(e, c.rms_norm_eps)?,
                rotary_emb: LlamaRotaryEmbedding::new(d, c.rope_theta, &c.rope_type)?,
            },
            lm_head,
        })
    }

    /// The mean cross-entropy of `logits` `[B, T, vocab]` against `targets` `[B, T]`
    /// (positions labelled -100 left out): [`common::lm_loss`].
    pub fn loss(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
        common::lm_loss(logits, targets)
    }
}

impl Forward for LlamaForCausalLM {
    /// The logits `[B, T, vocab]` for token ids `[B, T]`.
    fn forward(&self, input_ids: &Tensor) -> Result<Tensor> {
        self.lm_head.call(&self.model.call(input_ids)?)
    }
}
