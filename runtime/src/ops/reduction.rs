//! Reductions: `sum`, `mean`, `prod`, `amax`, `amin`, `all`, `any`, `argmax`, `argmin`, `max`
//! and `min` (three ways each), `logsumexp`, `var`, `std`, and the scans `cumsum`, `cumprod`.
//! A reduction without `dim` reduces every dimension to a zero-dimensional tensor.

use smallvec::SmallVec;

use crate::backend::host::check_dtype;
use crate::backend::{Binary, Reduce, Scan, Unary};
use crate::error::{Result, bail};
use crate::ops::inplace::write_out;
use crate::primitive;
use crate::tensor::{DType, Dense, Dims, ReduceDims, Scalar, Shape, Tensor, normalize_dim};
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
fn kept_shape(shape: &Shape, dims: &[usize]) -> Shape {
    shape.iter().enumerate().map(|(d, &n)| if dims.contains(&d) { 1 } else { n }).collect()
}

fn reduced_shape(shape: &Shape, dims: &[usize]) -> Shape {
    shape.iter().enumerate().filter(|(d, _)| !dims.contains(d)).map(|(_, &n)| n).collect()
}

/// `op` over `dims` of `t`, in `dtype`, keeping the reduced dimensions as size one when asked.
fn reduce(t: &Tensor, dims: &[usize], keepdim: bool, op: Reduce, dtype: DType) -> Result<Tensor> {
    let result = primitive::reduce(t, dims, op, dtype)?;
    if !keepdim {
        return Ok(result);
    }
    primitive::reshape(&result, &kept_shape(&t.data("reduce", "input")?.layout.shape, dims))
}

/// The dtype a sum or product accumulates in: the input's float dtype, int64 for integers and
/// bools, or the `dtype` asked for.
/// A `dtype` asked for must live on the input's device (a GPU without 64-bit types refuses
/// float64), where the default accumulation narrows as the device's tensors do.
fn accumulation(func: &str, x: &Dense, dtype: Option<DType>) -> Result<DType> {
    match dtype {
        Some(dtype) => check_dtype(func, x.device(), dtype).map(|()| dtype),
        None => Ok(if x.dtype.is_floating_point() { x.dtype } else { DType::Int64 }),
    }
}

fn sum_impl(
    func: &str,
    input: (&str, &Tensor),
    dims: Option<&Dims>,
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    let (x, dims) = reduced(func, input, dims)?;
    reduce(input.1, &dims, keepdim, Reduce::Sum, accumulation(func, x, dtype)?)
}

fn prod_impl(
    func: &str,
    input: (&str, &Tensor),
    dim: Option<i64>,
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    let (x, dims) = reduced(func, input, dim.map(Dims::from).as_ref())?;
    reduce(input.1, &dims, keepdim, Reduce::Prod, accumulation(func, x, dtype)?)
}

fn mean_impl(
    func: &str,
    input: (&str, &Tensor),
    dims: Option<&Dims>,
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    // The dtype is checked before the dimensions, as in PyTorch.
    let x = input.1.data(func, input.0)?;
    let dtype = match dtype {
        Some(dtype) => accumulation(func, x, Some(dtype))?,
        None => x.dtype,
    };
    if !dtype.is_floating_point() {
        bail!(
            NotImplemented,
            "{func}(): could not infer output dtype. {} dtype must be either a floating point or complex dtype. Got: {}",
            if dtype == x.dtype { "Input" } else { "Optional" },
            dtype.name()
        );
    }
    let (_, dims) = reduced(func, input, dims)?;
    reduce(input.1, &dims, keepdim, Reduce::Mean, dtype)
}

