//! Indexing and rearranging copies: `index_select`, `gather`, `flip`, `roll`, `repeat`,
//! `tril` and `triu`. Each returns a tensor with its own storage.

use crate::cpu;
use crate::error::{Result, bail};
use crate::tensor::{DType, Dense, Dims, Layout, Shape, Tensor, normalize_dim, with_dtype};
use crate::testing::{bools, f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

use super::IntList;

fn index_select_impl(func: &str, (name, t): (&str, &Tensor), dim: i64, index: &Tensor) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let idx = index.data(func, "index")?;
    if idx.layout.ndim() > 1 {
        bail!(Index, "{func}(): Index is supposed to be a vector, but it has {} dimensions", idx.layout.ndim());
    }
    if !matches!(idx.dtype, DType::Int64 | DType::Int32) {
        bail!(Runtime, "{func}(): Expected dtype int32 or int64 for index, but got {}", idx.dtype);
    }
    let ndim = x.layout.ndim();
    let d = normalize_dim(dim, ndim, func)?;
    let positions: Vec<i64> = cpu::read_as(idx, |v: ndarray::ArrayViewD<'_, i64>| v.iter().copied().collect());
    let size = if ndim == 0 { 1 } else { x.layout.shape[d] };
    if ndim == 0 && positions.len() != 1 {
        bail!(Runtime, "{func}(): Index to scalar can have only 1 value, got {} value(s)", positions.len());
    }
    let positions =
        positions.iter().map(|&p| usize::try_from(p).ok().filter(|&p| p < size)).collect::<Option<Vec<usize>>>();
    let Some(positions) = positions else {
        bail!(Index, "{func}(): index out of range in self (dimension {d} has size {size})");
    };
    if ndim == 0 {
        return Ok(Tensor::from_dense(cpu::copy(func, x)?));
    }
    Ok(Tensor::from_dense(with_dtype!(x.dtype, T => cpu::index_select::<T>(func, x, d, &positions)?)))
}

/// `dense` seen as one-dimensional when it has no dimension (a view of its one element).
fn at_least_1d(dense: &Dense) -> Dense {
    if dense.layout.ndim() > 0 {
        return dense.clone();
    }
    Dense {
        layout: Layout { shape: Shape::from([1]), strides: [1].into_iter().collect(), offset: dense.layout.offset },
        ..dense.clone()
    }
}

fn gather_impl(func: &str, (name, t): (&str, &Tensor), dim: i64, index: &Tensor) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let idx = index.data(func, "index")?;
    if idx.dtype != DType::Int64 {
        bail!(Runtime, "{func}(): Expected dtype int64 for index, but got {}", idx.dtype);
    }
    let d = normalize_dim(dim, x.layout.ndim(), func)?;
    let (input, indices) = (at_least_1d(x), at_least_1d(idx));
    let (xs, is) = (&input.layout.shape, &indices.layout.shape);
    if xs.len() != is.len() {
        bail!(
            Runtime,
            "{func}(): Index tensor must have the same number of dimensions as input tensor ({} and {})",
            idx.layout.ndim(),
            x.layout.ndim()
        );
    }
    if let Some(k) = (0..xs.len()).find(|&k| k != d && is[k] > xs[k]) {
        bail!(
            Runtime,
            "{func}(): Size does not match at dimension {k} expected index {:?} to be no larger than self {:?} apart \
             from dimension {d}",
            idx.layout.shape.as_ref(),
            x.layout.shape.as_ref()
        );
    }
    let out = with_dtype!(x.dtype, T => cpu::gather::<T>(func, &input, d, &indices)?);
    // The result has the index's shape (zero-dimensional for a zero-dimensional index).
    Ok(Tensor::from_dense(Dense { layout: Layout::contiguous(idx.layout.shape.clone()), ..out }))
}

fn flip_impl(func: &str, (name, t): (&str, &Tensor), dims: &Dims) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let mut dims = dims.resolve(x.layout.ndim(), func)?;
    if x.layout.ndim() == 0 {
        dims.clear();
    }
    Ok(Tensor::from_dense(with_dtype!(x.dtype, T => cpu::flip::<T>(func, x, &dims)?)))
}

