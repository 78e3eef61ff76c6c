//! diffusers' `UNet2DModel` (the denoiser of DDPM-style diffusion) written with torchfn's modules,
//! as a PyTorch user ports it: the same module tree, parameter names and forward as diffusers
//! 0.42 (`unets/unet_2d.py`, `unet_2d_blocks.py`, `resnet.py`, `attention_processor.py` with its
//! default `AttnProcessor2_0`, `embeddings.py`, `downsampling.py`, `upsampling.py`), so PyTorch's
//! `state_dict` (safetensors) loads by key. Config-driven ([`UNet2DConfig`], diffusers' config
//! keys): any number of blocks and widths, layers per block, `DownBlock2D`/`AttnDownBlock2D` and
//! `UpBlock2D`/`AttnUpBlock2D` blocks, norm groups, attention head size, dropout, the `default` or
//! `scale_shift` time conditioning, conv or resnet down/upsamplers. Options it does not implement
//! are errors that name them.
//!
//! One thing torchfn cannot express directly is written here: module lists holding modules of
//! several types (diffusers' `down_blocks`, `up_blocks`, `downsamplers` and `Attention.to_out`),
//! as enums that stand for their variant (`module_enum!` of `common.rs`) and `ToOut`.

use serde_json::Value as Json;
use torchfn::nn::{
    self, AvgPool2d, Conv2d, Dropout, Forward, GroupNorm, Layer, Linear, Module, SiLU, Visitor, VisitorMut,
};
use torchfn::prelude::*;

/// What the ports share (`examples/models/common.rs`): `module_enum!`.
#[macro_use]
#[path = "common.rs"]
pub mod common;

/// The typed config reader (`examples/models/config.rs`).
#[path = "config.rs"]
pub mod config;

use config::Config;

/// diffusers' `UNet2DModel` config (`model.config`), with diffusers' defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct UNet2DConfig {
    /// The height and width of samples (informational: any size divisible by `2^(blocks-1)` runs).
    pub sample_size: Option<usize>,
    /// Channels of the input.
    pub in_channels: usize,
    /// Channels of the output.
    pub out_channels: usize,
    /// Whether the input is mapped from `[0, 1]` to `[-1, 1]` first (`2 x - 1`).
    pub center_input_sample: bool,
    /// How timesteps are embedded: only `"positional"` (sinusoidal `Timesteps`) is implemented.
    pub time_embedding_type: String,
    /// The width of the time embedding; `4 * block_out_channels[0]` when `None` or 0 (diffusers'
    /// `time_embedding_dim or block_out_channels[0] * 4`).
    pub time_embedding_dim: Option<usize>,
    /// `Timesteps`' `downscale_freq_shift`.
    pub freq_shift: f64,
    /// Whether the sinusoidal embedding is `[cos, sin]` (else `[sin, cos]`).
    pub flip_sin_to_cos: bool,
    /// One per resolution: `"DownBlock2D"` or `"AttnDownBlock2D"`.
    pub down_block_types: Vec<String>,
    /// `"UNetMidBlock2D"`, or `None` for no middle block.
    pub mid_block_type: Option<String>,
    /// One per resolution, deepest first: `"UpBlock2D"` or `"AttnUpBlock2D"`.
    pub up_block_types: Vec<String>,
    /// The channels of each resolution.
    pub block_out_channels: Vec<usize>,
    /// Resnets per down block (up blocks have one more).
    pub layers_per_block: usize,
    /// The middle block's `output_scale_factor` (resnets and attention).
    pub mid_block_scale_factor: f64,
    /// The padding of `Downsample2D`'s stride-2 convolution (0 pads right and bottom by one).
    pub downsample_padding: usize,
    /// `AttnDownBlock2D`'s downsampler: `"conv"` (`Downsample2D`) or `"resnet"`.
    pub downsample_type: String,
    /// `AttnUpBlock2D`'s upsampler: `"conv"` (`Upsample2D`) or `"resnet"`.
    pub upsample_type: String,
    /// The resnets' dropout probability.
    pub dropout: f64,
    /// The activation: `"silu"` (or its alias `"swish"`) is implemented.
    pub act_fn: String,
    /// Channels per attention head; a block's width (one head) when `None`.
    pub attention_head_dim: Option<usize>,
    /// Groups of every GroupNorm.
    pub norm_num_groups: usize,
    /// Groups of the middle block's attention norm; `norm_num_groups` when `None` (with the
    /// `default` time conditioning; no norm with `scale_shift`).
    pub attn_norm_num_groups: Option<usize>,
    /// Every GroupNorm's epsilon.
    pub norm_eps: f64,
    /// How resnets take the time embedding: `"default"` (added) or `"scale_shift"`.
    pub resnet_time_scale_shift: String,
    /// Whether the middle block has attention (only `true` is implemented).
    pub add_attention: bool,
    /// Class conditioning (only `None` is implemented).
    pub class_embed_type: Option<String>,
    /// Class conditioning's class count (only `None` is implemented).
    pub num_class_embeds: Option<usize>,
    /// For the `"learned"` time embedding (not implemented).
    pub num_train_timesteps: Option<usize>,
}

