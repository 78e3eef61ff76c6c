//! The softmax family along one dimension: `softmax` and `log_softmax`, as functions and
//! methods (`torch.nn.functional`'s forms are in `nn`). Both subtract each lane's maximum
//! first, so large inputs do not overflow.

use crate::error::{Result, bail};
use crate::tensor::{DType, Shape, Tensor, normalize_dim};
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

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
            NotImplemented,
            "{func}(): not implemented for {} inputs; pass a floating point tensor, or dtype=torch.float32 \
             to convert it first",
            dtype
        );
    }
    let dim = normalize_dim(dim, x.layout.ndim(), func)?;
    if x.layout.ndim() == 0 {
        // One lane of one element.
        let lane = crate::primitive::reshape(t, &Shape::from([1]))?;
        let out = crate::primitive::softmax(&lane, 0, log, dtype)?;
        return crate::primitive::reshape(&out, &Shape::from([]));
    }
    crate::primitive::softmax(t, dim, log, dtype)
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
