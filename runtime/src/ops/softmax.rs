//! The softmax family along one dimension: `softmax` and `log_softmax`, as functions and
//! methods (`torch.nn.functional`'s forms are in `nn`). Both subtract each lane's maximum
//! first, so large inputs do not overflow.

use crate::cpu;
use crate::error::{Result, bail};
use crate::tensor::{DType, Dense, Element, Tensor, normalize_dim};
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

/// The softmax (or log-softmax) of row-major `data` of shape `[outer, n, inner]` along its
/// middle dimension, computed in `f64`: `exp(x - max) / sum(exp(x - max))`, or
/// `x - max - log(sum(exp(x - max)))`. One pass for the maxima, one for the exponentials and
/// one to normalize, each running along contiguous rows of `inner` elements. A NaN in a lane
/// makes its sum, and so the whole lane, NaN; so does `+inf` (`inf - inf`).
pub(crate) fn softmax_blocks<T: Element>(data: &[T], [_, n, inner]: [usize; 3], log: bool) -> Vec<T> {
    let mut out = vec![T::default(); data.len()];
    if data.is_empty() {
        return out;
    }
    if inner == 1 {
        // Contiguous lanes (the last dimension): each one on its own.
        for (lane, result) in data.chunks(n).zip(out.chunks_mut(n)) {
            let max = lane.iter().fold(f64::NEG_INFINITY, |m, v| m.max(v.to_f64()));
            let mut sum = 0.0;
            for (o, v) in result.iter_mut().zip(lane) {
                let e = (v.to_f64() - max).exp();
                sum += e;
                *o = T::from_f64(e);
            }
            if log {
                let log_sum = sum.ln();
                result.iter_mut().zip(lane).for_each(|(o, v)| *o = T::from_f64(v.to_f64() - max - log_sum));
            } else {
                result.iter_mut().for_each(|o| *o = T::from_f64(o.to_f64() / sum));
            }
        }
        return out;
    }
    let (mut max, mut sum) = (vec![f64::NEG_INFINITY; inner], vec![0.0f64; inner]);
    for (block, result) in data.chunks(n * inner).zip(out.chunks_mut(n * inner)) {
        max.fill(f64::NEG_INFINITY);
        sum.fill(0.0);
        for row in block.chunks(inner) {
            for (m, v) in max.iter_mut().zip(row) {
                *m = m.max(v.to_f64());
            }
        }
        for (row, out_row) in block.chunks(inner).zip(result.chunks_mut(inner)) {
            for (((o, v), m), s) in out_row.iter_mut().zip(row).zip(&max).zip(sum.iter_mut()) {
                let e = (v.to_f64() - m).exp();
                *s += e;
                if !log {
                    *o = T::from_f64(e);
                }
            }
        }
        if log {
            sum.iter_mut().for_each(|s| *s = s.ln());
        }
        for (row, out_row) in block.chunks(inner).zip(result.chunks_mut(inner)) {
            for (((o, v), m), s) in out_row.iter_mut().zip(row).zip(&max).zip(&sum) {
                *o = if log { T::from_f64(v.to_f64() - m - s) } else { T::from_f64(o.to_f64() / s) };
            }
        }
    }
    out
}

/// The body of every softmax and log-softmax: along `dim`, in `dtype` (the input's when `None`),
/// which must be a floating-point type.
pub(crate) fn softmax_along(
    func: &str,
    (name, t): (&str, &Tensor),
    dim: i64,
    dtype: Option<DType>,
    log: bool,
) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let dtype = dtype.unwrap_or(x.dtype);
    if !dtype.is_floating_point() {
        bail!(
            Runtime,
            "{func}(): not implemented for {} inputs; pass a floating point tensor, or dtype=torch.float32 \
             to convert it first",
            dtype
        );
    }
    let shape = &x.layout.shape;
    let dim = normalize_dim(dim, shape.len(), func)?;
    // A zero-dimensional tensor is one lane of one element.
    let n = shape.get(dim).copied().unwrap_or(1);
    let (outer, inner) = (shape.iter().take(dim).product(), shape.iter().skip(dim + 1).product());
    let sizes = [outer, n, inner];
    let dense = match dtype {
        DType::Float64 => {
            Dense::from_vec(cpu::with_elements(x, |d: &[f64]| softmax_blocks(d, sizes, log)), shape.clone())
        }
        _ => Dense::from_vec(cpu::with_elements(x, |d: &[f32]| softmax_blocks(d, sizes, log)), shape.clone()),
    };
    Ok(Tensor::from_dense(dense))
}

/// The softmax along `dim` (`torch.softmax`): `exp(x) / sum(exp(x))` over each lane of `dim`,
/// so every lane sums to one. Computed stably (the lane's maximum is subtracted first).
/// Floating-point inputs only, unless `dtype` names a floating-point type to convert to first;
/// a lane holding NaN or `+inf` gives NaN, as in PyTorch.
///
/// ```
/// let t = torchfn::tensor([[0.0f32, 0.0], [1000.0, 1000.0]])?;
/// assert_eq!(torchfn::softmax(&t, -1, None)?.to_vec::<f32>()?, [0.5, 0.5, 0.5, 0.5]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn softmax(input: &Tensor, dim: i64, #[default(None)] dtype: impl Into<Option<DType>>) -> Result<Tensor> {
    softmax_along("softmax", ("input", input), dim, dtype.into(), false)
}

/// The logarithm of the softmax along `dim` (`torch.log_softmax`): `x - log(sum(exp(x)))`
/// over each lane, computed stably and more accurately than `log(softmax(x))`.
///
/// ```
/// let t = torchfn::tensor([1.0f64, 1.0])?;
/// let half = 0.5f64.ln();
/// assert_eq!(torchfn::log_softmax(&t, 0, None)?.to_vec::<f64>()?, [half, half]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn log_softmax(input: &Tensor, dim: i64, #[default(None)] dtype: impl Into<Option<DType>>) -> Result<Tensor> {
    softmax_along("log_softmax", ("input", input), dim, dtype.into(), true)
}

impl Tensor {
    /// The softmax along `dim`: the method form of [`softmax`](crate::softmax()).
    #[torch_function]
    pub fn softmax(&self, dim: i64, #[default(None)] dtype: impl Into<Option<DType>>) -> Result<Tensor> {
        softmax_along("softmax", ("self", self), dim, dtype.into(), false)
    }

    /// The log-softmax along `dim`: the method form of [`log_softmax`](crate::log_softmax()).
    #[torch_function]
    pub fn log_softmax(&self, dim: i64, #[default(None)] dtype: impl Into<Option<DType>>) -> Result<Tensor> {
        softmax_along("log_softmax", ("self", self), dim, dtype.into(), true)
    }
}

crate::samples! {
    SOFTMAX => [sample([f32s(&[3, 4]), Value::Int(-1)]), sample([i64s(&[2, 3]), Value::Int(0)]).kw("dtype", DType::Float64)],
    LOG_SOFTMAX => [sample([f32s(&[3, 4])]).kw("dim", 1), sample([f32s(&[2, 3, 2]), Value::Int(1)])],
    Tensor::SOFTMAX => [sample([f32s(&[3, 4]), Value::Int(0)])],
    Tensor::LOG_SOFTMAX => [sample([f32s(&[3, 4]), Value::Int(-1)])],
}