impl Default for UNet2DConfig {
    /// diffusers' defaults.
    fn default() -> UNet2DConfig {
        let strings = |s: &[&str]| s.iter().map(|s| s.to_string()).collect();
        UNet2DConfig {
            sample_size: None,
            in_channels: 3,
            out_channels: 3,
            center_input_sample: false,
            time_embedding_type: "positional".into(),
            time_embedding_dim: None,
            freq_shift: 0.0,
            flip_sin_to_cos: true,
            down_block_types: strings(&["DownBlock2D", "AttnDownBlock2D", "AttnDownBlock2D", "AttnDownBlock2D"]),
            mid_block_type: Some("UNetMidBlock2D".into()),
            up_block_types: strings(&["AttnUpBlock2D", "AttnUpBlock2D", "AttnUpBlock2D", "UpBlock2D"]),
            block_out_channels: vec![224, 448, 672, 896],
            layers_per_block: 2,
            mid_block_scale_factor: 1.0,
            downsample_padding: 1,
            downsample_type: "conv".into(),
            upsample_type: "conv".into(),
            dropout: 0.0,
            act_fn: "silu".into(),
            attention_head_dim: Some(8),
            norm_num_groups: 32,
            attn_norm_num_groups: None,
            norm_eps: 1e-5,
            resnet_time_scale_shift: "default".into(),
            add_attention: true,
            class_embed_type: None,
            num_class_embeds: None,
            num_train_timesteps: None,
        }
    }
}

impl UNet2DConfig {
    /// The config from diffusers' JSON (`model.config`, `config.json`): missing keys take
    /// diffusers' defaults; a key of the wrong type is an error naming it.
    pub fn from_json(json: &Json) -> Result<UNet2DConfig> {
        let d = UNet2DConfig::default();
        let c = Config::new("UNet2DConfig", json)?;
        // `mid_block_type: null` means no middle block, `attention_head_dim: null` one head per
        // block; a missing key means the default.
        let mid_block_type =
            if c.contains("mid_block_type") { c.opt_string("mid_block_type")? } else { d.mid_block_type };
        let attention_head_dim =
            if c.contains("attention_head_dim") { c.opt_usize("attention_head_dim")? } else { d.attention_head_dim };
        Ok(UNet2DConfig {
            sample_size: c.opt_size("sample_size")?.map(|[h, _]| h),
            in_channels: c.usize_or("in_channels", d.in_channels)?,
            out_channels: c.usize_or("out_channels", d.out_channels)?,
            center_input_sample: c.bool_or("center_input_sample", d.center_input_sample)?,
            time_embedding_type: c.string_or("time_embedding_type", &d.time_embedding_type)?,
            time_embedding_dim: c.opt_usize("time_embedding_dim")?,
            freq_shift: c.f64_or("freq_shift", d.freq_shift)?,
            flip_sin_to_cos: c.bool_or("flip_sin_to_cos", d.flip_sin_to_cos)?,
            down_block_types: c.strings_or("down_block_types", &d.down_block_types)?,
            mid_block_type,
            up_block_types: c.strings_or("up_block_types", &d.up_block_types)?,
            block_out_channels: c.usizes_or("block_out_channels", &d.block_out_channels)?,
            layers_per_block: c.usize_or("layers_per_block", d.layers_per_block)?,
            mid_block_scale_factor: c.f64_or("mid_block_scale_factor", d.mid_block_scale_factor)?,
            downsample_padding: c.usize_or("downsample_padding", d.downsample_padding)?,
            downsample_type: c.string_or("downsample_type", &d.downsample_type)?,
            upsample_type: c.string_or("upsample_type", &d.upsample_type)?,
            dropout: c.f64_or("dropout", d.dropout)?,
            act_fn: c.string_or("act_fn", &d.act_fn)?,
            attention_head_dim,
            norm_num_groups: c.usize_or("norm_num_groups", d.norm_num_groups)?,
            attn_norm_num_groups: c.opt_usize("attn_norm_num_groups")?,
            norm_eps: c.f64_or("norm_eps", d.norm_eps)?,
            resnet_time_scale_shift: c.string_or("resnet_time_scale_shift", &d.resnet_time_scale_shift)?,
            add_attention: c.bool_or("add_attention", d.add_attention)?,
            class_embed_type: c.opt_string("class_embed_type")?,
            num_class_embeds: c.opt_usize("num_class_embeds")?,
            num_train_timesteps: c.opt_usize("num_train_timesteps")?,
        })
    }
}

fn unsupported(what: String) -> Error {
    Error::value_error(format!("UNet2DModel port: {what} is not implemented"))
}

/// A `k`×`k` convolution with `padding` and `stride`, bias, PyTorch's default initialisation.
fn conv(input: usize, output: usize, k: usize, stride: usize, padding: usize, g: &Generator) -> Result<Conv2d> {
    Conv2d::new(input, output, [k, k], [stride, stride], [padding, padding], [1, 1], 1, true, g)
}

