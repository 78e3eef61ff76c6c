//! The layers of `torch.nn` as modules, with PyTorch's default initialisations: each holds its
//! parameters and buffers and calls its `nn.functional` operation in `forward`.

use super::init;
use super::module::{Buffer, Module, Parameter, Training};
use crate::error::{Result, bail};
use crate::nn::functional as F;
use crate::{DType, Generator, Tensor};

/// A module with one input and one output: what [`Sequential`] chains.
///
/// Implement `forward`; call a module with [`Layer::call`] (PyTorch's `module(x)`), which
/// is `forward` unless a tracer is recording module calls (`torchfn::fx`).
pub trait Forward {
    /// The module applied to `input`.
    fn forward(&self, input: &Tensor) -> Result<Tensor>;
}

/// A module with a forward: what [`Sequential`] chains and what a graph's `call_module`
/// node runs.
pub trait Layer: Module + Forward {
    /// The module applied to `input` as PyTorch's `module(input)` does it: `forward` with the
    /// module's hooks around it ([`call_module`](super::call_module)), or, while
    /// `torchfn::fx` traces, one `call_module` node when the module is a leaf.
    fn call(&self, input: &Tensor) -> Result<Tensor> {
        super::call_module(self.as_dyn(), input.clone(), |input| match module_call_hook() {
            Some(hook) => hook.call_module(self.as_layer_dyn(), &input),
            None => self.forward(&input),
        })
    }

    /// The module as `&dyn Layer`.
    fn as_layer_dyn(&self) -> &dyn Layer;
}

impl<T: Module + Forward> Layer for T {
    fn as_layer_dyn(&self) -> &dyn Layer {
        self
    }
}

/// What sees module calls ([`Layer::call`]) while it is installed: the fx tracer.
pub trait ModuleCallHook {
    /// Calls `module` on `input`, or records the call.
    fn call_module(&self, module: &dyn Layer, input: &Tensor) -> Result<Tensor>;
}

thread_local! {
    static MODULE_CALL_HOOK: std::cell::RefCell<Option<std::rc::Rc<dyn ModuleCallHook>>> =
        const { std::cell::RefCell::new(None) };
}

fn module_call_hook() -> Option<std::rc::Rc<dyn ModuleCallHook>> {
    MODULE_CALL_HOOK.with(|h| h.borrow().clone())
}

/// Installs `hook` on this thread until the returned guard is dropped, which puts back the
/// hook that was there before.
pub fn install_module_call_hook(hook: Option<std::rc::Rc<dyn ModuleCallHook>>) -> impl Drop {
    struct Restore(Option<std::rc::Rc<dyn ModuleCallHook>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            MODULE_CALL_HOOK.with(|h| *h.borrow_mut() = previous);
        }
    }
    Restore(MODULE_CALL_HOOK.with(|h| std::mem::replace(&mut *h.borrow_mut(), hook)))
}

fn python_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Weights drawn as PyTorch's `reset_parameters` for Linear and Conv: Kaiming uniform with
/// `a = √5` (bound `1/√fan_in`), and the bias uniform on `±1/√fan_in`.
/// `bias` is the bias's length, when the layer has one.
fn kaiming_default(
    shape: &[usize],
    bias: Option<usize>,
    generator: &Generator,
) -> Result<(Parameter, Option<Parameter>)> {
    let weight = crate::zeros(shape.to_vec(), None, None)?;
    init::kaiming_uniform_(&weight, 5f64.sqrt(), "fan_in", "leaky_relu", generator)?;
    let (fan_in, _) = init::calculate_fan_in_and_fan_out(&weight)?;
    let bias = if let Some(length) = bias {
        let b = crate::zeros([length], None, None)?;
        let bound = if fan_in > 0 { 1.0 / (fan_in as f64).sqrt() } else { 0.0 };
        init::uniform_(&b, -bound, bound, generator)?;
        Some(Parameter::new(&b)?)
    } else {
        None
    };
    Ok((Parameter::new(&weight)?, bias))
}

/// `y = x Aᵀ + b` (`nn.Linear`).
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct Linear {
    /// `[out_features, in_features]`.
    pub weight: Parameter,
    /// `[out_features]`, if the layer has a bias.
    pub bias: Option<Parameter>,
}

impl Linear {
    /// A layer of PyTorch's default initialisation.
    pub fn new(in_features: usize, out_features: usize, bias: bool, generator: &Generator) -> Result<Linear> {
        let (weight, bias) = kaiming_default(&[out_features, in_features], bias.then_some(out_features), generator)?;
        Ok(Linear { weight, bias })
    }

