//! Sorting and selection: `sort`, `argsort`, `msort`, `topk`, `kthvalue` and `median`, all from
//! one stable sort along a dimension (NaN largest, as PyTorch orders it; `topk` selects its `k`
//! before sorting them), the values gathered at the sorted positions so they differentiate as
//! `gather` does.

use crate::error::{Result, bail};
use crate::primitive;
use crate::tensor::{DType, Shape, Tensor, normalize_dim};
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

/// `t` sorted along `dim` (checked): the values and their positions.
fn sorted(func: &str, (name, t): (&str, &Tensor), dim: i64, descending: bool) -> Result<(Tensor, Tensor)> {
    let x = t.data(func, name)?;
    let d = normalize_dim(dim, x.layout.ndim().max(1), func)?;
    primitive::sort(t, d, descending)
}

/// The size of `t`'s dimension `dim` (1 for a 0-d tensor) and the dimension, normalized.
fn extent(func: &str, t: &Tensor, dim: i64) -> Result<(usize, usize)> {
    let shape = t.shape()?;
    let d = normalize_dim(dim, shape.len().max(1), func)?;
    Ok((shape.get(d).copied().unwrap_or(1), d))
}

/// Positions `start..start + len` of `t` along `d` (of a 0-d tensor: itself).
fn first(t: &Tensor, d: usize, start: usize, len: usize) -> Result<Tensor> {
    if t.shape()?.is_empty() { Ok(t.clone()) } else { t.narrow(d as i64, start as i64, len as i64) }
}

/// Sorts `input` along `dim` (`torch.sort`): the values in ascending order (`descending`:
/// the reverse), NaN after every number (before, descending), and each one's position in
/// `input`. Ties keep their order (torchfn's sort is stable whatever `stable` says).
///
/// ```
/// let x = torchfn::tensor([3.0f32, f32::NAN, 1.0, 2.0])?;
/// let (values, indices) = torchfn::sort(&x, -1, false, false)?;
/// assert_eq!(values.to_vec::<f32>()?[..3], [1.0, 2.0, 3.0]);
/// assert_eq!(indices.to_vec::<i64>()?, [2, 3, 0, 1]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn sort(
    input: &Tensor,
    #[default(-1)] dim: i64,
    #[default(false)] descending: bool,
    #[keyword_only]
    #[default(false)]
    stable: bool,
) -> Result<(Tensor, Tensor)> {
    let _ = stable;
    sorted("sort", ("input", input), dim, descending)
}

/// The positions that sort `input` along `dim` (`torch.argsort`): [`sort`]'s indices.
///
/// ```
/// let x = torchfn::tensor([[3i64, 1, 2]])?;
/// assert_eq!(torchfn::argsort(&x, 1, true, false)?.to_vec::<i64>()?, [0, 2, 1]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn argsort(
    input: &Tensor,
    #[default(-1)] dim: i64,
    #[default(false)] descending: bool,
    #[default(false)] stable: bool,
) -> Result<Tensor> {
    let _ = stable;
    Ok(sorted("argsort", ("input", input), dim, descending)?.1)
}

/// `input` sorted along its first dimension (`torch.msort`): [`sort`]'s values for `dim = 0`.
#[torch_function(module = "torchfn")]
pub fn msort(input: &Tensor) -> Result<Tensor> {
    Ok(sorted("msort", ("input", input), 0, false)?.0)
}

fn topk_impl(func: &str, input: &Tensor, k: i64, dim: i64, largest: bool) -> Result<(Tensor, Tensor)> {
    input.data(func, "input")?;
    let (n, d) = extent(func, input, dim)?;
    let k = usize::try_from(k).ok().filter(|&k| k <= n);
    let Some(k) = k else { bail!(Runtime, "{func}(): selected index k out of range") };
    primitive::topk(input, k, d, largest)
}

/// The `k` largest elements along `dim` (`largest = false`: the smallest) and their positions
/// (`torch.topk`), in sorted order (`sorted` is accepted; the result is always sorted).
///
/// ```
/// let x = torchfn::tensor([1.0f32, 5.0, 3.0, 4.0])?;
/// let (values, indices) = torchfn::topk(&x, 2, -1, true, true)?;
/// assert_eq!((values.to_vec::<f32>()?, indices.to_vec::<i64>()?), (vec![5.0, 4.0], vec![1, 3]));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn topk(
    input: &Tensor,
    k: i64,
    #[default(-1)] dim: i64,
    #[default(true)] largest: bool,
    #[default(true)] sorted: bool,
) -> Result<(Tensor, Tensor)> {
    let _ = sorted;
    topk_impl("topk", input, k, dim, largest)
}