/// The sinusoidal timestep embedding (diffusers' `Timesteps`, `get_timestep_embedding` with
/// `max_period = 10000`): `[N]` timesteps to `[N, num_channels]` float32.
#[derive(Module)]
pub struct Timesteps {
    #[module(skip)]
    num_channels: usize,
    #[module(skip)]
    flip_sin_to_cos: bool,
    #[module(skip)]
    downscale_freq_shift: f64,
    #[module(skip)]
    scale: f64,
}

impl Forward for Timesteps {
    fn forward(&self, timesteps: &Tensor) -> Result<Tensor> {
        if timesteps.ndim()? != 1 {
            return Err(Error::value_error("Timesteps: timesteps must be a 1-d tensor"));
        }
        let half = self.num_channels / 2;
        let device = timesteps.device()?;
        // The float32 operations of `get_timestep_embedding`, in its order.
        let exponent = (&torchfn::arange(half as i64, DType::Float32, device)? * -(10000f64.ln()))?;
        let exponent = (&exponent / (half as f64 - self.downscale_freq_shift))?;
        let freqs = exponent.exp()?.unsqueeze(0)?;
        let emb = (&timesteps.unsqueeze(1)?.to(DType::Float32, false, false)? * &freqs)?;
        let emb = (&emb * self.scale)?;
        let (sin, cos) = (emb.sin()?, emb.cos()?);
        let emb = if self.flip_sin_to_cos { torchfn::cat(&[cos, sin], -1)? } else { torchfn::cat(&[sin, cos], -1)? };
        if self.num_channels % 2 == 1 { nn::functional::pad(&emb, vec![0, 1, 0, 0], "constant", None) } else { Ok(emb) }
    }
}

/// The time embedding's MLP (diffusers' `TimestepEmbedding`): `linear_2(act(linear_1(x)))`.
#[derive(Module)]
pub struct TimestepEmbedding {
    linear_1: Linear,
    act: SiLU,
    linear_2: Linear,
}

impl Forward for TimestepEmbedding {
    fn forward(&self, sample: &Tensor) -> Result<Tensor> {
        self.linear_2.call(&self.act.call(&self.linear_1.call(sample)?)?)
    }
}

/// How a resnet takes the time embedding (`time_embedding_norm`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum TimeNorm {
    /// Added after `conv1`.
    Default,
    /// `norm2(h) * (1 + scale) + shift`.
    ScaleShift,
}

module_enum! {
    /// `Downsample2D.conv`: `nn.Conv2d` (`use_conv=True`) or `nn.AvgPool2d`.
    pub enum DownsampleOp {
        /// The 3×3 stride-2 convolution.
        Conv2d(Conv2d),
        /// 2×2 average pooling.
        AvgPool2d(AvgPool2d),
    }
}

/// Halves the resolution (diffusers' `Downsample2D`): a 3×3 stride-2 convolution (right and
/// bottom padded by one first when its padding is 0), or 2×2 average pooling.
#[derive(Module)]
pub struct Downsample2D {
    conv: DownsampleOp,
    #[module(skip)]
    padding: usize,
}

impl Downsample2D {
    fn new(channels: usize, use_conv: bool, padding: usize, g: &Generator) -> Result<Downsample2D> {
        let conv = if use_conv {
            DownsampleOp::Conv2d(conv(channels, channels, 3, 2, padding, g)?)
        } else {
            DownsampleOp::AvgPool2d(AvgPool2d::new(2, 2, 0, false, true))
        };
        Ok(Downsample2D { conv, padding })
    }
}

impl Forward for Downsample2D {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match &self.conv {
            DownsampleOp::Conv2d(c) if self.padding == 0 => {
                c.call(&nn::functional::pad(x, vec![0, 1, 0, 1], "constant", Some(0.0))?)
            }
            DownsampleOp::Conv2d(c) => c.call(x),
            DownsampleOp::AvgPool2d(p) => p.call(x),
        }
    }
}

/// Doubles the resolution (diffusers' `Upsample2D`): nearest ×2, then a 3×3 convolution when it
/// has one.
#[derive(Module)]
pub struct Upsample2D {
    conv: Option<Conv2d>,
}

impl Forward for Upsample2D {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = nn::functional::interpolate(x, None, Some(2.0.into()), "nearest", None)?;
        match &self.conv {
            Some(c) => c.call(&x),
            None => Ok(x),
        }
    }
}

/// A residual block conditioned on the time embedding (diffusers' `ResnetBlock2D`).
#[derive(Module)]
pub struct ResnetBlock2D {
    norm1: GroupNorm,
    conv1: Conv2d,
    time_emb_proj: Linear,
    norm2: GroupNorm,
    dropout: Dropout,
    conv2: Conv2d,
    nonlinearity: SiLU,
    upsample: Option<Upsample2D>,
    downsample: Option<Downsample2D>,
    conv_shortcut: Option<Conv2d>,
    #[module(skip)]
    time_norm: TimeNorm,
    #[module(skip)]
    output_scale_factor: f64,
}

/// What a block's resnets share.
#[derive(Clone, Copy)]
struct ResnetSettings {
    temb_channels: usize,
    groups: usize,
    eps: f64,
    dropout: f64,
    time_norm: TimeNorm,
    output_scale_factor: f64,
}

