//! Reductions: `sum`, `mean`, `prod`, `amax`, `amin`, `all`, `any`, `argmax`, `argmin`, `max`
//! and `min` (three ways each), `logsumexp`, `var`, `std`, and the scans `cumsum`, `cumprod`.
//! A reduction without `dim` reduces every dimension to a zero-dimensional tensor.

use smallvec::SmallVec;

use crate::backend::{Array, Binary, Reduce, Scan, Unary};
use crate::error::{Result, bail};
use crate::tensor::{DType, Dense, Dims, Layout, Scalar, Shape, Tensor, normalize_dim};
use crate::testing::{bools, f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

/// The input's data and the dimensions to reduce: `dims`, or all of them.
fn reduced<'t>(
    func: &str,
    (name, t): (&str, &'t Tensor),
    dims: Option<&Dims>,
) -> Result<(&'t Dense, SmallVec<[usize; 4]>)> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    let dims = match dims {
        Some(dims) if !dims.as_slice().is_empty() => dims.resolve(ndim, func)?,
        _ => (0..ndim).collect(),
    };
    Ok((x, dims))
}

/// The shape of `x` with the `dims` kept as size one.
fn kept_shape(x: &Array, dims: &[usize]) -> Shape {
    x.layout.shape.iter().enumerate().map(|(d, &n)| if dims.contains(&d) { 1 } else { n }).collect()
}

/// A reduction's result (the other dimensions of `x`) with the reduced `dims` kept as size
/// one when `keepdim` asks for them (a view).
fn kept(result: Array, x: &Array, dims: &[usize], keepdim: bool) -> Array {
    if !keepdim {
        return result;
    }
    result.with_layout(Layout::contiguous(kept_shape(x, dims)))
}

/// `op` over `dims` of `x` in `dtype`, with or without the reduced dimensions kept.
fn reduce(x: &Array, dims: &[usize], keepdim: bool, op: Reduce, dtype: DType) -> Result<Array> {
    let result = x.device().backend().reduce(x, dims, op, dtype)?;
    Ok(kept(result, x, dims, keepdim))
}

/// The dtype a sum or product accumulates in: int64 for integers and bools, else the input's
/// (or the one asked for).
fn accumulation(x: &Dense, dtype: Option<DType>) -> DType {
    dtype.unwrap_or(if x.dtype.is_floating_point() { x.dtype } else { DType::Int64 })
}

fn sum_impl(func: &str, input: (&str, &Tensor), dims: Option<&Dims>, keepdim: bool) -> Result<Tensor> {
    let (x, dims) = reduced(func, input, dims)?;
    Ok(Tensor::from_array(reduce(x, &dims, keepdim, Reduce::Sum, accumulation(x, None))?))
}

fn prod_impl(func: &str, input: (&str, &Tensor), dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
    let (x, dims) = reduced(func, input, dim.map(Dims::from).as_ref())?;
    Ok(Tensor::from_array(reduce(x, &dims, keepdim, Reduce::Prod, accumulation(x, None))?))
}

fn mean_impl(func: &str, input: (&str, &Tensor), dims: Option<&Dims>, keepdim: bool) -> Result<Tensor> {
    let (x, dims) = reduced(func, input, dims)?;
    if !x.dtype.is_floating_point() {
        bail!(
            NotImplemented,
            "{func}(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}",
            x.dtype.name()
        );
    }
    Ok(Tensor::from_array(reduce(x, &dims, keepdim, Reduce::Mean, x.dtype)?))
}

/// `amax` (`largest`) or `amin`: NaN propagates, as in PyTorch.
fn extreme_impl(
    func: &str,
    input: (&str, &Tensor),
    dims: Option<&Dims>,
    keepdim: bool,
    largest: bool,
) -> Result<Tensor> {
    let (x, dims) = reduced(func, input, dims)?;
    if let Some(&d) = dims.iter().find(|&&d| x.layout.shape[d] == 0) {
        bail!(Index, "{func}(): Expected reduction dim {d} to have non-zero size.");
    }
    let op = if largest { Reduce::Max } else { Reduce::Min };
    Ok(Tensor::from_array(reduce(x, &dims, keepdim, op, x.dtype)?))
}