    fn describe(&self) -> String {
        let shape = self.weight.shape().unwrap_or_default();
        format!(
            "in_features={}, out_features={}, bias={}",
            shape.get(1).copied().unwrap_or(0),
            shape.first().copied().unwrap_or(0),
            python_bool(self.bias.is_some())
        )
    }
}

impl Forward for Linear {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        F::linear(input, &self.weight, self.bias.as_deref())
    }
}

/// A 2-D convolution (`nn.Conv2d`): square or rectangular kernels, stride, padding, dilation,
/// groups.
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct Conv2d {
    /// `[out_channels, in_channels / groups, kh, kw]`.
    pub weight: Parameter,
    /// `[out_channels]`, if the layer has a bias.
    pub bias: Option<Parameter>,
    #[module(skip)]
    stride: [usize; 2],
    #[module(skip)]
    padding: [usize; 2],
    #[module(skip)]
    dilation: [usize; 2],
    #[module(skip)]
    groups: usize,
}

impl Conv2d {
    /// A convolution of PyTorch's default initialisation.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
        bias: bool,
        generator: &Generator,
    ) -> Result<Conv2d> {
        check_groups("Conv2d", in_channels, out_channels, groups)?;
        let shape = [out_channels, in_channels / groups, kernel_size[0], kernel_size[1]];
        let (weight, bias) = kaiming_default(&shape, bias.then_some(out_channels), generator)?;
        Ok(Conv2d { weight, bias, stride, padding, dilation, groups })
    }

    fn describe(&self) -> String {
        let s = self.weight.shape().unwrap_or_default();
        let geometry = Geometry {
            stride: &self.stride,
            padding: &self.padding,
            dilation: &self.dilation,
            output_padding: &[0, 0],
        };
        conv_repr(s[1] * self.groups, s[0], &s[2..], geometry, self.groups, self.bias.is_some())
    }
}

/// Checks a convolution module's channels against its groups.
fn check_groups(layer: &str, in_channels: usize, out_channels: usize, groups: usize) -> Result<()> {
    if groups == 0 || !in_channels.is_multiple_of(groups) || !out_channels.is_multiple_of(groups) {
        bail!(Value, "{layer}(): in_channels and out_channels must be divisible by groups ({groups})");
    }
    Ok(())
}

/// A convolution's stride, padding, dilation and output padding, one entry per dimension.
#[derive(Clone, Copy)]
struct Geometry<'a> {
    stride: &'a [usize],
    padding: &'a [usize],
    dilation: &'a [usize],
    output_padding: &'a [usize],
}

/// PyTorch's repr of a convolution module's settings (`_ConvNd.extra_repr`): the channels,
/// kernel size and stride, then what differs from the defaults.
fn conv_repr(
    in_channels: usize,
    out_channels: usize,
    kernel: &[usize],
    g: Geometry<'_>,
    groups: usize,
    bias: bool,
) -> String {
    let mut text = format!(
        "{in_channels}, {out_channels}, kernel_size={}, stride={}",
        python_tuple(kernel),
        python_tuple(g.stride)
    );
    let all = |v: &[usize], x: usize| v.iter().all(|&e| e == x);
    for (name, values, default) in
        [("padding", g.padding, 0), ("dilation", g.dilation, 1), ("output_padding", g.output_padding, 0)]
    {
        if !all(values, default) {
            text += &format!(", {name}={}", python_tuple(values));
        }
    }
    if groups != 1 {
        text += &format!(", groups={groups}");
    }
    if !bias {
        text += ", bias=False";
    }
    text
}

/// A 1-D convolution over `[N, C, L]` input (`nn.Conv1d`), with PyTorch's default
/// initialisation (Kaiming uniform weights, uniform bias).
///
/// ```
/// use torchfn::nn::{Conv1d, Forward};
/// let conv = Conv1d::new(3, 4, 3, 1, 0, 1, 1, true, &torchfn::Generator::new())?;
/// assert_eq!(conv.to_string(), "Conv1d(3, 4, kernel_size=(3,), stride=(1,))");
/// assert_eq!(conv.forward(&torchfn::zeros([2, 3, 10], None, None)?)?.shape()?, [2, 4, 8]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct Conv1d {
    /// `[out_channels, in_channels / groups, k]`.
    pub weight: Parameter,
    /// `[out_channels]`, if the layer has a bias.
    pub bias: Option<Parameter>,
    #[module(skip)]
    stride: usize,
    #[module(skip)]
    padding: usize,
    #[module(skip)]
    dilation: usize,
    #[module(skip)]
    groups: usize,
}

