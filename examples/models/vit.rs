//! The Vision Transformer for image classification (transformers 5's `ViTForImageClassification`,
//! eager attention) written with torchfn's modules, as a PyTorch user ports it: the same module
//! tree (`vit.layers.{i}.attention.q_proj`, `mlp.fc1`...), parameter names and forward, so
//! PyTorch's `state_dict` (safetensors) loads by key. A strided convolution cuts the image into
//! patches, a CLS token and learned position embeddings join them, pre-norm encoder layers with
//! any of transformers' activations (the exact, erf GELU by default) follow, and the classifier
//! reads the CLS token. Any size: image and patch (square or not), channels, width, heads, head
//! width, layers, MLP width, labels.

use serde_json::Value as Json;
use torchfn::nn::{self, Conv2d, Dropout, Forward, Layer, LayerNorm, Linear, Module, Parameter, Training};
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
use common::{eager_attention, heads, normal_linear};
use config::Config;

/// The model's settings (transformers' `ViTConfig`, the fields the classifier uses).
#[derive(Clone, Debug, PartialEq)]
pub struct ViTConfig {
    /// Image height and width.
    pub image_size: [usize; 2],
    /// Patch height and width (the convolution's kernel and stride).
    pub patch_size: [usize; 2],
    /// Input channels.
    pub num_channels: usize,
    /// Embedding width.
    pub hidden_size: usize,
    /// Encoder layers.
    pub num_hidden_layers: usize,
    /// Attention heads per layer.
    pub num_attention_heads: usize,
    /// The width of one head, when set (`hidden_size / num_attention_heads` otherwise).
    pub head_dim: Option<usize>,
    /// The MLP's inner width.
    pub intermediate_size: usize,
    /// Classes.
    pub num_labels: usize,
    /// Dropout of the embeddings and after attention and MLP.
    pub hidden_dropout_prob: f64,
    /// Dropout of the attention weights.
    pub attention_probs_dropout_prob: f64,
    /// The layer norms' epsilon.
    pub layer_norm_eps: f64,
    /// The MLP's activation (a name of transformers' `ACT2FN`, see `activations.rs`).
    pub hidden_act: String,
    /// Whether the query, key and value projections have biases.
    pub qkv_bias: bool,
    /// The standard deviation of the initial weights.
    pub initializer_range: f64,
}

impl Default for ViTConfig {
    /// transformers' defaults (ViT-Base/16 at 224×224, two labels).
    fn default() -> ViTConfig {
        ViTConfig {
            image_size: [224, 224],
            patch_size: [16, 16],
            num_channels: 3,
            hidden_size: 768,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            head_dim: None,
            intermediate_size: 3072,
            num_labels: 2,
            hidden_dropout_prob: 0.0,
            attention_probs_dropout_prob: 0.0,
            layer_norm_eps: 1e-12,
            hidden_act: "gelu".into(),
            qkv_bias: true,
            initializer_range: 0.02,
        }
    }
}

impl ViTConfig {
    /// The settings of a JSON object of `ViTConfig`'s keys (`meta.json`'s `config`); a key that
    /// is absent keeps its default. `image_size` and `patch_size` are a number or `[h, w]`.
    pub fn from_json(json: &Json) -> Result<ViTConfig> {
        let d = ViTConfig::default();
        let c = Config::new("ViTConfig", json)?;
        Ok(ViTConfig {
            image_size: c.size_or("image_size", d.image_size)?,
            patch_size: c.size_or("patch_size", d.patch_size)?,
            num_channels: c.usize_or("num_channels", d.num_channels)?,
            hidden_size: c.usize_or("hidden_size", d.hidden_size)?,
            num_hidden_layers: c.usize_or("num_hidden_layers", d.num_hidden_layers)?,
            num_attention_heads: c.usize_or("num_attention_heads", d.num_attention_heads)?,
            head_dim: c.opt_usize("head_dim")?,
            intermediate_size: c.usize_or("intermediate_size", d.intermediate_size)?,
            num_labels: c.usize_or("num_labels", d.num_labels)?,
            hidden_dropout_prob: c.f64_or("hidden_dropout_prob", d.hidden_dropout_prob)?,
            attention_probs_dropout_prob: c.f64_or("attention_probs_dropout_prob", d.attention_probs_dropout_prob)?,
            layer_norm_eps: c.f64_or("layer_norm_eps", d.layer_norm_eps)?,
            hidden_act: c.string_or("hidden_act", &d.hidden_act)?,
            qkv_bias: c.bool_or("qkv_bias", d.qkv_bias)?,
            initializer_range: c.f64_or("initializer_range", d.initializer_range)?,
        })
    }

