//! The functional forms of common layers: `linear`, `layer_norm`, `embedding` and `dropout`.

use crate::cpu::{self, Number};
use crate::error::{Result, bail};
use crate::ops::linalg::{dense_product, transposed};
use crate::tensor::{DType, Dense, Element, Shape, Tensor, broadcast_shapes, with_dtype};
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::value::Value;

/// `input @ weight.T + bias`, with `bias` broadcast.
fn affine(func: &str, input: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let x = input.data(func, "input")?;
    let w = weight.data(func, "weight")?;
    let b = bias.map(|b| b.data(func, "bias")).transpose()?;
    let wt = match w.layout.ndim() {
        1 => w.clone(),
        2 => transposed(w),
        n => {
            bail!(Runtime, "{func}(): weight must be 1-D or 2-D (out_features, in_features), but it has {n} dimensions")
        }
    };
    let out = dense_product(func, ("input", x), ("weight", &wt), false)?;
    let Some(b) = b else {
        return Ok(Tensor::from_dense(out));
    };
    if b.dtype != out.dtype {
        bail!(
            Runtime,
            "{func}(): expected bias to have the dtype of input and weight, {}, but got {}",
            out.dtype,
            b.dtype
        );
    }
    let shape = broadcast_shapes(&out.layout.shape, &b.layout.shape, func)?;
    let dense = with_dtype!(out.dtype, T => cpu::binary::<T, T>(&out, b, &shape, |p, q| p.add(q))?,
        bool => bail!(Runtime, "{func}(): not implemented for bool tensors"));
    Ok(Tensor::from_dense(dense))
}

/// A linear (fully connected) layer, `input @ weight.T + bias` (`torch.nn.functional.linear`).
///
/// `input` is `[*, in_features]`, `weight` `[out_features, in_features]` (or a vector of
/// `in_features`, which drops the last dimension), `bias` broadcasts against the result
/// (usually `[out_features]`). All three must have the same dtype.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[1.0f32, 2.0]])?;
/// let w = torchfn::tensor([[1.0f32, 0.0], [1.0, 1.0], [0.0, -1.0]])?;
/// let b = torchfn::tensor([0.5f32, 0.5, 0.5])?;
/// assert_eq!(F::linear(&x, &w, Some(&b))?.to_vec::<f32>()?, [1.5, 3.5, -1.5]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn linear(input: &Tensor, weight: &Tensor, #[default(None)] bias: Option<&Tensor>) -> Result<Tensor> {
    affine("linear", input, weight, bias)
}

/// Normalizes each row of `data` (rows of `inner` elements): `(x - mean) / sqrt(var + eps)`,
/// with the biased variance, then `* weight + bias` elementwise along the row.
fn normalize_rows<T: Element>(
    x: &Dense,
    inner: usize,
    weight: Option<&[f64]>,
    bias: Option<&[f64]>,
    eps: f64,
) -> Dense {
    let data = cpu::with_elements(x, |data: &[T]| {
        let mut out = Vec::with_capacity(data.len());
        for row in data.chunks(inner.max(1)) {
            let n = row.len() as f64;
            let mean = row.iter().map(|v| v.to_f64()).sum::<f64>() / n;
            let var = row.iter().map(|v| (v.to_f64() - mean).powi(2)).sum::<f64>() / n;
            let scale = 1.0 / (var + eps).sqrt();
            for (i, v) in row.iter().enumerate() {
                let mut y = (v.to_f64() - mean) * scale;
                if let Some(w) = weight.and_then(|w| w.get(i)) {
                    y *= w;
                }
                if let Some(b) = bias.and_then(|b| b.get(i)) {
                    y += b;
                }
                out.push(T::from_f64(y));
            }
        }
        out
    });
    Dense::from_vec(data, x.layout.shape.clone())
}