impl Conv1d {
    /// A 1-D convolution of PyTorch's default initialisation.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        stride: usize,
        padding: usize,
        dilation: usize,
        groups: usize,
        bias: bool,
        generator: &Generator,
    ) -> Result<Conv1d> {
        check_groups("Conv1d", in_channels, out_channels, groups)?;
        let shape = [out_channels, in_channels / groups, kernel_size];
        let (weight, bias) = kaiming_default(&shape, bias.then_some(out_channels), generator)?;
        Ok(Conv1d { weight, bias, stride, padding, dilation, groups })
    }

    fn describe(&self) -> String {
        let s = self.weight.shape().unwrap_or_default();
        let geometry = Geometry {
            stride: &[self.stride],
            padding: &[self.padding],
            dilation: &[self.dilation],
            output_padding: &[0],
        };
        conv_repr(s[1] * self.groups, s[0], &s[2..], geometry, self.groups, self.bias.is_some())
    }
}

impl Forward for Conv1d {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let one = |v: usize| v as i64;
        F::conv1d(
            input,
            &self.weight,
            self.bias.as_deref(),
            one(self.stride),
            one(self.padding),
            one(self.dilation),
            self.groups as i64,
        )
    }
}

/// A 2-D transposed convolution (`nn.ConvTranspose2d`), with PyTorch's default initialisation
/// (its weight is `[in_channels, out_channels / groups, kh, kw]`, and its fan-in counts the
/// output channels, as PyTorch's).
///
/// ```
/// use torchfn::nn::{ConvTranspose2d, Forward};
/// let up = ConvTranspose2d::new(4, 2, [3, 3], [2, 2], [1, 1], [1, 1], 1, true, [1, 1], &torchfn::Generator::new())?;
/// assert_eq!(
///     up.to_string(),
///     "ConvTranspose2d(4, 2, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1))"
/// );
/// assert_eq!(up.forward(&torchfn::zeros([1, 4, 5, 5], None, None)?)?.shape()?, [1, 2, 10, 10]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct ConvTranspose2d {
    /// `[in_channels, out_channels / groups, kh, kw]`.
    pub weight: Parameter,
    /// `[out_channels]`, if the layer has a bias.
    pub bias: Option<Parameter>,
    #[module(skip)]
    stride: [usize; 2],
    #[module(skip)]
    padding: [usize; 2],
    #[module(skip)]
    output_padding: [usize; 2],
    #[module(skip)]
    groups: usize,
    #[module(skip)]
    dilation: [usize; 2],
}

impl ConvTranspose2d {
    /// A transposed convolution of PyTorch's default initialisation (PyTorch's argument order).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        output_padding: [usize; 2],
        groups: usize,
        bias: bool,
        dilation: [usize; 2],
        generator: &Generator,
    ) -> Result<ConvTranspose2d> {
        check_groups("ConvTranspose2d", in_channels, out_channels, groups)?;
        let shape = [in_channels, out_channels / groups, kernel_size[0], kernel_size[1]];
        let (weight, bias) = kaiming_default(&shape, bias.then_some(out_channels), generator)?;
        Ok(ConvTranspose2d { weight, bias, stride, padding, output_padding, groups, dilation })
    }

    fn describe(&self) -> String {
        let s = self.weight.shape().unwrap_or_default();
        let geometry = Geometry {
            stride: &self.stride,
            padding: &self.padding,
            dilation: &self.dilation,
            output_padding: &self.output_padding,
        };
        conv_repr(s[0], s[1] * self.groups, &s[2..], geometry, self.groups, self.bias.is_some())
    }
}

impl Forward for ConvTranspose2d {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let dims = |v: [usize; 2]| vec![v[0] as i64, v[1] as i64];
        F::conv_transpose2d(
            input,
            &self.weight,
            self.bias.as_deref(),
            dims(self.stride),
            dims(self.padding),
            dims(self.output_padding),
            self.groups as i64,
            dims(self.dilation),
        )
    }
}

impl Forward for Conv2d {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let dims = |v: [usize; 2]| vec![v[0] as i64, v[1] as i64];
        F::conv2d(
            input,
            &self.weight,
            self.bias.as_deref(),
            dims(self.stride),
            dims(self.padding),
            dims(self.dilation),
            self.groups as i64,
        )
    }
}

/// Batch normalization over `[N, C, H, W]` (`nn.BatchNorm2d`): batch statistics and running
/// averages in training, the running averages in eval.
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct BatchNorm2d {
    /// Scale, `[C]` (ones).
    pub weight: Parameter,
    /// Shift, `[C]` (zeros).
    pub bias: Parameter,
    /// Running mean, `[C]`.
    pub running_mean: Buffer,
    /// Running variance (unbiased), `[C]`.
    pub running_var: Buffer,
    /// Batches seen in training (int64, 0-d).
    pub num_batches_tracked: Buffer,
    training: Training,
    #[module(skip)]
    eps: f64,
    #[module(skip)]
    momentum: f64,
}

