//! Loss functions of `torch.nn.functional`: `cross_entropy` and `nll_loss`; the pointwise
//! ones, `mse_loss`, `l1_loss`, `smooth_l1_loss`, `huber_loss`, `kl_div`,
//! `binary_cross_entropy` and `binary_cross_entropy_with_logits`; and `ctc_loss`.

use crate::backend::{Binary, Reduce, Unary};
use crate::error::{Result, bail};
use crate::ops::device::device_of;
use crate::ops::indexing::out_of_range;
use crate::primitive;
use crate::tensor::{DType, Dense, Scalar, Shape, Tensor, check_broadcast, result_type};
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::value::Value;

/// How a loss reduces its elementwise values.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Reduction {
    None,
    Mean,
    Sum,
}

/// The reduction, from the deprecated `size_average` and `reduce` when either is given (as
/// PyTorch's `legacy_get_string`), else from `reduction`.
fn reduction(func: &str, size_average: Option<bool>, reduce: Option<bool>, reduction: &str) -> Result<Reduction> {
    if size_average.is_some() || reduce.is_some() {
        let (average, reduce) = (size_average.unwrap_or(true), reduce.unwrap_or(true));
        return Ok(match (average, reduce) {
            (true, true) => Reduction::Mean,
            (false, true) => Reduction::Sum,
            (_, false) => Reduction::None,
        });
    }
    Ok(match reduction {
        "mean" => Reduction::Mean,
        "sum" => Reduction::Sum,
        "none" => Reduction::None,
        other => {
            bail!(Value, "{func}(): {other} is not a valid value for reduction (expected 'none', 'mean' or 'sum')")
        }
    })
}

/// The arithmetic of a loss, in one float dtype.
struct Losses {
    dtype: DType,
}

impl Losses {
    fn binary(&self, a: &Tensor, b: &Tensor, op: Binary) -> Result<Tensor> {
        check_broadcast(&a.shape()?, &b.shape()?, "loss")?;
        primitive::binary(a, b, op, self.dtype, None)
    }

    fn mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(a, b, Binary::Mul)
    }

    fn add(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(a, b, Binary::Add(Scalar::Int(1)))
    }

    fn neg(&self, a: &Tensor) -> Result<Tensor> {
        primitive::unary(a, Unary::Neg, self.dtype, None)
    }

    /// The sum over `dim` (or everything), the dimension dropped.
    fn sum(&self, a: &Tensor, dim: Option<usize>) -> Result<Tensor> {
        let dims: Vec<usize> = dim.map_or_else(|| (0..a.shape().map_or(0, |s| s.len())).collect(), |d| vec![d]);
        primitive::reduce(a, &dims, Reduce::Sum, self.dtype)
    }

    /// The sum of `losses` divided by `total`, a weight that may be 0: then NaN, with no
    /// gradient.
    fn mean_by_weight(&self, losses: &Tensor, total: &Tensor) -> Result<Tensor> {
        let zero = primitive::binary(total, &Tensor::scalar(0.0), Binary::Eq, self.dtype, None)?;
        let safe = primitive::select(&zero, &Tensor::scalar(1.0), total, self.dtype)?;
        let mean = self.binary(&self.sum(losses, None)?, &safe, Binary::Div)?;
        primitive::select(&zero, &Tensor::scalar(f64::NAN), &mean, self.dtype)
    }

    /// `losses` reduced as asked: kept, summed, or averaged over its elements (NaN for none).
    fn reduced_by_count(&self, losses: Tensor, reduction: Reduction) -> Result<Tensor> {
        let count = losses.shape()?.numel();
        self.reduced(losses, reduction, || Ok(Tensor::scalar(if count == 0 { f64::NAN } else { count as f64 })))
    }

    fn unary(&self, a: &Tensor, op: Unary) -> Result<Tensor> {
        primitive::unary(a, op, self.dtype, None)
    }

    /// `a < b`, `a == b`... as a bool tensor.
    fn test(&self, a: &Tensor, b: &Tensor, op: Binary) -> Result<Tensor> {
        primitive::binary(a, b, op, self.dtype, None)
    }

    /// `value - a`.
    fn from(&self, value: f64, a: &Tensor) -> Result<Tensor> {
        primitive::binary(&Tensor::scalar(value), a, Binary::Sub(Scalar::Int(1)), self.dtype, None)
    }

    /// `losses` reduced as asked: kept, summed, or summed and divided by `total`.
    fn reduced(&self, losses: Tensor, reduction: Reduction, total: impl FnOnce() -> Result<Tensor>) -> Result<Tensor> {
        match reduction {
            Reduction::None => Ok(losses),
            Reduction::Sum => self.sum(&losses, None),
            Reduction::Mean => self.binary(&self.sum(&losses, None)?, &total()?, Binary::Div),
        }
    }
}

/// The arguments of `cross_entropy` past the two tensors (and of `nll_loss`, which takes
/// log-probabilities instead of logits, and class indices only).
struct CrossEntropy<'a> {
    logits: bool,
    weight: Option<&'a Tensor>,
    ignore_index: i64,
    reduction: Reduction,
    label_smoothing: f64,
}