/// Whether a resnet changes the resolution.
#[derive(Clone, Copy, PartialEq)]
enum Resample {
    None,
    Up,
    Down,
}

impl ResnetBlock2D {
    fn new(
        in_channels: usize,
        out_channels: usize,
        s: ResnetSettings,
        resample: Resample,
        g: &Generator,
    ) -> Result<ResnetBlock2D> {
        let proj = if s.time_norm == TimeNorm::ScaleShift { 2 * out_channels } else { out_channels };
        Ok(ResnetBlock2D {
            norm1: GroupNorm::new(s.groups, in_channels, s.eps)?,
            conv1: conv(in_channels, out_channels, 3, 1, 1, g)?,
            time_emb_proj: Linear::new(s.temb_channels, proj, true, g)?,
            norm2: GroupNorm::new(s.groups, out_channels, s.eps)?,
            dropout: Dropout::new(s.dropout)?,
            conv2: conv(out_channels, out_channels, 3, 1, 1, g)?,
            nonlinearity: SiLU::new(false),
            upsample: (resample == Resample::Up).then_some(Upsample2D { conv: None }),
            downsample: (resample == Resample::Down)
                .then(|| Downsample2D::new(in_channels, false, 1, g))
                .transpose()?,
            conv_shortcut: (in_channels != out_channels)
                .then(|| conv(in_channels, out_channels, 1, 1, 0, g))
                .transpose()?,
            time_norm: s.time_norm,
            output_scale_factor: s.output_scale_factor,
        })
    }

    /// The block on `x` `[N, C, H, W]` with the time embedding `temb` `[N, T]` (one module call).
    pub fn call(&self, x: &Tensor, temb: &Tensor) -> Result<Tensor> {
        nn::call_module(self, (x.clone(), temb.clone()), |(x, temb)| self.forward(&x, &temb))
    }

    fn forward(&self, input: &Tensor, temb: &Tensor) -> Result<Tensor> {
        let mut input = input.clone();
        let mut h = self.nonlinearity.call(&self.norm1.call(&input)?)?;
        if let Some(up) = &self.upsample {
            input = up.call(&input)?;
            h = up.call(&h)?;
        } else if let Some(down) = &self.downsample {
            input = down.call(&input)?;
            h = down.call(&h)?;
        }
        let h = self.conv1.call(&h)?;
        let temb = self.time_emb_proj.call(&self.nonlinearity.call(temb)?)?.unsqueeze(-1)?.unsqueeze(-1)?;
        let h = match self.time_norm {
            TimeNorm::Default => self.norm2.call(&(&h + &temb)?)?,
            TimeNorm::ScaleShift => {
                // `time_scale, time_shift = torch.chunk(temb, 2, dim=1)`
                let [scale, shift] = &temb.chunk(2, 1)?[..] else {
                    return Err(Error::value_error("ResnetBlock2D: the time embedding must split in two"));
                };
                let h = self.norm2.call(&h)?;
                (&(&h * &(scale + 1.0)?)? + shift)?
            }
        };
        let h = self.conv2.call(&self.dropout.call(&self.nonlinearity.call(&h)?)?)?;
        let input = match &self.conv_shortcut {
            Some(c) => c.call(&input)?,
            None => input,
        };
        &(&input + &h)? / self.output_scale_factor
    }
}

/// `Attention.to_out`: PyTorch's `nn.ModuleList([nn.Linear, nn.Dropout])`, the output projection
/// and its dropout (torchfn's `Vec<M>` is a ModuleList of one module type).
// Local: `nn::Sequential` holds mixed layers but prints `Sequential`, not `ModuleList`.
pub struct ToOut(pub Linear, pub Dropout);

impl Module for ToOut {
    fn visit<'m>(&'m self, visitor: &mut dyn Visitor<'m>) {
        visitor.module("0", self.0.as_dyn());
        visitor.module("1", self.1.as_dyn());
    }
    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut) {
        visitor.module("0", &mut self.0);
        visitor.module("1", &mut self.1);
    }
    fn type_name(&self) -> &'static str {
        "ModuleList"
    }
    fn as_dyn(&self) -> &dyn Module {
        self
    }
}

/// Self-attention over the pixels of a feature map with a residual connection (diffusers'
/// `Attention` as `UNet2DModel`'s blocks build it, `_from_deprecated_attn_block`, run by its
/// default `AttnProcessor2_0`: `scaled_dot_product_attention`, scale `1/√head_dim`).
#[derive(Module)]
pub struct Attention {
    group_norm: Option<GroupNorm>,
    to_q: Linear,
    to_k: Linear,
    to_v: Linear,
    to_out: ToOut,
    #[module(skip)]
    heads: usize,
    #[module(skip)]
    rescale_output_factor: f64,
}