impl BatchNorm2d {
    /// Batch normalization of `num_features` channels, `eps = 1e-5`, `momentum = 0.1`.
    pub fn new(num_features: usize) -> Result<BatchNorm2d> {
        Ok(BatchNorm2d {
            weight: Parameter::new(&crate::ones([num_features], None, None)?)?,
            bias: Parameter::new(&crate::zeros([num_features], None, None)?)?,
            running_mean: Buffer::new(crate::zeros([num_features], None, None)?),
            running_var: Buffer::new(crate::ones([num_features], None, None)?),
            num_batches_tracked: Buffer::new(crate::zeros(Vec::<usize>::new(), DType::Int64, None)?),
            training: Training::default(),
            eps: 1e-5,
            momentum: 0.1,
        })
    }

    fn describe(&self) -> String {
        let c = self.weight.shape().ok().and_then(|s| s.first().copied()).unwrap_or(0);
        format!(
            "{c}, eps={}, momentum={}, affine=True, bias=True, track_running_stats=True",
            python_float(self.eps),
            self.momentum
        )
    }
}

impl Forward for BatchNorm2d {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let training = self.training.get();
        if training {
            let _no_grad = crate::autograd::no_grad();
            self.num_batches_tracked.add_(&Tensor::scalar(1), 1)?;
        }
        F::batch_norm(
            input,
            Some(&self.running_mean),
            Some(&self.running_var),
            Some(&self.weight),
            Some(&self.bias),
            training,
            self.momentum,
            self.eps,
        )
    }
}

/// Layer normalization over the last dimensions (`nn.LayerNorm`), with elementwise affine.
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct LayerNorm {
    /// Scale (ones).
    pub weight: Parameter,
    /// Shift (zeros).
    pub bias: Parameter,
    #[module(skip)]
    normalized_shape: Vec<usize>,
    #[module(skip)]
    eps: f64,
}

impl LayerNorm {
    /// Layer normalization over the trailing `normalized_shape`.
    pub fn new(normalized_shape: &[usize], eps: f64) -> Result<LayerNorm> {
        Ok(LayerNorm {
            weight: Parameter::new(&crate::ones(normalized_shape.to_vec(), None, None)?)?,
            bias: Parameter::new(&crate::zeros(normalized_shape.to_vec(), None, None)?)?,
            normalized_shape: normalized_shape.to_vec(),
            eps,
        })
    }

    fn describe(&self) -> String {
        let (shape, eps) = (python_tuple(&self.normalized_shape), python_float(self.eps));
        format!("{shape}, eps={eps}, elementwise_affine=True, bias=True")
    }
}

/// Root-mean-square normalization over the last dimensions (`nn.RMSNorm`, LLaMA's norm),
/// with an elementwise scale (ones); `eps` `None` is the dtype's machine epsilon.
///
/// ```
/// use torchfn::nn::{Forward, RMSNorm};
/// let norm = RMSNorm::new(&[4], None)?;
/// assert_eq!(norm.to_string(), "RMSNorm((4,), eps=None, elementwise_affine=True)");
/// assert_eq!(norm.forward(&torchfn::randn([2, 4], None, None, None)?)?.shape()?, [2, 4]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct RMSNorm {
    /// Scale (ones).
    pub weight: Parameter,
    #[module(skip)]
    normalized_shape: Vec<usize>,
    #[module(skip)]
    eps: Option<f64>,
}

impl RMSNorm {
    /// RMS normalization over the trailing `normalized_shape`.
    pub fn new(normalized_shape: &[usize], eps: Option<f64>) -> Result<RMSNorm> {
        Ok(RMSNorm {
            weight: Parameter::new(&crate::ones(normalized_shape.to_vec(), None, None)?)?,
            normalized_shape: normalized_shape.to_vec(),
            eps,
        })
    }

    fn describe(&self) -> String {
        let eps = self.eps.map_or_else(|| "None".to_string(), python_float);
        format!("{}, eps={eps}, elementwise_affine=True", python_tuple(&self.normalized_shape))
    }
}

impl Forward for RMSNorm {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let shape: Vec<i64> = self.normalized_shape.iter().map(|&n| n as i64).collect();
        F::rms_norm(input, shape, Some(&self.weight), self.eps)
    }
}