fn cross_entropy_impl(func: &str, input: &Tensor, target: &Tensor, args: CrossEntropy<'_>) -> Result<Tensor> {
    let (x, t) = (input.data(func, "input")?, target.data(func, "target")?);
    let weight = args.weight.map(|w| w.data(func, "weight")).transpose()?;
    if !x.dtype.is_floating_point() {
        bail!(NotImplemented, "{func}(): not implemented for {} inputs; expected floating point logits", x.dtype);
    }
    let eps = args.label_smoothing;
    if !(0.0..=1.0).contains(&eps) {
        bail!(Runtime, "{func}(): label_smoothing must be between 0.0 and 1.0. Got: {eps}");
    }
    let shape = &x.layout.shape;
    let probabilities = args.logits && shape == &t.layout.shape;
    if probabilities {
        if !t.dtype.is_floating_point() {
            bail!(
                Runtime,
                "{func}(): expected floating point type for target with class probabilities (target has the \
                 input's shape), got {}",
                t.dtype
            );
        }
        if args.ignore_index >= 0 {
            bail!(Runtime, "{func}(): ignore_index is not supported for floating point target");
        }
    }
    if shape.is_empty() {
        bail!(Index, "{func}(): input must have a class dimension, but it is zero-dimensional");
    }
    // Classes along dimension 1 (0 for an unbatched input); the dimensions after it are positions.
    let (batch, classes) = if shape.len() == 1 { (1, shape[0]) } else { (shape[0], shape[1]) };
    let positions: usize = shape.iter().skip(2).product();
    if let Some(w) = weight {
        {
            if w.layout.shape != [classes] {
                bail!(
                    Runtime,
                    "{func}(): weight tensor should be defined either for all {classes} classes or no classes but got \
                     weight tensor of shape: {:?}",
                    &w.layout.shape[..]
                );
            }
            if w.dtype != x.dtype {
                bail!(Runtime, "{func}(): expected weight to have the input's dtype, {}, but got {}", x.dtype, w.dtype);
            }
        }
    }
    // The shape of the unreduced loss: the input's without the class dimension.
    let kept: Shape =
        shape.iter().enumerate().filter(|&(d, _)| d != usize::from(shape.len() > 1)).map(|(_, &n)| n).collect();
    if !probabilities {
        if shape.len() > 1 && t.layout.ndim() >= 1 && t.layout.shape[0] != batch {
            bail!(
                Value,
                "{func}(): expected input batch_size ({batch}) to match target batch_size ({}).",
                t.layout.shape[0]
            );
        }
        if t.layout.shape != kept {
            bail!(
                Runtime,
                "{func}(): expected a target of class indices of shape {:?} for an input of shape {:?}, but got {:?}",
                &kept[..],
                &shape[..],
                &t.layout.shape[..]
            );
        }
        if t.dtype != DType::Int64 && t.dtype != t.device().index_dtype() {
            bail!(
                Runtime,
                "{func}(): expected scalar type Long (int64) for the target class indices, but found {}",
                t.dtype
            );
        }
    }
    let class_dim = usize::from(shape.len() > 1);
    let mut operands = vec![("input", x), ("target", t)];
    operands.extend(weight.map(|w| ("weight", w)));
    device_of(func, &operands)?;
    let dtype = if probabilities { x.dtype.promote(t.dtype) } else { x.dtype };
    let f = Losses { dtype };
    let number = |v: f64| Tensor::scalar(v);
    let logp = if args.logits { primitive::softmax(input, class_dim, true, x.dtype)? } else { input.clone() };
    // The weights seen along the class dimension: `[C, 1, ...]` for a batched input.
    let trailing = shape.len() - class_dim - 1;
    let along = Shape::from([classes].into_iter().chain(std::iter::repeat_n(1, trailing)).collect::<Vec<_>>());
    let weights = args.weight.map(|w| primitive::reshape(w, &along)).transpose()?;
    let weighted = |a: Tensor| -> Result<Tensor> { weights.as_ref().map_or(Ok(a.clone()), |w| f.mul(&a, w)) };
    let smoothed = |eps: f64, a: &Tensor, b: &Tensor| -> Result<Tensor> {
        // (1 - eps) * a + eps / C * b
        f.add(&f.mul(a, &number(1.0 - eps))?, &f.mul(b, &number(eps / classes as f64))?)
    };
    let count = batch * positions;
    let loss = if probabilities {
        let p = f.add(&f.mul(target, &number(1.0 - eps))?, &number(eps / classes as f64))?;
        let losses = f.neg(&f.sum(&weighted(f.mul(&p, &logp)?)?, Some(class_dim))?)?;
        f.reduced(losses, args.reduction, || Ok(number(if count == 0 { f64::NAN } else { count as f64 })))?
    } else {
        let ignore = Tensor::scalar(args.ignore_index);
        let counted = primitive::binary(target, &ignore, Binary::Ne, t.dtype, None)?;
        let target = primitive::select(&counted, target, &Tensor::scalar(0i64), t.dtype)?;
        if let Some(class) = out_of_range(target.data(func, "target")?, classes)? {
            bail!(Index, "{func}(): Target {class} is out of bounds (the input has {classes} classes).");
        }
        // The target's class picked from each lane: gathered along the class dimension.
        let mut at: Vec<usize> = kept.to_vec();
        at.insert(class_dim, 1);
        let index = primitive::reshape(&target, &Shape::from(at))?;
        let picked = primitive::reshape(&primitive::gather(&logp, class_dim, &index)?, &kept)?;
        let n = kept.numel();
        let target_weights = match args.weight {
            Some(w) => {
                let flat = primitive::reshape(&target, &Shape::from([n]))?;
                primitive::reshape(&primitive::index_select(w, 0, &flat)?, &kept)?
            }
            None => primitive::ones(&kept, dtype, x.device())?,
        };
        let target_weights = primitive::select(&counted, &target_weights, &number(0.0), dtype)?;
        let nll = f.neg(&f.mul(&target_weights, &picked)?)?;
        let losses = if eps > 0.0 {
            let smooth = f.neg(&f.sum(&weighted(logp.clone())?, Some(class_dim))?)?;
            let smooth = primitive::select(&counted, &smooth, &number(0.0), dtype)?;
            smoothed(eps, &nll, &smooth)?
        } else {
            nll
        };
        // Both the likelihood and the smoothing term are normalized by the total weight of the
        // counted targets: NaN when every target is ignored, as in PyTorch, whose gradient is
        // then 0 (its backward writes nothing for ignored targets), not NaN.
        match args.reduction {
            Reduction::Mean => f.mean_by_weight(&losses, &f.sum(&target_weights, None)?)?,
            reduction => f.reduced(losses, reduction, || f.sum(&target_weights, None))?,
        }
    };
    Ok(loss)
}

