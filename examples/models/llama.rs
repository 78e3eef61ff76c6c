//! LLaMA (transformers' `LlamaForCausalLM`, eager attention) written with torchfn's modules, as a
//! PyTorch user ports it: the same module tree, parameter names and forward, so PyTorch's
//! `state_dict` (safetensors) loads by key. Rotary position embeddings (`rotate_half`), RMS norm
//! computed in float32 with the weight applied after, the SwiGLU MLP, grouped-query attention
//! (`repeat_kv`) with the causal mask added to the scores. Any size: layers, heads, key/value
//! heads, widths, vocabulary, context; the head tied to the embeddings or not.

use torchfn::Device;
use torchfn::nn::{self, Buffer, Embedding, Forward, Layer, Linear, Module, Parameter, Training};
use torchfn::prelude::*;

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
    /// Whether the head shares its weight with the token embeddings.
    pub tie_word_embeddings: bool,
    /// Whether the attention projections have biases.
    pub attention_bias: bool,
    /// Whether the MLP's projections have biases.
    pub mlp_bias: bool,
    /// The MLP's activation (transformers' `ACT2FN` name; `"silu"` is supported).
    pub hidden_act: String,
    /// Dropout probability on the attention weights (in training).
    pub attention_dropout: f64,
    /// The embedding row of the padding token, if any (`pad_token_id`).
    pub pad_token_id: Option<usize>,
    /// The standard deviation of the initial weights (`initializer_range`).
    pub initializer_range: f64,
}