/// A tuple as Python prints it: `(4,)`, `(2, 3)`.
fn python_tuple(items: &[impl ToString]) -> String {
    let items: Vec<String> = items.iter().map(ToString::to_string).collect();
    let comma = if items.len() == 1 { "," } else { "" };
    format!("({}{comma})", items.join(", "))
}

/// Group normalization (`nn.GroupNorm`): the channels of `[N, C, *]` input in `num_groups`
/// groups, each normalized per example, then a per-channel affine.
///
/// ```
/// use torchfn::nn::{Forward, GroupNorm};
/// let norm = GroupNorm::new(2, 4, 1e-5)?;
/// assert_eq!(norm.to_string(), "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)");
/// let y = norm.forward(&torchfn::randn([3, 4, 5], None, None, None)?)?;
/// assert_eq!(y.shape()?, [3, 4, 5]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct GroupNorm {
    /// Per-channel scale (ones).
    pub weight: Parameter,
    /// Per-channel shift (zeros).
    pub bias: Parameter,
    #[module(skip)]
    num_groups: usize,
    #[module(skip)]
    eps: f64,
}

impl GroupNorm {
    /// `num_channels` channels in `num_groups` groups (which must divide them).
    pub fn new(num_groups: usize, num_channels: usize, eps: f64) -> Result<GroupNorm> {
        if num_groups == 0 || !num_channels.is_multiple_of(num_groups) {
            return Err(crate::Error::value_error(format!(
                "GroupNorm(): num_channels must be divisible by num_groups, got {num_channels} and {num_groups}"
            )));
        }
        Ok(GroupNorm {
            weight: Parameter::new(&crate::ones([num_channels], None, None)?)?,
            bias: Parameter::new(&crate::zeros([num_channels], None, None)?)?,
            num_groups,
            eps,
        })
    }

    fn describe(&self) -> String {
        let channels = self.weight.shape().map_or(0, |s| s[0]);
        format!("{}, {channels}, eps={}, affine=True, bias=True", self.num_groups, python_float(self.eps))
    }
}

impl Forward for GroupNorm {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        F::group_norm(input, self.num_groups, Some(&self.weight), Some(&self.bias), self.eps)
    }
}

/// A float as Python prints it in reprs (`1e-05`).
fn python_float(x: f64) -> String {
    if x != 0.0 && x.abs() < 1e-4 {
        let text = format!("{x:e}");
        match text.split_once('e') {
            Some((m, e)) => {
                let e: i32 = e.parse().unwrap_or(0);
                format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
            }
            None => text,
        }
    } else {
        format!("{x:?}")
    }
}

impl Forward for LayerNorm {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let shape: Vec<i64> = self.normalized_shape.iter().map(|&n| n as i64).collect();
        F::layer_norm(input, shape, Some(&self.weight), Some(&self.bias), self.eps)
    }
}

/// A lookup table of embeddings (`nn.Embedding`), initialised normal(0, 1).
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct Embedding {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Parameter,
    /// The row that gets no gradient (and starts zero), as PyTorch's `padding_idx`.
    #[module(skip)]
    padding_idx: Option<i64>,
}

impl Embedding {
    /// `num_embeddings` vectors of `embedding_dim`.
    pub fn new(num_embeddings: usize, embedding_dim: usize, generator: &Generator) -> Result<Embedding> {
        let weight = crate::zeros([num_embeddings, embedding_dim], None, None)?;
        init::normal_(&weight, 0.0, 1.0, generator)?;
        Ok(Embedding { weight: Parameter::new(&weight)?, padding_idx: None })
    }

    /// The same with `padding_idx` (PyTorch's `nn.Embedding(n, d, padding_idx=i)`): that row is
    /// zeroed and its gradient is always zero. Negative indices count from the end; out of range
    /// is an error naming it.
    pub fn with_padding_idx(mut self, padding_idx: i64) -> Result<Embedding> {
        let n = self.weight.shape()?[0] as i64;
        if !(-n..n).contains(&padding_idx) {
            bail!(Value, "Embedding(): padding_idx {padding_idx} must be within num_embeddings ({n})");
        }
        let index = padding_idx.rem_euclid(n);
        {
            let _no_grad = crate::autograd::no_grad();
            self.weight.select(0, index)?.fill_(0.0)?;
        }
        self.padding_idx = Some(index);
        Ok(self)
    }

    fn describe(&self) -> String {
        let s = self.weight.shape().unwrap_or_default();
        let padding = self.padding_idx.map(|i| format!(", padding_idx={i}")).unwrap_or_default();
        format!("{}, {}{padding}", s.first().copied().unwrap_or(0), s.get(1).copied().unwrap_or(0))
    }
}