/// The cross-entropy loss between logits and targets (`torch.nn.functional.cross_entropy`):
/// `log_softmax` over the class dimension (dimension 1, or 0 for an unbatched `[C]` input),
/// then the negative log-likelihood of the targets.
///
/// - **Class indices**: `target` holds int64 classes, of the input's shape without the class
///   dimension (`[N]` for `[N, C]`, `[N, d1, ...]` for `[N, C, d1, ...]`, `[]` for `[C]`). The
///   loss of one element is `-weight[t] * log_softmax(input)[t]`; targets equal to
///   `ignore_index` count for nothing, and `"mean"` divides by the total weight of the others
///   (NaN when all are ignored). A class out of range is an `IndexError`.
/// - **Class probabilities**: `target` is a floating-point tensor of the input's shape; the
///   loss of one element is `-sum_c weight[c] * target[c] * log_softmax(input)[c]`, and
///   `"mean"` divides by the number of elements.
///
/// `weight` (one per class, the input's dtype) rescales classes; `label_smoothing` in
/// `[0, 1]` mixes the target with the uniform distribution. `reduction` is `"mean"`, `"sum"`
/// or `"none"` (any other is a `ValueError`); the deprecated `size_average` and `reduce`
/// override it when given, as in PyTorch.
///
/// ```
/// use torchfn::nn::functional as F;
/// let logits = torchfn::tensor([[0.0f64, 0.0], [0.0, 0.0]])?;
/// let target = torchfn::tensor([0i64, 1])?;
/// let loss = F::cross_entropy(&logits, &target, None, None, -100, None, "mean", 0.0)?;
/// assert!((loss.to_vec::<f64>()?[0] - 2.0f64.ln()).abs() < 1e-15);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn.nn.functional")]
pub fn cross_entropy(
    input: &Tensor,
    target: &Tensor,
    #[default(None)] weight: Option<&Tensor>,
    #[default(None)] size_average: Option<bool>,
    #[default(-100)] ignore_index: i64,
    #[default(None)] reduce: Option<bool>,
    #[default("mean")] reduction: &str,
    #[default(0.0)] label_smoothing: f64,
) -> Result<Tensor> {
    let reduction = self::reduction("cross_entropy", size_average, reduce, reduction)?;
    let args = CrossEntropy { logits: true, weight, ignore_index, reduction, label_smoothing };
    cross_entropy_impl("cross_entropy", input, target, args)
}

/// The negative log-likelihood loss (`torch.nn.functional.nll_loss`): `input` holds
/// log-probabilities (a `log_softmax`'s output) with classes along dimension 1 (0 for an
/// unbatched `[C]` input), `target` int64 class indices of the input's shape without that
/// dimension; the loss of one element is `-weight[t] * input[t]`. `weight`, `ignore_index` and
/// the reductions as in [`cross_entropy`], which is `nll_loss` of `log_softmax(input)`.
///
/// ```
/// use torchfn::nn::functional as F;
/// let logp = torchfn::tensor([[-0.5f32, -1.0], [-2.0, -0.25]])?;
/// let target = torchfn::tensor([0i64, 1])?;
/// assert_eq!(F::nll_loss(&logp, &target, None, None, -100, None, "sum")?.to_vec::<f32>()?, [0.75]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn.nn.functional")]
pub fn nll_loss(
    input: &Tensor,
    target: &Tensor,
    #[default(None)] weight: Option<&Tensor>,
    #[default(None)] size_average: Option<bool>,
    #[default(-100)] ignore_index: i64,
    #[default(None)] reduce: Option<bool>,
    #[default("mean")] reduction: &str,
) -> Result<Tensor> {
    let reduction = self::reduction("nll_loss", size_average, reduce, reduction)?;
    let args = CrossEntropy { logits: false, weight, ignore_index, reduction, label_smoothing: 0.0 };
    cross_entropy_impl("nll_loss", input, target, args)
}

/// The losses of `each` (computed by `f`, in the promoted float dtype of `input` and `target`,
/// which broadcast together), unreduced; `weight`, when given, must have the input's shape
/// (PyTorch's `ValueError` otherwise) and is also on `f`'s device.
fn pointwise(
    func: &str,
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    each: impl FnOnce(&Losses) -> Result<Tensor>,
) -> Result<(Losses, Tensor)> {
    let (x, y) = (input.data(func, "input")?, target.data(func, "target")?);
    let dtype = result_type([x.participant(), y.participant()]);
    if !dtype.is_floating_point() {
        bail!(
            NotImplemented,
            "{func}(): not implemented for {dtype} tensors; expected floating point input and target"
        );
    }
    check_broadcast(&x.layout.shape, &y.layout.shape, func)?;
    let mut operands = vec![("input", x), ("target", y)];
    if let Some(w) = weight {
        let w = w.data(func, "weight")?;
        if w.layout.shape != x.layout.shape {
            bail!(Value, "{func}(): Weights and input must have the same size.");
        }
        operands.push(("weight", w));
    }
    device_of(func, &operands)?;
    let f = Losses { dtype };
    let losses = each(&f)?;
    Ok((f, losses))
}

/// `input - target`, broadcast.
fn difference(f: &Losses, input: &Tensor, target: &Tensor) -> Result<Tensor> {
    f.binary(input, target, Binary::Sub(Scalar::Int(1)))
}