/// The `k`-th smallest element along `dim` (from 1) and its position (`torch.kthvalue`), the
/// dimension dropped unless `keepdim`.
///
/// ```
/// let x = torchfn::tensor([[4.0f32, 1.0, 3.0], [9.0, 7.0, 8.0]])?;
/// let (values, indices) = torchfn::kthvalue(&x, 2, 1, false)?;
/// assert_eq!((values.to_vec::<f32>()?, indices.to_vec::<i64>()?), (vec![3.0, 8.0], vec![2, 2]));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn kthvalue(
    input: &Tensor,
    k: i64,
    #[default(-1)] dim: i64,
    #[default(false)] keepdim: bool,
) -> Result<(Tensor, Tensor)> {
    const FUNC: &str = "kthvalue";
    let (n, d) = extent(FUNC, input, dim)?;
    let k = usize::try_from(k).ok().filter(|&k| (1..=n).contains(&k));
    let Some(k) = k else { bail!(Runtime, "{FUNC}(): selected number k out of range for dimension {dim}") };
    let (values, indices) = sorted(FUNC, ("input", input), dim, false)?;
    let pick = |t: &Tensor| -> Result<Tensor> {
        let one = first(t, d, k - 1, 1)?;
        if keepdim || t.shape()?.is_empty() { Ok(one) } else { one.squeeze_dim(d as i64) }
    };
    Ok((pick(&values)?, pick(&indices)?))
}

/// The lower median along `d` of `t` and its position, the dimension kept: NaN (the first
/// one's position) where a lane holds one, as PyTorch's `median`.
fn lower_median(func: &str, t: &Tensor, dim: i64) -> Result<(Tensor, Tensor)> {
    let (n, d) = extent(func, t, dim)?;
    if n == 0 {
        bail!(Index, "{func}(): Expected reduction dim {d} to have non-zero size.");
    }
    let (values, indices) = sorted(func, ("input", t), dim, false)?;
    if t.shape()?.is_empty() {
        return Ok((values, indices));
    }
    // The middle, or where the NaNs (sorted last) begin.
    let nans = t.isnan()?.sum_dim(d as i64, true)?;
    let middle = Tensor::scalar(((n - 1) / 2) as i64);
    let start = Tensor::scalar(n as i64).sub(&nans, 1)?;
    let at = crate::r#where(&nans.gt(&Tensor::scalar(0i64))?, &start, &middle)?;
    let at = at.to(indices.dtype()?, false, false)?;
    Ok((values.gather(d as i64, &at)?, indices.gather(d as i64, &at)?))
}

/// The lower median of all of `input`'s elements (`torch.median`): the middle one of the
/// sorted elements (the lower of the two middle ones for an even count), NaN if any is.
///
/// ```
/// let x = torchfn::tensor([[4.0f32, 1.0], [3.0, 2.0]])?;
/// assert_eq!(torchfn::median(&x)?.item()?.to_f64(), 2.0);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn median(input: &Tensor) -> Result<Tensor> {
    let flat = input.reshape(&[-1])?;
    let (values, _) = lower_median("median", &flat, 0)?;
    values.reshape(&[])
}

/// The lower median along `dim` and its position (`torch.median(input, dim)`), the dimension
/// dropped unless `keepdim`; NaN (and the first NaN's position) in a lane that holds one.
///
/// ```
/// let x = torchfn::tensor([[4.0f32, 1.0, 3.0], [9.0, 7.0, 8.0]])?;
/// let (values, indices) = torchfn::median_dim(&x, 1, false)?;
/// assert_eq!((values.to_vec::<f32>()?, indices.to_vec::<i64>()?), (vec![3.0, 8.0], vec![2, 2]));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(overload_of = MEDIAN)]
pub fn median_dim(input: &Tensor, dim: i64, #[default(false)] keepdim: bool) -> Result<(Tensor, Tensor)> {
    let (values, indices) = lower_median("median", input, dim)?;
    if keepdim || input.shape()?.is_empty() {
        return Ok((values, indices));
    }
    let d = normalize_dim(dim, input.shape()?.len(), "median")? as i64;
    Ok((values.squeeze_dim(d)?, indices.squeeze_dim(d)?))
}