impl Forward for Embedding {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        F::embedding(input, &self.weight, self.padding_idx, None, 2.0, false, false)
    }
}

/// Zeroes elements with probability `p` in training, scaling the rest by `1/(1-p)` (`nn.Dropout`).
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct Dropout {
    training: Training,
    #[module(skip)]
    p: f64,
}

impl Dropout {
    /// Dropout with probability `p`.
    pub fn new(p: f64) -> Result<Dropout> {
        if !(0.0..=1.0).contains(&p) {
            bail!(Value, "Dropout(): dropout probability has to be between 0 and 1, but got {p}");
        }
        Ok(Dropout { training: Training::default(), p })
    }

    fn describe(&self) -> String {
        format!("p={:?}, inplace=False", self.p)
    }
}

impl Forward for Dropout {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        F::dropout(input, self.p, self.training.get(), false)
    }
}

/// Declares an activation module whose only setting is `inplace` (PyTorch's repr shows
/// `inplace=True` when set), calling its `nn.functional` namesake.
macro_rules! inplace_activation {
    ($(#[$doc:meta])* $name:ident => $function:ident) => {
        $(#[$doc])*
        #[derive(crate::nn::Module, Default)]
        #[module(extra_repr = describe)]
        pub struct $name {
            #[module(skip)]
            inplace: bool,
        }

        impl $name {
            /// The activation; `inplace` overwrites its input.
            pub fn new(inplace: bool) -> $name {
                $name { inplace }
            }

            fn describe(&self) -> String {
                if self.inplace { "inplace=True".into() } else { String::new() }
            }
        }

        impl Forward for $name {
            fn forward(&self, input: &Tensor) -> Result<Tensor> {
                F::$function(input, self.inplace)
            }
        }
    };
}

inplace_activation! {
    /// `max(x, 0)` (`nn.ReLU`), in place on its input with `inplace`.
    ReLU => relu
}

inplace_activation! {
    /// `x * sigmoid(x)` (`nn.SiLU`), in place on its input with `inplace`.
    SiLU => silu
}

inplace_activation! {
    /// `x * min(max(x + 3, 0), 6) / 6` (`nn.Hardswish`), in place on its input with `inplace`.
    Hardswish => hardswish
}

inplace_activation! {
    /// `min(max(x + 3, 0), 6) / 6` (`nn.Hardsigmoid`), in place on its input with `inplace`.
    Hardsigmoid => hardsigmoid
}

/// `x` where positive, `negative_slope * x` elsewhere (`nn.LeakyReLU`), in place on its input
/// with `inplace`.
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct LeakyReLU {
    #[module(skip)]
    negative_slope: f64,
    #[module(skip)]
    inplace: bool,
}

impl Default for LeakyReLU {
    fn default() -> Self {
        LeakyReLU::new(0.01, false)
    }
}

impl LeakyReLU {
    /// A leaky ReLU of slope `negative_slope` below 0 (PyTorch's default is 0.01).
    pub fn new(negative_slope: f64, inplace: bool) -> LeakyReLU {
        LeakyReLU { negative_slope, inplace }
    }

    fn describe(&self) -> String {
        let inplace = if self.inplace { ", inplace=True" } else { "" };
        format!("negative_slope={}{inplace}", python_float(self.negative_slope))
    }
}

impl Forward for LeakyReLU {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        F::leaky_relu(input, self.negative_slope, self.inplace)
    }
}

/// `tanh(x)` (`nn.Tanh`).
#[derive(crate::nn::Module, Default)]
pub struct Tanh;

impl Forward for Tanh {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        input.tanh()
    }
}

/// The input unchanged (`nn.Identity`).
#[derive(crate::nn::Module, Default)]
pub struct Identity;

impl Forward for Identity {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        Ok(input.clone())
    }
}

/// The Gaussian error linear unit (`nn.GELU`), exact or with the tanh approximation.
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct GELU {
    #[module(skip)]
    approximate: &'static str,
}

impl GELU {
    /// `approximate`: `"none"` (exact) or `"tanh"`.
    pub fn new(approximate: &str) -> Result<GELU> {
        let approximate = match approximate {
            "none" => "none",
            "tanh" => "tanh",
            other => bail!(Value, "GELU(): approximate argument must be either none or tanh, but got '{other}'"),
        };
        Ok(GELU { approximate })
    }

    fn describe(&self) -> String {
        format!("approximate='{}'", self.approximate)
    }
}

impl Forward for GELU {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        F::gelu(input, self.approximate)
    }
}

/// Softmax along `dim` (`nn.Softmax`).
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct Softmax {
    #[module(skip)]
    dim: i64,
}