impl LlamaConfig {
    /// The config from a JSON object of `LlamaConfig`'s fields (`meta.json`'s `config`),
    /// with transformers' defaults for those missing where it has one.
    pub fn from_json(c: &serde_json::Value) -> Result<LlamaConfig> {
        let int = |k: &str| -> Result<usize> {
            c[k].as_u64().map(|n| n as usize).ok_or_else(|| Error::value_error(format!("LlamaConfig: no integer {k}")))
        };
        let int_or = |k: &str, default: usize| c[k].as_u64().map_or(default, |n| n as usize);
        let float_or = |k: &str, default: f64| c[k].as_f64().unwrap_or(default);
        let bool_or = |k: &str, default: bool| c[k].as_bool().unwrap_or(default);
        let rope_type = c["rope_scaling"]["rope_type"].as_str().or(c["rope_parameters"]["rope_type"].as_str());
        if let Some(other) = rope_type.filter(|t| *t != "default") {
            return Err(Error::value_error(format!(
                "LlamaConfig: rope_type {other:?} is not supported (only default)"
            )));
        }
        let (hidden_size, num_attention_heads) = (int("hidden_size")?, int("num_attention_heads")?);
        if num_attention_heads == 0 {
            return Err(Error::value_error("LlamaConfig: num_attention_heads must be positive"));
        }
        Ok(LlamaConfig {
            vocab_size: int("vocab_size")?,
            hidden_size,
            intermediate_size: int("intermediate_size")?,
            num_hidden_layers: int("num_hidden_layers")?,
            num_attention_heads,
            num_key_value_heads: int_or("num_key_value_heads", num_attention_heads),
            head_dim: int_or("head_dim", hidden_size / num_attention_heads),
            max_position_embeddings: int_or("max_position_embeddings", 2048),
            rms_norm_eps: float_or("rms_norm_eps", 1e-6),
            rope_theta: c["rope_parameters"]["rope_theta"].as_f64().unwrap_or(float_or("rope_theta", 10000.0)),
            tie_word_embeddings: bool_or("tie_word_embeddings", false),
            attention_bias: bool_or("attention_bias", false),
            mlp_bias: bool_or("mlp_bias", false),
            hidden_act: c["hidden_act"].as_str().unwrap_or("silu").to_string(),
            attention_dropout: float_or("attention_dropout", 0.0),
            pad_token_id: c["pad_token_id"].as_u64().map(|n| n as usize),
            initializer_range: float_or("initializer_range", 0.02),
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

/// The rotary position embedding's angles (`LlamaRotaryEmbedding`, default rope type): the
/// inverse frequencies `1 / theta^(2i / D)` as a buffer, and per position the cosines and sines
/// of `position * inv_freq`, each half repeated (`[.., T, D]`).
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
    /// The default rotary embedding of heads of `head_dim` with base `rope_theta`.
    pub fn new(head_dim: usize, rope_theta: f64) -> Result<LlamaRotaryEmbedding> {
        if head_dim == 0 || !head_dim.is_multiple_of(2) {
            return Err(Error::value_error(format!("LlamaRotaryEmbedding: head_dim ({head_dim}) must be even")));
        }
        // 1 / base ** (arange(0, dim, 2, float32) / dim), in float32 as transformers computes it.
        let exponents =
            (&torchfn::arange_range(0, head_dim as i64, 2, DType::Float32, Device::CPU)? / head_dim as f64)?;
        let inv_freq = (1.0 / &exponents.__rpow__(&Tensor::scalar(rope_theta))?)?;
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
    if n_rep == 1 {
        return Ok(hidden_states.clone());
    }
    let s: Vec<i64> = hidden_states.shape()?.iter().map(|&n| n as i64).collect();
    let (b, kv, t, d) = (s[0], s[1], s[2], s[3]);
    hidden_states.unsqueeze(2)?.expand(vec![b, kv, n_rep as i64, t, d])?.reshape(&[b, kv * n_rep as i64, t, d])
}

/// `0` where a query position may attend (key position `j <= i`), float32's lowest value
/// elsewhere: added to the scores (transformers' eager causal mask), `[T, T]`.
fn causal_mask(t: usize, device: Device) -> Result<Tensor> {
    torchfn::full([t, t], f32::MIN, DType::Float32, device)?.triu(1)
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
        let s = hidden_states.shape()?;
        let (b, t) = (s[0] as i64, s[1] as i64);
        let d = self.head_dim as i64;
        let heads = |proj: &Linear| proj.call(hidden_states)?.view(vec![b, t, -1, d])?.transpose(1, 2);
        let (q, k, v) = (heads(&self.q_proj)?, heads(&self.k_proj)?, heads(&self.v_proj)?);
        let (q, k) = apply_rotary_pos_emb(&q, &k, cos, sin)?;
        let k = repeat_kv(&k, self.num_key_value_groups)?;
        let v = repeat_kv(&v, self.num_key_value_groups)?;
        let scores = (&q.matmul(&k.transpose(2, 3)?)? * self.scaling)?;
        let scores = (&scores + mask)?;
        let weights = scores.softmax(-1, DType::Float32)?.to(q.dtype()?, false, false)?;
        let p = if self.training.get() { self.attention_dropout } else { 0.0 };
        let weights = nn::functional::dropout(&weights, p, self.training.get(), false)?;
        let out = weights.matmul(&v)?.transpose(1, 2)?.contiguous()?.reshape(&[b, t, -1])?;
        Ok((self.o_proj.call(&out)?, weights))
    }
}

/// transformers' `SiLUActivation`: `x * sigmoid(x)`.
// Local: `nn::SiLU` computes the same but prints `SiLU()`, not transformers' `SiLUActivation()`.
#[derive(Module, Default)]
pub struct SiLUActivation;

impl Forward for SiLUActivation {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        nn::functional::silu(x, false)
    }
}

/// The SwiGLU feed-forward part of a layer (`LlamaMLP`): `down(act(gate(x)) * up(x))`.
#[derive(Module)]
pub struct LlamaMLP {
    /// Gate projection, `hidden_size` to `intermediate_size`.
    pub gate_proj: Linear,
    /// Up projection, `hidden_size` to `intermediate_size`.
    pub up_proj: Linear,
    /// Down projection, back to `hidden_size`.
    pub down_proj: Linear,
    act_fn: SiLUActivation,
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
        if shape.len() != 2 {
            return Err(Error::value_error(format!("LlamaModel: input_ids must be [B, T], got {:?}", &shape[..])));
        }
        let t = shape[1];
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
        if c.hidden_act != "silu" {
            return Err(Error::value_error(format!(
                "LlamaForCausalLM: hidden_act {:?} is not supported",
                c.hidden_act
            )));
        }
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
        let std = c.initializer_range;
        let linear = |i: usize, o: usize, bias: bool| -> Result<Linear> {
            let m = Linear::new(i, o, bias, g)?;
            nn::init::normal_(&m.weight, 0.0, std, g)?;
            if let Some(b) = &m.bias {
                nn::init::zeros_(b)?;
            }
            Ok(m)
        };
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
                    act_fn: SiLUActivation,
                },
                input_layernorm: LlamaRMSNorm::new(e, c.rms_norm_eps)?,
                post_attention_layernorm: LlamaRMSNorm::new(e, c.rms_norm_eps)?,
            })
        };
        let mut embed_tokens = Embedding::new(c.vocab_size, e, g)?;
        nn::init::normal_(&embed_tokens.weight, 0.0, std, g)?;
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
                rotary_emb: LlamaRotaryEmbedding::new(d, c.rope_theta)?,
            },
            lm_head,
        })
    }

    /// The mean cross-entropy of `logits` `[B, T, vocab]` against `targets` `[B, T]`
    /// (positions labelled -100 left out).
    pub fn loss(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
        let vocab = logits.shape()?[2] as i64;
        nn::functional::cross_entropy(
            &logits.reshape(&[-1, vocab])?,
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

impl Forward for LlamaForCausalLM {
    /// The logits `[B, T, vocab]` for token ids `[B, T]`.
    fn forward(&self, input_ids: &Tensor) -> Result<Tensor> {
        self.lm_head.call(&self.model.call(input_ids)?)
    }
}
