//! The index family beyond `gather` and `index_select`: `index_add`, `index_copy` and
//! `index_fill` (their out-of-place forms), `scatter` and `scatter_add`, `scatter_reduce` (sum,
//! prod, mean, amax, amin), `take_along_dim` and `masked_select`, composed of `scatter_add`,
//! `index_put`, `sort`, `gather`, `where` and views, so their gradients are those operations';
//! `scatter` and the extremes are one node each, with PyTorch's gradients for repeated
//! positions and ties.

use crate::autograd::Function;
use crate::error::{Result, bail};
use crate::ops::indexing::out_of_range;
use crate::primitive;
use crate::tensor::{DType, Scalar, Shape, Tensor, broadcast_shapes, normalize_dim};
use crate::testing::{bools, f32s, sample};
use crate::torch_function;
use crate::value::Value;

/// The checked arguments of an `index_*` operation: the dimension and the index as a vector.
struct Along {
    dim: usize,
    index: Tensor,
}

/// Checks `index` (a vector, or one number, of int64 positions within `input`'s dimension
/// `dim`) and, when given, that `source` has `input`'s shape but for `dim`, where it has one
/// slice per index.
fn along(func: &str, input: &Tensor, dim: i64, index: &Tensor, source: Option<&Tensor>) -> Result<Along> {
    let (shape, idx) = (input.shape()?, index.data(func, "index")?);
    let d = if shape.is_empty() { normalize_dim(dim, 1, func)? } else { normalize_dim(dim, shape.len(), func)? };
    if idx.layout.ndim() > 1 {
        bail!(Runtime, "{func}(): Index is supposed to be a vector, but got a {}-D index", idx.layout.ndim());
    }
    if idx.dtype != DType::Int64 && idx.dtype != idx.device().index_dtype() {
        bail!(Runtime, "{func}(): Expected dtype int64 for index, but got {}", idx.dtype);
    }
    let size = shape.get(d).copied().unwrap_or(1);
    if let Some(bad) = out_of_range(idx, size)? {
        bail!(Runtime, "{func}(): index {bad} is out of bounds for dimension {d} with size {size}");
    }
    let index = if idx.layout.ndim() == 0 { index.reshape(&[1])? } else { index.clone() };
    if let Some(source) = source {
        let (s, n) = (source.shape()?, index.shape()?[0]);
        let want: Vec<usize> = if shape.is_empty() {
            Vec::new()
        } else {
            shape.iter().enumerate().map(|(k, &m)| if k == d { n } else { m }).collect()
        };
        if s[..] != want[..] && !(shape.is_empty() && s.len() <= 1 && n == 1) {
            bail!(
                Runtime,
                "{func}(): source {:?} must have the shape of self {:?} but for dimension {d}, where it has the \
                 index's {n} slices",
                &s[..],
                &shape[..]
            );
        }
        if source.dtype()? != input.dtype()? {
            bail!(
                Runtime,
                "{func}(): self ({}) and source ({}) must have the same scalar type",
                input.dtype()?.scalar_type_name(),
                source.dtype()?.scalar_type_name()
            );
        }
    }
    Ok(Along { dim: d, index })
}

impl Along {
    /// The index shaped to address `like`'s elements along the dimension (a view, expanded).
    fn spread_over(&self, like: &Shape) -> Result<Tensor> {
        if like.is_empty() {
            return Ok(self.index.clone());
        }
        let mut shape: Vec<i64> = vec![1; like.len()];
        shape[self.dim] = self.index.shape()?[0] as i64;
        let mut to: Vec<i64> = like.iter().map(|&n| n as i64).collect();
        to[self.dim] = shape[self.dim];
        self.index.reshape(&shape)?.expand(to)
    }

    /// Whether each position of `input`'s dimension is indexed, shaped to broadcast against it.
    fn mask(&self, input: &Tensor) -> Result<Tensor> {
        let shape = input.shape()?;
        let size = shape.get(self.dim).copied().unwrap_or(1);
        let device = input.device()?;
        let n = self.index.shape()?[0];
        let ones = primitive::ones(&Shape::from([n]), DType::Float32, device)?;
        let counts = primitive::scatter_add(&Shape::from([size]), 0, &self.index, &ones)?;
        let hit = counts.gt(&Tensor::scalar(0.0))?;
        let at: Vec<i64> = (0..shape.len()).map(|k| if k == self.dim { size as i64 } else { 1 }).collect();
        hit.reshape(&at)
    }

    /// `source`'s slices placed at the indexed positions of a tensor of `input`'s shape (zeros
    /// elsewhere, repeated positions summed).
    fn placed(&self, input: &Tensor, source: &Tensor) -> Result<Tensor> {
        let shape = input.shape()?;
        if shape.is_empty() {
            return source.reshape(&[]);
        }
        primitive::scatter_add(&shape, self.dim, &self.spread_over(&source.shape()?)?, source)
    }
}