/// The largest (or smallest) elements over `dims` (every dimension when `None` or empty); the
/// gradient is shared among ties. Reducing everything of an empty tensor is a `RuntimeError`, an
/// empty dimension named in `dims` an `IndexError`, as in PyTorch.
fn extreme_impl(
    func: &str,
    input: (&str, &Tensor),
    dims: Option<&Dims>,
    keepdim: bool,
    largest: bool,
) -> Result<Tensor> {
    let everything = dims.is_none_or(|d| d.as_slice().is_empty());
    let (x, dims) = reduced(func, input, dims)?;
    if everything && x.layout.numel() == 0 {
        bail!(
            Runtime,
            "{func}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim \
             with the 'dim' argument."
        );
    }
    if let Some(&d) = dims.iter().find(|&&d| x.layout.shape[d] == 0) {
        bail!(Index, "{func}(): Expected reduction dim {d} to have non-zero size.");
    }
    let op = if largest { Reduce::Max } else { Reduce::Min };
    reduce(input.1, &dims, keepdim, op, x.dtype)
}

/// The values and positions of the largest (or smallest) elements over `dim` (or everything).
/// Along a dim, the values are gathered at the positions, so their gradient goes to the
/// returned position only (PyTorch's rule for `max(x, dim)`). An empty tensor has no position
/// over everything, nor along an empty `dim` (an `IndexError` each); along another dim it has an
/// empty result.
fn arg_extreme(
    func: &str,
    input: (&str, &Tensor),
    dim: Option<i64>,
    keepdim: bool,
    largest: bool,
) -> Result<(Tensor, Tensor)> {
    let (x, dims) = reduced(func, input, dim.map(Dims::from).as_ref())?;
    if dim.is_none() && x.layout.numel() == 0 {
        bail!(Index, "{func}(): Expected reduction dim to be specified for input.numel() == 0.");
    }
    if let Some(&d) = dims.iter().find(|&&d| x.layout.shape[d] == 0) {
        bail!(Index, "{func}(): Expected reduction dim {d} to have non-zero size.");
    }
    let t = input.1;
    let (value, position) = if largest { (Reduce::Max, Reduce::ArgMax) } else { (Reduce::Min, Reduce::ArgMin) };
    if dim.is_none() || x.layout.ndim() == 0 {
        // Over everything, the position in the lane is the position in the flattened tensor;
        // `keepdim` keeps every dimension as size one.
        let values = reduce(t, &dims, false, value, x.dtype)?;
        let positions = reduce(t, &dims, false, position, x.dtype)?;
        if !keepdim || x.layout.ndim() == 0 {
            return Ok((values, positions));
        }
        let ones = kept_shape(&x.layout.shape, &dims);
        return Ok((primitive::reshape(&values, &ones)?, primitive::reshape(&positions, &ones)?));
    }
    let positions = reduce(t, &dims, true, position, x.dtype)?;
    let values = primitive::gather(t, dims[0], &positions)?;
    if keepdim {
        return Ok((values, positions));
    }
    let shape = reduced_shape(&x.layout.shape, &dims);
    Ok((primitive::reshape(&values, &shape)?, primitive::reshape(&positions, &shape)?))
}

/// A `NotImplementedError` for a bool `input`: PyTorch's `argmax` and `argmin` refuse bools
/// (where `max(input, dim)` takes them), before looking at `dim`.
fn refuse_bool(func: &str, input: &Tensor) -> Result<()> {
    if input.data(func, "input")?.dtype == DType::Bool {
        bail!(NotImplemented, "{func}(): does not support bool input");
    }
    Ok(())
}

/// `t` as `dtype` (itself when it already is).
fn as_float(t: &Tensor, dtype: DType) -> Result<Tensor> {
    if t.dtype()? == dtype { Ok(t.clone()) } else { primitive::copy(t, dtype) }
}