fn roll_impl(func: &str, (name, t): (&str, &Tensor), shifts: &[i64], dims: Option<&[i64]>) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let dims = dims.unwrap_or_default();
    if shifts.is_empty() {
        bail!(Runtime, "{func}(): `shifts` required");
    }
    if dims.is_empty() && shifts.len() == 1 {
        // Rolled as one flat sequence, then given its shape back.
        let flat = Dense { layout: Layout::contiguous(Shape::from([x.layout.numel()])), ..cpu::copy(func, x)? };
        let rolled = with_dtype!(x.dtype, T => cpu::roll::<T>(func, &flat, shifts, &[0])?);
        return Ok(Tensor::from_dense(Dense { layout: Layout::contiguous(x.layout.shape.clone()), ..rolled }));
    }
    if shifts.len() != dims.len() {
        bail!(Runtime, "{func}(): shifts and dimensions must align. shifts: {}, dims:{}", shifts.len(), dims.len());
    }
    let ndim = x.layout.ndim();
    let dims = dims.iter().map(|&d| normalize_dim(d, ndim, func)).collect::<Result<Vec<usize>>>()?;
    if ndim == 0 {
        return Ok(Tensor::from_dense(cpu::copy(func, x)?));
    }
    Ok(Tensor::from_dense(with_dtype!(x.dtype, T => cpu::roll::<T>(func, x, shifts, &dims)?)))
}

fn repeat_impl(func: &str, (name, t): (&str, &Tensor), repeats: &[i64]) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    if repeats.len() < ndim {
        bail!(
            Runtime,
            "{func}(): Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor \
             ({} < {ndim})",
            repeats.len()
        );
    }
    if let Some(r) = repeats.iter().find(|&&r| r < 0) {
        bail!(Runtime, "{func}(): Trying to create tensor with negative dimension {r}: {repeats:?}");
    }
    // The input padded with leading dimensions of size one, then each dimension `(n, s)` seen
    // as two, `(r, 0)` and `(n, s)`: reading that layout in order gives the repeated tensor.
    let leading = repeats.len() - ndim;
    let mut dims = Vec::with_capacity(2 * repeats.len());
    let mut shape = Vec::with_capacity(repeats.len());
    for (i, &r) in repeats.iter().enumerate() {
        let (n, s) = i.checked_sub(leading).map_or((1, 0), |d| (x.layout.shape[d], x.layout.strides[d]));
        let r = r as usize;
        dims.extend([(r, 0), (n, s)]);
        shape.push(r.checked_mul(n));
    }
    let shape: Option<Vec<usize>> = shape.into_iter().collect();
    let bytes = shape
        .as_ref()
        .and_then(|s| s.iter().filter(|&&d| d != 0).try_fold(x.dtype.itemsize(), |b, &d| b.checked_mul(d)));
    let (Some(shape), Some(bytes)) = (shape, bytes) else {
        bail!(Runtime, "{func}(): the repeated tensor has more elements than memory can hold");
    };
    if bytes > isize::MAX as usize {
        bail!(Runtime, "{func}(): the repeated tensor has more elements than memory can hold");
    }
    let (sizes, strides): (Vec<usize>, Vec<usize>) = dims.into_iter().unzip();
    let tiled = Layout { shape: Shape::from(sizes), strides: strides.into_iter().collect(), offset: x.layout.offset };
    let copy = cpu::copy(func, &Dense { layout: tiled, ..x.clone() })?;
    Ok(Tensor::from_dense(Dense { layout: Layout::contiguous(Shape::from(shape)), ..copy }))
}

fn triangle_impl(func: &str, (name, t): (&str, &Tensor), diagonal: i64, lower: bool) -> Result<Tensor> {
    let x = t.data(func, name)?;
    if x.layout.ndim() < 2 {
        bail!(Runtime, "{func}(): input tensor must have at least 2 dimensions, but it has {}", x.layout.ndim());
    }
    Ok(Tensor::from_dense(with_dtype!(x.dtype, T => cpu::triangle::<T>(func, x, diagonal, lower)?)))
}