/// `input` with `alpha * source` added at the positions `index` names along `dim`
/// (`torch.index_add`): slice `i` of `source` is added to slice `index[i]` of the result,
/// repeated indices accumulating. `source` has `input`'s shape but for `dim`, and its dtype.
///
/// ```
/// let x = torchfn::zeros([3, 2], None, None)?;
/// let src = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]])?;
/// let index = torchfn::tensor([0i64, 2, 0])?;
/// let y = torchfn::index_add(&x, 0, &index, &src, 1.0)?;
/// assert_eq!(y.to_vec::<f32>()?, [6.0, 8.0, 0.0, 0.0, 3.0, 4.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn index_add(
    input: &Tensor,
    dim: i64,
    index: &Tensor,
    source: &Tensor,
    #[default(1)] alpha: impl Into<Scalar>,
) -> Result<Tensor> {
    index_add_impl(input, dim, index, source, alpha.into())
}

fn index_add_impl(input: &Tensor, dim: i64, index: &Tensor, source: &Tensor, alpha: Scalar) -> Result<Tensor> {
    let a = along("index_add", input, dim, index, Some(source))?;
    let placed = a.placed(input, source)?;
    input.add(&placed, alpha)
}

/// `input` with the slices of `source` copied to the positions `index` names along `dim`
/// (`torch.index_copy`); `index` should not repeat a position (PyTorch leaves which copy wins
/// undefined; here repeated slices add up). Shapes and dtypes as in [`index_add`].
///
/// ```
/// let x = torchfn::zeros([3], None, None)?;
/// let y = torchfn::index_copy(&x, 0, &torchfn::tensor([2i64, 0])?, &torchfn::tensor([7.0f32, 9.0])?)?;
/// assert_eq!(y.to_vec::<f32>()?, [9.0, 0.0, 7.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn index_copy(input: &Tensor, dim: i64, index: &Tensor, source: &Tensor) -> Result<Tensor> {
    index_copy_impl(input, dim, index, source)
}

fn index_copy_impl(input: &Tensor, dim: i64, index: &Tensor, source: &Tensor) -> Result<Tensor> {
    let a = along("index_copy", input, dim, index, Some(source))?;
    crate::r#where(&a.mask(input)?, &a.placed(input, source)?, input)
}

/// `input` with `value` (a number, or a 0-d tensor that may require grad) at the positions
/// `index` names along `dim` (`torch.index_fill`).
///
/// ```
/// let x = torchfn::tensor([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]])?;
/// let y = torchfn::index_fill(&x, 1, &torchfn::tensor([0i64, 2])?, &torchfn::Tensor::scalar(-1.0))?;
/// assert_eq!(y.to_vec::<f32>()?, [-1.0, 2.0, -1.0, -1.0, 5.0, -1.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn index_fill(input: &Tensor, dim: i64, index: &Tensor, value: &Tensor) -> Result<Tensor> {
    index_fill_impl(input, dim, index, value)
}

fn index_fill_impl(input: &Tensor, dim: i64, index: &Tensor, value: &Tensor) -> Result<Tensor> {
    let a = along("index_fill", input, dim, index, None)?;
    if !value.shape()?.is_empty() {
        bail!(
            Runtime,
            "index_fill(): only supports a 0-dimensional value tensor, but got tensor with {} dimension(s)",
            value.shape()?.len()
        );
    }
    crate::masked_fill(input, &a.mask(input)?, value)
}

