//! Loss functions of `torch.nn.functional`: `cross_entropy` and `mse_loss`.

use crate::cpu;
use crate::error::{Result, bail};
use crate::ops::softmax::softmax_blocks;
use crate::tensor::{DType, Dense, Element, Shape, Tensor, broadcast_shapes, result_type};
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

/// A floating-point tensor of `dtype` from values computed in `f64`.
fn float_tensor(values: Vec<f64>, shape: Shape, dtype: DType) -> Tensor {
    let dense = match dtype {
        DType::Float64 => Dense::from_vec(values, shape),
        _ => Dense::from_vec(values.into_iter().map(|v| v as f32).collect(), shape),
    };
    Tensor::from_dense(dense)
}

/// The log-probabilities of `x` along its class dimension: `[batch, classes, positions]` in
/// row-major order (`batch` and `positions` may be 1).
fn log_probabilities(x: &Dense, sizes: [usize; 3]) -> Vec<f64> {
    cpu::with_elements(x, |v: &[f64]| softmax_blocks(v, sizes, true))
}

/// The arguments of `cross_entropy` past the two tensors.
struct CrossEntropy<'a> {
    weight: Option<&'a Tensor>,
    ignore_index: i64,
    reduction: Reduction,
    label_smoothing: f64,
}

fn cross_entropy_impl(func: &str, input: &Tensor, target: &Tensor, args: CrossEntropy<'_>) -> Result<Tensor> {
    let (x, t) = (input.data(func, "input")?, target.data(func, "target")?);
    let weight = args.weight.map(|w| w.data(func, "weight")).transpose()?;
    if !x.dtype.is_floating_point() {
        bail!(Runtime, "{func}(): not implemented for {} inputs; expected floating point logits", x.dtype);
    }
    let eps = args.label_smoothing;
    if !(0.0..=1.0).contains(&eps) {
        bail!(Runtime, "{func}(): label_smoothing must be between 0.0 and 1.0. Got: {eps}");
    }
    let shape = &x.layout.shape;
    let probabilities = shape == &t.layout.shape;
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
    let weights = match weight {
        None => vec![1.0; classes],
        Some(w) => {
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
            cpu::with_elements(w, |v: &[f64]| v.to_vec())
        }
    };
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
        if t.dtype != DType::Int64 {
            bail!(
                Runtime,
                "{func}(): expected scalar type Long (int64) for the target class indices, but found {}",
                t.dtype
            );
        }
    }
    let logp = log_probabilities(x, [batch, classes, positions]);
    let at = |n: usize, c: usize, s: usize| (n * classes + c) * positions + s;
    let count = batch * positions;
    let mut losses = Vec::with_capacity(count);
    let dtype;
    let loss = if probabilities {
        dtype = x.dtype.promote(t.dtype);
        let target = cpu::with_elements(t, |v: &[f64]| v.to_vec());
        for n in 0..batch {
            for s in 0..positions {
                let loss: f64 = (0..classes)
                    .map(|c| {
                        let p = target[at(n, c, s)] * (1.0 - eps) + eps / classes as f64;
                        -weights[c] * p * logp[at(n, c, s)]
                    })
                    .sum();
                losses.push(loss);
            }
        }
        match args.reduction {
            Reduction::None => return Ok(float_tensor(losses, kept, dtype)),
            Reduction::Sum => losses.iter().sum(),
            Reduction::Mean if count == 0 => f64::NAN,
            Reduction::Mean => losses.iter().sum::<f64>() / count as f64,
        }
    } else {
        dtype = x.dtype;
        let target = cpu::with_elements(t, |v: &[i64]| v.to_vec());
        let mut total_weight = 0.0;
        for n in 0..batch {
            for s in 0..positions {
                let class = target[n * positions + s];
                if class == args.ignore_index {
                    losses.push(0.0);
                    continue;
                }
                let Some(c) = usize::try_from(class).ok().filter(|&c| c < classes) else {
                    bail!(Index, "{func}(): Target {class} is out of bounds (the input has {classes} classes).");
                };
                let nll = -weights[c] * logp[at(n, c, s)];
                total_weight += weights[c];
                let smooth =
                    if eps > 0.0 { -(0..classes).map(|k| weights[k] * logp[at(n, k, s)]).sum::<f64>() } else { 0.0 };
                losses.push((1.0 - eps) * nll + eps / classes as f64 * smooth);
            }
        }
        match args.reduction {
            Reduction::None => return Ok(float_tensor(losses, kept, dtype)),
            Reduction::Sum => losses.iter().sum(),
            // Both the likelihood and the smoothing term are normalized by the total weight of
            // the counted targets (NaN when every target is ignored), as in PyTorch.
            Reduction::Mean => losses.iter().sum::<f64>() / total_weight,
        }
    };
    Ok(float_tensor(vec![loss], Shape::from([]), dtype))
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
    let args = CrossEntropy { weight, ignore_index, reduction, label_smoothing };
    cross_entropy_impl("cross_entropy", input, target, args)
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
    const FUNC: &str = "mse_loss";
    let reduction = self::reduction(FUNC, size_average, reduce, reduction)?;
    let (x, y) = (input.data(FUNC, "input")?, target.data(FUNC, "target")?);
    let dtype = result_type([x.participant(), y.participant()]);
    if !dtype.is_floating_point() {
        bail!(Runtime, "{FUNC}(): not implemented for {dtype} tensors; expected floating point input and target");
    }
    let shape = broadcast_shapes(&x.layout.shape, &y.layout.shape, FUNC)?;
    fn squares<T: Element + crate::cpu::Number>(
        x: &Dense,
        y: &Dense,
        shape: &Shape,
        reduction: Reduction,
    ) -> Result<Dense> {
        let squared = cpu::binary::<T, T>(x, y, shape, |p, q| {
            let d = p.sub(q);
            d.mul(d)
        })?;
        if reduction == Reduction::None {
            return Ok(squared);
        }
        let all: Vec<usize> = (0..shape.len()).collect();
        Ok(cpu::reduce::<T, T>(&squared, &all, false, |lane| {
            let sum: f64 = lane.iter().map(|v| v.to_f64()).sum();
            T::from_f64(if reduction == Reduction::Mean { sum / lane.len() as f64 } else { sum })
        }))
    }
    let dense = match dtype {
        DType::Float64 => squares::<f64>(x, y, &shape, reduction)?,
        _ => squares::<f32>(x, y, &shape, reduction)?,
    };
    Ok(Tensor::from_dense(dense))
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
    MSE_LOSS => [sample([f32s(&[2, 3]), f32s(&[2, 3])]), sample([f32s(&[2, 3]), f32s(&[3])]).kw("reduction", "none")],
}
