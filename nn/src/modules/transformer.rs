//! Attention and transformer modules: `nn.MultiheadAttention`, `nn.TransformerEncoderLayer`
//! and `nn.TransformerEncoder`, with PyTorch's parameters (names, shapes, initialisation) and
//! forwards.

use super::init;
use super::layers::{Dropout, Forward, LayerNorm, Linear};
use super::module::{Module, Parameter, Training};
use crate::error::{Result, bail};
use crate::nn::functional as F;
use crate::{Generator, Tensor};

/// Multi-head attention (`nn.MultiheadAttention`) over `F::multi_head_attention_forward`:
/// `in_proj_weight` `[3E, E]` (Xavier uniform) and `in_proj_bias` (zeros) when the keys and
/// values have the embedding's size, else `q_proj_weight`, `k_proj_weight` `[E, kdim]` and
/// `v_proj_weight` `[E, vdim]`; `out_proj` a linear layer whose bias starts at zero;
/// `bias_k` and `bias_v` (`[1, 1, E]`, Xavier normal) with `add_bias_kv`. The state dict's
/// keys are PyTorch's (`in_proj_weight`, `out_proj.weight`...).
///
/// ```
/// use torchfn::nn::MultiheadAttention;
/// let attention = MultiheadAttention::new(8, 2, 0.0, true, false, false, None, None, true, &torchfn::Generator::new())?;
/// let x = torchfn::randn([3, 5, 8], None, None, None)?; // batch_first: [N, L, E]
/// let (out, weights) = attention.forward(&x, &x, &x, None, true, None, true, false)?;
/// assert_eq!(out.shape()?, [3, 5, 8]);
/// assert_eq!(weights.unwrap().shape()?, [3, 5, 5]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(crate::nn::Module)]
pub struct MultiheadAttention {
    /// `[3E, E]`, when the keys and values have the embedding's size.
    pub in_proj_weight: Option<Parameter>,
    /// `[E, E]`, otherwise.
    pub q_proj_weight: Option<Parameter>,
    /// `[E, kdim]`, otherwise.
    pub k_proj_weight: Option<Parameter>,
    /// `[E, vdim]`, otherwise.
    pub v_proj_weight: Option<Parameter>,
    /// `[3E]`, with `bias`.
    pub in_proj_bias: Option<Parameter>,
    /// The output projection.
    pub out_proj: Linear,
    /// `[1, 1, E]`, with `add_bias_kv`.
    pub bias_k: Option<Parameter>,
    /// `[1, 1, E]`, with `add_bias_kv`.
    pub bias_v: Option<Parameter>,
    training: Training,
    #[module(skip)]
    num_heads: usize,
    #[module(skip)]
    dropout: f64,
    #[module(skip)]
    add_zero_attn: bool,
    #[module(skip)]
    batch_first: bool,
}

impl MultiheadAttention {
    /// Attention over `embed_dim` in `num_heads` heads (PyTorch's arguments, in its order; the
    /// keys and values have `kdim` and `vdim` features, the embedding's by default).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        embed_dim: usize,
        num_heads: usize,
        dropout: f64,
        bias: bool,
        add_bias_kv: bool,
        add_zero_attn: bool,
        kdim: Option<usize>,
        vdim: Option<usize>,
        batch_first: bool,
        generator: &Generator,
    ) -> Result<MultiheadAttention> {
        if num_heads == 0 || !embed_dim.is_multiple_of(num_heads) {
            bail!(Value, "MultiheadAttention(): embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})");
        }
        let (kdim, vdim) = (kdim.unwrap_or(embed_dim), vdim.unwrap_or(embed_dim));
        let xavier = |shape: Vec<usize>| -> Result<Parameter> {
            let t = crate::zeros(shape, None, None)?;
            init::xavier_uniform_(&t, 1.0, generator)?;
            Parameter::new(&t)
        };
        let packed = kdim == embed_dim && vdim == embed_dim;
        let separate = |cols: usize| if packed { Ok(None) } else { xavier(vec![embed_dim, cols]).map(Some) };
        let (q_proj_weight, k_proj_weight, v_proj_weight) = (separate(embed_dim)?, separate(kdim)?, separate(vdim)?);
        let in_proj_weight = if packed { Some(xavier(vec![3 * embed_dim, embed_dim])?) } else { None };
        let in_proj_bias = if bias { Some(Parameter::new(&crate::zeros([3 * embed_dim], None, None)?)?) } else { None };
        let out_proj = Linear::new(embed_dim, embed_dim, bias, generator)?;
        if let Some(b) = &out_proj.bias {
            init::zeros_(b)?;
        }
        let kv_bias = || -> Result<Option<Parameter>> {
            if !add_bias_kv {
                return Ok(None);
            }
            let t = crate::zeros([1, 1, embed_dim], None, None)?;
            init::xavier_normal_(&t, 1.0, generator)?;
            Ok(Some(Parameter::new(&t)?))
        };
        let (bias_k, bias_v) = (kv_bias()?, kv_bias()?);
        Ok(MultiheadAttention {
            in_proj_weight,
            q_proj_weight,
            k_proj_weight,
            v_proj_weight,
            in_proj_bias,
            out_proj,
            bias_k,
            bias_v,
            training: Training::default(),
            num_heads,
            dropout,
            add_zero_attn,
            batch_first,
        })
    }

    /// The attention of `query` over `key` and `value` (`[L, N, E]`, or `[N, L, E]` with
    /// `batch_first`, or unbatched `[L, E]`) as PyTorch's `forward`: the output and, with
    /// `need_weights`, the attention weights (averaged over the heads with
    /// `average_attn_weights`). Dropout applies while training.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        key_padding_mask: Option<&Tensor>,
        need_weights: bool,
        attn_mask: Option<&Tensor>,
        average_attn_weights: bool,
        is_causal: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let batched = query.shape()?.len() == 3;
        let sequence_first = |t: &Tensor| if self.batch_first && batched { t.transpose(0, 1) } else { Ok(t.clone()) };
        let (q, k, v) = (sequence_first(query)?, sequence_first(key)?, sequence_first(value)?);
        let embed_dim = self.out_proj.weight.shape()?[0];
        let (out, weights) = F::multi_head_attention_forward(
            &q,
            &k,
            &v,
            embed_dim as i64,
            self.num_heads as i64,
            self.in_proj_weight.as_deref(),
            self.in_proj_bias.as_deref(),
            self.bias_k.as_deref(),
            self.bias_v.as_deref(),
            self.add_zero_attn,
            self.dropout,
            &self.out_proj.weight,
            self.out_proj.bias.as_deref(),
            self.training.get(),
            key_padding_mask,
            need_weights,
            attn_mask,
            self.in_proj_weight.is_none(),
            self.q_proj_weight.as_deref(),
            self.k_proj_weight.as_deref(),
            self.v_proj_weight.as_deref(),
            None,
            None,
            average_attn_weights,
            is_causal,
        )?;
        Ok((sequence_first(&out)?, weights))
    }
}