/// The checked arguments of `scatter_add` and `scatter_reduce`: the dimension, and `src` cut
/// to `index`'s shape (PyTorch reads only that much of it).
fn scattered(func: &str, input: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<(usize, Tensor)> {
    let (xs, is, ss) = (input.shape()?, index.shape()?, src.shape()?);
    let idx = index.data(func, "index")?;
    if idx.dtype != DType::Int64 && idx.dtype != idx.device().index_dtype() {
        bail!(Runtime, "{func}(): Expected dtype int64 for index");
    }
    if input.dtype()? != src.dtype()? {
        bail!(
            Runtime,
            "{func}(): Expected self.dtype to be equal to src.dtype, got {} and {}",
            input.dtype()?,
            src.dtype()?
        );
    }
    if xs.is_empty() || xs.len() != is.len() || is.len() != ss.len() {
        bail!(Runtime, "{func}(): Index tensor must have the same number of dimensions as self and src tensors");
    }
    let d = normalize_dim(dim, xs.len(), func)?;
    if let Some(k) = (0..xs.len()).find(|&k| is[k] > ss[k] || (k != d && is[k] > xs[k])) {
        bail!(
            Runtime,
            "{func}(): Expected index {:?} to be smaller than self {:?} apart from dimension {d} and to be smaller \
             size than src {:?} (dimension {k})",
            &is[..],
            &xs[..],
            &ss[..]
        );
    }
    if let Some(bad) = out_of_range(idx, xs[d])? {
        bail!(Runtime, "{func}(): index {bad} is out of bounds for dimension {d} with size {}", xs[d]);
    }
    let mut cut = src.clone();
    for (k, (&n, &m)) in is.iter().zip(ss.iter()).enumerate() {
        if n < m {
            cut = cut.narrow(k as i64, 0, n as i64)?;
        }
    }
    Ok((d, cut))
}

fn scatter_add_impl(input: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    let (d, src) = scattered("scatter_add", input, dim, index, src)?;
    input.add(&primitive::scatter_add(&input.shape()?, d, index, &src)?, 1)
}

fn scatter_reduce_impl(
    input: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: &str,
    include_self: bool,
) -> Result<Tensor> {
    const FUNC: &str = "scatter_reduce";
    let (d, src) = scattered(FUNC, input, dim, index, src)?;
    if matches!(reduce, "amax" | "amin") {
        let args = (input.clone(), index.clone(), src, d, reduce == "amax", include_self);
        let [out] = super::results(FUNC, ScatterExtreme::apply(args)?)?;
        return Ok(out);
    }
    let shape = input.shape()?;
    let sums = primitive::scatter_add(&shape, d, index, &src)?;
    let ones = crate::ones_like(&src, None)?;
    let counts = primitive::scatter_add(&shape, d, index, &ones)?;
    let reached = counts.gt(&Tensor::scalar(0i64))?;
    let base = if include_self { input.clone() } else { crate::r#where(&reached, &Tensor::scalar(0i64), input)? };
    match reduce {
        "sum" => base.add(&sums, 1),
        "mean" => {
            let counts = if include_self { counts.add(&Tensor::scalar(1i64), 1)? } else { counts };
            let counts = crate::r#where(&reached, &counts, &Tensor::scalar(1i64))?;
            let mode = if input.dtype()?.is_floating_point() { None } else { Some("floor") };
            base.add(&sums, 1)?.div(&counts, mode)
        }
        "prod" => {
            let base =
                if include_self { input.clone() } else { crate::r#where(&reached, &Tensor::scalar(1i64), input)? };
            scatter_product(&base, d, index, &src, &counts)
        }
        other => bail!(Runtime, "{FUNC}(): reduce argument must be either sum, prod, mean, amax or amin, got {other}"),
    }
}

/// The position in `shape` (flattened) of each element `index` points at along `d`: the
/// element's own coordinates, `index`'s value along `d` (`index`'s shape, its dtype).
fn flat_positions(shape: &Shape, d: usize, index: &Tensor) -> Result<Tensor> {
    let strides = shape.contiguous_strides();
    let is = index.shape()?;
    let (dtype, device) = (index.dtype()?, index.device()?);
    let mut positions = index.mul(&Tensor::scalar(strides[d] as i64))?;
    for (k, &n) in is.iter().enumerate().filter(|&(k, _)| k != d) {
        let mut along: Vec<i64> = vec![1; is.len()];
        along[k] = n as i64;
        let coordinate = crate::arange(n as i64, dtype, device)?.reshape(&along)?;
        positions = positions.add(&coordinate.mul(&Tensor::scalar(strides[k] as i64))?, 1)?;
    }
    Ok(positions)
}

/// `input` with `src`'s elements written at the positions `index` gives along `dim`: the last
/// write of each position wins, or with `accumulate` they add up.
fn scatter_write(input: &Tensor, d: usize, index: &Tensor, src: &Tensor, accumulate: bool) -> Result<Tensor> {
    let shape = input.shape()?;
    let positions = flat_positions(&shape, d, index)?.reshape(&[-1])?;
    let flat = input.reshape(&[-1])?.index_put(&[positions], &src.reshape(&[-1])?, accumulate)?;
    flat.reshape(&shape.iter().map(|&n| n as i64).collect::<Vec<_>>())
}

/// `base` times the elements of `src` that `index` sends to each position along `d` (`counts`
/// of them there), exactly: in rounds, the `r`-th element of every position multiplied in at
/// round `r` (an element's rank among its position's, from a stable sort by position), as
/// many rounds as the most any position receives. Autograd differentiates the products
/// exactly, zeros included.
fn scatter_product(base: &Tensor, d: usize, index: &Tensor, src: &Tensor, counts: &Tensor) -> Result<Tensor> {
    let shape = base.shape()?;
    let positions = flat_positions(&shape, d, index)?.reshape(&[-1])?;
    let (sorted, order) = crate::sort(&positions, 0, false, true)?;
    let values = src.reshape(&[-1])?.index_select(0, &order)?;
    // Where each position's elements start in the sorted list: the counts before it.
    let counts = counts.reshape(&[-1])?.to(sorted.dtype()?, false, false)?;
    let starts = crate::cumsum(&counts, 0, None)?.sub(&counts, 1)?;
    let count = sorted.shape()?[0] as i64;
    let rank = crate::arange(count, sorted.dtype()?, sorted.device()?)?.sub(&starts.index_select(0, &sorted)?, 1)?;
    let rounds = if count == 0 { 0 } else { crate::amax(&counts, vec![0i64], false)?.item()?.to_i64() };
    let mut product = base.reshape(&[-1])?;
    let ones = crate::ones_like(&product, None)?;
    for r in 0..rounds {
        let this = rank.eq(&Tensor::scalar(r))?;
        let at = crate::masked_select(&sorted, &this)?;
        let factors = ones.index_put(&[at], &crate::masked_select(&values, &this)?, false)?;
        product = product.mul(&factors)?;
    }
    product.reshape(&shape.iter().map(|&n| n as i64).collect::<Vec<_>>())
}

/// `scatter_reduce`'s `amax` and `amin` as one node: the extreme of what reaches each position
/// (and the position's own value with `include_self`), NaN winning as in PyTorch; the gradient
/// shared evenly among the elements equal to the result, as PyTorch's.
#[derive(Default)]
struct ScatterExtreme {
    dim: usize,
    include_self: bool,
}

impl Function for ScatterExtreme {
    type Inputs = (Tensor, Tensor, Tensor, usize, bool, bool);
    type Output = Vec<Tensor>;
    type GradOutputs = Vec<Option<Tensor>>;

    fn forward_with_ctx(
        ctx: &mut crate::autograd::Ctx<Self>,
        (input, index, src, d, largest, include_self): &Self::Inputs,
    ) -> Result<Vec<Tensor>> {
        let (shape, d) = (input.shape()?, *d);
        // Every candidate of each position written in the order of its value, the extreme
        // last: `index_put`'s last write wins.
        let positions = flat_positions(&shape, d, index)?.reshape(&[-1])?;
        let mut values = src.reshape(&[-1])?;
        let mut at = positions;
        if *include_self {
            let own = crate::arange(shape.numel() as i64, at.dtype()?, at.device()?)?;
            values = crate::cat(&[values, input.reshape(&[-1])?], 0)?;
            at = crate::cat(&[at, own], 0)?;
        }
        let (sorted, order) = crate::sort(&values, 0, !*largest, true)?;
        let written = input.reshape(&[-1])?.index_put(&[at.index_select(0, &order)?], &sorted, false)?;
        let dims: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
        let mut result = written.reshape(&dims)?;
        if input.dtype()?.is_floating_point() {
            // NaN, last of an ascending sort and first of a descending one, wins both ways.
            let nan = |t: &Tensor| t.isnan()?.to(input.dtype()?, false, false);
            let mut hit = primitive::scatter_add(&shape, d, index, &nan(src)?)?;
            if *include_self {
                hit = hit.add(&nan(input)?, 1)?;
            }
            result = crate::r#where(&hit.gt(&Tensor::scalar(0.0))?, &Tensor::scalar(f64::NAN), &result)?;
        }
        ctx.dim = d;
        ctx.include_self = *include_self;
        ctx.save_for_backward((input.clone(), index.clone(), src.clone(), result.clone()));
        ctx.save_for_forward((input.clone(), index.clone(), src.clone(), result.clone()));
        Ok(vec![result])
    }

    /// `N` = how many elements equal the result at each position; `grad_self = (self ==
    /// result) g / N` (zero where `src` reaches without `include_self`), `grad_src = (src ==
    /// result[index]) (g / N)[index]`.
    fn backward(ctx: &mut crate::autograd::Ctx<Self>, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        let (input, index, src, result): (Tensor, Tensor, Tensor, Tensor) = ctx.saved_tensors()?;
        let Some(g) = grads.into_iter().next().flatten() else { return Ok(vec![None; 6]) };
        let (self_share, src_share) = shares(&input, &index, &src, &result, ctx.dim, ctx.include_self)?;
        let grad_self = g.mul(&self_share)?;
        let grad_src = g.gather(ctx.dim as i64, &index)?.mul(&src_share)?;
        Ok(vec![Some(grad_self), None, Some(grad_src), None, None, None])
    }

    /// The same shares of the tangents: `t_self` where `self` is the result, and `t_src`
    /// scattered where `src` is.
    fn jvp(ctx: &mut crate::autograd::Ctx<Self>, tangents: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        let (input, index, src, result): (Tensor, Tensor, Tensor, Tensor) = ctx.saved_tensors()?;
        let (self_share, src_share) = shares(&input, &index, &src, &result, ctx.dim, ctx.include_self)?;
        let mut out = crate::zeros_like(&result, None)?;
        if let Some(t) = tangents.first().cloned().flatten() {
            out = out.add(&t.mul(&self_share)?, 1)?;
        }
        if let Some(t) = tangents.get(2).cloned().flatten() {
            out = out.add(&primitive::scatter_add(&input.shape()?, ctx.dim, &index, &t.mul(&src_share)?)?, 1)?;
        }
        Ok(vec![Some(out)])
    }
}

/// Each element's share of the gradient of an extreme at its position (PyTorch's rule): `1/N`
/// where it equals the result, `N` counting the equal elements there; `self`'s own shares are
/// zero where `src` reaches without `include_self`.
fn shares(
    input: &Tensor,
    index: &Tensor,
    src: &Tensor,
    result: &Tensor,
    d: usize,
    include_self: bool,
) -> Result<(Tensor, Tensor)> {
    let dtype = input.dtype()?;
    let shape = input.shape()?;
    let self_is = input.eq(result)?.to(dtype, false, false)?;
    let src_is = src.eq(&result.gather(d as i64, index)?)?.to(dtype, false, false)?;
    // Zero only where the result is NaN (equal to nothing): the shares there are NaN, as
    // PyTorch's.
    let count = self_is.add(&primitive::scatter_add(&shape, d, index, &src_is)?, 1)?;
    let mut self_share = self_is.div(&count, None)?;
    if !include_self {
        let reached = primitive::scatter_add(&shape, d, index, &crate::ones_like(src, None)?)?;
        self_share = crate::r#where(&reached.gt(&Tensor::scalar(0.0))?, &Tensor::scalar(0.0), &self_share)?;
    }
    let src_share = src_is.div(&count.gather(d as i64, index)?, None)?;
    Ok((self_share, src_share))
}

/// `input` with `src`'s elements written at the positions `index` gives along `dim`
/// (`torch.scatter`): `out[index[i][j]][j] = src[i][j]` for `dim = 0`, and so on; where
/// positions repeat, the last element (in `src`'s row-major order) wins (PyTorch leaves the
/// order unspecified). `reduce = "add"` adds them instead, and `reduce = "multiply"` multiplies
/// the position's value by each ([`scatter_reduce`]'s `"prod"`). `index` is as
/// [`scatter_add`]'s. Differentiable in `input` (zero where written) and `src` (the gradient
/// gathered); with a reduction, as the sum or the product (PyTorch has no derivative there).
///
/// ```
/// let x = torchfn::zeros([2, 3], None, None)?;
/// let src = torchfn::tensor([[1.0f32, 2.0, 3.0]])?;
/// let index = torchfn::tensor([[1i64, 0, 1]])?;
/// assert_eq!(torchfn::scatter(&x, 0, &index, &src, None)?.to_vec::<f32>()?, [0.0, 2.0, 0.0, 1.0, 0.0, 3.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn scatter(
    input: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    #[keyword_only]
    #[default(None)]
    reduce: Option<&str>,
) -> Result<Tensor> {
    scatter_impl(input, dim, index, src, reduce)
}

/// [`scatter`] of one value (`torch.scatter(input, dim, index, value)`): `value` written at
/// every position `index` gives.
#[torch_function(overload_of = SCATTER)]
pub fn scatter_value(
    input: &Tensor,
    dim: i64,
    index: &Tensor,
    value: Scalar,
    #[keyword_only]
    #[default(None)]
    reduce: Option<&str>,
) -> Result<Tensor> {
    scatter_value_impl(input, dim, index, value, reduce)
}

fn scatter_value_impl(input: &Tensor, dim: i64, index: &Tensor, value: Scalar, reduce: Option<&str>) -> Result<Tensor> {
    let src = crate::full_like(index, value, input.dtype()?)?;
    scatter_impl(input, dim, index, &src, reduce)
}

fn scatter_impl(input: &Tensor, dim: i64, index: &Tensor, src: &Tensor, reduce: Option<&str>) -> Result<Tensor> {
    const FUNC: &str = "scatter";
    let (d, src) = scattered(FUNC, input, dim, index, src)?;
    let accumulate = match reduce {
        None => false,
        Some("add") => true,
        // Each position's value times every element written there: the product reduction,
        // the input's own value included (whose gradient torchfn has, where PyTorch's scatter
        // with a reduction has none).
        Some("multiply") => return scatter_reduce_impl(input, dim, index, &src, "prod", true),
        Some(other) => bail!(Runtime, "{FUNC}(): reduce argument must be either add or multiply, got {other}"),
    };
    let [out] = super::results(FUNC, ScatterWrite::apply((input.clone(), index.clone(), src, d, accumulate))?)?;
    Ok(out)
}

/// `scatter` as one node with PyTorch's gradients: the input's is zero where written (kept with
/// `reduce="add"`), each source element's is the gradient at its position, repeated positions
/// included.
#[derive(Default)]
struct ScatterWrite {
    dim: usize,
    accumulate: bool,
}

impl Function for ScatterWrite {
    type Inputs = (Tensor, Tensor, Tensor, usize, bool);
    type Output = Vec<Tensor>;
    type GradOutputs = Vec<Option<Tensor>>;

    fn forward_with_ctx(
        ctx: &mut crate::autograd::Ctx<Self>,
        (input, index, src, d, accumulate): &Self::Inputs,
    ) -> Result<Vec<Tensor>> {
        (ctx.dim, ctx.accumulate) = (*d, *accumulate);
        ctx.save_for_backward((index.clone(), src.clone()));
        ctx.save_for_forward((input.clone(), index.clone(), src.clone()));
        Ok(vec![scatter_write(input, *d, index, src, *accumulate)?])
    }

    fn backward(ctx: &mut crate::autograd::Ctx<Self>, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        let (index, src): (Tensor, Tensor) = ctx.saved_tensors()?;
        let Some(g) = grads.into_iter().next().flatten() else { return Ok(vec![None; 5]) };
        let grad_input = if ctx.accumulate {
            g.clone()
        } else {
            scatter_write(&g, ctx.dim, &index, &crate::zeros_like(&src, None)?, false)?
        };
        Ok(vec![Some(grad_input), None, Some(g.gather(ctx.dim as i64, &index)?), None, None])
    }

    /// The same write of the tangents (zeros for an input without one).
    fn jvp(ctx: &mut crate::autograd::Ctx<Self>, tangents: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        let (input, index, src): (Tensor, Tensor, Tensor) = ctx.saved_tensors()?;
        let or_zeros = |t: Option<Tensor>, like: &Tensor| t.map_or_else(|| crate::zeros_like(like, None), Ok);
        let t_input = or_zeros(tangents.first().cloned().flatten(), &input)?;
        let t_src = or_zeros(tangents.get(2).cloned().flatten(), &src)?;
        Ok(vec![Some(scatter_write(&t_input, ctx.dim, &index, &t_src, ctx.accumulate)?)])
    }
}

/// `input` with `src`'s elements added at the positions `index` gives along `dim`
/// (`torch.scatter_add`): `out[index[i][j]][j] += src[i][j]` for `dim = 0`, and so on, repeated
/// positions accumulating. `index` has `input`'s and `src`'s number of dimensions and is no
/// larger than `src` (of which only that much is read), nor than `input` but along `dim`.
///
/// ```
/// let x = torchfn::zeros([2, 3], None, None)?;
/// let src = torchfn::ones([2, 3], None, None)?;
/// let index = torchfn::tensor([[0i64, 1, 0], [0, 0, 1]])?;
/// assert_eq!(torchfn::scatter_add(&x, 0, &index, &src)?.to_vec::<f32>()?, [2.0, 1.0, 1.0, 0.0, 1.0, 1.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn scatter_add(input: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    scatter_add_impl(input, dim, index, src)
}

/// `input` with `src`'s elements reduced into the positions `index` gives along `dim`
/// (`torch.scatter_reduce`): `reduce = "sum"`, `"prod"`, `"mean"`, `"amax"` or `"amin"` (over
/// the elements scattered there, and `input`'s own with `include_self`; integer means round
/// down, as PyTorch's; NaN wins the extremes, whose gradient the elements equal to the result
/// share evenly). Positions no element reaches keep `input`'s value. The product's number of
/// rounds depends on the values (how many elements the busiest position receives), so fake
/// tensors cannot run it.
///
/// ```
/// let x = torchfn::tensor([10.0f32, 20.0])?;
/// let src = torchfn::tensor([1.0f32, 2.0, 3.0])?;
/// let index = torchfn::tensor([0i64, 0, 1])?;
/// let mean = torchfn::scatter_reduce(&x, 0, &index, &src, "mean", false)?;
/// assert_eq!(mean.to_vec::<f32>()?, [1.5, 3.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn scatter_reduce(
    input: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: &str,
    #[keyword_only]
    #[default(true)]
    include_self: bool,
) -> Result<Tensor> {
    scatter_reduce_impl(input, dim, index, src, reduce, include_self)
}

