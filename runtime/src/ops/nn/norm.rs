//! Normalization layers: `layer_norm` (over trailing dimensions), `batch_norm` (over every
//! dimension but the channels, with running statistics) and `group_norm`, each
//! `(x - mean) / sqrt(var + eps)` then an optional elementwise scale and shift; and `rms_norm`,
//! `x / sqrt(mean(x²) + eps)` then an optional scale.

use crate::autograd::no_grad;
use crate::backend::{Binary, Reduce, Unary};
use crate::error::{Result, bail};
use crate::ops::IntList;
use crate::ops::device::device_of;
use crate::ops::inplace::write_into;
use crate::primitive;
use crate::tensor::{DType, Scalar, Shape, Tensor};
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::value::Value;

/// The mean of `t` over `dims`, kept as size-one dimensions.
fn mean_keepdim(t: &Tensor, dims: &[usize]) -> Result<Tensor> {
    let shape = t.shape()?;
    let kept: Shape = shape.iter().enumerate().map(|(d, &n)| if dims.contains(&d) { 1 } else { n }).collect();
    primitive::reshape(&primitive::reduce(t, dims, Reduce::Mean, t.dtype()?)?, &kept)
}

/// Named affine tensors (`"weight"`, `"bias"`), each shaped to broadcast.
type Affine<'a> = Vec<(&'a str, &'a Tensor)>;

/// `1 / sqrt(variance + eps)`, in `dtype`.
fn inverse_std(variance: &Tensor, eps: f64, dtype: DType) -> Result<Tensor> {
    let shifted = primitive::binary(variance, &Tensor::scalar(eps), Binary::Add(Scalar::Int(1)), dtype, None)?;
    primitive::unary(&shifted, Unary::Rsqrt, dtype, None)
}

/// `deviations / sqrt(variance + eps)`, then multiplied by the `"weight"` and shifted by the
/// `"bias"` of `affine` (each already shaped to broadcast).
fn scale_and_shift(deviations: &Tensor, variance: &Tensor, eps: f64, affine: Vec<(&str, &Tensor)>) -> Result<Tensor> {
    let dtype = deviations.dtype()?;
    let scale = inverse_std(variance, eps, dtype)?;
    affine_transform(primitive::binary(deviations, &scale, Binary::Mul, dtype, None)?, affine)
}

/// `y` multiplied by the `"weight"` and shifted by the `"bias"` of `affine` (each already
/// shaped to broadcast).
fn affine_transform(mut y: Tensor, affine: Vec<(&str, &Tensor)>) -> Result<Tensor> {
    let (dtype, one) = (y.dtype()?, Scalar::Int(1));
    for (name, t) in affine {
        let op = if name == "weight" { Binary::Mul } else { Binary::Add(one) };
        y = primitive::binary(&y, t, op, dtype, None)?;
    }
    Ok(y)
}

/// Layer normalization over the last `normalized_shape.len()` dimensions
/// (`torch.nn.functional.layer_norm`): each slice is shifted to mean 0 and scaled to variance
/// 1 (the biased variance, plus `eps`; a constant slice with `eps = 0` gives NaN, as in
/// PyTorch), then multiplied by `weight` and shifted by `bias`
/// elementwise, both of shape `normalized_shape` when given.
///
/// `normalized_shape` is an int or a list of ints, as in PyTorch: `4` means `[4]`. The input's
/// trailing dimensions must equal it; floating-point tensors only, `weight` and `bias` of the
/// input's dtype. Computed in the input's dtype: the mean first, then the mean square of the
/// deviations.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[1.0f64, 3.0], [4.0, 8.0]])?;
/// let y = F::layer_norm(&x, [2], None, None, 0.0)?;
/// assert_eq!(y.to_vec::<f64>()?, [-1.0, 1.0, -1.0, 1.0]);
/// assert_eq!(F::layer_norm(&x, 2, None, None, 0.0)?.to_vec::<f64>()?, [-1.0, 1.0, -1.0, 1.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn layer_norm(
    input: &Tensor,
    normalized_shape: impl Into<IntList>,
    #[default(None)] weight: Option<&Tensor>,
    #[default(None)] bias: Option<&Tensor>,
    #[default(1e-5)] eps: f64,
) -> Result<Tensor> {
    const FUNC: &str = "layer_norm";
    let (dims, affine) = trailing(FUNC, input, normalized_shape.into(), [("weight", weight), ("bias", bias)])?;
    primitive::in_float32(input, |input| {
        let dtype = input.dtype()?;
        let mean = mean_keepdim(input, &dims)?;
        let deviations = primitive::binary(input, &mean, Binary::Sub(Scalar::Int(1)), dtype, None)?;
        let variance = mean_keepdim(&primitive::unary(&deviations, Unary::Square, dtype, None)?, &dims)?;
        scale_and_shift(&deviations, &variance, eps, affine)
    })
}