/// How many of `boundaries`' last dimension come before each of `values` (`[..., K]` against
/// `[..., M]`, or `[M]` for all): strictly smaller, or with `right` also equal; a NaN value
/// after every number. (PyTorch's binary search gives NaN boundaries answers that depend on its
/// search path; here they count as after every number.) A comparison of every pair, `O(K M)`,
/// composed of elementwise operations, in the device's index dtype (or int32).
fn positions_in(boundaries: &Tensor, values: &Tensor, right: bool, int32: bool) -> Result<Tensor> {
    let (b, v) = (boundaries.unsqueeze(-2)?, values.unsqueeze(-1)?);
    let before = if right { b.le(&v)? } else { b.lt(&v)? };
    // A NaN value comes after every number (and, with `right`, after every NaN too).
    let nan_value = v.isnan()?;
    let passed = if right { nan_value } else { nan_value.logical_and(&b.isnan()?.logical_not()?)? };
    let before = before.logical_or(&passed)?;
    let dtype = if int32 { crate::tensor::DType::Int32 } else { values.device()?.index_dtype() };
    crate::sum_dim(&before, -1, false)?.to(dtype, false, false)
}

/// The positions at which `values` would be inserted into `sorted_sequence` to keep it sorted
/// (`torch.searchsorted`): along its last dimension (a 1-D sequence serves every value; an
/// N-D one has `values`' leading dimensions), the first such position, or the last with
/// `right` (or `side = "right"`). `sorter` gives the positions that sort an unsorted
/// sequence. int64 positions, or int32 with `out_int32`. Computed by comparing every value with
/// every boundary.
///
/// ```
/// let boundaries = torchfn::tensor([1.0f32, 3.0, 5.0, 7.0])?;
/// let values = torchfn::tensor([3.0f32, 6.0, 9.0])?;
/// let left = torchfn::searchsorted(&boundaries, &values, false, false, None, None)?;
/// assert_eq!(left.to_vec::<i64>()?, [1, 3, 4]);
/// let right = torchfn::searchsorted(&boundaries, &values, false, true, None, None)?;
/// assert_eq!(right.to_vec::<i64>()?, [2, 3, 4]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn searchsorted(
    sorted_sequence: &Tensor,
    input: &Tensor,
    #[keyword_only]
    #[default(false)]
    out_int32: bool,
    #[default(false)] right: bool,
    #[default(None)] side: Option<&str>,
    #[default(None)] sorter: Option<&Tensor>,
) -> Result<Tensor> {
    const FUNC: &str = "searchsorted";
    let right = match side {
        None => right,
        Some("left") if !right => false,
        Some("right") => true,
        Some("left") => {
            bail!(Runtime, "{FUNC}(): side and right can't be set to opposites, got side of left while right was True")
        }
        Some(other) => bail!(Runtime, "{FUNC}(): side can only be 'left' or 'right' but got {other}"),
    };
    let (ss, vs) = (sorted_sequence.shape()?, input.shape()?);
    if ss.is_empty() {
        bail!(Runtime, "{FUNC}(): boundaries tensor should have positive dimension, but got 0 dimension");
    }
    if ss.len() > 1 && (vs.len() != ss.len() || ss[..ss.len() - 1] != vs[..vs.len() - 1]) {
        bail!(
            Runtime,
            "{FUNC}(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and \
             input value tensor must match, but we got boundaries tensor {:?} and input value tensor {:?}",
            &ss[..],
            &vs[..]
        );
    }
    let sequence = match sorter {
        Some(order) => {
            if order.shape()? != ss {
                bail!(
                    Runtime,
                    "{FUNC}(): boundary and sorter must have the same size, but got boundary tensor {:?} and sorter tensor {:?}",
                    &ss[..],
                    &order.shape()?[..]
                );
            }
            sorted_sequence.gather(-1, order)?
        }
        None => sorted_sequence.clone(),
    };
    positions_in(&sequence, input, right, out_int32)
}