/// The positions (`argmax`/`argmin`), or the values and positions (`max(dim)`/`min(dim)`), of
/// the extreme elements along `dim`, or over everything.
fn arg_extreme(
    func: &str,
    input: (&str, &Tensor),
    dim: Option<i64>,
    keepdim: bool,
    largest: bool,
) -> Result<(Array, Array)> {
    let (x, dims) = reduced(func, input, dim.map(Dims::from).as_ref())?;
    if x.layout.numel() == 0 || dims.iter().any(|&d| x.layout.shape[d] == 0) {
        bail!(Index, "{func}(): Expected reduction dim to be specified for input.numel() == 0.");
    }
    let keepdim = keepdim && dim.is_some();
    let (value, position) = if largest { (Reduce::Max, Reduce::ArgMax) } else { (Reduce::Min, Reduce::ArgMin) };
    // Over everything, the position in the lane is the position in the flattened tensor.
    Ok((reduce(x, &dims, keepdim, value, x.dtype)?, reduce(x, &dims, keepdim, position, x.dtype)?))
}

/// `x` as the floating-point dtype `dtype` (a copy only when it is of another dtype).
fn as_float(x: &Array, dtype: DType) -> Result<Array> {
    if x.dtype == dtype { Ok(x.clone()) } else { x.device().backend().copy(x, dtype) }
}

/// A zero-dimensional host array holding `value`: a number operand of a kernel.
pub(crate) fn number(value: impl Into<Scalar>) -> Array {
    Dense::number(value).array
}

/// `log(sum(exp(x)))` over `dims`, stably: the lane's maximum (0 where it is infinite) comes
/// out first, `m + log(sum(exp(x - m)))`. An empty lane gives `-inf`.
fn logsumexp_impl(func: &str, input: (&str, &Tensor), dims: &Dims, keepdim: bool) -> Result<Tensor> {
    let (x, dims) = reduced(func, input, Some(dims))?;
    let dtype = if x.dtype.is_floating_point() { x.dtype } else { DType::DEFAULT_FLOAT };
    let backend = x.device().backend();
    let x = as_float(x, dtype)?;
    if dims.iter().any(|&d| x.layout.shape[d] == 0) {
        let shape = if keepdim { kept_shape(&x, &dims) } else { reduced_shape(&x, &dims) };
        return Ok(Tensor::from_array(backend.fill(x.device(), &shape, Scalar::Float(f64::NEG_INFINITY), dtype)?));
    }
    let max = reduce(&x, &dims, true, Reduce::Max, dtype)?;
    let infinite = backend.unary(&max, Unary::IsInf, dtype, None)?;
    let shift = backend.select(&infinite, &number(0.0), &max, &max.layout.shape, dtype)?;
    let shifted = backend.binary(&x, &shift, &x.layout.shape, Binary::Sub(Scalar::Int(1)), dtype, None)?;
    let exps = backend.unary(&shifted, Unary::Exp, dtype, None)?;
    let sums = reduce(&exps, &dims, true, Reduce::Sum, dtype)?;
    let logs = backend.unary(&sums, Unary::Log, dtype, None)?;
    let out = backend.binary(&logs, &shift, &logs.layout.shape, Binary::Add(Scalar::Int(1)), dtype, None)?;
    Ok(Tensor::from_array(if keepdim { out } else { out.with_layout(Layout::contiguous(reduced_shape(&out, &dims))) }))
}

/// The shape of `x` without the `dims`.
fn reduced_shape(x: &Array, dims: &[usize]) -> Shape {
    x.layout.shape.iter().enumerate().filter(|(d, _)| !dims.contains(d)).map(|(_, &n)| n).collect()
}

/// `var` (`root` false) or `std`, dividing by `n - correction` (clamped at 0): the mean comes
/// out first, then the squared deviations are summed.
fn spread(
    func: &str,
    input: (&str, &Tensor),
    dims: Option<&Dims>,
    correction: f64,
    keepdim: bool,
    root: bool,
) -> Result<Tensor> {
    let (x, dims) = reduced(func, input, dims)?;
    if !x.dtype.is_floating_point() {
        bail!(Runtime, "{func}(): expected a floating point input, got {}", x.dtype);
    }
    let (backend, dtype) = (x.device().backend(), x.dtype);
    let n: usize = dims.iter().map(|&d| x.layout.shape[d]).product();
    let mean = reduce(x, &dims, true, Reduce::Mean, dtype)?;
    let deviations = backend.binary(x, &mean, &x.layout.shape, Binary::Sub(Scalar::Int(1)), dtype, None)?;
    let squares = backend.unary(&deviations, Unary::Square, dtype, None)?;
    let sums = reduce(&squares, &dims, keepdim, Reduce::Sum, dtype)?;
    let divisor = number((n as f64 - correction).max(0.0));
    let var = backend.binary(&sums, &divisor, &sums.layout.shape, Binary::Div, dtype, None)?;
    Ok(Tensor::from_array(if root { backend.unary(&var, Unary::Sqrt, dtype, None)? } else { var }))
}