/// The positions `index` (a vector of int64 or int32, each in range) of dimension `dim`, in
/// that order, repeats allowed (`torch.index_select`). A copy.
///
/// ```
/// let t = torchfn::tensor([[1i64, 2, 3], [4, 5, 6]])?;
/// let idx = torchfn::tensor([2i64, 0, 0])?;
/// assert_eq!(torchfn::index_select(&t, 1, &idx)?.to_vec::<i64>()?, [3, 1, 1, 6, 4, 4]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn index_select(input: &Tensor, dim: i64, index: &Tensor) -> Result<Tensor> {
    index_select_impl("index_select", ("input", input), dim, index)
}

/// The elements of `input` picked along `dim` by the int64 `index`, of the same number of
/// dimensions (`torch.gather`): for `dim = 1`, `out[i][j] = input[i][index[i][j]]`. The result
/// has the index's shape.
///
/// ```
/// let t = torchfn::tensor([[1i64, 2], [3, 4]])?;
/// let idx = torchfn::tensor([[0i64, 0], [1, 0]])?;
/// assert_eq!(torchfn::gather(&t, 1, &idx)?.to_vec::<i64>()?, [1, 1, 4, 3]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn gather(input: &Tensor, dim: i64, index: &Tensor) -> Result<Tensor> {
    gather_impl("gather", ("input", input), dim, index)
}

/// A copy with the order of positions reversed along each of `dims` (`torch.flip`).
///
/// ```
/// let t = torchfn::tensor([[1i64, 2], [3, 4]])?;
/// assert_eq!(torchfn::flip(&t, [0, 1])?.to_vec::<i64>()?, [4, 3, 2, 1]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn flip(input: &Tensor, dims: impl Into<Dims>) -> Result<Tensor> {
    flip_impl("flip", ("input", input), &dims.into())
}

/// A copy with positions moved `shifts` places forward along `dims`, wrapping around
/// (`torch.roll`); without `dims`, the tensor rolls as one flat sequence and keeps its shape.
///
/// ```
/// let t = torchfn::tensor([[1i64, 2, 3], [4, 5, 6]])?;
/// assert_eq!(torchfn::roll(&t, 1, None)?.to_vec::<i64>()?, [6, 1, 2, 3, 4, 5]);
/// assert_eq!(torchfn::roll(&t, 1, Some(1.into()))?.to_vec::<i64>()?, [3, 1, 2, 6, 4, 5]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn roll(input: &Tensor, shifts: impl Into<IntList>, #[default(None)] dims: Option<IntList>) -> Result<Tensor> {
    roll_impl("roll", ("input", input), shifts.into().as_slice(), dims.as_ref().map(IntList::as_slice))
}

/// The lower triangle of each matrix of the last two dimensions, the rest zeroed
/// (`torch.tril`): element `(i, j)` is kept when `j - i <= diagonal`.
///
/// ```
/// let t = torchfn::ones([2, 3], torchfn::DType::Int64)?;
/// assert_eq!(torchfn::tril(&t, 0)?.to_vec::<i64>()?, [1, 0, 0, 1, 1, 0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn tril(input: &Tensor, #[default(0)] diagonal: i64) -> Result<Tensor> {
    triangle_impl("tril", ("input", input), diagonal, true)
}

/// The upper triangle of each matrix of the last two dimensions, the rest zeroed
/// (`torch.triu`): element `(i, j)` is kept when `j - i >= diagonal`.
///
/// ```
/// let t = torchfn::ones([2, 3], torchfn::DType::Int64)?;
/// assert_eq!(torchfn::triu(&t, 1)?.to_vec::<i64>()?, [0, 1, 1, 0, 0, 1]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn triu(input: &Tensor, #[default(0)] diagonal: i64) -> Result<Tensor> {
    triangle_impl("triu", ("input", input), diagonal, false)
}

impl Tensor {
    /// The positions `index` of dimension `dim`: the method form of
    /// [`index_select`](crate::index_select()).
    #[torch_function]
    pub fn index_select(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        index_select_impl("index_select", ("self", self), dim, index)
    }

    /// The elements picked along `dim` by `index`: the method form of
    /// [`gather`](crate::gather()).
    #[torch_function]
    pub fn gather(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        gather_impl("gather", ("self", self), dim, index)
    }