/// The mean squared error (`torch.nn.functional.mse_loss`): `(input - target)^2` elementwise,
/// broadcast, then averaged (`"mean"`, NaN for no elements), summed (`"sum"`) or kept
/// (`"none"`). Floating-point tensors (the promoted dtype must be floating-point);
/// `size_average` and `reduce` as in [`cross_entropy`].
///
/// ```
/// use torchfn::nn::functional as F;
/// let a = torchfn::tensor([1.0f32, 2.0, 3.0])?;
/// let b = torchfn::tensor([1.0f32, 0.0, 0.0])?;
/// assert_eq!(F::mse_loss(&a, &b, None, None, "sum")?.to_vec::<f32>()?, [13.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn mse_loss(
    input: &Tensor,
    target: &Tensor,
    #[default(None)] size_average: Option<bool>,
    #[default(None)] reduce: Option<bool>,
    #[default("mean")] reduction: &str,
) -> Result<Tensor> {
    let reduction = self::reduction("mse_loss", size_average, reduce, reduction)?;
    let (f, squares) =
        pointwise("mse_loss", input, target, None, |f| f.unary(&difference(f, input, target)?, Unary::Square))?;
    f.reduced_by_count(squares, reduction)
}

/// The mean absolute error (`torch.nn.functional.l1_loss`): `|input - target|` elementwise,
/// broadcast, reduced as [`mse_loss`]. With `weight` (of the input's shape) each error is
/// scaled by it, and `"mean"` divides by the weights' sum, as PyTorch's.
///
/// ```
/// use torchfn::nn::functional as F;
/// let a = torchfn::tensor([1.0f32, 2.0, 3.0])?;
/// let b = torchfn::tensor([1.0f32, 0.0, 4.0])?;
/// assert_eq!(F::l1_loss(&a, &b, None, None, "mean", None)?.to_vec::<f32>()?, [1.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn l1_loss(
    input: &Tensor,
    target: &Tensor,
    #[default(None)] size_average: Option<bool>,
    #[default(None)] reduce: Option<bool>,
    #[default("mean")] reduction: &str,
    #[default(None)] weight: Option<&Tensor>,
) -> Result<Tensor> {
    let reduction = self::reduction("l1_loss", size_average, reduce, reduction)?;
    let (f, errors) =
        pointwise("l1_loss", input, target, weight, |f| f.unary(&difference(f, input, target)?, Unary::Abs))?;
    match weight {
        None => f.reduced_by_count(errors, reduction),
        Some(w) => f.reduced(f.mul(&errors, w)?, reduction, || f.sum(w, None)),
    }
}

/// The smooth L1 loss (`torch.nn.functional.smooth_l1_loss`): of `d = input - target`,
/// `0.5 d² / beta` where `|d| < beta` and `|d| - 0.5 beta` elsewhere (plain L1 for
/// `beta = 0`; a negative `beta` is a `RuntimeError`), reduced as [`mse_loss`].
///
/// ```
/// use torchfn::nn::functional as F;
/// let a = torchfn::tensor([0.5f32, 3.0])?;
/// let b = torchfn::tensor([0.0f32, 0.0])?;
/// assert_eq!(F::smooth_l1_loss(&a, &b, None, None, "none", 1.0)?.to_vec::<f32>()?, [0.125, 2.5]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn smooth_l1_loss(
    input: &Tensor,
    target: &Tensor,
    #[default(None)] size_average: Option<bool>,
    #[default(None)] reduce: Option<bool>,
    #[default("mean")] reduction: &str,
    #[default(1.0)] beta: f64,
) -> Result<Tensor> {
    const FUNC: &str = "smooth_l1_loss";
    let reduction = self::reduction(FUNC, size_average, reduce, reduction)?;
    if beta < 0.0 {
        bail!(Runtime, "{FUNC}(): smooth_l1_loss does not support negative values for beta.");
    }
    let (f, losses) = pointwise(FUNC, input, target, None, |f| {
        let d = difference(f, input, target)?;
        // Quadratic below `limit`, linear with slope 1 above: both branches of `quadratic_below`.
        quadratic_below(f, &d, beta, 1.0 / beta, 1.0)
    })?;
    f.reduced_by_count(losses, reduction)
}

/// The Huber loss (`torch.nn.functional.huber_loss`): of `d = input - target`, `0.5 d²` where
/// `|d| < delta` and `delta (|d| - 0.5 delta)` elsewhere (`delta` must be positive), reduced
/// as [`mse_loss`]; with `weight` (of the input's shape) each loss is scaled by it before the
/// reduction. It is `delta` times [`smooth_l1_loss`] with `beta = delta`.
///
/// ```
/// use torchfn::nn::functional as F;
/// let a = torchfn::tensor([0.5f32, 3.0])?;
/// let b = torchfn::tensor([0.0f32, 0.0])?;
/// assert_eq!(F::huber_loss(&a, &b, "none", 2.0, None)?.to_vec::<f32>()?, [0.125, 4.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn huber_loss(
    input: &Tensor,
    target: &Tensor,
    #[default("mean")] reduction: &str,
    #[default(1.0)] delta: f64,
    #[default(None)] weight: Option<&Tensor>,
) -> Result<Tensor> {
    const FUNC: &str = "huber_loss";
    let reduction = self::reduction(FUNC, None, None, reduction)?;
    if delta <= 0.0 {
        bail!(Runtime, "{FUNC}(): huber_loss does not support non-positive values for delta.");
    }
    let (f, mut losses) = pointwise(FUNC, input, target, weight, |f| {
        quadratic_below(f, &difference(f, input, target)?, delta, 1.0, delta)
    })?;
    if let Some(w) = weight {
        losses = f.mul(&losses, w)?;
    }
    f.reduced_by_count(losses, reduction)
}