/// The checks of a normalization over the input's trailing dimensions (`layer_norm`,
/// `rms_norm`): `normalized_shape` must end the input's shape, the input be floating-point,
/// and each given affine tensor have `normalized_shape` and the input's dtype, on its device.
/// The dimensions normalized, and the affine tensors given.
fn trailing<'a, const N: usize>(
    func: &str,
    input: &Tensor,
    sizes: IntList,
    affine: [(&'a str, Option<&'a Tensor>); N],
) -> Result<(Vec<usize>, Affine<'a>)> {
    let x = input.data(func, "input")?;
    let shape = &x.layout.shape;
    // A negative size matches no input, as in PyTorch's check.
    let normalized: Option<Shape> = sizes.as_slice().iter().map(|&d| usize::try_from(d).ok()).collect();
    let k = sizes.as_slice().len();
    let Some(normalized) = normalized.filter(|n| k <= shape.len() && shape[shape.len() - k..] == n[..]) else {
        bail!(
            Runtime,
            "{func}(): given normalized_shape={:?}, expected input with shape [*, {}], but got input of size {:?}",
            sizes.as_slice(),
            sizes.as_slice().iter().map(i64::to_string).collect::<Vec<_>>().join(", "),
            &shape[..]
        );
    };
    if !x.dtype.is_floating_point() {
        bail!(NotImplemented, "{func}(): not implemented for {} inputs; expected a floating point tensor", x.dtype);
    }
    let mut operands = vec![("input", x)];
    let mut given = Vec::new();
    for (name, t) in affine {
        let Some(t) = t else { continue };
        let d = t.data(func, name)?;
        if d.layout.shape != normalized {
            bail!(
                Runtime,
                "{func}(): expected {name} to be of same shape as normalized_shape, but got {name} of shape {:?} \
                 and normalized_shape = {:?}",
                &d.layout.shape[..],
                &normalized[..]
            );
        }
        if d.dtype != x.dtype {
            bail!(Runtime, "{func}(): expected {name} to have the input's dtype, {}, but got {}", x.dtype, d.dtype);
        }
        operands.push((name, d));
        given.push((name, t));
    }
    device_of(func, &operands)?;
    Ok(((shape.len() - k..shape.len()).collect(), given))
}

/// Root-mean-square normalization over the last `normalized_shape.len()` dimensions
/// (`torch.nn.functional.rms_norm`, LLaMA's norm): `x / sqrt(mean(x²) + eps)` over each
/// slice, times `weight` (of shape `normalized_shape`) when given. `eps` defaults to the
/// dtype's machine epsilon (`torch.finfo(dtype).eps`), as PyTorch's. Shapes and dtypes as in
/// [`layer_norm`].
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[3.0f64, 4.0]])?;
/// let y = F::rms_norm(&x, [2], None, Some(0.0))?; // rms = sqrt(12.5)
/// assert_eq!(y.to_vec::<f64>()?, [3.0 / 12.5f64.sqrt(), 4.0 / 12.5f64.sqrt()]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn rms_norm(
    input: &Tensor,
    normalized_shape: impl Into<IntList>,
    #[default(None)] weight: Option<&Tensor>,
    #[default(None)] eps: Option<f64>,
) -> Result<Tensor> {
    let (dims, affine) = trailing("rms_norm", input, normalized_shape.into(), [("weight", weight)])?;
    primitive::in_float32(input, |input| {
        // The epsilon of the dtype it computes in (float32 for half precision), as PyTorch's.
        let dtype = input.dtype()?;
        let eps = eps.unwrap_or(if dtype == DType::Float32 { f32::EPSILON as f64 } else { f64::EPSILON });
        let mean_square = mean_keepdim(&primitive::unary(input, Unary::Square, dtype, None)?, &dims)?;
        scale_and_shift(input, &mean_square, eps, affine)
    })
}