/// `cumsum` (`product` false) or `cumprod` along `dim`.
fn cumulative(func: &str, (name, t): (&str, &Tensor), dim: i64, dtype: Option<DType>, product: bool) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let backend = x.device().backend();
    let dim = normalize_dim(dim, x.layout.ndim(), func)?;
    if x.layout.ndim() == 0 {
        return Ok(Tensor::from_array(backend.copy(x, accumulation(x, dtype))?));
    }
    let op = if product { Scan::Prod } else { Scan::Sum };
    // A bool result (`dtype=torch.bool`) is the int64 scan of the input as bools, made bool:
    // a running "or" for sums, a running "and" for products, as in PyTorch.
    let array = match accumulation(x, dtype) {
        DType::Bool => {
            let bools = backend.copy(x, DType::Bool)?;
            backend.copy(&backend.scan(&bools, dim, op, DType::Int64)?, DType::Bool)?
        }
        dtype => backend.scan(x, dim, op, dtype)?,
    };
    Ok(Tensor::from_array(array))
}

fn pair(values: Array, indices: Array) -> (Tensor, Tensor) {
    (Tensor::from_array(values), Tensor::from_array(indices))
}

/// The sum of all elements, as a zero-dimensional tensor (`torch.sum`). Integer and bool
/// tensors sum to int64.
///
/// ```
/// let t = torchfn::tensor([[1i64, 2], [3, 4]])?;
/// assert_eq!(torchfn::sum(&t)?.item()?, torchfn::Scalar::Int(10));
/// assert_eq!(torchfn::sum_dim(&t, 1, false)?.to_vec::<i64>()?, [3, 7]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn sum(input: &Tensor) -> Result<Tensor> {
    sum_impl("sum", ("input", input), None, false)
}

/// The sums over `dim` (one dimension or several), keeping them as size one with `keepdim`
/// (`torch.sum(input, dim, keepdim)`).
#[torch_function(overload_of = SUM)]
pub fn sum_dim(input: &Tensor, dim: impl Into<Dims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
    sum_impl("sum", ("input", input), Some(&dim.into()), keepdim)
}

/// The mean of all elements (`torch.mean`); floating-point tensors only.
#[torch_function(module = "torchfn")]
pub fn mean(input: &Tensor) -> Result<Tensor> {
    mean_impl("mean", ("input", input), None, false)
}

/// The means over `dim` (`torch.mean(input, dim, keepdim)`).
#[torch_function(overload_of = MEAN)]
pub fn mean_dim(input: &Tensor, dim: impl Into<Dims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
    mean_impl("mean", ("input", input), Some(&dim.into()), keepdim)
}

/// The product of all elements (`torch.prod`).
#[torch_function(module = "torchfn")]
pub fn prod(input: &Tensor) -> Result<Tensor> {
    prod_impl("prod", ("input", input), None, false)
}

/// The products along `dim` (`torch.prod(input, dim, keepdim)`).
#[torch_function(overload_of = PROD)]
pub fn prod_dim(input: &Tensor, dim: i64, #[default(false)] keepdim: bool) -> Result<Tensor> {
    prod_impl("prod", ("input", input), Some(dim), keepdim)
}

/// The largest elements over `dim` (all dimensions when empty), NaN propagating (`torch.amax`).
#[torch_function(module = "torchfn")]
pub fn amax(
    input: &Tensor,
    #[default(Vec::<i64>::new())] dim: impl Into<Dims>,
    #[default(false)] keepdim: bool,
) -> Result<Tensor> {
    extreme_impl("amax", ("input", input), Some(&dim.into()), keepdim, true)
}

/// The smallest elements over `dim` (all dimensions when empty), NaN propagating (`torch.amin`).
#[torch_function(module = "torchfn")]
pub fn amin(
    input: &Tensor,
    #[default(Vec::<i64>::new())] dim: impl Into<Dims>,
    #[default(false)] keepdim: bool,
) -> Result<Tensor> {
    extreme_impl("amin", ("input", input), Some(&dim.into()), keepdim, false)
}

/// Whether every element is true (non-zero), as a bool tensor (`torch.all`).
#[torch_function(module = "torchfn")]
pub fn all(input: &Tensor) -> Result<Tensor> {
    all_any("all", ("input", input), None, false, true)
}