impl Softmax {
    /// Softmax along `dim`.
    pub fn new(dim: i64) -> Softmax {
        Softmax { dim }
    }

    fn describe(&self) -> String {
        format!("dim={}", self.dim)
    }
}

impl Forward for Softmax {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        input.softmax(self.dim, None)
    }
}

/// Average pooling to a fixed output size (`nn.AdaptiveAvgPool2d`).
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct AdaptiveAvgPool2d {
    #[module(skip)]
    output_size: [usize; 2],
}

impl AdaptiveAvgPool2d {
    /// Pooling to `output_size`.
    pub fn new(output_size: [usize; 2]) -> AdaptiveAvgPool2d {
        AdaptiveAvgPool2d { output_size }
    }

    fn describe(&self) -> String {
        format!("output_size=({}, {})", self.output_size[0], self.output_size[1])
    }
}

impl Forward for AdaptiveAvgPool2d {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        F::adaptive_avg_pool2d(input, vec![self.output_size[0] as i64, self.output_size[1] as i64])
    }
}

/// Max pooling (`nn.MaxPool2d`).
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct MaxPool2d {
    #[module(skip)]
    kernel_size: usize,
    #[module(skip)]
    stride: usize,
    #[module(skip)]
    padding: usize,
}

impl MaxPool2d {
    /// Square windows of `kernel_size`, moved by `stride`, with `padding`.
    pub fn new(kernel_size: usize, stride: usize, padding: usize) -> MaxPool2d {
        MaxPool2d { kernel_size, stride, padding }
    }

    fn describe(&self) -> String {
        format!(
            "kernel_size={}, stride={}, padding={}, dilation=1, ceil_mode=False",
            self.kernel_size, self.stride, self.padding
        )
    }
}

impl Forward for MaxPool2d {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        F::max_pool2d(
            input,
            self.kernel_size as i64,
            Some(crate::Dims::from(self.stride as i64)),
            self.padding as i64,
            1,
            false,
            false,
        )
    }
}

/// Average pooling (`nn.AvgPool2d`) over square windows.
///
/// ```
/// use torchfn::nn::{AvgPool2d, Forward};
/// let pool = AvgPool2d::new(2, 2, 0, false, true);
/// assert_eq!(pool.to_string(), "AvgPool2d(kernel_size=2, stride=2, padding=0)");
/// assert_eq!(pool.forward(&torchfn::ones([1, 3, 4, 4], None, None)?)?.shape()?, [1, 3, 2, 2]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct AvgPool2d {
    #[module(skip)]
    kernel_size: usize,
    #[module(skip)]
    stride: usize,
    #[module(skip)]
    padding: usize,
    #[module(skip)]
    ceil_mode: bool,
    #[module(skip)]
    count_include_pad: bool,
}

impl AvgPool2d {
    /// Square windows of `kernel_size`, moved by `stride`, over `padding` zeros (counted in
    /// the means with `count_include_pad`, PyTorch's default); `ceil_mode` keeps partial windows.
    pub fn new(
        kernel_size: usize,
        stride: usize,
        padding: usize,
        ceil_mode: bool,
        count_include_pad: bool,
    ) -> AvgPool2d {
        AvgPool2d { kernel_size, stride, padding, ceil_mode, count_include_pad }
    }

    fn describe(&self) -> String {
        format!("kernel_size={}, stride={}, padding={}", self.kernel_size, self.stride, self.padding)
    }
}

impl Forward for AvgPool2d {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let stride = Some(crate::Dims::from(self.stride as i64));
        F::avg_pool2d(
            input,
            self.kernel_size as i64,
            stride,
            self.padding as i64,
            self.ceil_mode,
            self.count_include_pad,
            None,
        )
    }
}

/// Flattens dimensions `start_dim..=end_dim` (`nn.Flatten`, default `1..=-1`).
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct Flatten {
    #[module(skip)]
    start_dim: i64,
    #[module(skip)]
    end_dim: i64,
}

impl Default for Flatten {
    fn default() -> Self {
        Flatten { start_dim: 1, end_dim: -1 }
    }
}

impl Flatten {
    /// Flattening `start_dim..=end_dim`.
    pub fn new(start_dim: i64, end_dim: i64) -> Flatten {
        Flatten { start_dim, end_dim }
    }

    fn describe(&self) -> String {
        format!("start_dim={}, end_dim={}", self.start_dim, self.end_dim)
    }
}

impl Forward for Flatten {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        input.flatten(self.start_dim, self.end_dim)
    }
}