/// Batch normalization (`torch.nn.functional.batch_norm`) of `input` `[N, C, *]` over every
/// dimension but the channels (dimension 1).
///
/// With `training`, each channel is normalized by the batch's mean and biased variance, and
/// `running_mean` / `running_var` (when given) are updated in place, as PyTorch does:
/// `running = (1 - momentum) * running + momentum * batch`, with the unbiased variance.
/// Otherwise the running statistics (required then) normalize. `weight` and `bias` (`[C]`)
/// scale and shift each channel. Floating-point tensors of one dtype.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[1.0f64, 10.0], [3.0, 30.0]])?;
/// let (mean, var) = (torchfn::zeros([2], Some(torchfn::DType::Float64), None)?, torchfn::ones([2], Some(torchfn::DType::Float64), None)?);
/// let y = F::batch_norm(&x, Some(&mean), Some(&var), None, None, true, 0.1, 0.0)?;
/// assert_eq!(y.to_vec::<f64>()?, [-1.0, -1.0, 1.0, 1.0]);
/// assert_eq!(mean.to_vec::<f64>()?, [0.2, 2.0]); // 0.1 * the batch means 2 and 20
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn.nn.functional")]
pub fn batch_norm(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    #[default(None)] weight: Option<&Tensor>,
    #[default(None)] bias: Option<&Tensor>,
    #[default(false)] training: bool,
    #[default(0.1)] momentum: f64,
    #[default(1e-5)] eps: f64,
) -> Result<Tensor> {
    const FUNC: &str = "batch_norm";
    let x = input.data(FUNC, "input")?;
    let shape = &x.layout.shape;
    if shape.len() < 2 {
        bail!(Value, "{FUNC}(): expected an input with at least 2 dimensions [N, C, *], but got {:?}", &shape[..]);
    }
    if !x.dtype.is_floating_point() {
        bail!(NotImplemented, "{FUNC}(): not implemented for {} inputs; expected a floating point tensor", x.dtype);
    }
    let channels = shape[1];
    // Per-channel tensors seen as [1, C, 1, ...] to broadcast against the input.
    let along: Shape = shape.iter().enumerate().map(|(d, &n)| if d == 1 { n } else { 1 }).collect();
    let mut operands = vec![("input", x)];
    for (name, t) in [("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)]
    {
        let Some(t) = t else { continue };
        let d = t.data(FUNC, name)?;
        if d.layout.shape != [channels] {
            bail!(Runtime, "{FUNC}(): expected {name} of shape [{channels}], but got {:?}", &d.layout.shape[..]);
        }
        operands.push((name, d));
    }
    device_of(FUNC, &operands)?;
    let dims: Vec<usize> = (0..shape.len()).filter(|&d| d != 1).collect();
    let count: usize = dims.iter().map(|&d| shape[d]).product();
    primitive::in_float32(input, |input| {
        let dtype = input.dtype()?;
        let (deviations, variance) = if training {
            if count <= 1 {
                bail!(
                    Value,
                    "{FUNC}(): Expected more than 1 value per channel when training, got input size {:?}",
                    &shape[..]
                );
            }
            let mean = mean_keepdim(input, &dims)?;
            let deviations = primitive::binary(input, &mean, Binary::Sub(Scalar::Int(1)), dtype, None)?;
            let variance = mean_keepdim(&primitive::unary(&deviations, Unary::Square, dtype, None)?, &dims)?;
            let unbiased = count as f64 / (count - 1) as f64;
            for (running, batch, factor) in [(running_mean, &mean, 1.0), (running_var, &variance, unbiased)] {
                if let Some(running) = running {
                    update_running(running, batch, momentum, factor)?;
                }
            }
            (deviations, variance)
        } else {
            let (Some(mean), Some(var)) = (running_mean, running_var) else {
                bail!(Value, "{FUNC}(): running_mean and running_var must be given when training is False");
            };
            let mean = primitive::reshape(mean, &along)?;
            (
                primitive::binary(input, &mean, Binary::Sub(Scalar::Int(1)), dtype, None)?,
                primitive::reshape(var, &along)?,
            )
        };
        // As PyTorch's CPU kernel: the weight folds into each channel's scale, so the input's
        // elements see one product and one sum.
        let mut scale = inverse_std(&variance, eps, dtype)?;
        if let Some(weight) = weight {
            scale = primitive::binary(&scale, &primitive::reshape(weight, &along)?, Binary::Mul, dtype, None)?;
        }
        let bias = bias.map(|b| primitive::reshape(b, &along)).transpose()?;
        affine_transform(
            primitive::binary(&deviations, &scale, Binary::Mul, dtype, None)?,
            bias.iter().map(|b| ("bias", b)).collect(),
        )
    })
}

/// `running = (1 - momentum) * running + momentum * factor * batch`, in place and unrecorded.
fn update_running(running: &Tensor, batch: &Tensor, momentum: f64, factor: f64) -> Result<()> {
    let _no_grad = no_grad();
    let dtype = running.dtype()?;
    let batch = primitive::reshape(batch, &running.shape()?)?;
    let kept = primitive::binary(running, &Tensor::scalar(1.0 - momentum), Binary::Mul, dtype, None)?;
    let new = primitive::binary(&kept, &batch, Binary::Add(Scalar::Float(momentum * factor)), dtype, None)?;
    write_into("batch_norm", running, new)?;
    Ok(())
}

/// Group normalization (`torch.nn.functional.group_norm`) of `input` `[N, C, *]`: the channels
/// split into `num_groups` groups, each group of each example shifted to mean 0 and scaled to
/// variance 1 (the biased variance, plus `eps`), then each channel multiplied by `weight` and
/// shifted by `bias` (`[C]`) when given. Floating-point tensors of one dtype.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[[1.0f64], [3.0], [10.0], [30.0]]])?; // N = 1, C = 4, one position
/// let y = F::group_norm(&x, 2, None, None, 0.0)?;
/// assert_eq!(y.to_vec::<f64>()?, [-1.0, 1.0, -1.0, 1.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn group_norm(
    input: &Tensor,
    num_groups: usize,
    #[default(None)] weight: Option<&Tensor>,
    #[default(None)] bias: Option<&Tensor>,
    #[default(1e-5)] eps: f64,
) -> Result<Tensor> {
    const FUNC: &str = "group_norm";
    let x = input.data(FUNC, "input")?;
    let shape = x.layout.shape.clone();
    if shape.len() < 2 {
        bail!(Runtime, "{FUNC}(): Expected at least 2 dimensions for input tensor but received {}", shape.len());
    }
    let channels = shape[1];
    if num_groups == 0 || !channels.is_multiple_of(num_groups) {
        bail!(
            Runtime,
            "{FUNC}(): Expected number of channels in input to be divisible by num_groups, but got input of shape \
             {:?} and num_groups={num_groups}",
            &shape[..]
        );
    }
    if !x.dtype.is_floating_point() {
        bail!(NotImplemented, "{FUNC}(): not implemented for {} inputs; expected a floating point tensor", x.dtype);
    }
    // Per-channel tensors seen as [1, C, 1, ...] to broadcast against the input.
    let along: Shape = shape.iter().enumerate().map(|(d, &n)| if d == 1 { n } else { 1 }).collect();
    let mut operands = vec![("input", x)];
    let mut affine = Vec::new();
    for (name, t) in [("weight", weight), ("bias", bias)] {
        let Some(t) = t else { continue };
        let d = t.data(FUNC, name)?;
        if d.layout.shape != [channels] {
            bail!(Runtime, "{FUNC}(): expected {name} of shape [{channels}], but got {:?}", &d.layout.shape[..]);
        }
        if d.dtype != x.dtype {
            bail!(Runtime, "{FUNC}(): expected {name} to have the input's dtype, {}, but got {}", x.dtype, d.dtype);
        }
        operands.push((name, d));
        affine.push((name, primitive::reshape(t, &along)?));
    }
    device_of(FUNC, &operands)?;
    let per_group = shape.iter().skip(2).product::<usize>() * (channels / num_groups);
    primitive::in_float32(input, |input| {
        let dtype = input.dtype()?;
        let grouped = primitive::reshape(input, &Shape::from([shape[0], num_groups, per_group]))?;
        let mean = mean_keepdim(&grouped, &[2])?;
        let deviations = primitive::binary(&grouped, &mean, Binary::Sub(Scalar::Int(1)), dtype, None)?;
        let variance = mean_keepdim(&primitive::unary(&deviations, Unary::Square, dtype, None)?, &[2])?;
        let normalized = primitive::reshape(&scale_and_shift(&deviations, &variance, eps, Vec::new())?, &shape)?;
        affine_transform(normalized, affine.iter().map(|(name, t)| (*name, t)).collect())
    })
}

crate::samples! {
    GROUP_NORM => [
        sample([f32s(&[2, 4, 3]), Value::Int(2)]),
        sample([f32s(&[2, 6, 2, 2]), Value::Int(3), f32s(&[6]), f32s(&[6])]).kw("eps", 1e-3),
        sample([f32s(&[3, 4]), Value::Int(1)]),
    ],
    LAYER_NORM => [
        sample([f32s(&[2, 4]), Value::List(vec![4.into()])]),
        sample([f32s(&[3, 2]), Value::Int(2)]),
        sample([f32s(&[2, 2, 3]), Value::List(vec![2.into(), 3.into()]), f32s(&[2, 3]), f32s(&[2, 3])]).kw("eps", 1e-3),
    ],
    RMS_NORM => [
        sample([f32s(&[2, 4]), Value::List(vec![4.into()])]),
        sample([f32s(&[2, 2, 3]), Value::List(vec![2.into(), 3.into()]), f32s(&[2, 3])]).kw("eps", 1e-3),
    ],
    BATCH_NORM => [
        sample([f32s(&[4, 3, 2, 2]), f32s(&[3]), f32s(&[3]), f32s(&[3]), f32s(&[3])]).kw("training", true),
        sample([f32s(&[5, 3]), f32s(&[3]), f32s(&[3])]).kw("training", true).kw("momentum", 0.2),
        sample([f32s(&[2, 3, 2]), f32s(&[3]), Value::Tensor(crate::testing::values(&[3], crate::DType::Float32).abs().expect("abs of float32"))]),
    ],
}