    /// The width of one attention head (`getattr(config, "head_dim", hidden_size //
    /// num_attention_heads)`, as `ViTAttention` reads it).
    fn head_dim(&self) -> usize {
        self.head_dim.unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }
}

/// A parameter of `shape` drawn from normal(0, `std`) (transformers' `trunc_normal_`, whose cut
/// at ±2 changes nothing at this width).
fn normal_parameter(shape: Vec<usize>, std: f64, g: &Generator) -> Result<Parameter> {
    let t = torchfn::zeros(shape, None, None)?;
    nn::init::normal_(&t, 0.0, std, g)?;
    Parameter::new(&t.clamp(Some((-2.0).into()), Some(2.0.into()))?)
}

/// The image as a sequence of patch embeddings (`ViTPatchEmbeddings`): one strided convolution.
#[derive(Module)]
pub struct ViTPatchEmbeddings {
    /// `Conv2d(num_channels, hidden_size, kernel_size=patch_size, stride=patch_size)`.
    pub projection: Conv2d,
    #[module(skip)]
    num_channels: usize,
}

impl Forward for ViTPatchEmbeddings {
    /// `[B, num_patches, hidden_size]` for images `[B, C, H, W]`.
    fn forward(&self, pixel_values: &Tensor) -> Result<Tensor> {
        let shape = pixel_values.shape()?;
        if shape.len() != 4 || shape[1] != self.num_channels {
            return Err(Error::value_error(format!(
                "Make sure that the channel dimension of the pixel values match with the one set in the \
                 configuration. Expected {} but got shape {:?}.",
                self.num_channels,
                &shape[..]
            )));
        }
        self.projection.call(pixel_values)?.flatten(2, -1)?.transpose(1, 2)
    }
}

/// The CLS token, the patch embeddings and the position embeddings (`ViTEmbeddings`).
#[derive(Module)]
pub struct ViTEmbeddings {
    /// `[1, 1, hidden_size]`.
    pub cls_token: Parameter,
    /// The patches.
    pub patch_embeddings: ViTPatchEmbeddings,
    /// `[1, num_patches + 1, hidden_size]`.
    pub position_embeddings: Parameter,
    dropout: Dropout,
    #[module(skip)]
    image_size: [usize; 2],
}

impl Forward for ViTEmbeddings {
    /// `[B, num_patches + 1, hidden_size]`, the CLS token first.
    fn forward(&self, pixel_values: &Tensor) -> Result<Tensor> {
        let shape = pixel_values.shape()?;
        if shape.len() != 4 {
            return Err(Error::value_error(format!("ViT: pixel_values must be [B, C, H, W], got {:?}", &shape[..])));
        }
        let (batch, height, width) = (shape[0] as i64, shape[2], shape[3]);
        let embeddings = self.patch_embeddings.call(pixel_values)?;
        if [height, width] != self.image_size {
            return Err(Error::value_error(format!(
                "Input image size ({height}*{width}) doesn't match model ({}*{}).",
                self.image_size[0], self.image_size[1]
            )));
        }
        let cls_tokens = self.cls_token.expand([batch, -1, -1])?;
        let embeddings = torchfn::cat(&[cls_tokens, embeddings], 1)?;
        self.dropout.call(&(&embeddings + &*self.position_embeddings)?)
    }
}