    /// A copy reversed along `dims`: the method form of [`flip`](crate::flip()).
    #[torch_function]
    pub fn flip(&self, dims: impl Into<Dims>) -> Result<Tensor> {
        flip_impl("flip", ("self", self), &dims.into())
    }

    /// A copy rolled by `shifts` along `dims`: the method form of [`roll`](crate::roll()).
    #[torch_function]
    pub fn roll(&self, shifts: impl Into<IntList>, #[default(None)] dims: Option<IntList>) -> Result<Tensor> {
        roll_impl("roll", ("self", self), shifts.into().as_slice(), dims.as_ref().map(IntList::as_slice))
    }

    /// A copy tiled `repeats[i]` times along each dimension `i` (`Tensor.repeat(*repeats)`; by
    /// name, the counts come one by one or as one sequence). With more counts than dimensions,
    /// the tensor is first given leading dimensions of size one.
    ///
    /// ```
    /// let t = torchfn::tensor([1i64, 2])?;
    /// let r = t.repeat([2, 2])?;
    /// assert_eq!(r.shape()?, [2, 4]);
    /// assert_eq!(r.to_vec::<i64>()?, [1, 2, 1, 2, 1, 2, 1, 2]);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn repeat(&self, #[variadic] repeats: impl Into<IntList>) -> Result<Tensor> {
        repeat_impl("repeat", ("self", self), repeats.into().as_slice())
    }

    /// The lower triangle: the method form of [`tril`](crate::tril()).
    #[torch_function]
    pub fn tril(&self, #[default(0)] diagonal: i64) -> Result<Tensor> {
        triangle_impl("tril", ("self", self), diagonal, true)
    }

    /// The upper triangle: the method form of [`triu`](crate::triu()).
    #[torch_function]
    pub fn triu(&self, #[default(0)] diagonal: i64) -> Result<Tensor> {
        triangle_impl("triu", ("self", self), diagonal, false)
    }
}

fn index(values: &[i64]) -> Value {
    Value::Tensor(Tensor::from_vec(values.to_vec(), [values.len()]).expect("one element per position"))
}

fn index2(values: &[i64], shape: [usize; 2]) -> Value {
    Value::Tensor(Tensor::from_vec(values.to_vec(), shape).expect("one element per position"))
}

crate::samples! {
    INDEX_SELECT => [sample([f32s(&[2, 3, 4]), Value::Int(2), index(&[3, 0, 0])])],
    GATHER => [sample([f32s(&[3, 4]), Value::Int(1), index2(&[0, 1, 3, 3, 2, 0], [3, 2])])],
    FLIP => [sample([f32s(&[2, 3, 4]), Value::List(vec![0.into(), 2.into()])]), sample([i64s(&[3]), Value::Int(0)])],
    ROLL => [sample([f32s(&[2, 3]), Value::Int(1), Value::Int(1)]), sample([f32s(&[2, 3]), Value::Int(-2)]),
        sample([f32s(&[2, 3]), Value::Tuple(vec![1.into(), 2.into()]), Value::Tuple(vec![0.into(), 1.into()])])],
    TRIL => [sample([f32s(&[3, 4])]), sample([bools(&[2, 3, 3])]).kw("diagonal", -1)],
    TRIU => [sample([f32s(&[3, 4])]).kw("diagonal", 1)],
    Tensor::INDEX_SELECT => [sample([i64s(&[4, 2]), Value::Int(0), index(&[1, 3])])],
    Tensor::GATHER => [sample([i64s(&[2, 2]), Value::Int(0), index2(&[1, 0], [1, 2])])],
    Tensor::FLIP => [sample([f32s(&[2, 3]), Value::Int(1)])],
    Tensor::ROLL => [sample([f32s(&[4]), Value::Int(1)])],
    Tensor::REPEAT => [sample([f32s(&[2, 2]), Value::Int(2), Value::Int(3)]), sample([f32s(&[2]), Value::Tuple(vec![2.into(), 1.into(), 2.into()])])],
    Tensor::TRIL => [sample([f32s(&[3, 3])])],
    Tensor::TRIU => [sample([f32s(&[3, 3])]).kw("diagonal", -1)],
}
