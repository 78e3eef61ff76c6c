//! The functional forms of common layers: `linear`, `layer_norm`, `embedding` and `dropout`.

use crate::backend::Binary;
use crate::backend::Distribution;
use crate::error::{Result, bail};
use crate::ops::device::device_of;
use crate::ops::indexing::out_of_range;
use crate::ops::products::{product, transposed};
use crate::primitive;
use crate::tensor::{DType, Dense, Element, Scalar, Shape, Tensor, check_broadcast, with_dtype};
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::value::Value;

/// The number of rows of a 2-D weight, as a signed index.
fn rows_of(w: &Dense) -> i64 {
    i64::try_from(w.layout.shape[0]).unwrap_or(i64::MAX)
}

/// `input @ weight.T + bias`, with `bias` broadcast.
fn affine(func: &str, input: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let x = input.data(func, "input")?;
    let w = weight.data(func, "weight")?;
    let b = bias.map(|b| b.data(func, "bias")).transpose()?;
    let wt = match w.layout.ndim() {
        1 => weight.clone(),
        2 => transposed(weight)?,
        n => {
            bail!(Runtime, "{func}(): weight must be 1-D or 2-D (out_features, in_features), but it has {n} dimensions")
        }
    };
    let out = product(func, ("input", input), ("weight", &wt), false)?;
    let (Some(b), Some(bias)) = (b, bias) else {
        return Ok(out);
    };
    let dtype = out.dtype()?;
    if b.dtype != dtype {
        bail!(Runtime, "{func}(): expected bias to have the dtype of input and weight, {}, but got {}", dtype, b.dtype);
    }
    device_of(func, &[("input", x), ("bias", b)])?;
    check_broadcast(&out.shape()?, &b.layout.shape, func)?;
    primitive::binary(&out, bias, Binary::Add(Scalar::Int(1)), dtype, None)
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

/// What `max_norm` needs of `weight`: 2-D and floating point, each element its own memory.
fn check_renormalizable(func: &str, weight: &Dense) -> Result<()> {
    let (&[rows, dim], &[row_stride, column_stride]) = (&weight.layout.shape[..], &weight.layout.strides[..]) else {
        bail!(Runtime, "{func}(): 'weight' must be 2-D, but it has {} dimensions", weight.layout.ndim());
    };
    if !weight.dtype.is_floating_point() {
        bail!(
            Runtime,
            "{func}(): max_norm renormalizes the rows of weight, which must be a floating point tensor, not {}",
            weight.dtype
        );
    }
    if (rows > 1 && row_stride == 0) || (dim > 1 && column_stride == 0) {
        bail!(
            Runtime,
            "{func}(): max_norm writes into weight, but more than one of its elements refers to a single memory \
             location (an expanded tensor); pass weight.clone()"
        );
    }
    Ok(())
}

/// A lookup table (`torch.nn.functional.embedding`): row `input[...]` of `weight` for each
/// index, so the result has shape `[*input.shape, embedding_dim]` and `weight`'s dtype.
///
/// `input` holds int64 or int32 indices into the first dimension of the 2-D `weight`; an index
/// out of range is an `IndexError`. `padding_idx` (which must name a row, negative counting from
/// the end) names a row whose lookups get no gradient; `sparse` (sparse gradients) is accepted
/// and has no effect; `scale_grad_by_freq` is not implemented (an error when true).
///
/// With `max_norm`, as in PyTorch, each row of `weight` that `input` looks up and whose
/// `norm_type`-norm (2 by default; `inf` is the largest absolute value, 0 the count of non-zero
/// elements) exceeds `max_norm` is first scaled, in place, by `max_norm / (norm + 1e-7)`; then
/// the rows are looked up. `weight` must then be floating point; the norms are computed in
/// `f64`. Unlike PyTorch, every index is checked before any row changes, so an index out of
/// range leaves `weight` as it was.
///
/// ```
/// use torchfn::nn::functional as F;
/// let weight = torchfn::tensor([[0.0f32, 0.5], [1.0, 1.5], [2.0, 2.5]])?;
/// let idx = torchfn::tensor([2i64, 0])?;
/// let out = F::embedding(&idx, &weight, None, None, 2.0, false, false)?;
/// assert_eq!(out.to_vec::<f32>()?, [2.0, 2.5, 0.0, 0.5]);
///
/// // max_norm rescales the rows it looks up, in weight itself: row 0 has norm 5.
/// let weight = torchfn::tensor([[3.0f64, 4.0], [30.0, 40.0]])?;
/// let out = F::embedding(&torchfn::tensor([0i64])?, &weight, None, Some(1.0), 2.0, false, false)?;
/// let row = weight.to_vec::<f64>()?;
/// assert!((row[0] - 0.6).abs() < 1e-7 && (row[1] - 0.8).abs() < 1e-7);
/// assert_eq!(row[2..], [30.0, 40.0]); // not looked up, not changed
/// assert_eq!(out.to_vec::<f64>()?, row[..2]);
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
    let _ = sparse;
    if scale_grad_by_freq {
        bail!(NotImplemented, "{FUNC}(): scale_grad_by_freq=True is not implemented");
    }
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
    device_of(FUNC, &[("input", x), ("weight", w)])?;
    // Every index is checked before max_norm writes into any row.
    if let Some(i) = out_of_range(x, rows)? {
        bail!(Index, "{FUNC}(): index {i} is out of range for a weight of {rows} rows (index out of range in self)");
    }
    if let Some(max_norm) = max_norm {
        check_renormalizable(FUNC, w)?;
        primitive::embedding_renorm(weight, input, max_norm, norm_type)?;
    }
    let n = x.layout.numel();
    let flat = primitive::reshape(input, &Shape::from([n]))?;
    let mut rows = primitive::index_select(weight, 0, &flat)?;
    if let Some(p) = padding_idx
        && crate::autograd::meta::requires_grad(&rows)
    {
        // The padding row gets no gradient: its lookups are the same values, detached.
        let p = if p < 0 { p + rows_of(w) } else { p };
        let kept = primitive::binary(&flat, &Tensor::scalar(p), Binary::Ne, x.dtype, None)?;
        let kept = primitive::reshape(&kept, &Shape::from([n, 1]))?;
        rows = primitive::select(&kept, &rows, &rows.detach()?, w.dtype)?;
    }
    let shape: Shape = x.layout.shape.iter().copied().chain([dim]).collect();
    primitive::reshape(&rows, &shape)
}

