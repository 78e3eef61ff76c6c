//! Attention: `scaled_dot_product_attention`, PyTorch's math reference composed of the matrix
//! product, `where`, softmax and dropout, so that it differentiates in both modes through
//! their derivatives.

use crate::backend::{Binary, Buffer, Reduce};
use crate::error::{Result, bail};
use crate::ops::device::device_of;
use crate::ops::linalg::{product, transposed};
use crate::primitive;
use crate::tensor::{DType, Scalar, Shape, Tensor, broadcast_shapes};
use crate::testing::{bools, f32s, sample};
use crate::torch_function;
use crate::value::Value;

/// The `[l, s]` bool mask of causal attention: position `i` of the query sees positions
/// `0..=i` of the key (`torch.ones(l, s).tril()`).
fn causal_mask(l: usize, s: usize, on: &Tensor) -> Result<Tensor> {
    let keep: Vec<bool> = (0..l).flat_map(|i| (0..s).map(move |j| j <= i)).collect();
    primitive::upload(
        on.data("scaled_dot_product_attention", "query")?.device(),
        Buffer::from_vec(keep),
        Shape::from([l, s]),
    )
}

/// Softmax over the last dimension of `scores` (`[..., L, S]`, `S` > 0) in which a row that is
/// masked out entirely (all `-inf`) gives zeros rather than NaN, as PyTorch's `_safe_softmax`;
/// the row is zeroed before the softmax too, so that no NaN reaches the gradients.
fn safe_softmax(scores: &Tensor, dtype: DType) -> Result<Tensor> {
    let shape = scores.shape()?;
    let last = shape.len() - 1;
    let row_max = primitive::reduce(&scores.detach()?, &[last], Reduce::Max, dtype)?;
    let dead = primitive::binary(&row_max, &Tensor::scalar(f64::NEG_INFINITY), Binary::Eq, dtype, None)?;
    let kept: Shape = shape.iter().enumerate().map(|(d, &n)| if d == last { 1 } else { n }).collect();
    let dead = primitive::reshape(&dead, &kept)?;
    let zero = Tensor::scalar(0.0);
    let finite = primitive::select(&dead, &zero, scores, dtype)?;
    let weights = primitive::softmax(&finite, last, false, dtype)?;
    primitive::select(&dead, &zero, &weights, dtype)
}