/// Bidirectional multi-head self-attention (`ViTAttention`, transformers' eager attention).
#[derive(Module)]
pub struct ViTAttention {
    /// Queries.
    pub q_proj: Linear,
    /// Keys.
    pub k_proj: Linear,
    /// Values.
    pub v_proj: Linear,
    /// The output projection.
    pub o_proj: Linear,
    training: Training,
    #[module(skip)]
    head_dim: usize,
    #[module(skip)]
    attention_dropout: f64,
}

impl ViTAttention {
    /// The attention's output and its weights (after dropout), as transformers' `ViTAttention`
    /// returns them: one call of the module, whose hooks see both.
    pub fn call(&self, hidden_states: &Tensor) -> Result<(Tensor, Tensor)> {
        nn::call_module(self, hidden_states.clone(), |x| self.forward(&x))
    }

    fn forward(&self, hidden_states: &Tensor) -> Result<(Tensor, Tensor)> {
        let split = |proj: &Linear| heads(proj, hidden_states, self.head_dim, "ViTAttention");
        let (q, k, v) = (split(&self.q_proj)?, split(&self.k_proj)?, split(&self.v_proj)?);
        let training = self.training.get();
        let p = if training { self.attention_dropout } else { 0.0 };
        // The functional dropout at the configured probability: not a module of the tree.
        let dropout = |w: &Tensor| nn::functional::dropout(w, p, training, false);
        let scaling = (self.head_dim as f64).powf(-0.5);
        let (out, weights) = eager_attention(&q, &k, &v, None, scaling, Some(DType::Float32), &dropout)?;
        Ok((self.o_proj.call(&out)?, weights))
    }
}

/// The feed-forward part of a layer (`ViTMLP`).
#[derive(Module)]
pub struct ViTMLP {
    activation_fn: Activation,
    /// Up projection.
    pub fc1: Linear,
    /// Down projection.
    pub fc2: Linear,
}

impl Forward for ViTMLP {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc2.call(&self.activation_fn.call(&self.fc1.call(x)?)?)
    }
}

/// A pre-norm encoder layer (`ViTLayer`).
#[derive(Module)]
pub struct ViTLayer {
    /// Self-attention.
    pub attention: ViTAttention,
    layernorm_before: LayerNorm,
    layernorm_after: LayerNorm,
    /// The MLP.
    pub mlp: ViTMLP,
    dropout: Dropout,
}

impl Forward for ViTLayer {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let attention = self.attention.call(&self.layernorm_before.call(x)?)?.0;
        let x = (&self.dropout.call(&attention)? + x)?;
        let mlp = self.mlp.call(&self.layernorm_after.call(&x)?)?;
        &self.dropout.call(&mlp)? + &x
    }
}

/// Embeddings, encoder layers and the final norm (`ViTModel` without its pooler).
#[derive(Module)]
pub struct ViTModel {
    /// CLS token, patches and positions.
    pub embeddings: ViTEmbeddings,
    /// The encoder layers.
    pub layers: Vec<ViTLayer>,
    layernorm: LayerNorm,
}

impl Forward for ViTModel {
    /// The normed last hidden states `[B, num_patches + 1, hidden_size]`.
    fn forward(&self, pixel_values: &Tensor) -> Result<Tensor> {
        // transformers casts the pixels to the weights' dtype.
        let dtype = self.embeddings.patch_embeddings.projection.weight.dtype()?;
        let mut x = self.embeddings.call(&pixel_values.to(dtype, false, false)?)?;
        for layer in &self.layers {
            x = layer.call(&x)?;
        }
        self.layernorm.call(&x)
    }
}

/// ViT with a linear classifier on the CLS token (`ViTForImageClassification`).
#[derive(Module)]
pub struct ViTForImageClassification {
    /// The transformer.
    pub vit: ViTModel,
    /// The head.
    pub classifier: Linear,
}

