//! Attention: `scaled_dot_product_attention`, PyTorch's math reference composed of the matrix
//! product, `where`, softmax and dropout, so that it differentiates in both modes through
//! their derivatives.

use crate::backend::{Binary, Buffer, Reduce};
use crate::error::{Result, bail};
use crate::ops::device::device_of;
use crate::ops::products::{product, transposed};
use crate::primitive;
use crate::tensor::{DType, Scalar, Shape, Tensor, broadcast_shapes};
use crate::testing::{bools, f32s, sample, small_f32s};
use crate::torch_function;
use crate::value::Value;

use super::functional as F;

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
/// - dropout with probability `dropout_p` (drawn as [`dropout`](F::dropout()) draws; with
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

/// A boolean or float attention mask as the float mask that is added to the scores
/// (PyTorch's `_canonical_mask`): `-inf` where a boolean mask is true (masked out), 0
/// elsewhere; a float mask as it is. `None` stays `None`.
fn additive_mask(func: &str, name: &str, mask: Option<&Tensor>, dtype: DType) -> Result<Option<Tensor>> {
    let Some(mask) = mask else { return Ok(None) };
    let m = mask.data(func, name)?.dtype;
    if m == DType::Bool {
        let zeros = crate::zeros_like(mask, Some(dtype))?;
        return Ok(Some(zeros.masked_fill(mask, &Tensor::scalar(f64::NEG_INFINITY))?));
    }
    if !m.is_floating_point() {
        bail!(Runtime, "{func}(): only bool and floating types of {name} are supported");
    }
    Ok(Some(mask.clone()))
}

/// `t` with one more position of zeros at the end of its last dimension (the attention masks'
/// column for `bias_k` and `add_zero_attn`'s extra key).
fn one_more_column(t: &Tensor) -> Result<Tensor> {
    let shape = t.shape()?;
    let mut column: Vec<usize> = shape.to_vec();
    *column.last_mut().expect("a mask has dimensions") = 1;
    crate::cat(&[t.clone(), crate::zeros(column, Some(t.dtype()?), Some(t.device()?))?], -1)
}