impl Attention {
    fn new(
        channels: usize,
        head_dim: usize,
        groups: Option<usize>,
        eps: f64,
        rescale_output_factor: f64,
        g: &Generator,
    ) -> Result<Attention> {
        let heads = channels / head_dim.max(1);
        if head_dim == 0 || heads == 0 {
            return Err(Error::value_error(format!(
                "Attention: attention_head_dim ({head_dim}) must be between 1 and the block's channels ({channels})"
            )));
        }
        let inner = heads * head_dim;
        Ok(Attention {
            group_norm: groups.map(|groups| GroupNorm::new(groups, channels, eps)).transpose()?,
            to_q: Linear::new(channels, inner, true, g)?,
            to_k: Linear::new(channels, inner, true, g)?,
            to_v: Linear::new(channels, inner, true, g)?,
            to_out: ToOut(Linear::new(inner, channels, true, g)?, Dropout::new(0.0)?),
            heads,
            rescale_output_factor,
        })
    }
}

impl Forward for Attention {
    /// `x` `[N, C, H, W]` plus attention over its `H W` positions, `/ rescale_output_factor`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let s = x.shape()?;
        if s.len() != 4 {
            return Err(Error::value_error(format!("Attention: expected [N, C, H, W], got {:?}", &s[..])));
        }
        let (b, c, height, width) = (s[0] as i64, s[1] as i64, s[2] as i64, s[3] as i64);
        let mut h = x.view(vec![b, c, height * width])?.transpose(1, 2)?;
        if let Some(norm) = &self.group_norm {
            h = norm.call(&h.transpose(1, 2)?)?.transpose(1, 2)?;
        }
        let (q, k, v) = (self.to_q.call(&h)?, self.to_k.call(&h)?, self.to_v.call(&h)?);
        let heads = self.heads as i64;
        let head_dim = k.shape()?[2] as i64 / heads;
        let split = |t: &Tensor| t.view(vec![b, -1, heads, head_dim])?.transpose(1, 2);
        let (q, k, v) = (split(&q)?, split(&k)?, split(&v)?);
        let a = nn::functional::scaled_dot_product_attention(&q, &k, &v, None, 0.0, false, None)?;
        let a = a.transpose(1, 2)?.reshape(&[b, -1, heads * head_dim])?;
        let out = self.to_out.1.call(&self.to_out.0.call(&a)?)?;
        let out = out.transpose(-1, -2)?.reshape(&[b, c, height, width])?;
        &(&out + x)? / self.rescale_output_factor
    }
}

module_enum! {
    /// A down or up block's resolution changer: `Downsample2D`, `Upsample2D`, or a resnet that
    /// resamples (`downsample_type`/`upsample_type` `"resnet"`).
    pub enum Sampler {
        /// `Downsample2D`.
        Downsample2D(Downsample2D),
        /// `Upsample2D`.
        Upsample2D(Upsample2D),
        /// `ResnetBlock2D` with `down=True` or `up=True`.
        ResnetBlock2D(ResnetBlock2D),
    }
}

impl Sampler {
    fn call(&self, x: &Tensor, temb: &Tensor) -> Result<Tensor> {
        match self {
            Sampler::Downsample2D(m) => m.call(x),
            Sampler::Upsample2D(m) => m.call(x),
            Sampler::ResnetBlock2D(m) => m.call(x, temb),
        }
    }
}

/// Resnets, then a downsampler (diffusers' `DownBlock2D`).
#[derive(Module)]
pub struct DownBlock2D {
    resnets: Vec<ResnetBlock2D>,
    downsamplers: Option<Vec<Sampler>>,
}

/// Resnets each followed by attention, then a downsampler (diffusers' `AttnDownBlock2D`).
#[derive(Module)]
pub struct AttnDownBlock2D {
    attentions: Vec<Attention>,
    resnets: Vec<ResnetBlock2D>,
    downsamplers: Option<Vec<Sampler>>,
}

/// Runs a down block: each resnet (and its attention), then the downsamplers; the hidden state
/// first, then every output kept for the skip connections.
fn down_forward(
    resnets: &[ResnetBlock2D],
    attentions: &[Attention],
    downsamplers: Option<&Vec<Sampler>>,
    x: &Tensor,
    temb: &Tensor,
) -> Result<Vec<Tensor>> {
    let mut x = x.clone();
    let mut out = Vec::new();
    for (i, resnet) in resnets.iter().enumerate() {
        x = resnet.call(&x, temb)?;
        if let Some(attn) = attentions.get(i) {
            x = attn.call(&x)?;
        }
        out.push(x.clone());
    }
    if let Some(samplers) = downsamplers {
        for s in samplers {
            x = s.call(&x, temb)?;
        }
        out.push(x.clone());
    }
    out.insert(0, x);
    Ok(out)
}

module_enum! {
    /// One of `UNet2DModel.down_blocks`.
    pub enum DownBlock {
        /// Without attention.
        DownBlock2D(DownBlock2D),
        /// With attention.
        AttnDownBlock2D(AttnDownBlock2D),
    }
}

impl DownBlock {
    /// The block on `x` with the time embedding (one module call): the hidden state, and the
    /// outputs kept for the up blocks' skip connections.
    pub fn call(&self, x: &Tensor, temb: &Tensor) -> Result<(Tensor, Vec<Tensor>)> {
        let mut out = nn::call_module(self.inner(), vec![x.clone(), temb.clone()], |v| match self {
            DownBlock::DownBlock2D(b) => down_forward(&b.resnets, &[], b.downsamplers.as_ref(), &v[0], &v[1]),
            DownBlock::AttnDownBlock2D(b) => {
                down_forward(&b.resnets, &b.attentions, b.downsamplers.as_ref(), &v[0], &v[1])
            }
        })?;
        let hidden = out.remove(0);
        Ok((hidden, out))
    }
}

