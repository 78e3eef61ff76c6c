//! GPT-2 (transformers' `GPT2LMHeadModel`, eager attention) written with torchfn's modules, as a
//! PyTorch user ports it: the same module tree, parameter names and forward, so PyTorch's
//! `state_dict` (safetensors) loads by key. Any size: layers, heads, width, vocabulary, context.

use torchfn::nn::{self, Dropout, Embedding, Forward, Layer, LayerNorm, Linear, Module, Parameter};
use torchfn::prelude::*;

/// transformers' activations (`examples/models/activations.rs`): GPT-2's `NewGELUActivation`.
#[path = "activations.rs"]
pub mod activations;

/// What the ports share (`examples/models/common.rs`): the causal mask and the loss.
#[path = "common.rs"]
pub mod common;

use activations::Activation;
use common::causal_mask;

/// The model's sizes (`GPT2Config`).
#[derive(Clone, Copy, Debug)]
pub struct GptConfig {
    /// Transformer blocks.
    pub n_layer: usize,
    /// Attention heads per block.
    pub n_head: usize,
    /// Embedding width.
    pub n_embd: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Longest context.
    pub n_positions: usize,
    /// Dropout probability (residual, embedding and attention).
    pub dropout: f64,
}

/// GPT-2's `Conv1D`: `y = x W + b` with `W` of shape `(in, out)`.
#[derive(Module)]
#[module(extra_repr = describe)]
pub struct Conv1D {
    /// `(nx, nf)`: input width by output width.
    pub weight: Parameter,
    /// `(nf,)`.
    pub bias: Parameter,
}

impl Conv1D {
    fn new(nf: usize, nx: usize, std: f64, g: &Generator) -> Result<Conv1D> {
        let weight = torchfn::zeros([nx, nf], None, None)?;
        nn::init::normal_(&weight, 0.0, std, g)?;
        Ok(Conv1D { weight: Parameter::new(&weight)?, bias: Parameter::new(&torchfn::zeros([nf], None, None)?)? })
    }

    fn describe(&self) -> String {
        let s = self.weight.shape().unwrap_or_default();
        format!("nf={}, nx={}", s[1], s[0])
    }
}

impl Forward for Conv1D {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let shape = x.shape()?;
        let (nx, nf) = (self.weight.shape()?[0] as i64, self.weight.shape()?[1] as i64);
        let y = torchfn::addmm(&self.bias, &x.reshape(&[-1, nx])?, &self.weight, 1, 1)?;
        let mut out: Vec<i64> = shape[..shape.len() - 1].iter().map(|&n| n as i64).collect();
        out.push(nf);
        y.reshape(&out)
    }
}

/// Causal self-attention (`GPT2Attention`).
#[derive(Module)]
pub struct GPT2Attention {
    /// Queries, keys and values in one projection.
    pub c_attn: Conv1D,
    /// The output projection.
    pub c_proj: Conv1D,
    attn_dropout: Dropout,
    resid_dropout: Dropout,
    #[module(skip)]
    n_head: usize,
}

impl GPT2Attention {
    /// The attention's output and its weights (after dropout), as transformers'
    /// `GPT2Attention` returns them: one call of the module, whose hooks see both.
    pub fn call(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        nn::call_module(self, x.clone(), |x| self.forward(&x))
    }

    fn forward(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        let s = x.shape()?;
        let (b, t, e) = (s[0] as i64, s[1] as i64, s[2] as i64);
        let h = self.n_head as i64;
        let d = e / h;
        let qkv = self.c_attn.call(x)?;
        let heads = |i: i64| qkv.narrow(2, i * e, e)?.view(vec![b, t, h, d])?.transpose(1, 2);
        let (q, k, v) = (heads(0)?, heads(1)?, heads(2)?);
        let scores = (&q.matmul(&k.transpose(-1, -2)?)? * (d as f64).powf(-0.5))?;
        let scores = (&scores + &causal_mask(t as usize, x.device()?)?)?;
        // transformers' eager attention drops weights with the functional dropout at the
        // module's probability: not a call of the module.
        let weights = self.attn_dropout.forward(&scores.softmax(-1, None)?)?;
        let a = weights.matmul(&v)?.transpose(1, 2)?.reshape(&[b, t, e])?;
        Ok((self.resid_dropout.call(&self.c_proj.call(&a)?)?, weights))
    }
}

/// The feed-forward part of a block (`GPT2MLP`).
#[derive(Module)]
pub struct GPT2MLP {
    /// Up projection.
    pub c_fc: Conv1D,
    /// Down projection.
    pub c_proj: Conv1D,
    act: Activation,
    dropout: Dropout,
}