/// The bucket of each element of `input` among `boundaries` (1-D, sorted) (`torch.bucketize`):
/// `i` such that `boundaries[i - 1] < x <= boundaries[i]`, or with `right`
/// `boundaries[i - 1] <= x < boundaries[i]`; [`searchsorted`] with the roles of the arguments
/// exchanged.
///
/// ```
/// let boundaries = torchfn::tensor([1.0f32, 3.0, 5.0])?;
/// let x = torchfn::tensor([[0.5f32, 3.0], [4.0, 9.0]])?;
/// assert_eq!(torchfn::bucketize(&x, &boundaries, false, false)?.to_vec::<i64>()?, [0, 1, 2, 3]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn bucketize(
    input: &Tensor,
    boundaries: &Tensor,
    #[keyword_only]
    #[default(false)]
    out_int32: bool,
    #[default(false)] right: bool,
) -> Result<Tensor> {
    if boundaries.shape()?.len() != 1 {
        bail!(
            Runtime,
            "bucketize(): boundaries tensor must be 1 dimension, but got dim({})",
            boundaries.shape()?.len()
        );
    }
    positions_in(boundaries, input, right, out_int32)
}

fn unique_impl(
    func: &str,
    input: &Tensor,
    return_inverse: bool,
    return_counts: bool,
    dim: Option<i64>,
) -> Result<Value> {
    if let Some(dim) = dim {
        return unique_slices(func, input, dim, return_inverse, return_counts);
    }
    let shape = input.shape()?;
    let flat = input.reshape(&[-1])?;
    let n = flat.shape()?[0];
    let (values, order) = sorted(func, ("input", &flat), 0, false)?;
    let index_dtype = order.dtype()?;
    // Where each run of equal values starts (NaN, unequal to itself, is its own run).
    let starts = if n == 0 {
        crate::zeros([0], Some(crate::tensor::DType::Bool), Some(flat.device()?))?
    } else {
        let first = crate::ones([1], Some(crate::tensor::DType::Bool), Some(flat.device()?))?;
        let changed = values.narrow(0, 1, n as i64 - 1)?.ne(&values.narrow(0, 0, n as i64 - 1)?)?;
        crate::cat(&[first, changed], 0)?
    };
    let output = crate::masked_select(&values, &starts)?;
    let mut results = vec![Value::Tensor(output)];
    if return_inverse {
        let run = crate::cumsum(&starts, 0, None)?.sub(&Tensor::scalar(1i64), 1)?.to(index_dtype, false, false)?;
        // The run of the element sorted to position i is that of input element order[i].
        let inverse = if n == 0 { run } else { run.gather(0, &crate::argsort(&order, 0, false, false)?)? };
        results.push(Value::Tensor(inverse.reshape(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>())?));
    }
    if return_counts {
        let first = crate::nonzero(&starts)?.reshape(&[-1])?.to(index_dtype, false, false)?;
        let runs = first.shape()?[0] as i64;
        let counts = if runs == 0 {
            first
        } else {
            let total = crate::full([1], n as i64, Some(index_dtype), Some(flat.device()?))?;
            crate::cat(&[first.narrow(0, 1, runs - 1)?, total], 0)?.sub(&first, 1)?
        };
        results.push(Value::Tensor(counts));
    }
    Ok(if results.len() == 1 { results.remove(0) } else { Value::Tuple(results) })
}