/// The bottleneck (diffusers' `UNetMidBlock2D`): a resnet, then attention and a resnet per layer.
#[derive(Module)]
pub struct UNetMidBlock2D {
    attentions: Vec<Attention>,
    resnets: Vec<ResnetBlock2D>,
}

impl UNetMidBlock2D {
    /// The block on `x` with the time embedding (one module call).
    pub fn call(&self, x: &Tensor, temb: &Tensor) -> Result<Tensor> {
        nn::call_module(self, (x.clone(), temb.clone()), |(x, temb)| {
            let mut x = self.resnets[0].call(&x, &temb)?;
            for (attn, resnet) in self.attentions.iter().zip(&self.resnets[1..]) {
                x = resnet.call(&attn.call(&x)?, &temb)?;
            }
            Ok(x)
        })
    }
}

/// Resnets on the hidden state concatenated with skips, then an upsampler (diffusers'
/// `UpBlock2D`).
#[derive(Module)]
pub struct UpBlock2D {
    resnets: Vec<ResnetBlock2D>,
    upsamplers: Option<Vec<Sampler>>,
}

/// Resnets on the hidden state concatenated with skips, each followed by attention, then an
/// upsampler (diffusers' `AttnUpBlock2D`).
#[derive(Module)]
pub struct AttnUpBlock2D {
    attentions: Vec<Attention>,
    resnets: Vec<ResnetBlock2D>,
    upsamplers: Option<Vec<Sampler>>,
}

module_enum! {
    /// One of `UNet2DModel.up_blocks`.
    pub enum UpBlock {
        /// Without attention.
        UpBlock2D(UpBlock2D),
        /// With attention.
        AttnUpBlock2D(AttnUpBlock2D),
    }
}

impl UpBlock {
    /// How many skips the block takes (one per resnet).
    pub fn skips(&self) -> usize {
        match self {
            UpBlock::UpBlock2D(b) => b.resnets.len(),
            UpBlock::AttnUpBlock2D(b) => b.resnets.len(),
        }
    }

    /// The block on `x`, its skips (in the order the down path made them; the last is used
    /// first) and the time embedding (one module call).
    pub fn call(&self, x: &Tensor, skips: &[Tensor], temb: &Tensor) -> Result<Tensor> {
        let mut inputs = vec![x.clone()];
        inputs.extend(skips.iter().cloned());
        inputs.push(temb.clone());
        nn::call_module(self.inner(), inputs, |v| {
            let (resnets, attentions, upsamplers) = match self {
                UpBlock::UpBlock2D(b) => (&b.resnets, &[][..], &b.upsamplers),
                UpBlock::AttnUpBlock2D(b) => (&b.resnets, &b.attentions[..], &b.upsamplers),
            };
            let (x, skips, temb) = (&v[0], &v[1..v.len() - 1], &v[v.len() - 1]);
            if skips.len() != resnets.len() {
                return Err(Error::value_error(format!(
                    "up block: {} skip connections for {} resnets",
                    skips.len(),
                    resnets.len()
                )));
            }
            let mut x = x.clone();
            for (i, resnet) in resnets.iter().enumerate() {
                let skip = &skips[skips.len() - 1 - i];
                x = resnet.call(&torchfn::cat(&[x, skip.clone()], 1)?, temb)?;
                if let Some(attn) = attentions.get(i) {
                    x = attn.call(&x)?;
                }
            }
            for s in upsamplers.iter().flatten() {
                x = s.call(&x, temb)?;
            }
            Ok(x)
        })
    }
}

/// diffusers' `UNet2DModel`: `sample` `[N, C, H, W]` and timesteps `[N]` (or one) to the
/// denoiser's output `[N, out_channels, H, W]`.
#[derive(Module)]
pub struct UNet2DModel {
    conv_in: Conv2d,
    time_proj: Timesteps,
    time_embedding: TimestepEmbedding,
    /// The down path, one block per resolution.
    pub down_blocks: Vec<DownBlock>,
    /// The up path, deepest first.
    pub up_blocks: Vec<UpBlock>,
    /// The bottleneck (registered after `up_blocks`, as diffusers does).
    pub mid_block: Option<UNetMidBlock2D>,
    conv_norm_out: GroupNorm,
    conv_act: SiLU,
    conv_out: Conv2d,
    #[module(skip)]
    center_input_sample: bool,
}