/// The activation between a transformer layer's two linear layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `relu` (PyTorch's default).
    Relu,
    /// `gelu`, exact.
    Gelu,
}

/// One transformer encoder layer (`nn.TransformerEncoderLayer`): self-attention and a
/// feed-forward block (`linear2(dropout(activation(linear1(x))))`), each added to its input,
/// with layer norms after (or, with `norm_first`, before) each. The submodules have PyTorch's
/// names (`self_attn`, `linear1`, `dropout`, `linear2`, `norm1`, `norm2`, `dropout1`,
/// `dropout2`), so state dicts move between the two.
///
/// ```
/// use torchfn::nn::{Activation, Forward, Module, TransformerEncoderLayer};
/// let layer = TransformerEncoderLayer::new(8, 2, 16, 0.1, Activation::Relu, 1e-5, true, false, true, &torchfn::Generator::new())?;
/// let x = torchfn::randn([3, 5, 8], None, None, None)?;
/// assert_eq!(layer.forward(&x)?.shape()?, [3, 5, 8]);
/// assert!(layer.state_dict().contains_key("self_attn.in_proj_weight"));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(crate::nn::Module)]
pub struct TransformerEncoderLayer {
    /// The self-attention.
    pub self_attn: MultiheadAttention,
    /// `d_model → dim_feedforward`.
    pub linear1: Linear,
    /// Between the feed-forward block's layers.
    pub dropout: Dropout,
    /// `dim_feedforward → d_model`.
    pub linear2: Linear,
    /// After (or before) the attention block.
    pub norm1: LayerNorm,
    /// After (or before) the feed-forward block.
    pub norm2: LayerNorm,
    /// On the attention block's output.
    pub dropout1: Dropout,
    /// On the feed-forward block's output.
    pub dropout2: Dropout,
    #[module(skip)]
    activation: Activation,
    #[module(skip)]
    norm_first: bool,
    #[module(skip)]
    settings: EncoderSettings,
}

/// What a transformer encoder layer was made with, to make its copies.
#[derive(Clone, Copy, Debug)]
struct EncoderSettings {
    d_model: usize,
    nhead: usize,
    dim_feedforward: usize,
    dropout: f64,
    layer_norm_eps: f64,
    batch_first: bool,
    bias: bool,
}