fn masked_scatter_impl(input: &Tensor, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
    const FUNC: &str = "masked_scatter";
    if mask.dtype()? != DType::Bool {
        bail!(Runtime, "{FUNC}(): expected BoolTensor for mask");
    }
    if source.dtype()? != input.dtype()? {
        bail!(
            Runtime,
            "{FUNC}(): expected self and source to have same dtypes but got {} and {}",
            input.dtype()?,
            source.dtype()?
        );
    }
    let shape = input.shape()?;
    let mask = mask.expand(shape.iter().map(|&n| n as i64).collect::<Vec<_>>())?;
    let flat_mask = mask.reshape(&[-1])?;
    let positions = crate::nonzero(&flat_mask)?.reshape(&[-1])?;
    let (count, available) = (positions.shape()?[0], source.shape()?.numel());
    if count > available {
        bail!(Runtime, "{FUNC}(): Number of elements of source < number of ones in mask");
    }
    // The first `count` elements of `source`, in order, at the mask's positions.
    let taken = source.reshape(&[-1])?.narrow(0, 0, count as i64)?;
    let total = Shape::from([shape.numel()]);
    let placed = primitive::scatter_add(&total, 0, &positions, &taken)?;
    crate::r#where(&mask, &placed.reshape(&shape.iter().map(|&n| n as i64).collect::<Vec<_>>())?, input)
}