impl Forward for GPT2MLP {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.dropout.call(&self.c_proj.call(&self.act.call(&self.c_fc.call(x)?)?)?)
    }
}

/// A pre-norm transformer block (`GPT2Block`).
#[derive(Module)]
pub struct GPT2Block {
    ln_1: LayerNorm,
    attn: GPT2Attention,
    ln_2: LayerNorm,
    mlp: GPT2MLP,
}

impl Forward for GPT2Block {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = (x + &self.attn.call(&self.ln_1.call(x)?)?.0)?;
        &x + &self.mlp.call(&self.ln_2.call(&x)?)?
    }
}

/// Embeddings, blocks and the final norm (`GPT2Model`).
#[derive(Module)]
pub struct GPT2Model {
    /// Token embeddings (tied to the head).
    pub wte: Embedding,
    /// Position embeddings.
    pub wpe: Embedding,
    drop: Dropout,
    /// The blocks.
    pub h: Vec<GPT2Block>,
    ln_f: LayerNorm,
}

/// GPT-2 with its language-model head (`GPT2LMHeadModel`), the head tied to the token
/// embeddings.
#[derive(Module)]
pub struct GPT2LMHeadModel {
    /// The transformer.
    pub transformer: GPT2Model,
    /// The head (`lm_head.weight` is `transformer.wte.weight`).
    pub lm_head: Linear,
}

impl GPT2LMHeadModel {
    /// A model of `config`'s sizes, initialised as transformers does (normal(0, 0.02), the
    /// residual projections scaled by `1/√(2 n_layer)`).
    pub fn new(config: GptConfig, g: &Generator) -> Result<GPT2LMHeadModel> {
        let GptConfig { n_layer, n_head, n_embd: e, vocab_size, n_positions, dropout } = config;
        if n_head == 0 || e % n_head != 0 {
            return Err(Error::value_error(format!("GPT: n_embd ({e}) must be a multiple of n_head ({n_head})")));
        }
        let std = 0.02;
        let proj_std = std / (2.0 * n_layer as f64).sqrt();
        let embedding = |n: usize| -> Result<Embedding> {
            let m = Embedding::new(n, e, g)?;
            nn::init::normal_(&m.weight, 0.0, std, g)?;
            Ok(m)
        };
        let block = || -> Result<GPT2Block> {
            Ok(GPT2Block {
                ln_1: LayerNorm::new(&[e], 1e-5)?,
                attn: GPT2Attention {
                    c_attn: Conv1D::new(3 * e, e, std, g)?,
                    c_proj: Conv1D::new(e, e, proj_std, g)?,
                    attn_dropout: Dropout::new(dropout)?,
                    resid_dropout: Dropout::new(dropout)?,
                    n_head,
                },
                ln_2: LayerNorm::new(&[e], 1e-5)?,
                mlp: GPT2MLP {
                    c_fc: Conv1D::new(4 * e, e, std, g)?,
                    c_proj: Conv1D::new(e, 4 * e, proj_std, g)?,
                    act: Activation::new("gelu_new")?,
                    dropout: Dropout::new(dropout)?,
                },
            })
        };
        let wte = embedding(vocab_size)?;
        let lm_head = Linear { weight: wte.weight.clone(), bias: None };
        Ok(GPT2LMHeadModel {
            transformer: GPT2Model {
                wte,
                wpe: embedding(n_positions)?,
                drop: Dropout::new(dropout)?,
                h: (0..n_layer).map(|_| block()).collect::<Result<_>>()?,
                ln_f: LayerNorm::new(&[e], 1e-5)?,
            },
            lm_head,
        })
    }

    /// The mean cross-entropy of `logits` against `targets` `[B, T]`: [`common::lm_loss`].
    pub fn loss(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
        common::lm_loss(logits, targets)
    }
}

impl Forward for GPT2Model {
    /// The final hidden states `[B, T, n_embd]` for token ids `[B, T]`.
    fn forward(&self, input_ids: &Tensor) -> Result<Tensor> {
        let t = input_ids.shape()?[1];
        let positions = torchfn::arange(t as i64, input_ids.dtype()?, input_ids.device()?)?;
        let mut x = self.drop.call(&(&self.wte.call(input_ids)? + &self.wpe.call(&positions)?)?)?;
        for block in &self.h {
            x = block.call(&x)?;
        }
        self.ln_f.call(&x)
    }
}

impl Forward for GPT2LMHeadModel {
    /// The logits `[B, T, vocab]` for token ids `[B, T]`.
    fn forward(&self, input_ids: &Tensor) -> Result<Tensor> {
        self.lm_head.call(&self.transformer.call(input_ids)?)
    }
}