/// Expands dimension `dim` into `unflattened_size` (`nn.Unflatten`), a view.
///
/// ```
/// use torchfn::nn::{Forward, Unflatten};
/// let layer = Unflatten::new(1, &[2, 3]);
/// assert_eq!(layer.to_string(), "Unflatten(dim=1, unflattened_size=(2, 3))");
/// assert_eq!(layer.forward(&torchfn::zeros([4, 6], None, None)?)?.shape()?, [4, 2, 3]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct Unflatten {
    #[module(skip)]
    dim: i64,
    #[module(skip)]
    unflattened_size: Vec<i64>,
}

impl Unflatten {
    /// Unflattening `dim` into `unflattened_size` (one entry may be -1).
    pub fn new(dim: i64, unflattened_size: &[i64]) -> Unflatten {
        Unflatten { dim, unflattened_size: unflattened_size.to_vec() }
    }

    fn describe(&self) -> String {
        format!("dim={}, unflattened_size={}", self.dim, python_tuple(&self.unflattened_size))
    }
}

impl Forward for Unflatten {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        input.unflatten(self.dim, self.unflattened_size.clone())
    }
}

/// Upsampling by [`interpolate`](F::interpolate) (`nn.Upsample`): to `size`, or by
/// `scale_factor`, in `mode` (`"nearest"`, `"nearest-exact"`, `"linear"`, `"bilinear"`,
/// `"bicubic"`, `"trilinear"`, `"area"`), with `align_corners` for the linear and cubic modes.
///
/// ```
/// use torchfn::nn::{Forward, Upsample};
/// let up = Upsample::new(None, Some(2.0.into()), "nearest", None);
/// assert_eq!(up.to_string(), "Upsample(scale_factor=2.0, mode='nearest')");
/// let x = torchfn::tensor([[[[1.0f32, 2.0]]]])?;
/// assert_eq!(up.forward(&x)?.to_vec::<f32>()?, [1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(crate::nn::Module)]
#[module(extra_repr = describe)]
pub struct Upsample {
    #[module(skip)]
    size: Option<crate::IntList>,
    #[module(skip)]
    scale_factor: Option<crate::FloatList>,
    #[module(skip)]
    mode: String,
    #[module(skip)]
    align_corners: Option<bool>,
}

impl Upsample {
    /// Upsampling to `size` or by `scale_factor` (one of the two) in `mode`.
    pub fn new(
        size: Option<crate::IntList>,
        scale_factor: Option<crate::FloatList>,
        mode: &str,
        align_corners: Option<bool>,
    ) -> Upsample {
        Upsample { size, scale_factor, mode: mode.to_string(), align_corners }
    }

    fn describe(&self) -> String {
        let one_or_tuple = |items: Vec<String>| if items.len() == 1 { items[0].clone() } else { python_tuple(&items) };
        let setting = match (&self.size, &self.scale_factor) {
            (Some(size), _) => format!("size={}", one_or_tuple(size.as_slice().iter().map(i64::to_string).collect())),
            (None, Some(scale)) => {
                format!("scale_factor={}", one_or_tuple(scale.as_slice().iter().map(|&f| python_float(f)).collect()))
            }
            (None, None) => "size=None".to_string(),
        };
        format!("{setting}, mode='{}'", self.mode)
    }
}

impl Forward for Upsample {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        F::interpolate(input, self.size.clone(), self.scale_factor.clone(), &self.mode, self.align_corners)
    }
}

/// Layers applied in order (`nn.Sequential`); its children are named `0`, `1`...
#[derive(Default)]
pub struct Sequential(pub Vec<Box<dyn Layer>>);

impl Sequential {
    /// The layers, in order.
    pub fn new(layers: Vec<Box<dyn Layer>>) -> Sequential {
        Sequential(layers)
    }
}

impl Module for Sequential {
    fn visit<'m>(&'m self, visitor: &mut dyn super::module::Visitor<'m>) {
        for (i, layer) in self.0.iter().enumerate() {
            visitor.module(&i.to_string(), layer.as_dyn());
        }
    }
    fn visit_mut(&mut self, visitor: &mut dyn super::module::VisitorMut) {
        for (i, layer) in self.0.iter_mut().enumerate() {
            visitor.module(&i.to_string(), &mut **layer);
        }
    }
    fn type_name(&self) -> &'static str {
        "Sequential"
    }
    fn as_dyn(&self) -> &dyn Module {
        self
    }
    fn as_layer(&self) -> Option<&dyn Layer> {
        Some(self)
    }
}

impl std::fmt::Display for Sequential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.repr())
    }
}

impl Forward for Sequential {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let mut x = input.clone();
        for layer in &self.0 {
            x = layer.call(&x)?;
        }
        Ok(x)
    }
}