/// `0.5 * curvature * d²` where `|d| < limit`, `slope * (|d| - 0.5 * limit)` elsewhere: the
/// smooth L1 and Huber losses (continuous with a continuous derivative at `|d| = limit` when
/// `curvature * limit = slope`). A zero `limit` is the linear branch alone, so the quadratic
/// one's `0 / 0` never reaches a gradient.
fn quadratic_below(f: &Losses, d: &Tensor, limit: f64, curvature: f64, slope: f64) -> Result<Tensor> {
    let size = f.unary(d, Unary::Abs)?;
    let linear =
        f.mul(&f.binary(&size, &Tensor::scalar(0.5 * limit), Binary::Sub(Scalar::Int(1)))?, &Tensor::scalar(slope))?;
    if limit == 0.0 {
        return Ok(linear);
    }
    let quadratic = f.mul(&f.unary(d, Unary::Square)?, &Tensor::scalar(0.5 * curvature))?;
    let inside = f.test(&size, &Tensor::scalar(limit), Binary::Lt)?;
    primitive::select(&inside, &quadratic, &linear, f.dtype)
}

/// The Kullback-Leibler divergence loss (`torch.nn.functional.kl_div`) of `input`, log-probabilities,
/// from `target`, probabilities (or log-probabilities with `log_target=True`): elementwise
/// `target * (log(target) - input)` (0 where `target` is 0), or
/// `exp(target) * (target - input)`. `reduction` is `"mean"` (over every element),
/// `"batchmean"` (the sum divided by the first dimension's size, the divergence's definition),
/// `"sum"` or `"none"`; `size_average` and `reduce` as in [`cross_entropy`].
///
/// ```
/// use torchfn::nn::functional as F;
/// let logp = torchfn::tensor([[0.5f64.ln(), 0.5f64.ln()]])?;
/// let q = torchfn::tensor([[0.25f64, 0.75]])?;
/// let kl = F::kl_div(&logp, &q, None, None, "batchmean", false)?.item()?.to_f64();
/// assert!((kl - (0.25 * 0.5f64.ln() + 0.75 * 1.5f64.ln())).abs() < 1e-15);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn kl_div(
    input: &Tensor,
    target: &Tensor,
    #[default(None)] size_average: Option<bool>,
    #[default(None)] reduce: Option<bool>,
    #[default("mean")] reduction: &str,
    #[default(false)] log_target: bool,
) -> Result<Tensor> {
    const FUNC: &str = "kl_div";
    let batchmean = reduction == "batchmean" && size_average.is_none() && reduce.is_none();
    let reduction = if batchmean { Reduction::Sum } else { self::reduction(FUNC, size_average, reduce, reduction)? };
    let (f, losses) = pointwise(FUNC, input, target, None, |f| {
        if log_target {
            return f.mul(&f.unary(target, Unary::Exp)?, &difference(f, target, input)?);
        }
        // target * log(target), 0 where the target is 0 (xlogy): the logarithm of a safe 1 there.
        let zero = f.test(target, &Tensor::scalar(0.0), Binary::Eq)?;
        let safe = primitive::select(&zero, &Tensor::scalar(1.0), target, f.dtype)?;
        let entropy = f.mul(target, &f.unary(&safe, Unary::Log)?)?;
        difference(f, &entropy, &f.mul(target, input)?)
    })?;
    let total = f.reduced_by_count(losses, reduction)?;
    let ndim = input.shape()?.len();
    if batchmean && ndim > 0 {
        let rows = input.shape()?[0];
        return f.binary(&total, &Tensor::scalar(rows as f64), Binary::Div);
    }
    Ok(total)
}

/// The binary cross-entropy of probabilities `input` (in `[0, 1]`; a value outside is a
/// `RuntimeError`) against `target` of the same shape (`torch.nn.functional.binary_cross_entropy`):
/// `-(target * log(x) + (1 - target) * log(1 - x))`, each logarithm clamped to at least -100
/// as PyTorch's, times `weight` (broadcast) when given, reduced as [`mse_loss`]. Prefer
/// [`binary_cross_entropy_with_logits`], which takes the logits and is stable.
///
/// ```
/// use torchfn::nn::functional as F;
/// let p = torchfn::tensor([0.5f64, 1.0])?;
/// let t = torchfn::tensor([1.0f64, 0.0])?;
/// let loss = F::binary_cross_entropy(&p, &t, None, None, None, "none")?.to_vec::<f64>()?;
/// assert_eq!(loss, [2f64.ln(), 100.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn binary_cross_entropy(
    input: &Tensor,
    target: &Tensor,
    #[default(None)] weight: Option<&Tensor>,
    #[default(None)] size_average: Option<bool>,
    #[default(None)] reduce: Option<bool>,
    #[default("mean")] reduction: &str,
) -> Result<Tensor> {
    const FUNC: &str = "binary_cross_entropy";
    let reduction = self::reduction(FUNC, size_average, reduce, reduction)?;
    let (x, t) = (input.data(FUNC, "input")?, target.data(FUNC, "target")?);
    if t.layout.shape != x.layout.shape {
        bail!(
            Value,
            "{FUNC}(): Using a target size ({:?}) that is different to the input size ({:?}) is deprecated. Please \
             ensure they have the same size.",
            &t.layout.shape[..],
            &x.layout.shape[..]
        );
    }
    if let Some((low, high)) = crate::ops::indexing::value_range(input)?
        && !(low.to_f64() >= 0.0 && high.to_f64() <= 1.0)
    {
        bail!(Runtime, "{FUNC}(): all elements of input should be between 0 and 1");
    }
    let (f, mut losses) = pointwise(FUNC, input, target, None, |f| {
        let log = |a: &Tensor| f.binary(&f.unary(a, Unary::Log)?, &Tensor::scalar(-100.0), Binary::ClampMin);
        let positive = f.mul(target, &log(input)?)?;
        let negative = f.mul(&f.from(1.0, target)?, &log(&f.from(1.0, input)?)?)?;
        f.neg(&f.add(&positive, &negative)?)
    })?;
    if let Some(w) = weight {
        check_broadcast(&w.shape()?, &x.layout.shape, FUNC)?;
        losses = f.mul(&losses, w)?;
    }
    f.reduced_by_count(losses, reduction)
}