impl UNet2DModel {
    /// A model of `config`, PyTorch's default initialisation drawn from `g`. Options this port
    /// does not implement are errors naming them.
    pub fn new(config: &UNet2DConfig, g: &Generator) -> Result<UNet2DModel> {
        let c = config;
        let blocks = c.block_out_channels.len();
        if blocks == 0 || c.down_block_types.len() != blocks || c.up_block_types.len() != blocks {
            return Err(Error::value_error(format!(
                "UNet2DModel: block_out_channels ({blocks}), down_block_types ({}) and up_block_types ({}) must \
                 have the same, non-zero length",
                c.down_block_types.len(),
                c.up_block_types.len()
            )));
        }
        if c.time_embedding_type != "positional" {
            return Err(unsupported(format!("time_embedding_type {:?}", c.time_embedding_type)));
        }
        if c.class_embed_type.is_some() || c.num_class_embeds.is_some() {
            return Err(unsupported("class conditioning (class_embed_type, num_class_embeds)".into()));
        }
        if !matches!(c.act_fn.as_str(), "silu" | "swish") {
            return Err(unsupported(format!("act_fn {:?} (silu is)", c.act_fn)));
        }
        if !c.add_attention {
            // diffusers keeps `None` in the mid block's ModuleList (`(0): None`), which a
            // torchfn module list cannot hold.
            return Err(unsupported("add_attention=False".into()));
        }
        let time_norm = match c.resnet_time_scale_shift.as_str() {
            "default" => TimeNorm::Default,
            "scale_shift" => TimeNorm::ScaleShift,
            other => return Err(unsupported(format!("resnet_time_scale_shift {other:?}"))),
        };
        let block_type = |t: &str| t.strip_prefix("UNetRes").unwrap_or(t).to_string();
        let (ch0, last) = (c.block_out_channels[0], c.block_out_channels[blocks - 1]);
        let temb_channels = c.time_embedding_dim.filter(|&n| n != 0).unwrap_or(4 * ch0);
        let settings = |output_scale_factor: f64| ResnetSettings {
            temb_channels,
            groups: c.norm_num_groups,
            eps: c.norm_eps,
            dropout: c.dropout,
            time_norm,
            output_scale_factor,
        };
        let s = settings(1.0);
        let head_dim = |channels: usize| c.attention_head_dim.unwrap_or(channels);
        let attention = |channels: usize, groups: Option<usize>, rescale: f64| {
            Attention::new(channels, head_dim(channels), groups, c.norm_eps, rescale, g)
        };
        let resample_type = |key: &str, value: &str| -> Result<bool> {
            match value {
                "conv" => Ok(false),
                "resnet" => Ok(true),
                other => Err(unsupported(format!("{key} {other:?}"))),
            }
        };

        let mut down_blocks = Vec::new();
        let mut output_channel = ch0;
        for (i, t) in c.down_block_types.iter().enumerate() {
            let input_channel = output_channel;
            output_channel = c.block_out_channels[i];
            let add_downsample = i + 1 < blocks;
            let mut resnets = Vec::new();
            for l in 0..c.layers_per_block {
                let input = if l == 0 { input_channel } else { output_channel };
                resnets.push(ResnetBlock2D::new(input, output_channel, s, Resample::None, g)?);
            }
            let conv_downsampler = || -> Result<Vec<Sampler>> {
                Ok(vec![Sampler::Downsample2D(Downsample2D::new(output_channel, true, c.downsample_padding, g)?)])
            };
            down_blocks.push(match block_type(t).as_str() {
                "DownBlock2D" => DownBlock::DownBlock2D(DownBlock2D {
                    resnets,
                    downsamplers: add_downsample.then(conv_downsampler).transpose()?,
                }),
                "AttnDownBlock2D" => {
                    let downsamplers = if !add_downsample {
                        None
                    } else if resample_type("downsample_type", &c.downsample_type)? {
                        let r = ResnetBlock2D::new(output_channel, output_channel, s, Resample::Down, g)?;
                        Some(vec![Sampler::ResnetBlock2D(r)])
                    } else {
                        Some(conv_downsampler()?)
                    };
                    let attentions = (0..c.layers_per_block)
                        .map(|_| attention(output_channel, Some(c.norm_num_groups), 1.0))
                        .collect::<Result<_>>()?;
                    DownBlock::AttnDownBlock2D(AttnDownBlock2D { attentions, resnets, downsamplers })
                }
                other => {
                    return Err(unsupported(format!(
                        "down block type {other:?} (DownBlock2D and AttnDownBlock2D are)"
                    )));
                }
            });
        }

        let mid_block = match c.mid_block_type.as_deref() {
            None => None,
            Some("UNetMidBlock2D") => {
                let ms = settings(c.mid_block_scale_factor);
                let attn_groups =
                    c.attn_norm_num_groups.or((time_norm == TimeNorm::Default).then_some(c.norm_num_groups));
                Some(UNetMidBlock2D {
                    attentions: vec![attention(last, attn_groups, c.mid_block_scale_factor)?],
                    resnets: vec![
                        ResnetBlock2D::new(last, last, ms, Resample::None, g)?,
                        ResnetBlock2D::new(last, last, ms, Resample::None, g)?,
                    ],
                })
            }
            Some(other) => return Err(unsupported(format!("mid_block_type {other:?} (UNetMidBlock2D is)"))),
        };

        let reversed: Vec<usize> = c.block_out_channels.iter().rev().copied().collect();
        let mut up_blocks = Vec::new();
        let mut output_channel = reversed[0];
        for (i, t) in c.up_block_types.iter().enumerate() {
            let prev_output_channel = output_channel;
            output_channel = reversed[i];
            let input_channel = reversed[(i + 1).min(blocks - 1)];
            let add_upsample = i + 1 < blocks;
            let layers = c.layers_per_block + 1;
            let mut resnets = Vec::new();
            for l in 0..layers {
                let skip = if l == layers - 1 { input_channel } else { output_channel };
                let input = if l == 0 { prev_output_channel } else { output_channel };
                resnets.push(ResnetBlock2D::new(input + skip, output_channel, s, Resample::None, g)?);
            }
            let conv_upsampler = || -> Result<Vec<Sampler>> {
                let conv = Some(conv(output_channel, output_channel, 3, 1, 1, g)?);
                Ok(vec![Sampler::Upsample2D(Upsample2D { conv })])
            };
            up_blocks.push(match block_type(t).as_str() {
                "UpBlock2D" => UpBlock::UpBlock2D(UpBlock2D {
                    resnets,
                    upsamplers: add_upsample.then(conv_upsampler).transpose()?,
                }),
                "AttnUpBlock2D" => {
                    let upsamplers = if !add_upsample {
                        None
                    } else if resample_type("upsample_type", &c.upsample_type)? {
                        let r = ResnetBlock2D::new(output_channel, output_channel, s, Resample::Up, g)?;
                        Some(vec![Sampler::ResnetBlock2D(r)])
                    } else {
                        Some(conv_upsampler()?)
                    };
                    let attentions = (0..layers)
                        .map(|_| attention(output_channel, Some(c.norm_num_groups), 1.0))
                        .collect::<Result<_>>()?;
                    UpBlock::AttnUpBlock2D(AttnUpBlock2D { attentions, resnets, upsamplers })
                }
                other => return Err(unsupported(format!("up block type {other:?} (UpBlock2D and AttnUpBlock2D are)"))),
            });
        }

        Ok(UNet2DModel {
            conv_in: conv(c.in_channels, ch0, 3, 1, 1, g)?,
            time_proj: Timesteps {
                num_channels: ch0,
                flip_sin_to_cos: c.flip_sin_to_cos,
                downscale_freq_shift: c.freq_shift,
                scale: 1.0,
            },
            time_embedding: TimestepEmbedding {
                linear_1: Linear::new(ch0, temb_channels, true, g)?,
                act: SiLU::new(false),
                linear_2: Linear::new(temb_channels, temb_channels, true, g)?,
            },
            down_blocks,
            up_blocks,
            mid_block,
            conv_norm_out: GroupNorm::new(c.norm_num_groups, ch0, c.norm_eps)?,
            conv_act: SiLU::new(false),
            conv_out: conv(ch0, c.out_channels, 3, 1, 1, g)?,
            center_input_sample: c.center_input_sample,
        })
    }