/// Layer normalization over the last `normalized_shape.len()` dimensions
/// (`torch.nn.functional.layer_norm`): each slice is shifted to mean 0 and scaled to variance
/// 1 (the biased variance, plus `eps`; a constant slice with `eps = 0` gives NaN, as in
/// PyTorch), then multiplied by `weight` and shifted by `bias`
/// elementwise, both of shape `normalized_shape` when given.
///
/// The input's trailing dimensions must equal `normalized_shape`; floating-point tensors only,
/// `weight` and `bias` of the input's dtype. Computed in `f64`.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[1.0f64, 3.0], [4.0, 8.0]])?;
/// let y = F::layer_norm(&x, [2], None, None, 0.0)?;
/// assert_eq!(y.to_vec::<f64>()?, [-1.0, 1.0, -1.0, 1.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn layer_norm(
    input: &Tensor,
    normalized_shape: impl Into<Shape>,
    #[default(None)] weight: Option<&Tensor>,
    #[default(None)] bias: Option<&Tensor>,
    #[default(1e-5)] eps: f64,
) -> Result<Tensor> {
    const FUNC: &str = "layer_norm";
    let normalized: Shape = normalized_shape.into();
    let x = input.data(FUNC, "input")?;
    let shape = &x.layout.shape;
    let k = normalized.len();
    if k > shape.len() || shape[shape.len() - k..] != normalized[..] {
        bail!(
            Runtime,
            "{FUNC}(): given normalized_shape={:?}, expected input with shape [*, {}], but got input of size {:?}",
            &normalized[..],
            normalized.iter().map(usize::to_string).collect::<Vec<_>>().join(", "),
            &shape[..]
        );
    }
    if !x.dtype.is_floating_point() {
        bail!(Runtime, "{FUNC}(): not implemented for {} inputs; expected a floating point tensor", x.dtype);
    }
    let mut affine = Vec::new();
    for (name, t) in [("weight", weight), ("bias", bias)] {
        let Some(t) = t else {
            affine.push(None);
            continue;
        };
        let d = t.data(FUNC, name)?;
        if d.layout.shape != normalized {
            bail!(
                Runtime,
                "{FUNC}(): expected {name} to be of same shape as normalized_shape, but got {name} of shape {:?} \
                 and normalized_shape = {:?}",
                &d.layout.shape[..],
                &normalized[..]
            );
        }
        if d.dtype != x.dtype {
            bail!(Runtime, "{FUNC}(): expected {name} to have the input's dtype, {}, but got {}", x.dtype, d.dtype);
        }
        affine.push(Some(cpu::with_elements(d, |v: &[f64]| v.to_vec())));
    }
    let (w, b) = (affine.first().and_then(Option::as_deref), affine.get(1).and_then(Option::as_deref));
    let inner = normalized.numel();
    let dense = match x.dtype {
        DType::Float64 => normalize_rows::<f64>(x, inner, w, b, eps),
        _ => normalize_rows::<f32>(x, inner, w, b, eps),
    };
    Ok(Tensor::from_dense(dense))
}

/// The rows of `weight` (`[rows, dim]`, row-major) at `indices`, or the first index out of range.
fn gather_rows<T: Element>(weight: &Dense, indices: &[i64], rows: usize, dim: usize) -> Result<Vec<T>, i64> {
    cpu::with_elements(weight, |w: &[T]| {
        let mut out = Vec::with_capacity(indices.len().saturating_mul(dim));
        for &i in indices {
            match usize::try_from(i).ok().filter(|&i| i < rows) {
                Some(i) => out.extend_from_slice(&w[i * dim..][..dim]),
                None => return Err(i),
            }
        }
        Ok(out)
    })
}

/// A lookup table (`torch.nn.functional.embedding`): row `input[...]` of `weight` for each
/// index, so the result has shape `[*input.shape, embedding_dim]` and `weight`'s dtype.
///
/// `input` holds int64 or int32 indices into the first dimension of the 2-D `weight`; an index
/// out of range is an `IndexError`. `padding_idx` (which must name a row, negative counting from
/// the end), `scale_grad_by_freq` and `sparse` only affect gradients, which torchfn does not
/// compute: they are checked and otherwise ignored. `max_norm` renormalizes `weight` in place in
/// PyTorch, which torchfn cannot do yet: giving it is a `NotImplementedError`.
///
/// ```
/// use torchfn::nn::functional as F;
/// let weight = torchfn::tensor([[0.0f32, 0.5], [1.0, 1.5], [2.0, 2.5]])?;
/// let idx = torchfn::tensor([2i64, 0])?;
/// let out = F::embedding(&idx, &weight, None, None, 2.0, false, false)?;
/// assert_eq!(out.to_vec::<f32>()?, [2.0, 2.5, 0.0, 0.5]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn.nn.functional")]
pub fn embedding(
    input: &Tensor,
    weight: &Tensor,
    #[default(None)] padding_idx: Option<i64>,
    #[default(None)] max_norm: Option<f64>,
    #[default(2.0)] norm_type: f64,
    #[default(false)] scale_grad_by_freq: bool,
    #[default(false)] sparse: bool,
) -> Result<Tensor> {
    const FUNC: &str = "embedding";
    let _ = (norm_type, scale_grad_by_freq, sparse);
    let (x, w) = (input.data(FUNC, "input")?, weight.data(FUNC, "weight")?);
    let &[rows, dim] = &w.layout.shape[..] else {
        bail!(Runtime, "{FUNC}(): 'weight' must be 2-D, but it has {} dimensions", w.layout.ndim());
    };
    if !matches!(x.dtype, DType::Int64 | DType::Int32) {
        bail!(
            Runtime,
            "{FUNC}(): expected tensor for argument #1 'indices' to have one of the following scalar types: \
             Long, Int; but got {} instead",
            x.dtype
        );
    }
    if let Some(p) = padding_idx {
        let n = i64::try_from(rows).unwrap_or(i64::MAX);
        if p >= n || p < -n {
            bail!(Value, "{FUNC}(): padding_idx must be within num_embeddings ({rows}), but got {p}");
        }
    }
    if max_norm.is_some() {
        bail!(
            NotImplemented,
            "{FUNC}(): max_norm renormalizes the rows of weight in place, and torchfn has no in-place \
             operations yet; leave max_norm=None"
        );
    }
    let indices = cpu::with_elements(x, |v: &[i64]| v.to_vec());
    let rows_out = with_dtype!(w.dtype, T => gather_rows::<T>(w, &indices, rows, dim).map(|v| Dense::from_vec(v, Shape::new(&[]))));
    let data = match rows_out {
        Ok(d) => d,
        Err(i) => {
            bail!(Index, "{FUNC}(): index {i} is out of range for a weight of {rows} rows (index out of range in self)")
        }
    };
    let shape: Shape = x.layout.shape.iter().copied().chain([dim]).collect();
    Ok(Tensor::from_dense(Dense { layout: crate::tensor::Layout::contiguous(shape), ..data }))
}