/// The binary cross-entropy of the probabilities `sigmoid(input)` against `target` (in `[0, 1]`,
/// of `input`'s shape) (`torch.nn.functional.binary_cross_entropy_with_logits`):
/// `-(pos_weight * target * log σ(x) + (1 - target) * log(1 - σ(x)))`, times `weight` when
/// given (both broadcast; `pos_weight` along the last dimension, one per class), reduced by
/// `reduction` (`"mean"`, `"sum"` or `"none"`; the deprecated `size_average` and `reduce` as
/// in [`cross_entropy`]). The two logarithms come from one log-softmax of `(0, x)`, so large
/// logits neither overflow nor lose the gradient.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[0.5f64, -1.0], [2.0, 0.0]])?;
/// let t = torchfn::tensor([[1.0f64, 0.0], [0.0, 1.0]])?;
/// let loss = F::binary_cross_entropy_with_logits(&x, &t, None, None, None, "mean", None)?;
/// assert!((loss.item()?.to_f64() - 0.9019).abs() < 1e-4); // PyTorch 2.15: 0.9019
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn.nn.functional")]
pub fn binary_cross_entropy_with_logits(
    input: &Tensor,
    target: &Tensor,
    #[default(None)] weight: Option<&Tensor>,
    #[default(None)] size_average: Option<bool>,
    #[default(None)] reduce: Option<bool>,
    #[default("mean")] reduction: &str,
    #[default(None)] pos_weight: Option<&Tensor>,
) -> Result<Tensor> {
    const FUNC: &str = "binary_cross_entropy_with_logits";
    let reduction = self::reduction(FUNC, size_average, reduce, reduction)?;
    let (x, t) = (input.data(FUNC, "input")?, target.data(FUNC, "target")?);
    if t.layout.shape != x.layout.shape {
        bail!(
            Value,
            "{FUNC}(): Target size ({:?}) must be the same as input size ({:?})",
            &t.layout.shape[..],
            &x.layout.shape[..]
        );
    }
    let dtype = result_type([x.participant(), t.participant()]);
    if !dtype.is_floating_point() {
        bail!(
            NotImplemented,
            "{FUNC}(): not implemented for {dtype} tensors; expected floating point input and target"
        );
    }
    let mut operands = vec![("input", x), ("target", t)];
    for (name, w) in [("weight", weight), ("pos_weight", pos_weight)] {
        if let Some(w) = w {
            let d = w.data(FUNC, name)?;
            check_broadcast(&d.layout.shape, &x.layout.shape, FUNC)?;
            operands.push((name, d));
        }
    }
    device_of(FUNC, &operands)?;
    let f = Losses { dtype };
    // log(1 - σ(x)) and log σ(x): the log-softmax of (0, x) along a new last dimension.
    let shape = x.layout.shape.clone();
    let last = shape.len();
    let column: Shape = shape.iter().copied().chain([1]).collect();
    let pair_shape: Shape = shape.iter().copied().chain([2]).collect();
    let zeros = primitive::zeros(&column, dtype, x.device())?;
    let logits = primitive::reshape(input, &column)?;
    let pair = primitive::concat(&[zeros, logits], last, &pair_shape, dtype)?;
    let logs = primitive::softmax(&pair, last, true, dtype)?;
    let side = |i: i64| -> Result<Tensor> {
        let index = crate::ops::indexing::positions(x.device(), [i].into_iter())?;
        primitive::reshape(&primitive::index_select(&logs, last, &index)?, &shape)
    };
    let (log_not, log_p) = (side(0)?, side(1)?);
    let mut positive = f.mul(target, &log_p)?;
    if let Some(pw) = pos_weight {
        positive = f.mul(&positive, pw)?;
    }
    let mut losses = f.neg(&f.add(&positive, &f.mul(&f.from(1.0, target)?, &log_not)?)?)?;
    if let Some(w) = weight {
        losses = f.mul(&losses, w)?;
    }
    f.reduced_by_count(losses, reduction)
}

/// A log-probability that stands for `-inf` in `ctc_loss`'s recurrence: finite, so that the
/// gradient of a log-sum of impossible paths is 0 rather than NaN.
const IMPOSSIBLE: f64 = -1e30;