/// [`unique`] along `dim`: the distinct slices of `input` along `dim`, sorted
/// lexicographically (each slice read row-major), with each slice's position among them and
/// how often each occurs. The slices are sorted by a stable sort per element position, the last
/// first, so that the first decides (a radix sort's order); a slice holding NaN is its own.
fn unique_slices(func: &str, input: &Tensor, dim: i64, return_inverse: bool, return_counts: bool) -> Result<Value> {
    let shape = input.shape()?;
    let d = normalize_dim(dim, shape.len().max(1), func)?;
    if shape.iter().enumerate().any(|(k, &n)| n == 0 && k != d) {
        bail!(Runtime, "{func}(): There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
    }
    let n = shape.get(d).copied().unwrap_or(1);
    // One row per slice: `dim` first, the others in order.
    let front: Vec<i64> = std::iter::once(d).chain((0..shape.len()).filter(|&k| k != d)).map(|k| k as i64).collect();
    let moved = input.permute(front.clone())?;
    let rows = moved.reshape(&[n as i64, -1])?;
    let width = rows.shape()?[1];
    let mut order = crate::arange(n as i64, None, Some(input.device()?))?;
    for c in (0..width).rev() {
        let keys = rows.select(1, c as i64)?.index_select(0, &order)?;
        order = order.index_select(0, &crate::argsort(&keys, 0, false, true)?)?;
    }
    let sorted_rows = rows.index_select(0, &order)?;
    let index_dtype = order.dtype()?;
    let starts = if n == 0 {
        crate::zeros([0], Some(DType::Bool), Some(input.device()?))?
    } else {
        let first = crate::ones([1], Some(DType::Bool), Some(input.device()?))?;
        let (later, earlier) = (sorted_rows.narrow(0, 1, n as i64 - 1)?, sorted_rows.narrow(0, 0, n as i64 - 1)?);
        crate::cat(&[first, later.ne(&earlier)?.any_dim(1, false)?], 0)?
    };
    let first = crate::nonzero(&starts)?.reshape(&[-1])?;
    let kept = sorted_rows.index_select(0, &first)?;
    let mut slice_shape: Vec<i64> = moved.shape()?.iter().map(|&k| k as i64).collect();
    slice_shape[0] = first.shape()?[0] as i64;
    // `dim` back in its place: the inverse permutation.
    let mut back = vec![0i64; front.len()];
    for (position, &k) in front.iter().enumerate() {
        back[k as usize] = position as i64;
    }
    let output = kept.reshape(&slice_shape)?.permute(back)?.contiguous()?;
    let mut results = vec![Value::Tensor(output)];
    if return_inverse {
        let run = crate::cumsum(&starts, 0, None)?.sub(&Tensor::scalar(1i64), 1)?.to(index_dtype, false, false)?;
        let inverse = if n == 0 { run } else { run.gather(0, &crate::argsort(&order, 0, false, false)?)? };
        results.push(Value::Tensor(inverse));
    }
    if return_counts {
        let first = first.to(index_dtype, false, false)?;
        let runs = first.shape()?[0] as i64;
        let counts = if runs == 0 {
            first
        } else {
            let total = crate::full([1], n as i64, Some(index_dtype), Some(input.device()?))?;
            crate::cat(&[first.narrow(0, 1, runs - 1)?, total], 0)?.sub(&first, 1)?
        };
        results.push(Value::Tensor(counts));
    }
    Ok(if results.len() == 1 { results.remove(0) } else { Value::Tuple(results) })
}

/// The distinct elements of `input`, sorted (`torch.unique`), and with `return_inverse` each
/// element's position among them (of `input`'s shape), with `return_counts` how often each
/// occurs: a tensor, or a tuple of those asked for, as PyTorch returns them. Each NaN is its
/// own element. `sorted` is accepted (the result is always sorted). With `dim`, the distinct
/// slices along it, sorted lexicographically, the inverse and counts per slice.
/// The count of distinct elements depends on the values, so fake tensors cannot run it.
///
/// ```
/// let x = torchfn::tensor([[3i64, 1], [3, 2]])?;
/// let all = torchfn::unique(&x, true, true, true, None)?;
/// let torchfn::Value::Tuple(parts) = all else { unreachable!() };
/// assert_eq!(parts[0].as_tensor().unwrap().to_vec::<i64>()?, [1, 2, 3]);
/// assert_eq!(parts[1].as_tensor().unwrap().to_vec::<i64>()?, [2, 0, 2, 1]);
/// assert_eq!(parts[2].as_tensor().unwrap().to_vec::<i64>()?, [1, 1, 2]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn unique(
    input: &Tensor,
    #[default(true)] sorted: bool,
    #[default(false)] return_inverse: bool,
    #[default(false)] return_counts: bool,
    #[default(None)] dim: Option<i64>,
) -> Result<Value> {
    let _ = sorted;
    unique_impl("unique", input, return_inverse, return_counts, dim)
}

impl Tensor {
    /// Sorted along `dim`: the method form of [`sort`](crate::sort()).
    #[torch_function]
    pub fn sort(
        &self,
        #[default(-1)] dim: i64,
        #[default(false)] descending: bool,
        #[keyword_only]
        #[default(false)]
        stable: bool,
    ) -> Result<(Tensor, Tensor)> {
        let _ = stable;
        sorted("sort", ("self", self), dim, descending)
    }