/// `input` with the elements of `source`, in row-major order, written where `mask` (bool,
/// broadcast to `input`'s shape) is true (`torch.masked_scatter`): the `i`-th true position
/// gets `source`'s `i`-th element. `source` needs at least as many elements as the mask has
/// true positions. Which positions those are depends on the values, as for `masked_select`.
///
/// ```
/// let x = torchfn::zeros([2, 2], None, None)?;
/// let mask = torchfn::tensor([[true, false], [true, true]])?;
/// let source = torchfn::tensor([1.0f32, 2.0, 3.0, 4.0])?;
/// assert_eq!(torchfn::masked_scatter(&x, &mask, &source)?.to_vec::<f32>()?, [1.0, 0.0, 2.0, 3.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn masked_scatter(input: &Tensor, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
    masked_scatter_impl(input, mask, source)
}

/// The elements of `input` at `indices` along `dim` (`torch.take_along_dim`), the two
/// broadcasting in every other dimension: `gather` after broadcasting. Without `dim`, both are
/// flattened first.
///
/// ```
/// let x = torchfn::tensor([[10.0f32, 30.0, 20.0], [60.0, 40.0, 50.0]])?;
/// let top = torchfn::tensor([[1i64], [0]])?;
/// assert_eq!(torchfn::take_along_dim(&x, &top, Some(1))?.to_vec::<f32>()?, [30.0, 60.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn take_along_dim(input: &Tensor, indices: &Tensor, #[default(None)] dim: Option<i64>) -> Result<Tensor> {
    take_along_dim_impl(input, indices, dim)
}