fn logsumexp_impl(func: &str, input: (&str, &Tensor), dims: &Dims, keepdim: bool) -> Result<Tensor> {
    let (x, dims) = reduced(func, input, Some(dims))?;
    let dtype = if x.dtype.is_floating_point() { x.dtype } else { crate::types::get_default_dtype() };
    let shape = x.layout.shape.clone();
    let x = as_float(input.1, dtype)?;
    if dims.iter().any(|&d| shape[d] == 0) {
        let shape = if keepdim { kept_shape(&shape, &dims) } else { reduced_shape(&shape, &dims) };
        return primitive::full(&shape, Scalar::Float(f64::NEG_INFINITY), dtype, x.device()?);
    }
    // The largest element is shifted out first (not where it is infinite); no gradient flows
    // through the shift, which cancels.
    let max = {
        let _no_grad = crate::autograd::no_grad();
        let max = reduce(&x, &dims, true, Reduce::Max, dtype)?;
        let infinite = primitive::unary(&max, Unary::IsInf, dtype, None)?;
        primitive::select(&infinite, &Tensor::scalar(0.0), &max, dtype)?
    };
    let shifted = primitive::binary(&x, &max, Binary::Sub(Scalar::Int(1)), dtype, None)?;
    let exps = primitive::unary(&shifted, Unary::Exp, dtype, None)?;
    let sums = reduce(&exps, &dims, true, Reduce::Sum, dtype)?;
    let logs = primitive::unary(&sums, Unary::Log, dtype, None)?;
    let out = primitive::binary(&logs, &max, Binary::Add(Scalar::Int(1)), dtype, None)?;
    if keepdim { Ok(out) } else { primitive::reshape(&out, &reduced_shape(&shape, &dims)) }
}

fn spread(
    func: &str,
    input: (&str, &Tensor),
    dims: Option<&Dims>,
    correction: f64,
    keepdim: bool,
    root: bool,
) -> Result<Tensor> {
    // The dtype is checked before the dimensions, as in PyTorch.
    let dtype = input.1.data(func, input.0)?.dtype;
    if !dtype.is_floating_point() {
        bail!(NotImplemented, "{func}(): std and var only support floating point dtypes, got {dtype}");
    }
    let (x, dims) = reduced(func, input, dims)?;
    let (t, dtype) = (input.1, x.dtype);
    let n: usize = dims.iter().map(|&d| x.layout.shape[d]).product();
    let mean = reduce(t, &dims, true, Reduce::Mean, dtype)?;
    let deviations = primitive::binary(t, &mean, Binary::Sub(Scalar::Int(1)), dtype, None)?;
    let squares = primitive::unary(&deviations, Unary::Square, dtype, None)?;
    let sums = reduce(&squares, &dims, keepdim, Reduce::Sum, dtype)?;
    let divisor = Tensor::scalar((n as f64 - correction).max(0.0));
    let var = primitive::binary(&sums, &divisor, Binary::Div, dtype, None)?;
    if root { std_root(&var) } else { Ok(var) }
}

/// The square root of a variance, whose gradient and tangent are 0 (not infinite or NaN) where
/// the variance is 0, as PyTorch's `std` of a constant lane.
fn std_root(var: &Tensor) -> Result<Tensor> {
    let dtype = var.dtype()?;
    let records = crate::autograd::meta::requires_grad(var) && crate::autograd::is_grad_enabled();
    let tangent = crate::autograd::forward_ad::level_active() && crate::autograd::forward_ad::tangent(var).is_some();
    if !records && !tangent {
        return primitive::unary(var, Unary::Sqrt, dtype, None);
    }
    // where(v == 0, 0, sqrt(where(v == 0, 1, v))): the same values, and no gradient (rather
    // than an infinite one) through the zero lanes.
    let zero = primitive::binary(var, &Tensor::scalar(0.0), Binary::Eq, dtype, None)?;
    let safe = primitive::select(&zero, &Tensor::scalar(1.0), var, dtype)?;
    let root = primitive::unary(&safe, Unary::Sqrt, dtype, None)?;
    primitive::select(&zero, &Tensor::scalar(0.0), &root, dtype)
}