/// The connectionist temporal classification loss (`torch.nn.functional.ctc_loss`):
/// `-log p(target | input)` summed over every alignment of the target with the input's `T`
/// steps (blanks between and around labels, repeats merged), by the forward recurrence over
/// the target with blanks interleaved, in log space.
///
/// `log_probs` is `[T, N, C]` (a `log_softmax` over the `C` classes; `[T, C]` unbatched),
/// `targets` `[N, S]` class indices padded to the longest target (or, concatenated, a vector;
/// or `[S]` unbatched), `input_lengths` and `target_lengths` int64 `[N]` (each at most `T`
/// and `S`). `blank` is the blank class. `reduction` `"mean"` divides each loss by its target
/// length then averages, `"sum"` sums, `"none"` keeps `[N]`. A target no alignment fits gives
/// an infinite loss, or 0 (and a zero gradient) with `zero_infinity`.
///
/// ```
/// use torchfn::nn::functional as F;
/// // Two steps, classes {blank, a}: "a" is "a a", "a -", "- a" (each step 1/2): p = 3/4.
/// let lp = torchfn::full([2, 1, 2], 0.5f64.ln(), Some(torchfn::DType::Float64), None)?;
/// let targets = torchfn::tensor([[1i64]])?;
/// let (inputs, lengths) = (torchfn::tensor([2i64])?, torchfn::tensor([1i64])?);
/// let loss = F::ctc_loss(&lp, &targets, &inputs, &lengths, 0, "sum", false)?;
/// assert!((loss.item()?.to_f64() + 0.75f64.ln()).abs() < 1e-12);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn.nn.functional")]
pub fn ctc_loss(
    log_probs: &Tensor,
    targets: &Tensor,
    input_lengths: &Tensor,
    target_lengths: &Tensor,
    #[default(0)] blank: i64,
    #[default("mean")] reduction: &str,
    #[default(false)] zero_infinity: bool,
) -> Result<Tensor> {
    const FUNC: &str = "ctc_loss";
    let reduction = self::reduction(FUNC, None, None, reduction)?;
    let shape = log_probs.shape()?;
    let batched = match shape.len() {
        3 => true,
        2 => false,
        n => bail!(Runtime, "{FUNC}(): log_probs must be 2-D (unbatched) or 3-D [T, N, C], got {n}-D"),
    };
    let lp = if batched { log_probs.clone() } else { log_probs.unsqueeze(1)? };
    let (steps, batch, classes) = {
        let s = lp.shape()?;
        (s[0], s[1], s[2])
    };
    let dtype = lp.dtype()?;
    if !dtype.is_floating_point() {
        bail!(Runtime, "{FUNC}(): log_probs must be floating point, got {dtype}");
    }
    if !(0..classes as i64).contains(&blank) {
        bail!(Runtime, "{FUNC}(): blank must be in label range, got blank={blank} for {classes} classes");
    }
    let lengths = |t: &Tensor, name: &str| -> Result<Tensor> {
        let t = if batched { t.clone() } else { t.reshape(&[1])? };
        if t.dtype()?.is_floating_point() || t.shape()?[..] != [batch] {
            bail!(Runtime, "{FUNC}(): {name} must be an integer tensor of size [{batch}], got {:?}", t.shape()?);
        }
        Ok(t)
    };
    let (input_lengths, target_lengths) =
        (lengths(input_lengths, "input_lengths")?, lengths(target_lengths, "target_lengths")?);
    // Targets padded: [N, S].
    let targets = match (batched, targets.shape()?.len()) {
        (false, 1) => targets.unsqueeze(0)?,
        (true, 2) => targets.clone(),
        (true, 1) => {
            // Concatenated: cut by the target lengths (read from the tensor) and padded with blanks.
            let counts = target_lengths.to_vec::<i64>()?;
            let longest = counts.iter().copied().max().unwrap_or(0).max(0);
            let mut rows = Vec::with_capacity(batch);
            let mut start = 0i64;
            for &n in &counts {
                let row = targets.narrow(0, start, n)?;
                let pad = crate::full([(longest - n) as usize], blank, Some(row.dtype()?), Some(row.device()?))?;
                rows.push(crate::cat(&[row, pad], 0)?);
                start += n;
            }
            crate::stack(&rows, 0)?
        }
        (_, n) => bail!(Runtime, "{FUNC}(): targets of {n} dimensions do not fit log_probs of {}", shape.len()),
    };
    let longest = targets.shape()?[1];
    let extended = 2 * longest + 1;
    let device = lp.device()?;
    let int = |v: i64| Tensor::scalar(v);
    let index_dtype = device.index_dtype();
    let position = crate::arange(extended as i64, Some(index_dtype), Some(device))?; // [L']
    // The target with blanks interleaved, [N, L']: odd positions the labels, even ones blank;
    // past each target's end, blank (padding may hold anything).
    let blanks = crate::full([batch, longest], blank, Some(targets.dtype()?), Some(device))?;
    let pairs = crate::stack(&[blanks, targets.clone()], -1)?.reshape(&[batch as i64, 2 * longest as i64])?;
    let tail = crate::full([batch, 1], blank, Some(targets.dtype()?), Some(device))?;
    let labels = crate::cat(&[pairs, tail], 1)?;
    let within = position.unsqueeze(0)?.lt(&target_lengths.unsqueeze(1)?.mul(&int(2))?.add(&int(1), 1)?)?;
    let labels = crate::r#where(&within, &labels, &int(blank))?.to(index_dtype, false, false)?;
    // Each step's log-probability of each extended label: [T, N, L'].
    let index = labels.unsqueeze(0)?.expand(vec![steps as i64, batch as i64, extended as i64])?;
    let emissions = lp.gather(2, &index)?;
    // A label may follow the one two back when it is not blank and differs from it.
    let two_back = crate::full([batch, 2], blank, Some(index_dtype), Some(device))?;
    let two_back = crate::cat(&[two_back, labels.narrow(1, 0, extended as i64 - 2)?], 1)?;
    let skip = labels.ne(&int(blank))?.logical_and(&labels.ne(&two_back)?)?;
    let impossible = Tensor::scalar(IMPOSSIBLE);
    let shifted = |alpha: &Tensor, by: i64| -> Result<Tensor> {
        let pad = crate::full([batch, by as usize], IMPOSSIBLE, Some(dtype), Some(device))?;
        crate::cat(&[pad, alpha.narrow(1, 0, extended as i64 - by)?], 1)
    };
    let first = emissions.select(0, 0)?;
    let mut alpha = crate::r#where(&position.lt(&int(2))?.unsqueeze(0)?, &first, &impossible)?;
    for t in 1..steps {
        let (stay, step, jump) = (alpha.clone(), shifted(&alpha, 1)?, shifted(&alpha, 2)?);
        let jump = crate::r#where(&skip, &jump, &impossible)?;
        let paths = crate::logsumexp(&crate::stack(&[stay, step, jump], 0)?, 0, false)?;
        let next = paths.add(&emissions.select(0, t as i64)?, 1)?;
        let running = int(t as i64).lt(&input_lengths)?.unsqueeze(1)?;
        alpha = crate::r#where(&running, &next, &alpha)?;
    }
    // The paths that end on the last label or the blank after it.
    let end = target_lengths.mul(&int(2))?.unsqueeze(1)?; // [N, 1]
    let last_blank = alpha.gather(1, &end)?;
    let last_label = alpha.gather(1, &end.sub(&int(1), 1)?.clamp(Some(Scalar::Int(0)), None)?)?;
    let has_label = target_lengths.gt(&int(0))?.unsqueeze(1)?;
    let last_label = crate::r#where(&has_label, &last_label, &impossible)?;
    let total = crate::logsumexp(&crate::cat(&[last_blank, last_label], 1)?, 1, false)?;
    // PyTorch's gradient for log_probs is `exp(log_probs) - posterior` over each item's steps
    // (the gradient of the logits a log_softmax made them from; through that log_softmax both
    // give the same): the first term is added with no value, as a sum minus itself detached.
    let counted = crate::arange(steps as i64, Some(index_dtype), Some(device))?
        .unsqueeze(1)?
        .lt(&input_lengths.unsqueeze(0)?)?
        .unsqueeze(2)?; // [T, N, 1]
    let mass = crate::r#where(&counted, &lp.exp()?, &Tensor::scalar(0.0))?.sum_dim(vec![0, 2], false)?; // [N]
    let mut losses = total.neg()?.add(&mass.sub(&mass.detach()?, 1)?, 1)?;
    // An alignment-free target: an infinite loss, or 0 with zero_infinity.
    let infinite = losses.gt(&Tensor::scalar(-IMPOSSIBLE / 2.0))?;
    let fill = if zero_infinity { 0.0 } else { f64::INFINITY };
    losses = crate::r#where(&infinite, &Tensor::scalar(fill), &losses)?;
    let f = Losses { dtype };
    match reduction {
        Reduction::Mean => {
            let per_label =
                losses.div(&target_lengths.clamp(Some(Scalar::Int(1)), None)?.to(dtype, false, false)?, None)?;
            per_label.mean()
        }
        Reduction::Sum => f.sum(&losses, None),
        Reduction::None => {
            if batched {
                Ok(losses)
            } else {
                losses.squeeze_dim(0)
            }
        }
    }
}