/// Whether every element along `dim` is true (`torch.all(input, dim, keepdim)`).
#[torch_function(overload_of = ALL)]
pub fn all_dim(input: &Tensor, dim: impl Into<Dims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
    all_any("all", ("input", input), Some(&dim.into()), keepdim, true)
}

/// Whether any element is true (non-zero), as a bool tensor (`torch.any`).
#[torch_function(module = "torchfn")]
pub fn any(input: &Tensor) -> Result<Tensor> {
    all_any("any", ("input", input), None, false, false)
}

/// Whether any element along `dim` is true (`torch.any(input, dim, keepdim)`).
#[torch_function(overload_of = ANY)]
pub fn any_dim(input: &Tensor, dim: impl Into<Dims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
    all_any("any", ("input", input), Some(&dim.into()), keepdim, false)
}

fn all_any(func: &str, input: (&str, &Tensor), dims: Option<&Dims>, keepdim: bool, every: bool) -> Result<Tensor> {
    let (x, dims) = reduced(func, input, dims)?;
    let op = if every { Reduce::All } else { Reduce::Any };
    Ok(Tensor::from_array(reduce(x, &dims, keepdim, op, DType::Bool)?))
}

/// The position of the first largest element, over everything (flattened) or along `dim`
/// (`torch.argmax`).
#[torch_function(module = "torchfn")]
pub fn argmax(input: &Tensor, #[default(None)] dim: Option<i64>, #[default(false)] keepdim: bool) -> Result<Tensor> {
    Ok(Tensor::from_array(arg_extreme("argmax", ("input", input), dim, keepdim, true)?.1))
}

/// The position of the first smallest element (`torch.argmin`).
#[torch_function(module = "torchfn")]
pub fn argmin(input: &Tensor, #[default(None)] dim: Option<i64>, #[default(false)] keepdim: bool) -> Result<Tensor> {
    Ok(Tensor::from_array(arg_extreme("argmin", ("input", input), dim, keepdim, false)?.1))
}

/// The largest element (`torch.max(input)`); see [`max_dim`] and [`max_other`].
#[torch_function(module = "torchfn")]
pub fn max(input: &Tensor) -> Result<Tensor> {
    extreme_impl("max", ("input", input), None, false, true)
}

/// The largest elements along `dim` and their positions, as `(values, indices)`
/// (`torch.max(input, dim, keepdim)`).
#[torch_function(overload_of = MAX)]
pub fn max_dim(input: &Tensor, dim: i64, #[default(false)] keepdim: bool) -> Result<(Tensor, Tensor)> {
    let (values, indices) = arg_extreme("max", ("input", input), Some(dim), keepdim, true)?;
    Ok(pair(values, indices))
}

/// The elementwise maximum of two tensors (`torch.max(input, other)`, as `torch.maximum`).
#[torch_function(overload_of = MAX)]
pub fn max_other(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    crate::maximum(input, other)
}

/// The smallest element (`torch.min(input)`); see [`min_dim`] and [`min_other`].
#[torch_function(module = "torchfn")]
pub fn min(input: &Tensor) -> Result<Tensor> {
    extreme_impl("min", ("input", input), None, false, false)
}

/// The smallest elements along `dim` and their positions, as `(values, indices)`
/// (`torch.min(input, dim, keepdim)`).
#[torch_function(overload_of = MIN)]
pub fn min_dim(input: &Tensor, dim: i64, #[default(false)] keepdim: bool) -> Result<(Tensor, Tensor)> {
    let (values, indices) = arg_extreme("min", ("input", input), Some(dim), keepdim, false)?;
    Ok(pair(values, indices))
}

/// The elementwise minimum of two tensors (`torch.min(input, other)`, as `torch.minimum`).
#[torch_function(overload_of = MIN)]
pub fn min_other(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    crate::minimum(input, other)
}

/// `log(sum(exp(input)))` over `dim`, computed stably (`torch.logsumexp`).
#[torch_function(module = "torchfn")]
pub fn logsumexp(input: &Tensor, dim: impl Into<Dims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
    logsumexp_impl("logsumexp", ("input", input), &dim.into(), keepdim)
}

/// The variance over `dim` (all when `None`), dividing by `n - correction` (`torch.var`).
#[torch_function(module = "torchfn")]
pub fn var(
    input: &Tensor,
    #[default(None)] dim: Option<Dims>,
    #[default(1)] correction: impl Into<Scalar>,
    #[default(false)] keepdim: bool,
) -> Result<Tensor> {
    spread("var", ("input", input), dim.as_ref(), correction.into().to_f64(), keepdim, false)
}