/// The running sums or products along `dim`, accumulated in `dtype` (see [`accumulation`]). A
/// bool accumulation (`dtype=torch.bool`) is a `NotImplementedError`: PyTorch's CPU kernels have
/// none.
fn cumulative(func: &str, (name, t): (&str, &Tensor), dim: i64, dtype: Option<DType>, product: bool) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let dim = normalize_dim(dim, x.layout.ndim(), func)?;
    let dtype = accumulation(func, x, dtype)?;
    if dtype == DType::Bool {
        bail!(NotImplemented, "{func}(): not implemented for torch.bool results; accumulate in an integer dtype");
    }
    if x.layout.ndim() == 0 {
        return primitive::copy(t, dtype);
    }
    let op = if product { Scan::Prod } else { Scan::Sum };
    primitive::scan(t, dim, op, dtype)
}

/// The sum of all elements, as a zero-dimensional tensor (`torch.sum`). Integer and bool
/// tensors sum to int64.
///
/// ```
/// let t = torchfn::tensor([[1i64, 2], [3, 4]])?;
/// assert_eq!(torchfn::sum(&t)?.item()?, torchfn::Scalar::Int(10));
/// assert_eq!(torchfn::sum_dim(&t, 1, false)?.to_vec::<i64>()?, [3, 7]);
/// // dtype= (torch.sum(t, dtype=torch.float64)), typed and by name
/// assert_eq!(torchfn::sum_dtype(&t, torchfn::DType::Float64)?.item()?, torchfn::Scalar::Float(10.0));
/// let by_name = torchfn::SUM.call(&[t.into()], &torchfn::Kwargs::from([("dtype", torchfn::DType::Float64)]))?;
/// assert_eq!(by_name.to_string(), "tensor(10., dtype=torch.float64)");
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn sum(input: &Tensor) -> Result<Tensor> {
    sum_impl("sum", ("input", input), None, false, None)
}

/// The sums over `dim` (one dimension or several; every one for `None` or an empty list),
/// keeping them as size one with `keepdim` (`torch.sum(input, dim, keepdim)`).
#[torch_function(overload_of = SUM)]
pub fn sum_dim(input: &Tensor, dim: impl Into<ReduceDims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
    sum_impl("sum", ("input", input), dim.into().as_dims(), keepdim, None)
}

/// The mean of all elements (`torch.mean`); floating-point tensors only.
#[torch_function(module = "torchfn")]
pub fn mean(input: &Tensor) -> Result<Tensor> {
    mean_impl("mean", ("input", input), None, false, None)
}

/// The means over `dim` (every dimension for `None` or an empty list)
/// (`torch.mean(input, dim, keepdim)`).
#[torch_function(overload_of = MEAN)]
pub fn mean_dim(input: &Tensor, dim: impl Into<ReduceDims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
    mean_impl("mean", ("input", input), dim.into().as_dims(), keepdim, None)
}

/// The product of all elements (`torch.prod`).
#[torch_function(module = "torchfn")]
pub fn prod(input: &Tensor) -> Result<Tensor> {
    prod_impl("prod", ("input", input), None, false, None)
}

/// The products along `dim` (`torch.prod(input, dim, keepdim)`).
#[torch_function(overload_of = PROD)]
pub fn prod_dim(input: &Tensor, dim: i64, #[default(false)] keepdim: bool) -> Result<Tensor> {
    prod_impl("prod", ("input", input), Some(dim), keepdim, None)
}