/// A float32 tensor of values in [0, 1] (targets, positive weights), as a sample argument.
fn probabilities(shape: &[usize]) -> Value {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| ((i * 7 + 3) % 10) as f32 / 10.0).collect();
    Value::Tensor(Tensor::from_dense(Dense::from_vec(data, Shape::new(shape))))
}

/// Log-probabilities over the last dimension (a `log_softmax` of varied values), float32.
fn log_softmax_sample(shape: &[usize]) -> Value {
    let Value::Tensor(t) = f32s(shape) else { unreachable!("f32s gives a tensor") };
    let last = shape.len() - 1;
    Value::Tensor(primitive::softmax(&t, last, true, DType::Float32).expect("a log-softmax of a float tensor"))
}

/// An int64 tensor of class indices, as a sample argument.
fn classes(data: &[i64], shape: &[usize]) -> Value {
    Value::Tensor(Tensor::from_dense(Dense::from_vec(data.to_vec(), Shape::new(shape))))
}

crate::samples! {
    CROSS_ENTROPY => [
        sample([f32s(&[3, 5]), classes(&[1, 0, 4], &[3])]),
        sample([f32s(&[2, 3, 2]), classes(&[0, 2, 1, -100], &[2, 2])]).kw("weight", f32s(&[3])).kw("reduction", "sum"),
        sample([f32s(&[2, 3]), f32s(&[2, 3])]).kw("label_smoothing", 0.1),
    ],
    NLL_LOSS => [
        sample([f32s(&[3, 5]), classes(&[1, 0, 4], &[3])]),
        sample([f32s(&[2, 3, 2]), classes(&[0, 2, 1, -100], &[2, 2])]).kw("weight", f32s(&[3])).kw("reduction", "none"),
    ],
    MSE_LOSS => [sample([f32s(&[2, 3]), f32s(&[2, 3])]), sample([f32s(&[2, 3]), f32s(&[3])]).kw("reduction", "none")],
    L1_LOSS => [sample([f32s(&[2, 3]), f32s(&[2, 3])]), sample([f32s(&[2, 3]), f32s(&[2, 3])]).kw("weight", probabilities(&[2, 3]))],
    SMOOTH_L1_LOSS => [sample([f32s(&[2, 3]), f32s(&[3])]).kw("beta", 0.5), sample([f32s(&[4]), f32s(&[4])]).kw("reduction", "sum")],
    HUBER_LOSS => [sample([f32s(&[2, 3]), f32s(&[2, 3])]).kw("delta", 0.5), sample([f32s(&[4]), f32s(&[4]), Value::from("none")])],
    KL_DIV => [
        sample([f32s(&[2, 3]), probabilities(&[2, 3])]).kw("reduction", "batchmean"),
        sample([f32s(&[2, 3]), f32s(&[2, 3])]).kw("log_target", true).kw("reduction", "none"),
    ],
    CTC_LOSS => [
        sample([log_softmax_sample(&[4, 2, 3]), classes(&[1, 2, 2, 0], &[2, 2]), classes(&[4, 3], &[2]), classes(&[2, 1], &[2])]),
        sample([log_softmax_sample(&[3, 1, 3]), classes(&[1, 1], &[1, 2]), classes(&[3], &[1]), classes(&[2], &[1])])
            .kw("reduction", "sum"),
    ],
    BINARY_CROSS_ENTROPY => [
        sample([probabilities(&[2, 3]), probabilities(&[2, 3])]),
        sample([probabilities(&[4]), probabilities(&[4]), f32s(&[4])]).kw("reduction", "sum"),
    ],
    BINARY_CROSS_ENTROPY_WITH_LOGITS => [
        sample([f32s(&[2, 3]), probabilities(&[2, 3])]),
        sample([f32s(&[2, 3]), probabilities(&[2, 3]), f32s(&[3])]).kw("reduction", "sum").kw("pos_weight", probabilities(&[3])),
        sample([f32s(&[4]), probabilities(&[4])]).kw("reduction", "none"),
    ],
}