fn take_along_dim_impl(input: &Tensor, indices: &Tensor, dim: Option<i64>) -> Result<Tensor> {
    const FUNC: &str = "take_along_dim";
    let idx = indices.data(FUNC, "indices")?;
    if idx.dtype != DType::Int64 && idx.dtype != idx.device().index_dtype() {
        bail!(Runtime, "{FUNC}(): dtype of indices should be Long but got {}", idx.dtype);
    }
    let Some(dim) = dim else {
        return crate::gather(&input.flatten(0, -1)?, 0, &indices.flatten(0, -1)?);
    };
    let (xs, is) = (input.shape()?, indices.shape()?);
    if xs.len() != is.len() {
        bail!(
            Runtime,
            "{FUNC}(): input and indices should have the same number of dimensions, but got {} dimensions for input, \
             and {} dimensions for indices",
            xs.len(),
            is.len()
        );
    }
    let d = normalize_dim(dim, xs.len().max(1), FUNC)?;
    // Every dimension but `dim` broadcast; `dim` keeps each its own size.
    let others = |s: &Shape| -> Shape { s.iter().enumerate().map(|(k, &n)| if k == d { 1 } else { n }).collect() };
    let common = broadcast_shapes(&others(&xs), &others(&is), FUNC)?;
    let sized = |n: usize| -> Vec<i64> {
        common.iter().enumerate().map(|(k, &m)| if k == d { n as i64 } else { m as i64 }).collect()
    };
    let (xd, id) = (xs.get(d).copied().unwrap_or(1), is.get(d).copied().unwrap_or(1));
    crate::gather(&input.expand(sized(xd))?, dim, &indices.expand(sized(id))?)
}