/// The `dtype=` and `out=` overloads of a reduction `NAME` (body `$body`, taking the function
/// name, the input, the dimensions, `keepdim` and the dtype): `NAME(input, *, dtype)`,
/// `NAME(input, dim, keepdim=False, *, dtype)` and `NAME(input, dim, keepdim=False, *,
/// dtype=None, out)`, each converting the input to `dtype` first, as PyTorch does; `$dim` is the
/// type of `dim` and `|$d| $dims` what the body gets of it.
macro_rules! dtype_and_out {
    ($handle:ident, $name:literal, $body:ident, $dim:ty, |$d:ident| $dims:expr, $all:ident, $along:ident, $out:ident) => {
        #[doc = concat!("`torch.", $name, "(input, *, dtype)`: over every element, in and as `dtype`.")]
        #[torch_function(overload_of = $handle)]
        pub fn $all(input: &Tensor, #[keyword_only] dtype: impl Into<Option<DType>>) -> Result<Tensor> {
            $body($name, ("input", input), None, false, dtype.into())
        }

        #[doc = concat!("`torch.", $name, "(input, dim, keepdim=False, *, dtype)`: over `dim`, in and as `dtype`.")]
        #[torch_function(overload_of = $handle)]
        pub fn $along(
            input: &Tensor,
            dim: impl Into<$dim>,
            #[default(false)] keepdim: bool,
            #[keyword_only] dtype: impl Into<Option<DType>>,
        ) -> Result<Tensor> {
            let $d: $dim = dim.into();
            $body($name, ("input", input), $dims, keepdim, dtype.into())
        }

        #[doc = concat!("`torch.", $name, "(input, dim, keepdim=False, *, dtype=None, out)`: over `dim` (in `dtype` when given), written into `out`, which must have the result's shape; returns `out`.")]
        #[torch_function(overload_of = $handle)]
        pub fn $out(
            input: &Tensor,
            dim: impl Into<$dim>,
            #[default(false)] keepdim: bool,
            #[keyword_only]
            #[default(None)]
            dtype: impl Into<Option<DType>>,
            out: &Tensor,
        ) -> Result<Tensor> {
            let ($d, dtype): ($dim, _) = (dim.into(), dtype.into());
            write_out($name, out, &[input], || $body($name, ("input", input), $dims, keepdim, dtype))
        }
    };
}

dtype_and_out!(SUM, "sum", sum_impl, ReduceDims, |dim| dim.as_dims(), sum_dtype, sum_dim_dtype, sum_out);
dtype_and_out!(MEAN, "mean", mean_impl, ReduceDims, |dim| dim.as_dims(), mean_dtype, mean_dim_dtype, mean_out);
dtype_and_out!(PROD, "prod", prod_impl, i64, |dim| Some(dim), prod_dtype, prod_dim_dtype, prod_out);

/// The largest elements over `dim` (all dimensions when empty or `None`), NaN propagating
/// (`torch.amax`).
#[torch_function(module = "torchfn")]
pub fn amax(
    input: &Tensor,
    #[default(Vec::<i64>::new())] dim: impl Into<ReduceDims>,
    #[default(false)] keepdim: bool,
) -> Result<Tensor> {
    extreme_impl("amax", ("input", input), dim.into().as_dims(), keepdim, true)
}

/// The smallest elements over `dim` (all dimensions when empty or `None`), NaN propagating
/// (`torch.amin`).
#[torch_function(module = "torchfn")]
pub fn amin(
    input: &Tensor,
    #[default(Vec::<i64>::new())] dim: impl Into<ReduceDims>,
    #[default(false)] keepdim: bool,
) -> Result<Tensor> {
    extreme_impl("amin", ("input", input), dim.into().as_dims(), keepdim, false)
}

/// Whether every element is true (non-zero), as a bool tensor (`torch.all`).
#[torch_function(module = "torchfn")]
pub fn all(input: &Tensor) -> Result<Tensor> {
    all_any("all", ("input", input), None, false, true)
}

/// Whether every element along `dim` is true (`torch.all(input, dim, keepdim)`): over every
/// dimension for `None`, over none for an empty list.
#[torch_function(overload_of = ALL)]
pub fn all_dim(input: &Tensor, dim: impl Into<ReduceDims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
    all_any("all", ("input", input), dim.into().as_dims(), keepdim, true)
}

/// Whether any element is true (non-zero), as a bool tensor (`torch.any`).
#[torch_function(module = "torchfn")]
pub fn any(input: &Tensor) -> Result<Tensor> {
    all_any("any", ("input", input), None, false, false)
}