impl ViTForImageClassification {
    /// A model of `config`'s settings, initialised as transformers does (weights normal(0,
    /// `initializer_range`), biases zero, layer norms ones and zeros).
    pub fn new(config: &ViTConfig, g: &Generator) -> Result<ViTForImageClassification> {
        let c = config;
        let e = c.hidden_size;
        if e == 0 || c.num_attention_heads == 0 || c.head_dim() == 0 {
            return Err(Error::value_error(format!(
                "ViT: hidden_size ({e}), num_attention_heads ({}) and the head width ({}) must be positive",
                c.num_attention_heads,
                c.head_dim()
            )));
        }
        let ([h, w], [ph, pw]) = (c.image_size, c.patch_size);
        if ph == 0 || pw == 0 || h < ph || w < pw {
            return Err(Error::value_error(format!(
                "ViT: patch_size {:?} must be positive and fit in image_size {:?}",
                c.patch_size, c.image_size
            )));
        }
        if c.num_labels == 0 {
            return Err(Error::not_implemented("ViT: num_labels 0 (an nn.Identity head) is not supported"));
        }
        let activation_fn = Activation::new(&c.hidden_act)?;
        let std = c.initializer_range;
        let linear = |i: usize, o: usize, bias: bool| normal_linear(i, o, bias, std, g);
        let num_patches = (h / ph) * (w / pw);
        let inner = c.num_attention_heads * c.head_dim();
        let norm = || LayerNorm::new(&[e], c.layer_norm_eps);
        let projection = Conv2d::new(c.num_channels, e, [ph, pw], [ph, pw], [0, 0], [1, 1], 1, true, g)?;
        nn::init::normal_(&projection.weight, 0.0, std, g)?;
        if let Some(b) = &projection.bias {
            nn::init::zeros_(b)?;
        }
        let layer = || -> Result<ViTLayer> {
            Ok(ViTLayer {
                attention: ViTAttention {
                    q_proj: linear(e, inner, c.qkv_bias)?,
                    k_proj: linear(e, inner, c.qkv_bias)?,
                    v_proj: linear(e, inner, c.qkv_bias)?,
                    o_proj: linear(inner, e, true)?,
                    training: Training::default(),
                    head_dim: c.head_dim(),
                    attention_dropout: c.attention_probs_dropout_prob,
                },
                layernorm_before: norm()?,
                layernorm_after: norm()?,
                mlp: ViTMLP {
                    activation_fn,
                    fc1: linear(e, c.intermediate_size, true)?,
                    fc2: linear(c.intermediate_size, e, true)?,
                },
                dropout: Dropout::new(c.hidden_dropout_prob)?,
            })
        };
        Ok(ViTForImageClassification {
            vit: ViTModel {
                embeddings: ViTEmbeddings {
                    cls_token: normal_parameter(vec![1, 1, e], std, g)?,
                    patch_embeddings: ViTPatchEmbeddings { projection, num_channels: c.num_channels },
                    position_embeddings: normal_parameter(vec![1, num_patches + 1, e], std, g)?,
                    dropout: Dropout::new(c.hidden_dropout_prob)?,
                    image_size: c.image_size,
                },
                layers: (0..c.num_hidden_layers).map(|_| layer()).collect::<Result<_>>()?,
                layernorm: norm()?,
            },
            classifier: linear(e, c.num_labels, true)?,
        })
    }

    /// The mean cross-entropy of `logits` `[B, num_labels]` against class `labels` `[B]`.
    pub fn loss(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
        nn::functional::cross_entropy(logits, labels, None, None, -100, None, "mean", 0.0)
    }
}

impl Forward for ViTForImageClassification {
    /// The logits `[B, num_labels]` for images `[B, C, H, W]`.
    fn forward(&self, pixel_values: &Tensor) -> Result<Tensor> {
        let sequence_output = self.vit.call(pixel_values)?;
        self.classifier.call(&sequence_output.select(1, 0)?)
    }
}