/// Dropout (`torch.nn.functional.dropout`): with `training`, each element is zeroed with
/// probability `p` and the others scaled by `1 / (1 - p)`; without, the input itself.
///
/// `p` outside `[0, 1]` is a `ValueError`. `training=False`, `p = 0` or an empty input give the
/// input itself (the same data). `p = 1` gives `input * 0` (any dtype; NaN stays NaN).
///
/// For `0 < p < 1` the elements to keep are drawn from the default generator (PyTorch's
/// `F.dropout` takes no generator; [`manual_seed`](crate::manual_seed) makes the draw
/// repeatable): one `f64` uniform `u` on `[0, 1)` per element, in row-major order, keeps the
/// element when `u < 1 - p`, as PyTorch's CPU `bernoulli_`. As in PyTorch the result is
/// `input * noise`, where `noise` is `1 / (1 - p)` (computed in the input's dtype) for the kept
/// elements and 0 for the others: a dropped NaN or infinity gives NaN, a dropped negative
/// number -0.0. The input must then be floating point (PyTorch cannot cast the scale into an
/// integer one either).
///
/// With `inplace=True` the result is written into `input` and `input` itself is returned.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([1.0f32, -2.0])?;
/// assert_eq!(F::dropout(&x, 0.5, false, false)?.to_vec::<f32>()?, [1.0, -2.0]);
/// assert_eq!(F::dropout(&x, 1.0, true, false)?.to_vec::<f32>()?, [0.0, -0.0]);
///
/// // Training: each element is 0 or doubled (p = 0.5), drawn at random.
/// let ones = torchfn::ones([1000], None, None)?;
/// let y = F::dropout(&ones, 0.5, true, false)?.to_vec::<f32>()?;
/// assert!(y.iter().all(|&v| v == 0.0 || v == 2.0));
/// let kept = y.iter().filter(|&&v| v == 2.0).count();
/// assert!((400..600).contains(&kept), "{kept} of 1000 kept");
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn dropout(
    input: &Tensor,
    #[default(0.5)] p: f64,
    #[default(true)] training: bool,
    #[default(false)] inplace: bool,
) -> Result<Tensor> {
    dropout_impl("dropout", input, p, training, inplace)
}