/// Whether any element along `dim` is true (`torch.any(input, dim, keepdim)`): over every
/// dimension for `None`, over none for an empty list.
#[torch_function(overload_of = ANY)]
pub fn any_dim(input: &Tensor, dim: impl Into<ReduceDims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
    all_any("any", ("input", input), dim.into().as_dims(), keepdim, false)
}

/// `all` or `any` over `dims` (every dimension when `None`); an empty list of dims reduces none,
/// as PyTorch's (unlike `sum`'s): each element made bool.
fn all_any(func: &str, input: (&str, &Tensor), dims: Option<&Dims>, keepdim: bool, every: bool) -> Result<Tensor> {
    let op = if every { Reduce::All } else { Reduce::Any };
    if dims.is_some_and(|d| d.as_slice().is_empty()) {
        input.1.data(func, input.0)?;
        return reduce(input.1, &[], keepdim, op, DType::Bool);
    }
    let (_, dims) = reduced(func, input, dims)?;
    reduce(input.1, &dims, keepdim, op, DType::Bool)
}

/// The position of the first largest element, over everything (flattened) or along `dim`
/// (`torch.argmax`).
#[torch_function(module = "torchfn")]
pub fn argmax(input: &Tensor, #[default(None)] dim: Option<i64>, #[default(false)] keepdim: bool) -> Result<Tensor> {
    refuse_bool("argmax", input)?;
    Ok(arg_extreme("argmax", ("input", input), dim, keepdim, true)?.1)
}