impl TransformerEncoderLayer {
    /// A layer of PyTorch's arguments, in its order.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        d_model: usize,
        nhead: usize,
        dim_feedforward: usize,
        dropout: f64,
        activation: Activation,
        layer_norm_eps: f64,
        batch_first: bool,
        norm_first: bool,
        bias: bool,
        generator: &Generator,
    ) -> Result<TransformerEncoderLayer> {
        let self_attn =
            MultiheadAttention::new(d_model, nhead, dropout, bias, false, false, None, None, batch_first, generator)?;
        let norm = || LayerNorm::new(&[d_model], layer_norm_eps);
        Ok(TransformerEncoderLayer {
            self_attn,
            linear1: Linear::new(d_model, dim_feedforward, bias, generator)?,
            dropout: Dropout::new(dropout)?,
            linear2: Linear::new(dim_feedforward, d_model, bias, generator)?,
            norm1: norm()?,
            norm2: norm()?,
            dropout1: Dropout::new(dropout)?,
            dropout2: Dropout::new(dropout)?,
            activation,
            norm_first,
            settings: EncoderSettings { d_model, nhead, dim_feedforward, dropout, layer_norm_eps, batch_first, bias },
        })
    }

    /// The layer on `src`, with PyTorch's `src_mask` (an attention mask), `src_key_padding_mask`
    /// and `is_causal` hint.
    pub fn forward_masked(
        &self,
        src: &Tensor,
        src_mask: Option<&Tensor>,
        src_key_padding_mask: Option<&Tensor>,
        is_causal: bool,
    ) -> Result<Tensor> {
        let attention = |x: &Tensor| -> Result<Tensor> {
            let (out, _) = self.self_attn.forward(x, x, x, src_key_padding_mask, false, src_mask, true, is_causal)?;
            self.dropout1.forward(&out)
        };
        let feed_forward = |x: &Tensor| -> Result<Tensor> {
            let hidden = self.linear1.forward(x)?;
            let hidden = match self.activation {
                Activation::Relu => F::relu(&hidden, false)?,
                Activation::Gelu => F::gelu(&hidden, "none")?,
            };
            self.dropout2.forward(&self.linear2.forward(&self.dropout.forward(&hidden)?)?)
        };
        if self.norm_first {
            let x = src.add(&attention(&self.norm1.forward(src)?)?, 1)?;
            x.add(&feed_forward(&self.norm2.forward(&x)?)?, 1)
        } else {
            let x = self.norm1.forward(&src.add(&attention(src)?, 1)?)?;
            self.norm2.forward(&x.add(&feed_forward(&x)?, 1)?)
        }
    }

    /// A new layer with this one's settings and a copy of its parameters (PyTorch's
    /// `copy.deepcopy`, which `TransformerEncoder` makes its layers with).
    fn deep_copy(&self) -> Result<TransformerEncoderLayer> {
        let s = self.settings;
        let copy = TransformerEncoderLayer::new(
            s.d_model,
            s.nhead,
            s.dim_feedforward,
            s.dropout,
            self.activation,
            s.layer_norm_eps,
            s.batch_first,
            self.norm_first,
            s.bias,
            &Generator::new(),
        )?;
        copy.load_state_dict(&self.state_dict(), true)?;
        Ok(copy)
    }
}

impl Forward for TransformerEncoderLayer {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        self.forward_masked(input, None, None, false)
    }
}

/// A stack of transformer encoder layers (`nn.TransformerEncoder`): `num_layers` copies of
/// `encoder_layer` (the same initial parameters, as PyTorch's deep copies), named
/// `layers.0`, `layers.1`..., then the optional final `norm`.
///
/// ```
/// use torchfn::nn::{Activation, Forward, TransformerEncoder, TransformerEncoderLayer};
/// let layer = TransformerEncoderLayer::new(8, 2, 16, 0.0, Activation::Gelu, 1e-5, false, true, true, &torchfn::Generator::new())?;
/// let encoder = TransformerEncoder::new(layer, 3, None)?;
/// assert_eq!(encoder.layers.len(), 3);
/// assert_eq!(encoder.forward(&torchfn::randn([5, 2, 8], None, None, None)?)?.shape()?, [5, 2, 8]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(crate::nn::Module)]
pub struct TransformerEncoder {
    /// The layers, in order.
    pub layers: Vec<TransformerEncoderLayer>,
    /// A layer norm after the last layer, when given.
    pub norm: Option<LayerNorm>,
}

impl TransformerEncoder {
    /// `num_layers` copies of `encoder_layer`, then `norm`.
    pub fn new(encoder_layer: TransformerEncoderLayer, num_layers: usize, norm: Option<LayerNorm>) -> Result<Self> {
        let mut layers = Vec::with_capacity(num_layers);
        for _ in 1..num_layers {
            layers.push(encoder_layer.deep_copy()?);
        }
        if num_layers > 0 {
            layers.insert(0, encoder_layer);
        }
        Ok(TransformerEncoder { layers, norm })
    }

    /// The stack on `src`, each layer with the masks of
    /// [`TransformerEncoderLayer::forward_masked`].
    pub fn forward_masked(
        &self,
        src: &Tensor,
        mask: Option<&Tensor>,
        src_key_padding_mask: Option<&Tensor>,
        is_causal: bool,
    ) -> Result<Tensor> {
        let mut x = src.clone();
        for layer in &self.layers {
            x = layer.forward_masked(&x, mask, src_key_padding_mask, is_causal)?;
        }
        match &self.norm {
            Some(norm) => norm.forward(&x),
            None => Ok(x),
        }
    }
}

impl Forward for TransformerEncoder {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        self.forward_masked(input, None, None, false)
    }
}