/// Scaled dot-product attention (`torch.nn.functional.scaled_dot_product_attention`), as
/// PyTorch's math reference computes it: for `query` `[..., L, E]`, `key` `[..., S, E]` and
/// `value` `[..., S, Ev]` (leading dimensions broadcast, as in [`matmul`](crate::matmul())),
///
/// - `scores = query @ key.transpose(-2, -1) * scale`, `scale` being `1 / sqrt(E)` unless given;
/// - with `is_causal`, scores above the diagonal (key position after query position) are
///   `-inf`; a bool `attn_mask` masks out (sets to `-inf`) where it is `false`, a floating-point
///   one is added; either must broadcast to `[..., L, S]`;
/// - softmax over the last dimension (a row masked out entirely gives zeros, as in PyTorch);
/// - dropout with probability `dropout_p` (drawn as [`dropout`](super::dropout()) draws; with
///   `dropout_p = 0` nothing is random);
/// - the weights `@ value`, `[..., L, Ev]`.
///
/// `query`, `key` and `value` must be floating point, of one dtype, and have at least two
/// dimensions; `is_causal` together with `attn_mask` is an error, as in PyTorch. Grouped-query
/// attention (`enable_gqa`) is not supported: give `key` and `value` as many heads as `query`.
///
/// ```
/// use torchfn::nn::functional as F;
/// let q = torchfn::tensor([[1.0f64, 0.0], [0.0, 1.0]])?; // L = 2, E = 2
/// let k = q.clone();
/// let v = torchfn::tensor([[1.0f64, 2.0], [3.0, 4.0]])?;
/// // Causal: the first query sees only the first key.
/// let out = F::scaled_dot_product_attention(&q, &k, &v, None, 0.0, true, None)?;
/// assert_eq!(out.get(0)?.to_vec::<f64>()?, [1.0, 2.0]);
/// // A bool mask keeps where true: here the second key only.
/// let mask = torchfn::tensor([false, true])?;
/// let out = F::scaled_dot_product_attention(&q, &k, &v, Some(&mask), 0.0, false, None)?;
/// assert_eq!(out.to_vec::<f64>()?, [3.0, 4.0, 3.0, 4.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn.nn.functional")]
pub fn scaled_dot_product_attention(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    #[default(None)] attn_mask: Option<&Tensor>,
    #[default(0.0)] dropout_p: f64,
    #[default(false)] is_causal: bool,
    #[default(None)] scale: Option<f64>,
) -> Result<Tensor> {
    const FUNC: &str = "scaled_dot_product_attention";
    let (q, k, v) = (query.data(FUNC, "query")?, key.data(FUNC, "key")?, value.data(FUNC, "value")?);
    let (qs, ks, vs) = (&q.layout.shape, &k.layout.shape, &v.layout.shape);
    if qs.len() < 2 || ks.len() < 2 || vs.len() < 2 {
        bail!(
            Runtime,
            "{FUNC}(): Expected query, key, and value to all be at least 2 dimensional, but got query.dim: {} \
             key.dim: {} and value.dim: {} instead.",
            qs.len(),
            ks.len(),
            vs.len()
        );
    }
    if q.dtype != k.dtype || q.dtype != v.dtype {
        bail!(
            Runtime,
            "{FUNC}(): Expected query, key, and value to have the same dtype, but got query.dtype: {} key.dtype: \
             {} and value.dtype: {} instead.",
            q.dtype,
            k.dtype,
            v.dtype
        );
    }
    let dtype = q.dtype;
    if !dtype.is_floating_point() {
        bail!(Runtime, "{FUNC}(): expected floating point query, key and value, but got {dtype}");
    }
    let (l, e, s) = (qs[qs.len() - 2], qs[qs.len() - 1], ks[ks.len() - 2]);
    if ks[ks.len() - 1] != e {
        bail!(
            Runtime,
            "{FUNC}(): query and key must have the same last dimension (E), but got {e} and {}",
            ks[ks.len() - 1]
        );
    }
    if vs[vs.len() - 2] != s {
        bail!(
            Runtime,
            "{FUNC}(): key and value must have the same sequence length (dimension -2), but got {s} and {}",
            vs[vs.len() - 2]
        );
    }
    if !(0.0..=1.0).contains(&dropout_p) {
        bail!(Runtime, "{FUNC}(): dropout probability has to be between 0 and 1, but got {dropout_p}");
    }
    let mask = attn_mask.map(|m| m.data(FUNC, "attn_mask")).transpose()?;
    let mut operands = vec![("query", q), ("key", k), ("value", v)];
    if let Some(m) = mask {
        if is_causal {
            bail!(Runtime, "{FUNC}(): Explicit attn_mask should not be set when is_causal=True");
        }
        if m.dtype != DType::Bool && !m.dtype.is_floating_point() {
            bail!(
                Runtime,
                "{FUNC}(): Expected attn_mask dtype to be bool or float or to match query dtype, but got \
                 attn_mask.dtype: {} and query.dtype: {dtype} instead.",
                m.dtype
            );
        }
        operands.push(("attn_mask", m));
    }
    device_of(FUNC, &operands)?;
    let scale = scale.unwrap_or(1.0 / (e as f64).sqrt());
    let scores = product(FUNC, ("query", query), ("key", &transposed(key)?), false)?;
    let mut scores = primitive::binary(&scores, &Tensor::scalar(scale), Binary::Mul, dtype, None)?;
    let shape = scores.shape()?;
    let masked = |mask: &Tensor, scores: &Tensor| -> Result<Tensor> {
        let m = mask.data(FUNC, "attn_mask")?;
        if broadcast_shapes(&m.layout.shape, &shape, FUNC)? != shape {
            bail!(
                Runtime,
                "{FUNC}(): attn_mask of shape {:?} does not broadcast to the attention scores' shape {:?} ([..., L, S])",
                m.layout.shape.as_ref(),
                shape.as_ref()
            );
        }
        if m.dtype == DType::Bool {
            primitive::select(mask, scores, &Tensor::scalar(f64::NEG_INFINITY), dtype)
        } else {
            primitive::binary(scores, mask, Binary::Add(Scalar::Int(1)), dtype, None)
        }
    };
    let weights = if is_causal {
        scores = masked(&causal_mask(l, s, query)?, &scores)?;
        primitive::softmax(&scores, shape.len() - 1, false, dtype)?
    } else if let Some(mask) = attn_mask.filter(|_| s > 0) {
        safe_softmax(&masked(mask, &scores)?, dtype)?
    } else {
        primitive::softmax(&scores, shape.len() - 1, false, dtype)?
    };
    let weights = super::layers::dropout_impl(FUNC, &weights, dropout_p, true, false)?;
    product(FUNC, ("attn_weight", &weights), ("value", value), false)
}

crate::samples! {
    SCALED_DOT_PRODUCT_ATTENTION => [
        sample([f32s(&[2, 3, 4]), f32s(&[2, 5, 4]), f32s(&[2, 5, 2])]),
        sample([f32s(&[1, 2, 4, 3]), f32s(&[1, 2, 4, 3]), f32s(&[1, 2, 4, 3])]).kw("is_causal", true).kw("scale", 0.5),
        sample([f32s(&[2, 3, 4]), f32s(&[2, 5, 4]), f32s(&[2, 5, 2]), bools(&[3, 5])]),
        sample([f32s(&[3, 4]), f32s(&[5, 4]), f32s(&[5, 2])]).kw("attn_mask", f32s(&[5])),
        sample([f32s(&[2, 3, 4]), f32s(&[2, 3, 4]), f32s(&[2, 3, 4])]).kw("dropout_p", 0.25),
        sample([f32s(&[2, 3, 2]), f32s(&[2, 3, 2]), f32s(&[2, 3, 2])]).kw("attn_mask", Value::Tensor(
            Tensor::from_vec(vec![true, false, true, false, false, false, true, true, false], [3, 3]).expect("a 3 x 3 mask"))),
    ],
}