/// The body of [`dropout`], for `func` (`scaled_dot_product_attention` drops attention
/// weights with it too).
pub(super) fn dropout_impl(func: &str, input: &Tensor, p: f64, training: bool, inplace: bool) -> Result<Tensor> {
    let x = input.data(func, "input")?;
    if !(0.0..=1.0).contains(&p) {
        bail!(Value, "{func}(): dropout probability has to be between 0 and 1, but got {p}");
    }
    if !training || p == 0.0 || x.layout.numel() == 0 {
        return Ok(input.clone());
    }
    let noise = if p == 1.0 {
        Tensor::scalar(0i64)
    } else {
        if !x.dtype.is_floating_point() {
            bail!(
                Runtime,
                "{func}(): with training=True and 0 < p < 1 the kept elements are scaled by 1 / (1 - p), which \
                 a {} input cannot hold; expected a floating point tensor",
                x.dtype
            );
        }
        // PyTorch's: a Bernoulli mask of the kept elements (`aten::bernoulli.p`), scaled by
        // 1 / (1 - p) (computed in the input's dtype from 1 - p in it).
        let keep = 1.0 - p;
        let mask = primitive::draw(
            func,
            Distribution::Bernoulli { p: keep },
            (&x.layout.shape, x.dtype, x.device()),
            None,
            Some(input),
        )?;
        let scale = with_dtype!(x.dtype, T => T::from_f64(1.0).to_f64() / T::from_f64(keep).to_f64());
        primitive::binary(&mask, &Tensor::scalar(scale), Binary::Mul, x.dtype, None)?
    };
    let dtype = x.dtype;
    super::activation::in_place_or_new(func, input, inplace, |source| {
        primitive::binary(source, &noise, Binary::Mul, dtype, None)
    })
}

/// An int64 tensor of these indices, as a sample argument.
fn indices(data: &[i64], shape: &[usize]) -> Value {
    Value::Tensor(Tensor::from_dense(Dense::from_vec(data.to_vec(), Shape::new(shape))))
}

crate::samples! {
    LINEAR => [
        sample([f32s(&[2, 3]), f32s(&[4, 3]), f32s(&[4])]),
        sample([f32s(&[2, 2, 3]), f32s(&[4, 3])]),
        sample([f32s(&[3]), f32s(&[3])]).kw("bias", f32s(&[])),
    ],
    EMBEDDING => [
        sample([indices(&[0, 2, 1, 1], &[2, 2]), f32s(&[3, 4])]).kw("padding_idx", 0),
        sample([indices(&[1], &[]), f32s(&[2, 3])]),
        sample([indices(&[1, 0, 1], &[3]), f32s(&[2, 3])]).kw("max_norm", 1.0).kw("norm_type", 1.0),
    ],
    DROPOUT => [
        sample([f32s(&[2, 3])]).kw("training", false),
        sample([f32s(&[2, 3]), Value::Float(1.0)]),
        sample([f32s(&[4])]).kw("p", 0.0),
        sample([f32s(&[3, 4])]),
        sample([f32s(&[8]), Value::Float(0.25)]).kw("inplace", true),
    ],
}