/// Multi-head attention (`torch.nn.functional.multi_head_attention_forward`, what
/// `nn.MultiheadAttention` calls), as PyTorch's Python implementation computes it: `query`
/// `[L, N, E]`, `key` and `value` `[S, N, E]` (or unbatched `[L, E]`, `[S, E]`) projected by
/// `in_proj_weight` `[3E, E]` (or by `q_proj_weight`, `k_proj_weight`, `v_proj_weight` with
/// `use_separate_proj_weight`) and `in_proj_bias`, split into `num_heads` heads, scaled dot
/// products masked by `attn_mask` (`[L, S]` or `[N * num_heads, L, S]`; true or `-inf` masks
/// out) and `key_padding_mask` (`[N, S]`), softmax, dropout (`dropout_p` while `training`),
/// and the output projection. `bias_k` and `bias_v` (`[1, 1, E]`) append a learned key and
/// value, `add_zero_attn` a zero one. Returns the output `[L, N, E]` and, with
/// `need_weights`, the attention weights `[N, L, S]` averaged over the heads
/// (`average_attn_weights`) or `[N, num_heads, L, S]`. `is_causal` is a hint that `attn_mask`
/// is the causal mask (required with it). `static_k` and `static_v` are not supported (a
/// `NotImplementedError`).
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::randn([3, 2, 4], None, None, None)?; // L = 3, N = 2, E = 4
/// let (w, b) = (torchfn::randn([12, 4], None, None, None)?, torchfn::zeros([12], None, None)?);
/// let (ow, ob) = (torchfn::randn([4, 4], None, None, None)?, torchfn::zeros([4], None, None)?);
/// let (out, weights) = F::multi_head_attention_forward(
///     &x, &x, &x, 4, 2, Some(&w), Some(&b), None, None, false, 0.0, &ow, Some(&ob),
///     true, None, true, None, false, None, None, None, None, None, true, false,
/// )?;
/// assert_eq!(out.shape()?, [3, 2, 4]);
/// assert_eq!(weights.unwrap().shape()?, [2, 3, 3]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn.nn.functional")]
pub fn multi_head_attention_forward(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    embed_dim_to_check: i64,
    num_heads: i64,
    in_proj_weight: Option<&Tensor>,
    in_proj_bias: Option<&Tensor>,
    bias_k: Option<&Tensor>,
    bias_v: Option<&Tensor>,
    add_zero_attn: bool,
    dropout_p: f64,
    out_proj_weight: &Tensor,
    out_proj_bias: Option<&Tensor>,
    #[default(true)] training: bool,
    #[default(None)] key_padding_mask: Option<&Tensor>,
    #[default(true)] need_weights: bool,
    #[default(None)] attn_mask: Option<&Tensor>,
    #[default(false)] use_separate_proj_weight: bool,
    #[default(None)] q_proj_weight: Option<&Tensor>,
    #[default(None)] k_proj_weight: Option<&Tensor>,
    #[default(None)] v_proj_weight: Option<&Tensor>,
    #[default(None)] static_k: Option<&Tensor>,
    #[default(None)] static_v: Option<&Tensor>,
    #[default(true)] average_attn_weights: bool,
    #[default(false)] is_causal: bool,
) -> Result<(Tensor, Option<Tensor>)> {
    const FUNC: &str = "multi_head_attention_forward";
    if static_k.is_some() || static_v.is_some() {
        bail!(NotImplemented, "{FUNC}(): static_k and static_v are not supported");
    }
    let qs = query.data(FUNC, "query")?.layout.shape.clone();
    let batched = match qs.len() {
        3 => true,
        2 => false,
        n => bail!(
            Runtime,
            "{FUNC}(): query should be unbatched 2D or batched 3D tensor but received {n}-D query tensor"
        ),
    };
    for (name, t) in [("key", key), ("value", value)] {
        if t.data(FUNC, name)?.layout.ndim() != qs.len() {
            bail!(
                Runtime,
                "{FUNC}(): For {} 3-D query, expected {name} to be {}-D, but found {}-D tensor",
                if batched { "batched (3-D)" } else { "unbatched (2-D)" },
                qs.len(),
                t.data(FUNC, name)?.layout.ndim()
            );
        }
    }
    let dtype = query.dtype()?;
    let mut key_padding_mask = additive_mask(FUNC, "key_padding_mask", key_padding_mask, dtype)?;
    let mut attn_mask = additive_mask(FUNC, "attn_mask", attn_mask, dtype)?;
    if is_causal && attn_mask.is_none() {
        bail!(
            Runtime,
            "{FUNC}(): Need attn_mask if specifying the is_causal hint. You may use the Transformer module method \
             `generate_square_subsequent_mask` to create this mask."
        );
    }
    // The causal hint lets the fused path build the mask itself, when nothing else masks.
    let is_causal = is_causal && key_padding_mask.is_none() && !need_weights;
    if is_causal {
        attn_mask = None;
    }
    // Unbatched: a batch of one.
    let (query, key, value) = if batched {
        (query.clone(), key.clone(), value.clone())
    } else {
        key_padding_mask = key_padding_mask.map(|m| m.unsqueeze(0)).transpose()?;
        (query.unsqueeze(1)?, key.unsqueeze(1)?, value.unsqueeze(1)?)
    };
    let (tgt_len, bsz, embed_dim) = {
        let s = query.shape()?;
        (s[0], s[1], s[2])
    };
    if i64::try_from(embed_dim).ok() != Some(embed_dim_to_check) {
        bail!(Runtime, "{FUNC}(): was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}");
    }
    let heads = usize::try_from(num_heads).ok().filter(|&h| h > 0 && embed_dim % h == 0);
    let Some(heads) = heads else {
        bail!(Runtime, "{FUNC}(): embed_dim {embed_dim} not divisible by num_heads {num_heads}");
    };
    let head_dim = embed_dim / heads;
    // Separate projections take keys and values of their own widths.
    let (ks, vs) = (key.shape()?, value.shape()?);
    let compared = if use_separate_proj_weight { 2 } else { ks.len() };
    if ks[..compared.min(ks.len())] != vs[..compared.min(vs.len())] {
        bail!(Runtime, "{FUNC}(): key shape {ks:?} does not match value shape {vs:?}");
    }
    // The input projections.
    let biases: [Option<Tensor>; 3] = match in_proj_bias {
        Some(b) => {
            let parts = b.chunk(3, 0)?;
            [Some(parts[0].clone()), Some(parts[1].clone()), Some(parts[2].clone())]
        }
        None => [None, None, None],
    };
    let weights: [Tensor; 3] = if use_separate_proj_weight {
        let named =
            [("q_proj_weight", q_proj_weight), ("k_proj_weight", k_proj_weight), ("v_proj_weight", v_proj_weight)];
        let mut out = Vec::new();
        for (name, w) in named {
            match w {
                Some(w) => out.push(w.clone()),
                None => bail!(Runtime, "{FUNC}(): use_separate_proj_weight is True but {name} is None"),
            }
        }
        [out[0].clone(), out[1].clone(), out[2].clone()]
    } else {
        let Some(w) = in_proj_weight else {
            bail!(Runtime, "{FUNC}(): use_separate_proj_weight is False but in_proj_weight is None");
        };
        let parts = w.chunk(3, 0)?;
        [parts[0].clone(), parts[1].clone(), parts[2].clone()]
    };
    let q = F::linear(&query, &weights[0], biases[0].as_ref())?;
    let mut k = F::linear(&key, &weights[1], biases[1].as_ref())?;
    let mut v = F::linear(&value, &weights[2], biases[2].as_ref())?;
    // A 2-D mask is one for every batch and head.
    if let Some(m) = &attn_mask {
        let s = m.shape()?;
        let src_len = key.shape()?[0];
        attn_mask = Some(match s.len() {
            2 if s[..] == [tgt_len, src_len] => m.unsqueeze(0)?,
            3 if s[..] == [bsz * heads, tgt_len, src_len] => m.clone(),
            2 | 3 => bail!(
                Runtime,
                "{FUNC}(): The shape of the {}D attn_mask is {:?}, but should be {:?}.",
                s.len(),
                &s[..],
                if s.len() == 2 { vec![tgt_len, src_len] } else { vec![bsz * heads, tgt_len, src_len] }
            ),
            n => bail!(Runtime, "{FUNC}(): attn_mask's dimension {n} is not supported"),
        });
    }
    // bias_k and bias_v: one more key and value.
    match (bias_k, bias_v) {
        (Some(bk), Some(bv)) => {
            k = crate::cat(&[k, bk.repeat(vec![1, bsz as i64, 1])?], 0)?;
            v = crate::cat(&[v, bv.repeat(vec![1, bsz as i64, 1])?], 0)?;
            attn_mask = attn_mask.as_ref().map(one_more_column).transpose()?;
            key_padding_mask = key_padding_mask.as_ref().map(one_more_column).transpose()?;
        }
        (None, None) => {}
        _ => bail!(Runtime, "{FUNC}(): bias_k and bias_v must both be given or both be None"),
    }
    // Heads: [L, N, E] -> [N * heads, L, head_dim].
    let split = |t: &Tensor| -> Result<Tensor> {
        let len = t.shape()?[0] as i64;
        t.reshape(&[len, (bsz * heads) as i64, head_dim as i64])?.transpose(0, 1)
    };
    let q = split(&q)?;
    let (mut k, mut v) = (split(&k)?, split(&v)?);
    if add_zero_attn {
        let zero = |t: &Tensor| -> Result<Tensor> {
            crate::cat(&[t.clone(), crate::zeros([bsz * heads, 1, head_dim], Some(dtype), Some(t.device()?))?], 1)
        };
        (k, v) = (zero(&k)?, zero(&v)?);
        attn_mask = attn_mask.as_ref().map(one_more_column).transpose()?;
        key_padding_mask = key_padding_mask.as_ref().map(one_more_column).transpose()?;
    }
    let src_len = k.shape()?[1];
    if let Some(m) = key_padding_mask {
        if m.shape()?[..] != [bsz, src_len] {
            bail!(
                Runtime,
                "{FUNC}(): expecting key_padding_mask shape of {:?}, but got {:?}",
                [bsz, src_len],
                m.shape()?
            );
        }
        let per_head = m
            .view(vec![bsz as i64, 1, 1, src_len as i64])?
            .expand(vec![-1, heads as i64, -1, -1])?
            .reshape(&[(bsz * heads) as i64, 1, src_len as i64])?;
        attn_mask = Some(match attn_mask {
            None => per_head,
            Some(a) => a.add(&per_head, 1)?,
        });
    }
    let dropout_p = if training { dropout_p } else { 0.0 };
    let out_proj = |attn: Tensor| -> Result<Tensor> {
        let flat = F::linear(&attn, out_proj_weight, out_proj_bias)?;
        flat.view(vec![tgt_len as i64, bsz as i64, embed_dim as i64])
    };
    if need_weights {
        let scaled = q.mul(&Tensor::scalar((1.0 / head_dim as f64).sqrt()))?;
        let scores = match &attn_mask {
            Some(m) => crate::baddbmm(m, &scaled, &k.transpose(-2, -1)?, 1, 1)?,
            None => crate::bmm(&scaled, &k.transpose(-2, -1)?)?,
        };
        let mut weights = F::softmax(&scores, -1, 3, None)?;
        if dropout_p > 0.0 {
            weights = F::dropout(&weights, dropout_p, true, false)?;
        }
        let attn = crate::bmm(&weights, &v)?; // [N * heads, L, head_dim]
        let attn = attn.transpose(0, 1)?.contiguous()?.view(vec![(tgt_len * bsz) as i64, embed_dim as i64])?;
        let mut out = out_proj(attn)?;
        let mut weights = weights.view(vec![bsz as i64, heads as i64, tgt_len as i64, src_len as i64])?;
        if average_attn_weights {
            weights = weights.mean_dim(1, false)?;
        }
        if !batched {
            out = out.squeeze_dim(1)?;
            weights = weights.squeeze_dim(0)?;
        }
        return Ok((out, Some(weights)));
    }
    // Without the weights: the fused attention over [N, heads, L, head_dim].
    let attn_mask = match attn_mask {
        Some(m) if m.shape()?[0] == 1 && m.shape()?.len() == 3 => Some(m.unsqueeze(0)?),
        Some(m) => Some(m.view(vec![bsz as i64, heads as i64, -1, src_len as i64])?),
        None => None,
    };
    let per_batch = |t: &Tensor| -> Result<Tensor> {
        let len = t.shape()?[1] as i64;
        t.view(vec![bsz as i64, heads as i64, len, head_dim as i64])
    };
    let attn = scaled_dot_product_attention(
        &per_batch(&q)?,
        &per_batch(&k)?,
        &per_batch(&v)?,
        attn_mask.as_ref(),
        dropout_p,
        is_causal,
        None,
    )?;
    let attn = attn.permute(vec![2, 0, 1, 3])?.contiguous()?.view(vec![(bsz * tgt_len) as i64, embed_dim as i64])?;
    let mut out = out_proj(attn)?;
    if !batched {
        out = out.squeeze_dim(1)?;
    }
    Ok((out, None))
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
    MULTI_HEAD_ATTENTION_FORWARD => [
        attention_sample(&[3, 2, 4], &[5, 2, 4]),
        attention_sample(&[3, 2, 4], &[3, 2, 4]).kw("need_weights", false).kw("key_padding_mask", bools(&[2, 3])),
        attention_sample(&[3, 4], &[3, 4]).kw("attn_mask", f32s(&[3, 3])).kw("average_attn_weights", false),
    ],
}

/// A `multi_head_attention_forward` sample: query and key/value shapes, embedding 4 in 2 heads,
/// packed projections with biases.
fn attention_sample(query: &[usize], key: &[usize]) -> crate::testing::Sample {
    sample([
        f32s(query),
        f32s(key),
        f32s(key),
        Value::Int(4),
        Value::Int(2),
        small_f32s(&[12, 4]),
        small_f32s(&[12]),
        Value::None,
        Value::None,
        Value::Bool(false),
        Value::Float(0.0),
        small_f32s(&[4, 4]),
        small_f32s(&[4]),
    ])
}