/// The elements of `input` where `mask` (bool, broadcasting with it) is true, in row-major
/// order, as a 1-D tensor (`torch.masked_select`).
///
/// ```
/// let x = torchfn::tensor([[1.0f32, -2.0], [-3.0, 4.0]])?;
/// let positive = x.gt(&torchfn::Tensor::scalar(0.0))?;
/// assert_eq!(torchfn::masked_select(&x, &positive)?.to_vec::<f32>()?, [1.0, 4.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn masked_select(input: &Tensor, mask: &Tensor) -> Result<Tensor> {
    masked_select_impl(input, mask)
}

fn masked_select_impl(input: &Tensor, mask: &Tensor) -> Result<Tensor> {
    const FUNC: &str = "masked_select";
    if mask.dtype()? != DType::Bool {
        bail!(Runtime, "{FUNC}(): expected BoolTensor for mask, but got {}", mask.dtype()?);
    }
    let shape = broadcast_shapes(&input.shape()?, &mask.shape()?, FUNC)?;
    let to: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
    let flat = |t: &Tensor| -> Result<Tensor> { t.expand(to.clone())?.reshape(&[-1]) };
    let positions = crate::nonzero(&flat(mask)?)?.reshape(&[-1])?;
    crate::index_select(&flat(input)?, 0, &positions)
}

impl Tensor {
    /// `self` with `alpha * source` added at `index` along `dim`: the method form of
    /// [`index_add`](crate::index_add()).
    #[torch_function]
    pub fn index_add(
        &self,
        dim: i64,
        index: &Tensor,
        source: &Tensor,
        #[default(1)] alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        index_add_impl(self, dim, index, source, alpha.into())
    }

    /// `self` with `source`'s slices copied to `index` along `dim`: the method form of
    /// [`index_copy`](crate::index_copy()).
    #[torch_function]
    pub fn index_copy(&self, dim: i64, index: &Tensor, source: &Tensor) -> Result<Tensor> {
        index_copy_impl(self, dim, index, source)
    }

    /// `self` with `value` at `index` along `dim`: the method form of
    /// [`index_fill`](crate::index_fill()).
    #[torch_function]
    pub fn index_fill(&self, dim: i64, index: &Tensor, value: &Tensor) -> Result<Tensor> {
        index_fill_impl(self, dim, index, value)
    }

    /// `self` with `src` added at `index` along `dim`: the method form of
    /// [`scatter_add`](crate::scatter_add()).
    #[torch_function]
    pub fn scatter_add(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        scatter_add_impl(self, dim, index, src)
    }

    /// `self` with `src` written at `index` along `dim`: the method form of
    /// [`scatter`](crate::scatter()).
    #[torch_function]
    pub fn scatter(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        #[keyword_only]
        #[default(None)]
        reduce: Option<&str>,
    ) -> Result<Tensor> {
        scatter_impl(self, dim, index, src, reduce)
    }

    /// `self` with `value` written at `index` along `dim`: the method form of
    /// [`scatter_value`](crate::scatter_value()).
    #[torch_function(overload_of = Tensor::SCATTER)]
    pub fn scatter_value(
        &self,
        dim: i64,
        index: &Tensor,
        value: Scalar,
        #[keyword_only]
        #[default(None)]
        reduce: Option<&str>,
    ) -> Result<Tensor> {
        scatter_value_impl(self, dim, index, value, reduce)
    }

    /// `self` with `src` reduced into `index` along `dim`: the method form of
    /// [`scatter_reduce`](crate::scatter_reduce()).
    #[torch_function]
    pub fn scatter_reduce(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        reduce: &str,
        #[keyword_only]
        #[default(true)]
        include_self: bool,
    ) -> Result<Tensor> {
        scatter_reduce_impl(self, dim, index, src, reduce, include_self)
    }

    /// `self` with `source` written where `mask` is true: the method form of
    /// [`masked_scatter`](crate::masked_scatter()).
    #[torch_function]
    pub fn masked_scatter(&self, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
        masked_scatter_impl(self, mask, source)
    }

    /// The elements at `indices` along `dim`: the method form of
    /// [`take_along_dim`](crate::take_along_dim()).
    #[torch_function]
    pub fn take_along_dim(&self, indices: &Tensor, #[default(None)] dim: Option<i64>) -> Result<Tensor> {
        take_along_dim_impl(self, indices, dim)
    }