    /// The model on `sample` `[N, C, H, W]` at `timesteps` (`[N]`, `[1]` or 0-d, any integer or
    /// float dtype): one module call (`model(sample, timesteps).sample`).
    pub fn call(&self, sample: &Tensor, timesteps: &Tensor) -> Result<Tensor> {
        nn::call_module(self, (sample.clone(), timesteps.clone()), |(s, t)| self.forward(&s, &t))
    }

    fn forward(&self, sample: &Tensor, timesteps: &Tensor) -> Result<Tensor> {
        let shape = sample.shape()?;
        if shape.len() != 4 {
            return Err(Error::value_error(format!("UNet2DModel: sample must be [N, C, H, W], got {:?}", &shape[..])));
        }
        let sample = if self.center_input_sample { (&(sample * 2.0)? - 1.0)? } else { sample.clone() };
        // 1. time: broadcast to the batch, as diffusers does (`timesteps * ones(N)`).
        let timesteps = if timesteps.ndim()? == 0 { timesteps.unsqueeze(0)? } else { timesteps.clone() };
        let ones = torchfn::ones([shape[0]], timesteps.dtype()?, timesteps.device()?)?;
        let timesteps = (&timesteps * &ones)?;
        let t_emb = self.time_proj.call(&timesteps)?.to(self.conv_in.weight.dtype()?, false, false)?;
        let emb = self.time_embedding.call(&t_emb)?;
        // 2. pre-process
        let mut x = self.conv_in.call(&sample)?;
        // 3. down
        let mut skips = vec![x.clone()];
        for block in &self.down_blocks {
            let (hidden, res) = block.call(&x, &emb)?;
            x = hidden;
            skips.extend(res);
        }
        // 4. mid
        if let Some(mid) = &self.mid_block {
            x = mid.call(&x, &emb)?;
        }
        // 5. up
        for block in &self.up_blocks {
            let n = block.skips();
            if skips.len() < n {
                return Err(Error::value_error("UNet2DModel: fewer skip connections than the up blocks take"));
            }
            let res = skips.split_off(skips.len() - n);
            x = block.call(&x, &res, &emb)?;
        }
        // 6. post-process
        self.conv_out.call(&self.conv_act.call(&self.conv_norm_out.call(&x)?)?)
    }

    /// The mean squared error of the output against `target`.
    pub fn loss(output: &Tensor, target: &Tensor) -> Result<Tensor> {
        nn::functional::mse_loss(output, target, None, None, "mean")
    }
}