/// The position of the first smallest element (`torch.argmin`).
#[torch_function(module = "torchfn")]
pub fn argmin(input: &Tensor, #[default(None)] dim: Option<i64>, #[default(false)] keepdim: bool) -> Result<Tensor> {
    refuse_bool("argmin", input)?;
    Ok(arg_extreme("argmin", ("input", input), dim, keepdim, false)?.1)
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
    arg_extreme("max", ("input", input), Some(dim), keepdim, true)
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
    arg_extreme("min", ("input", input), Some(dim), keepdim, false)
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
pub fn cumsum(
    input: &Tensor,
    dim: i64,
    #[keyword_only]
    #[default(None)]
    dtype: Option<DType>,
) -> Result<Tensor> {
    cumulative("cumsum", ("input", input), dim, dtype, false)
}

/// The running sums along `dim` (in `dtype` when given) written into `out`
/// (`torch.cumsum(input, dim, *, dtype=None, out)`); returns `out`.
#[torch_function(overload_of = CUMSUM)]
pub fn cumsum_out(
    input: &Tensor,
    dim: i64,
    #[keyword_only]
    #[default(None)]
    dtype: Option<DType>,
    out: &Tensor,
) -> Result<Tensor> {
    write_out("cumsum", out, &[input], || cumulative("cumsum", ("input", input), dim, dtype, false))
}

/// The running products along `dim` (`torch.cumprod`).
#[torch_function(module = "torchfn")]
pub fn cumprod(
    input: &Tensor,
    dim: i64,
    #[keyword_only]
    #[default(None)]
    dtype: Option<DType>,
) -> Result<Tensor> {
    cumulative("cumprod", ("input", input), dim, dtype, true)
}

/// The running products along `dim` (in `dtype` when given) written into `out`
/// (`torch.cumprod(input, dim, *, dtype=None, out)`); returns `out`.
#[torch_function(overload_of = CUMPROD)]
pub fn cumprod_out(
    input: &Tensor,
    dim: i64,
    #[keyword_only]
    #[default(None)]
    dtype: Option<DType>,
    out: &Tensor,
) -> Result<Tensor> {
    write_out("cumprod", out, &[input], || cumulative("cumprod", ("input", input), dim, dtype, true))
}

impl Tensor {
    /// The sum of all elements: the method form of [`sum`](crate::sum()).
    #[torch_function]
    pub fn sum(&self) -> Result<Tensor> {
        sum_impl("sum", ("self", self), None, false, None)
    }

    /// The sums over `dim`: the method form of [`sum_dim`](crate::sum_dim()).
    #[torch_function(overload_of = Tensor::SUM)]
    pub fn sum_dim(&self, dim: impl Into<ReduceDims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
        sum_impl("sum", ("self", self), dim.into().as_dims(), keepdim, None)
    }

    /// The mean of all elements: the method form of [`mean`](crate::mean()).
    #[torch_function]
    pub fn mean(&self) -> Result<Tensor> {
        mean_impl("mean", ("self", self), None, false, None)
    }

    /// The means over `dim`: the method form of [`mean_dim`](crate::mean_dim()).
    #[torch_function(overload_of = Tensor::MEAN)]
    pub fn mean_dim(&self, dim: impl Into<ReduceDims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
        mean_impl("mean", ("self", self), dim.into().as_dims(), keepdim, None)
    }

    /// Whether every element is true: the method form of [`all`](crate::all()).
    #[torch_function]
    pub fn all(&self) -> Result<Tensor> {
        all_any("all", ("self", self), None, false, true)
    }

    /// Whether every element along `dim` is true: the method form of
    /// [`all_dim`](crate::all_dim()).
    #[torch_function(overload_of = Tensor::ALL)]
    pub fn all_dim(&self, dim: impl Into<ReduceDims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
        all_any("all", ("self", self), dim.into().as_dims(), keepdim, true)
    }

    /// Whether any element is true: the method form of [`any`](crate::any()).
    #[torch_function]
    pub fn any(&self) -> Result<Tensor> {
        all_any("any", ("self", self), None, false, false)
    }

    /// Whether any element along `dim` is true: the method form of
    /// [`any_dim`](crate::any_dim()).
    #[torch_function(overload_of = Tensor::ANY)]
    pub fn any_dim(&self, dim: impl Into<ReduceDims>, #[default(false)] keepdim: bool) -> Result<Tensor> {
        all_any("any", ("self", self), dim.into().as_dims(), keepdim, false)
    }
}

crate::samples! {
    SUM => [sample([f32s(&[3, 4])]), sample([bools(&[5])]), sample([f32s(&[2, 3, 2])]).kw("dim", Value::Tuple(vec![0.into(), 2.into()])),
        sample([f32s(&[3, 4]), Value::Int(1)]).kw("keepdim", true), sample([i64s(&[3, 4])]).kw("dtype", Value::DType(DType::Float32)),
        sample([i64s(&[3, 4]), Value::Int(0)]).kw("dtype", Value::DType(DType::Float32))],
    MEAN => [sample([f32s(&[3, 4])]), sample([f32s(&[3, 4]), Value::Int(-1)]),
        sample([i64s(&[3, 4]), Value::Int(1)]).kw("dtype", Value::DType(DType::Float32))],
    PROD => [sample([f32s(&[3, 4])]), sample([i64s(&[2, 3]), Value::Int(0)]),
        sample([i64s(&[2, 3])]).kw("dtype", Value::DType(DType::Float32))],
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
    CUMSUM => [sample([f32s(&[3, 4]), Value::Int(1)]), sample([bools(&[4]), Value::Int(0)]),
        sample([i64s(&[3, 4]), Value::Int(0)]).kw("dtype", Value::DType(DType::Float32))],
    CUMPROD => [sample([f32s(&[3, 4]), Value::Int(0)])],
    Tensor::SUM => [sample([f32s(&[3, 4])]), sample([f32s(&[3, 4]), Value::Int(1)])],
    Tensor::MEAN => [sample([f32s(&[3, 4])]), sample([f32s(&[3, 4])]).kw("dim", 0)],
    Tensor::ALL => [sample([bools(&[2, 3])]), sample([f32s(&[2, 3]), Value::Int(1)]).kw("keepdim", true)],
    Tensor::ANY => [sample([bools(&[2, 3])]), sample([i64s(&[2, 3]), Value::Int(0)])],
}