/// Dropout (`torch.nn.functional.dropout`): with `training`, each element is zeroed with
/// probability `p` and the others scaled by `1 / (1 - p)`; without, the input itself.
///
/// `p` outside `[0, 1]` is a `ValueError`. `training=False` or `p = 0` give the input
/// unchanged (the same data); `p = 1` gives zeros (`input * 0`, so NaN stays NaN). Random
/// dropout (`training=True`, `0 < p < 1`) needs a random number generator, which torchfn does
/// not have yet: it is a `NotImplementedError`, as is `inplace=True` where data would change.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([1.0f32, -2.0])?;
/// assert_eq!(F::dropout(&x, 0.5, false, false)?.to_vec::<f32>()?, [1.0, -2.0]);
/// assert_eq!(F::dropout(&x, 1.0, true, false)?.to_vec::<f32>()?, [0.0, -0.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn dropout(
    input: &Tensor,
    #[default(0.5)] p: f64,
    #[default(true)] training: bool,
    #[default(false)] inplace: bool,
) -> Result<Tensor> {
    const FUNC: &str = "dropout";
    let x = input.data(FUNC, "input")?;
    if !(0.0..=1.0).contains(&p) {
        bail!(Value, "{FUNC}(): dropout probability has to be between 0 and 1, but got {p}");
    }
    if !training || p == 0.0 || x.layout.numel() == 0 {
        return Ok(input.clone());
    }
    if p < 1.0 {
        bail!(
            NotImplemented,
            "{FUNC}(): random dropout (training=True with 0 < p < 1) needs a random number generator, \
             which torchfn does not have yet; pass training=False for evaluation"
        );
    }
    super::activation::not_in_place(FUNC, inplace)?;
    let dense = with_dtype!(x.dtype, T => cpu::unary::<T, T>(x, |v| v.mul(T::default())),
        bool => cpu::unary::<bool, bool>(x, |_| false));
    Ok(Tensor::from_dense(dense))
}

/// An int64 tensor of these indices, as a sample argument.
fn indices(data: &[i64], shape: &[usize]) -> Value {
    Value::Tensor(Tensor::from_dense(Dense::from_vec(data.to_vec(), Shape::new(shape))))
}

crate::samples! {
    LINEAR => [sample([f32s(&[2, 3]), f32s(&[4, 3]), f32s(&[4])]), sample([f32s(&[2, 2, 3]), f32s(&[4, 3])]), sample([f32s(&[3]), f32s(&[3])]).kw("bias", f32s(&[]))],
    LAYER_NORM => [sample([f32s(&[2, 4]), Value::List(vec![4.into()])]), sample([f32s(&[2, 2, 3]), Value::List(vec![2.into(), 3.into()]), f32s(&[2, 3]), f32s(&[2, 3])]).kw("eps", 1e-3)],
    EMBEDDING => [sample([indices(&[0, 2, 1, 1], &[2, 2]), f32s(&[3, 4])]).kw("padding_idx", 0), sample([indices(&[1], &[]), f32s(&[2, 3])])],
    DROPOUT => [sample([f32s(&[2, 3])]).kw("training", false), sample([f32s(&[2, 3]), Value::Float(1.0)]), sample([f32s(&[4])]).kw("p", 0.0)],
}