    /// The positions that sort `self`: the method form of [`argsort`](crate::argsort()).
    #[torch_function]
    pub fn argsort(
        &self,
        #[default(-1)] dim: i64,
        #[default(false)] descending: bool,
        #[default(false)] stable: bool,
    ) -> Result<Tensor> {
        let _ = stable;
        Ok(sorted("argsort", ("self", self), dim, descending)?.1)
    }

    /// The distinct elements of `self`: the method form of [`unique`](crate::unique()).
    #[torch_function]
    pub fn unique(
        &self,
        #[default(true)] sorted: bool,
        #[default(false)] return_inverse: bool,
        #[default(false)] return_counts: bool,
        #[default(None)] dim: Option<i64>,
    ) -> Result<Value> {
        let _ = sorted;
        unique_impl("unique", self, return_inverse, return_counts, dim)
    }

    /// The `k` largest (or smallest) along `dim`: the method form of [`topk`](crate::topk()).
    #[torch_function]
    pub fn topk(
        &self,
        k: i64,
        #[default(-1)] dim: i64,
        #[default(true)] largest: bool,
        #[default(true)] sorted: bool,
    ) -> Result<(Tensor, Tensor)> {
        let _ = sorted;
        topk_impl("topk", self, k, dim, largest)
    }
}

/// A float32 tensor ascending along its last dimension (with a repeat), as a sample argument.
fn sorted_values(shape: &[usize]) -> Value {
    let n: usize = shape.iter().product();
    let last = *shape.last().expect("a dimension");
    let data: Vec<f32> = (0..n).map(|i| ((i % last) / 2 * 2) as f32 - 1.5 + (i / last) as f32 * 0.25).collect();
    Value::Tensor(Tensor::from_vec(data, Shape::new(shape)).expect("a sample"))
}

/// A float32 tensor with ties and a NaN, as a sample argument.
fn with_ties(shape: &[usize]) -> Value {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| if i == 4 { f32::NAN } else { ((i * 5 + 2) % 4) as f32 - 1.5 }).collect();
    Value::Tensor(Tensor::from_vec(data, Shape::new(shape)).expect("a sample"))
}

crate::samples! {
    SORT => [
        sample([f32s(&[3, 4])]),
        sample([f32s(&[3, 4]), Value::Int(0), Value::Bool(true)]),
        sample([i64s(&[5])]).kw("descending", true),
        sample([with_ties(&[2, 4])]),
    ],
    ARGSORT => [sample([f32s(&[2, 5])]), sample([with_ties(&[6])]).kw("descending", true)],
    MSORT => [sample([f32s(&[4, 2])])],
    TOPK => [sample([f32s(&[2, 5]), Value::Int(2)]), sample([f32s(&[4, 3]), Value::Int(3)]).kw("dim", 0).kw("largest", false)],
    KTHVALUE => [sample([f32s(&[3, 4]), Value::Int(2)]), sample([f32s(&[3, 4]), Value::Int(3), Value::Int(0)]).kw("keepdim", true)],
    MEDIAN => [
        sample([f32s(&[3, 4])]),
        sample([with_ties(&[2, 3])]),
        sample([f32s(&[3, 4]), Value::Int(1)]),
        sample([f32s(&[4, 3]), Value::Int(0), Value::Bool(true)]),
    ],
    SEARCHSORTED => [
        sample([sorted_values(&[5]), f32s(&[2, 3])]),
        sample([sorted_values(&[2, 4]), f32s(&[2, 3])]).kw("right", true).kw("out_int32", true),
    ],
    BUCKETIZE => [sample([f32s(&[2, 3]), sorted_values(&[4])]).kw("right", true)],
    UNIQUE => [
        sample([i64s(&[3, 4])]),
        sample([with_ties(&[2, 4])]).kw("return_inverse", true).kw("return_counts", true),
        sample([with_ties(&[4, 2])]).kw("dim", 1).kw("return_inverse", true).kw("return_counts", true),
    ],
    Tensor::UNIQUE => [sample([i64s(&[6])]).kw("return_counts", true)],
    Tensor::SORT => [sample([f32s(&[4])])],
    Tensor::ARGSORT => [sample([f32s(&[2, 3]), Value::Int(0)])],
    Tensor::TOPK => [sample([f32s(&[6]), Value::Int(3)])],
}