/// The standard deviation over `dim`, dividing by `n - correction` (`torch.std`).
#[torch_function(module = "torchfn")]
pub fn std(
    input: &Tensor,
    #[default(None)] dim: Option<Dims>,
    #[default(1)] correction: impl Into<Scalar>,
    #[default(false)] keepdim: bool,
) -> Result<Tensor> {
    spread("std", ("input", input), dim.as_ref(), correction.into().to_f64(), keepdim, true)
}

/// The running sums along `dim` (`torch.cumsum`); integers and bools accumulate in int64.
#[torch_function(module = "torchfn")]
pub fn cumsum(input: &Tensor, dim: i64, #[default(None)] dtype: Option<DType>) -> Result<Tensor> {
    cumulative("cumsum", ("input", input), dim, dtype, false)
}

/// The running products along `dim` (`torch.cumprod`).
#[torch_function(module = "torchfn")]
pub fn cumprod(input: &Tensor, dim: i64, #[default(None)] dtype: Option<DType>) -> Result<Tensor> {
    cumulative("cumprod", ("input", input), dim, dtype, true)
}

impl Tensor {
    /// The sum of all elements: the method form of [`sum`](crate::sum()).
    #[torch_function]
    pub fn sum(&self) -> Result<Tensor> {
        sum_impl("sum", ("self", self), None, false)
    }

    /// The sums over `dim`: the method form of [`sum_dim`](crate::sum_dim()).
    #[torch_function(overload_of = Tensor::SUM)]
    pub fn sum_dim(&self, dim: impl Into<Dims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
        sum_impl("sum", ("self", self), Some(&dim.into()), keepdim)
    }

    /// The mean of all elements: the method form of [`mean`](crate::mean()).
    #[torch_function]
    pub fn mean(&self) -> Result<Tensor> {
        mean_impl("mean", ("self", self), None, false)
    }

    /// The means over `dim`: the method form of [`mean_dim`](crate::mean_dim()).
    #[torch_function(overload_of = Tensor::MEAN)]
    pub fn mean_dim(&self, dim: impl Into<Dims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
        mean_impl("mean", ("self", self), Some(&dim.into()), keepdim)
    }
}

crate::samples! {
    SUM => [sample([f32s(&[3, 4])]), sample([bools(&[5])]), sample([f32s(&[2, 3, 2])]).kw("dim", Value::Tuple(vec![0.into(), 2.into()])),
        sample([f32s(&[3, 4]), Value::Int(1)]).kw("keepdim", true)],
    MEAN => [sample([f32s(&[3, 4])]), sample([f32s(&[3, 4]), Value::Int(-1)])],
    PROD => [sample([f32s(&[3, 4])]), sample([i64s(&[2, 3]), Value::Int(0)])],
    AMAX => [sample([f32s(&[3, 4])]).kw("dim", 1)],
    AMIN => [sample([f32s(&[3, 4])]).kw("dim", 0).kw("keepdim", true)],
    ALL => [sample([bools(&[2, 3])]), sample([bools(&[2, 3]), Value::Int(1)])],
    ANY => [sample([bools(&[2, 3])]), sample([bools(&[2, 3]), Value::Int(0)])],
    ARGMAX => [sample([f32s(&[3, 4])]), sample([f32s(&[3, 4])]).kw("dim", 0)],
    ARGMIN => [sample([f32s(&[3, 4])]).kw("dim", 1).kw("keepdim", true)],
    MAX => [sample([f32s(&[3, 4])]), sample([f32s(&[3, 4]), Value::Int(1)]), sample([f32s(&[3, 4]), f32s(&[4])])],
    MIN => [sample([f32s(&[3, 4])]), sample([f32s(&[3, 4]), Value::Int(0)]), sample([f32s(&[3, 4]), f32s(&[3, 4])])],
    LOGSUMEXP => [sample([f32s(&[3, 4]), Value::Int(1)])],
    VAR => [sample([f32s(&[3, 4])]), sample([f32s(&[3, 4])]).kw("dim", 1).kw("correction", 0)],
    STD => [sample([f32s(&[3, 4])]).kw("dim", 0)],
    CUMSUM => [sample([f32s(&[3, 4]), Value::Int(1)]), sample([bools(&[4]), Value::Int(0)])],
    CUMPROD => [sample([f32s(&[3, 4]), Value::Int(0)])],
    Tensor::SUM => [sample([f32s(&[3, 4])]), sample([f32s(&[3, 4]), Value::Int(1)])],
    Tensor::MEAN => [sample([f32s(&[3, 4])]), sample([f32s(&[3, 4])]).kw("dim", 0)],
}