    /// The elements where `mask` is true, as a vector: the method form of
    /// [`masked_select`](crate::masked_select()).
    #[torch_function]
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        masked_select_impl(self, mask)
    }
}

/// An int64 tensor of positions of `shape`, as a sample argument.
fn index2(values: &[i64], shape: [usize; 2]) -> Value {
    Value::Tensor(Tensor::from_vec(values.to_vec(), shape).expect("an index"))
}

/// An int64 vector of positions, as a sample argument.
fn positions(values: &[i64]) -> Value {
    Value::Tensor(Tensor::from_vec(values.to_vec(), [values.len()]).expect("a vector"))
}

crate::samples! {
    INDEX_ADD => [
        sample([f32s(&[3, 2]), Value::Int(0), positions(&[0, 2, 0]), f32s(&[3, 2])]),
        sample([f32s(&[2, 4]), Value::Int(1), positions(&[3, 1]), f32s(&[2, 2])]).kw("alpha", 2.0),
    ],
    INDEX_COPY => [sample([f32s(&[4, 2]), Value::Int(0), positions(&[3, 0]), f32s(&[2, 2])])],
    INDEX_FILL => [
        sample([f32s(&[2, 3]), Value::Int(1), positions(&[0, 2]), Value::Tensor(Tensor::scalar(-1.0f32))]),
    ],
    MASKED_SCATTER => [sample([f32s(&[2, 3]), bools(&[2, 3]), f32s(&[6])]), sample([f32s(&[2, 3]), bools(&[3]), f32s(&[2, 4])])],
    Tensor::MASKED_SCATTER => [sample([f32s(&[4]), bools(&[4]), f32s(&[4])])],
    SCATTER_ADD => [sample([f32s(&[3, 2]), Value::Int(0), index2(&[0, 2, 1, 0], [2, 2]), f32s(&[2, 3])])],
    SCATTER_REDUCE => [
        sample([f32s(&[3, 2]), Value::Int(0), index2(&[0, 2, 0, 0], [2, 2]), f32s(&[2, 2]), Value::from("sum")]),
        sample([f32s(&[2, 3]), Value::Int(1), index2(&[2, 2, 0, 1], [2, 2]), f32s(&[2, 2]), Value::from("mean")])
            .kw("include_self", false),
        sample([f32s(&[3, 2]), Value::Int(0), index2(&[0, 2, 0, 0], [2, 2]), f32s(&[2, 2]), Value::from("amax")]),
        sample([f32s(&[2, 3]), Value::Int(1), index2(&[2, 2, 0, 1], [2, 2]), f32s(&[2, 2]), Value::from("amin")])
            .kw("include_self", false),
        sample([f32s(&[2, 3]), Value::Int(1), index2(&[2, 2, 0, 2], [2, 2]), f32s(&[2, 2]), Value::from("prod")]),
    ],
    SCATTER => [
        sample([f32s(&[3, 2]), Value::Int(0), index2(&[0, 2, 1, 0], [2, 2]), f32s(&[2, 3])]),
        sample([f32s(&[2, 3]), Value::Int(1), index2(&[2, 1, 0, 0], [2, 2]), f32s(&[2, 2])]).kw("reduce", "add"),
        sample([f32s(&[2, 3]), Value::Int(1), index2(&[2, 1, 0, 2], [2, 2]), f32s(&[2, 2])]).kw("reduce", "multiply"),
        sample([f32s(&[2, 3]), Value::Int(1), index2(&[2, 0], [2, 1]), Value::Float(-1.5)]),
    ],
    Tensor::SCATTER => [
        sample([f32s(&[4]), Value::Int(0), positions(&[3, 0]), f32s(&[2])]),
        sample([f32s(&[2, 2]), Value::Int(1), index2(&[1, 1], [2, 1]), Value::Int(7)]),
    ],
    Tensor::SCATTER_ADD => [sample([f32s(&[4]), Value::Int(0), positions(&[1, 1]), f32s(&[2])])],
    Tensor::SCATTER_REDUCE => [sample([f32s(&[3]), Value::Int(0), positions(&[2, 0]), f32s(&[2]), Value::from("mean")])],
    TAKE_ALONG_DIM => [
        sample([f32s(&[2, 3]), Value::Tensor(Tensor::from_vec(vec![2i64, 0], [2, 1]).expect("indices"))]).kw("dim", 1),
        sample([f32s(&[2, 3]), positions(&[5, 0, 3])]),
    ],
    MASKED_SELECT => [sample([f32s(&[2, 3]), bools(&[2, 3])]), sample([f32s(&[2, 3]), bools(&[3])])],
    Tensor::INDEX_ADD => [sample([f32s(&[4]), Value::Int(0), positions(&[1]), f32s(&[1])])],
    Tensor::INDEX_COPY => [sample([f32s(&[3, 2]), Value::Int(1), positions(&[1]), f32s(&[3, 1])])],
    Tensor::INDEX_FILL => [sample([f32s(&[3]), Value::Int(0), positions(&[2]), Value::Tensor(Tensor::scalar(0.5f32))])],
    Tensor::TAKE_ALONG_DIM => [sample([f32s(&[2, 2]), Value::Tensor(Tensor::from_vec(vec![1i64, 0], [1, 2]).expect("indices"))]).kw("dim", 0)],
    Tensor::MASKED_SELECT => [sample([f32s(&[3]), bools(&[3])])],
}
