//! Views: `flatten`, `squeeze`, `unsqueeze`, `permute`, `transpose`, `t`, `expand`,
//! `broadcast_to`, `narrow` and `select`. Each view shares its input's storage (its `_base` is
//! the root of the view chain), as PyTorch's do; only `flatten` of a layout that no view can
//! flatten copies.

use crate::error::{Result, bail};
use crate::primitive;
use crate::tensor::{Dims, Layout, Shape, Tensor, normalize_dim};
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

use super::IntList;

/// A view of `t` whose dimensions (size, stride) and offset `make` gives for `t`'s layout (a
/// function of the layout, so that autograd can apply it to a contiguous one too).
pub(crate) fn view_of(t: &Tensor, make: impl Fn(&Layout) -> (Vec<(usize, usize)>, usize)) -> Result<Tensor> {
    primitive::view(t, |l| {
        let (dims, offset) = make(l);
        let (shape, strides): (Vec<usize>, Vec<usize>) = dims.into_iter().unzip();
        Ok(Layout { shape: Shape::from(shape), strides: strides.into_iter().collect(), offset })
    })
}

/// The (size, stride) of each dimension of `layout`.
pub(crate) fn dims_of(layout: &Layout) -> impl Iterator<Item = (usize, usize)> + '_ {
    layout.shape.iter().copied().zip(layout.strides.iter().copied())
}

/// `offset + index * stride`, saturating: exact whenever the position holds an element; a
/// view without elements may carry any offset.
pub(crate) fn advance(offset: usize, index: usize, stride: usize) -> usize {
    offset.saturating_add(index.saturating_mul(stride))
}

/// The layout of `length` positions of dimension `dim` from `start` (all checked).
pub(crate) fn narrowed(layout: &Layout, dim: usize, start: usize, length: usize) -> Layout {
    let mut shape = layout.shape.to_vec();
    shape[dim] = length;
    let offset = if length == 0 { layout.offset } else { advance(layout.offset, start, layout.strides[dim]) };
    Layout { shape: Shape::from(shape), strides: layout.strides.clone(), offset }
}

/// The size and stride of the dimensions `start..=end` merged into one, when one stride can
/// step through them all (as `view` requires); `None` when only a copy can flatten them.
fn merged(layout: &Layout, start: usize, end: usize) -> Option<(usize, usize)> {
    let dims: Vec<(usize, usize)> = dims_of(layout).skip(start).take(end - start + 1).collect();
    if dims.iter().any(|&(n, _)| n == 0) {
        return Some((0, 1));
    }
    // Dimensions of size one take no step; every other must step over the next one whole.
    let stepping: Vec<(usize, usize)> = dims.iter().copied().filter(|&(n, _)| n != 1).collect();
    for pair in stepping.windows(2) {
        let (outer, inner) = (pair[0], pair[1]);
        if inner.1.checked_mul(inner.0) != Some(outer.1) {
            return None;
        }
    }
    let size = dims.iter().try_fold(1usize, |n, &(d, _)| n.checked_mul(d))?;
    Some((size, stepping.last().map_or(1, |&(_, s)| s)))
}

fn flatten_impl(func: &str, (name, t): (&str, &Tensor), start_dim: i64, end_dim: i64) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    let (start, end) = (normalize_dim(start_dim, ndim, func)?, normalize_dim(end_dim, ndim, func)?);
    if ndim == 0 {
        return view_of(t, |l| (vec![(1, 1)], l.offset));
    }
    if start > end {
        bail!(
            Runtime,
            "{func}(): flatten() has invalid args: start_dim cannot come after end_dim (got start_dim={start_dim}, \
             end_dim={end_dim})"
        );
    }
    if start == end {
        return Ok(t.clone());
    }
    let flat = |layout: &Layout, (size, stride): (usize, usize)| -> Vec<(usize, usize)> {
        let dims: Vec<(usize, usize)> = dims_of(layout).collect();
        dims[..start].iter().copied().chain([(size, stride)]).chain(dims[end + 1..].iter().copied()).collect()
    };
    if merged(&x.layout, start, end).is_some() {
        return view_of(t, |l| (flat(l, merged(l, start, end).unwrap_or((0, 1))), l.offset));
    }
    // A copy is contiguous, so it merges; the result is no view of it.
    primitive::unsafe_view(&primitive::copy(t, x.dtype)?, |l| {
        let (shape, strides): (Vec<usize>, Vec<usize>) =
            flat(l, merged(l, start, end).unwrap_or((0, 1))).into_iter().unzip();
        Ok(Layout { shape: Shape::from(shape), strides: strides.into_iter().collect(), offset: l.offset })
    })
}

fn squeeze_impl(func: &str, (name, t): (&str, &Tensor), dims: Option<&Dims>) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    let chosen = match dims {
        Some(dims) => dims.resolve(ndim, func)?.to_vec(),
        None => (0..ndim).collect(),
    };
    view_of(t, |l| {
        let kept = dims_of(l).enumerate().filter(|&(d, (n, _))| !(n == 1 && chosen.contains(&d))).map(|(_, d)| d);
        (kept.collect(), l.offset)
    })
}

fn unsqueeze_impl(func: &str, (name, t): (&str, &Tensor), dim: i64) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    let at = normalize_dim(dim, ndim + 1, func)?;
    view_of(t, |l| {
        let mut dims: Vec<(usize, usize)> = dims_of(l).collect();
        // The stride PyTorch gives the new dimension: one step over the dimension after it.
        let stride = dims.get(at).map_or(1, |&(n, s)| n.saturating_mul(s));
        dims.insert(at, (1, stride));
        (dims, l.offset)
    })
}

fn permute_impl(func: &str, (name, t): (&str, &Tensor), order: &[i64]) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    if order.len() != ndim {
        bail!(
            Runtime,
            "{func}(): number of dimensions in the tensor input does not match the length of the desired ordering \
             of dimensions i.e. input.dim() = {ndim} is not equal to len(dims) = {}",
            order.len()
        );
    }
    let mut seen = vec![false; ndim];
    let mut resolved = Vec::with_capacity(ndim);
    for &d in order {
        let d = normalize_dim(d, ndim, func)?;
        if std::mem::replace(&mut seen[d], true) {
            bail!(Runtime, "{func}(): duplicate dims are not allowed (dim {d} appears twice in {order:?})");
        }
        resolved.push(d);
    }
    view_of(t, |l| (resolved.iter().map(|&d| (l.shape[d], l.strides[d])).collect(), l.offset))
}

fn transpose_impl(func: &str, (name, t): (&str, &Tensor), dim0: i64, dim1: i64) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    let (a, b) = (normalize_dim(dim0, ndim, func)?, normalize_dim(dim1, ndim, func)?);
    view_of(t, |l| {
        let mut dims: Vec<(usize, usize)> = dims_of(l).collect();
        if ndim > 0 {
            dims.swap(a, b);
        }
        (dims, l.offset)
    })
}

fn t_impl(func: &str, (name, t): (&str, &Tensor)) -> Result<Tensor> {
    let ndim = t.data(func, name)?.layout.ndim();
    if ndim > 2 {
        bail!(Runtime, "{func}(): expects a tensor with <= 2 dimensions, but {name} is {ndim}D");
    }
    transpose_impl(func, (name, t), 0, if ndim == 2 { 1 } else { 0 })
}

fn shown(sizes: impl IntoIterator<Item = impl std::fmt::Display>) -> String {
    let items: Vec<String> = sizes.into_iter().map(|s| s.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// The view of `t` broadcast to `sizes`, where `-1` keeps a size (PyTorch's
/// `inferExpandGeometry`): a dimension of size one, or a new leading one, repeats its
/// elements with stride 0.
pub(crate) fn expand_impl(func: &str, (name, t): (&str, &Tensor), sizes: &[i64]) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    if sizes.len() < ndim {
        bail!(
            Runtime,
            "{func}(): the number of sizes provided ({}) must be greater or equal to the number of dimensions in \
             the tensor ({ndim})",
            sizes.len()
        );
    }
    let leading = sizes.len() - ndim;
    let expanded = |l: &Layout| -> Result<Vec<(usize, usize)>> {
        let mut dims = vec![(0usize, 0usize); sizes.len()];
        for i in (0..sizes.len()).rev() {
            let target = sizes[i];
            let existing = i.checked_sub(leading).map(|d| (l.shape[d], l.strides[d]));
            let (size, stride) = existing.unwrap_or_else(|| {
                let next = dims.get(i + 1).map_or(1, |&(n, s)| n.saturating_mul(s));
                (1, next)
            });
            let target = match target {
                -1 if existing.is_none() => bail!(
                    Runtime,
                    "{func}(): the expanded size of the tensor (-1) isn't allowed in a leading, non-existing \
                     dimension {i}"
                ),
                -1 => size,
                n if n < 0 => bail!(Runtime, "{func}(): the expanded size of the tensor ({n}) must be non-negative"),
                n => usize::try_from(n).unwrap_or(usize::MAX),
            };
            dims[i] = match (size == target, size) {
                (true, _) => (size, stride),
                (false, 1) => (target, 0),
                (false, _) => bail!(
                    Runtime,
                    "{func}(): the expanded size of the tensor ({target}) must match the existing size ({size}) at \
                     non-singleton dimension {i}.  Target sizes: {}.  Tensor sizes: {}",
                    shown(sizes),
                    shown(l.shape.iter())
                ),
            };
        }
        Ok(dims)
    };
    let dims = expanded(&x.layout)?;
    // Copying the view must stay possible: its elements must fit in memory (ndarray also needs
    // the product of the non-zero sizes to fit).
    let bytes = dims.iter().filter(|d| d.0 != 0).try_fold(x.dtype.itemsize(), |n, &(d, _)| n.checked_mul(d));
    if bytes.is_none_or(|b| b > isize::MAX as usize) {
        bail!(Runtime, "{func}(): the expanded shape {} has more elements than memory can hold", shown(sizes));
    }
    primitive::view(t, |l| {
        let (shape, strides): (Vec<usize>, Vec<usize>) = expanded(l)?.into_iter().unzip();
        Ok(Layout { shape: Shape::from(shape), strides: strides.into_iter().collect(), offset: l.offset })
    })
}

/// A position along a dimension of `size`, negative counting from the end.
fn wrap(index: i64, size: usize) -> Option<usize> {
    let size = i64::try_from(size).ok()?;
    let i = if index < 0 { index.checked_add(size)? } else { index };
    usize::try_from(i).ok()
}

pub(crate) fn narrow_impl(func: &str, (name, t): (&str, &Tensor), dim: i64, start: i64, length: i64) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    if ndim == 0 {
        bail!(Runtime, "{func}(): cannot be applied to a 0-dim tensor");
    }
    if length < 0 {
        bail!(Runtime, "{func}(): length must be non-negative (got {length})");
    }
    let d = normalize_dim(dim, ndim, func)?;
    let size = x.layout.shape[d];
    let first = match wrap(start, size) {
        Some(s) if s <= size => s,
        _ => {
            bail!(Index, "{func}(): start out of range (expected to be in range of [-{size}, {size}], but got {start})")
        }
    };
    let length = usize::try_from(length).unwrap_or(usize::MAX);
    if length > size - first {
        bail!(Runtime, "{func}(): start ({start}) + length ({length}) exceeds dimension size ({size})");
    }
    primitive::view(t, |l| Ok(narrowed(l, d, first, length)))
}

pub(super) fn select_impl(func: &str, (name, t): (&str, &Tensor), dim: i64, index: i64) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    if ndim == 0 {
        bail!(Index, "{func}(): cannot be applied to a 0-dim tensor");
    }
    let d = normalize_dim(dim, ndim, func)?;
    let size = x.layout.shape[d];
    let Some(i) = wrap(index, size).filter(|&i| i < size) else {
        bail!(
            Index,
            "{func}(): index {index} out of range for tensor of size {} at dimension {d}",
            shown(x.layout.shape.iter())
        )
    };
    primitive::view(t, |l| Ok(selected(l, d, i)))
}

/// The layout of position `index` of dimension `dim`, that dimension dropped (all checked).
pub(crate) fn selected(layout: &Layout, dim: usize, index: usize) -> Layout {
    let (shape, strides): (Vec<usize>, Vec<usize>) =
        dims_of(layout).enumerate().filter(|&(k, _)| k != dim).map(|(_, d)| d).unzip();
    Layout {
        shape: Shape::from(shape),
        strides: strides.into_iter().collect(),
        offset: advance(layout.offset, index, layout.strides[dim]),
    }
}

/// The dimensions `start_dim..=end_dim` (negative counting from the end) merged into one
/// (`torch.flatten`); a zero-dimensional tensor becomes one-dimensional.
///
/// A view of the same data whenever one stride can step through the merged dimensions (always
/// for a contiguous tensor), a copy otherwise; with `start_dim == end_dim`, the input itself.
///
/// ```
/// let t = torchfn::zeros([2, 3, 4], None, None)?;
/// assert_eq!(torchfn::flatten(&t, 0, -1)?.shape()?, [24]);
/// assert_eq!(torchfn::flatten(&t, 1, -1)?.shape()?, [2, 12]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn flatten(input: &Tensor, #[default(0)] start_dim: i64, #[default(-1)] end_dim: i64) -> Result<Tensor> {
    flatten_impl("flatten", ("input", input), start_dim, end_dim)
}

/// Dimension `dim` split into `sizes` (one of which may be -1, inferred), a view of the same data
/// (`Tensor.unflatten`); the inverse of [`flatten`].
fn unflatten_impl(func: &str, (name, t): (&str, &Tensor), dim: i64, sizes: &[i64]) -> Result<Tensor> {
    let x = t.data(func, name)?;
    if x.layout.ndim() == 0 {
        bail!(Index, "{func}(): dimension specified as {dim} but tensor has no dimensions");
    }
    let d = normalize_dim(dim, x.layout.ndim(), func)?;
    let n = x.layout.shape[d];
    if sizes.is_empty() {
        bail!(Runtime, "{func}(): sizes must be non-empty");
    }
    if sizes.iter().filter(|&&k| k == -1).count() > 1 {
        bail!(Runtime, "{func}(): only one dimension can be inferred");
    }
    if let Some(&k) = sizes.iter().find(|&&k| k < -1) {
        bail!(Runtime, "{func}(): invalid shape dimension {k}");
    }
    let known = sizes.iter().filter(|&&k| k != -1).try_fold(1usize, |p, &k| p.checked_mul(k as usize));
    let fits = match (known, sizes.contains(&-1)) {
        (Some(p), true) => p != 0 && n % p == 0,
        (Some(p), false) => p == n,
        (None, _) => false,
    };
    if !fits {
        bail!(
            Runtime,
            "{func}(): Provided sizes {sizes:?} don't multiply up to the size of dim {dim} ({n}) in the input tensor"
        );
    }
    let inferred = n / known.unwrap_or(1).max(1);
    let sizes: Vec<usize> = sizes.iter().map(|&k| if k == -1 { inferred } else { k as usize }).collect();
    view_of(t, |l| {
        let mut dims: Vec<(usize, usize)> = dims_of(l).collect();
        let mut stride = l.strides[d];
        let mut split: Vec<(usize, usize)> = sizes
            .iter()
            .rev()
            .map(|&k| {
                let entry = (k, stride);
                stride = stride.saturating_mul(k);
                entry
            })
            .collect();
        split.reverse();
        dims.splice(d..=d, split);
        (dims, l.offset)
    })
}

/// A view without the dimensions of size one (`torch.squeeze(input)`); see [`squeeze_dim`].
///
/// ```
/// let t = torchfn::zeros([1, 3, 1], None, None)?;
/// assert_eq!(torchfn::squeeze(&t)?.shape()?, [3]);
/// assert_eq!(torchfn::squeeze_dim(&t, 0)?.shape()?, [3, 1]);
/// assert_eq!(torchfn::squeeze_dim(&t, 1)?.shape()?, [1, 3, 1]); // size 3: left alone
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn squeeze(input: &Tensor) -> Result<Tensor> {
    squeeze_impl("squeeze", ("input", input), None)
}

/// A view without the dimensions `dim` (one or several) that have size one; the others are
/// left alone (`torch.squeeze(input, dim)`).
#[torch_function(overload_of = SQUEEZE)]
pub fn squeeze_dim(input: &Tensor, dim: impl Into<Dims>) -> Result<Tensor> {
    squeeze_impl("squeeze", ("input", input), Some(&dim.into()))
}

/// A view with a new dimension of size one at position `dim`, in `-(ndim + 1)..=ndim`
/// (`torch.unsqueeze`).
///
/// ```
/// let t = torchfn::zeros([2, 3], None, None)?;
/// assert_eq!(torchfn::unsqueeze(&t, 1)?.shape()?, [2, 1, 3]);
/// assert_eq!(torchfn::unsqueeze(&t, -1)?.shape()?, [2, 3, 1]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn unsqueeze(input: &Tensor, dim: i64) -> Result<Tensor> {
    unsqueeze_impl("unsqueeze", ("input", input), dim)
}

/// A view with the dimensions reordered: dimension `i` of the result is dimension `dims[i]` of
/// the input (`torch.permute`). `dims` must name every dimension once.
///
/// ```
/// let t = torchfn::zeros([2, 3, 4], None, None)?;
/// assert_eq!(torchfn::permute(&t, [2, 0, 1])?.shape()?, [4, 2, 3]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn permute(input: &Tensor, dims: impl Into<IntList>) -> Result<Tensor> {
    permute_impl("permute", ("input", input), dims.into().as_slice())
}

/// A view with dimensions `dim0` and `dim1` swapped (`torch.transpose`).
///
/// ```
/// let t = torchfn::tensor([[1i64, 2, 3], [4, 5, 6]])?;
/// let u = torchfn::transpose(&t, 0, 1)?;
/// assert_eq!(u.to_vec::<i64>()?, [1, 4, 2, 5, 3, 6]);
/// assert_eq!(u.data_ptr()?, t.data_ptr()?); // the same storage
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn transpose(input: &Tensor, dim0: i64, dim1: i64) -> Result<Tensor> {
    transpose_impl("transpose", ("input", input), dim0, dim1)
}

/// The transpose of a matrix, as a view (`torch.t`); a tensor of fewer dimensions is returned
/// as a view of itself, one of more is an error.
#[torch_function(module = "torchfn")]
pub fn t(input: &Tensor) -> Result<Tensor> {
    t_impl("t", ("input", input))
}

/// A view of `input` broadcast to `size` (`torch.broadcast_to`, as [`Tensor::expand`]):
/// dimensions of size one repeat their elements with stride 0, new leading dimensions are added,
/// and `-1` keeps a size.
///
/// ```
/// let t = torchfn::tensor([[1i64], [2]])?;
/// let b = torchfn::broadcast_to(&t, [2, 2, 3])?;
/// assert_eq!(b.to_vec::<i64>()?, [1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn broadcast_to(input: &Tensor, size: impl Into<IntList>) -> Result<Tensor> {
    expand_impl("broadcast_to", ("input", input), size.into().as_slice())
}

/// A view of `length` positions of dimension `dim` from `start` (negative counting from the
/// end) (`torch.narrow`).
///
/// ```
/// let t = torchfn::tensor([[1i64, 2, 3], [4, 5, 6]])?;
/// assert_eq!(torchfn::narrow(&t, 1, 1, 2)?.to_vec::<i64>()?, [2, 3, 5, 6]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn narrow(input: &Tensor, dim: i64, start: i64, length: i64) -> Result<Tensor> {
    narrow_impl("narrow", ("input", input), dim, start, length)
}

/// A view of position `index` (negative counting from the end) of dimension `dim`, which the
/// result no longer has (`torch.select`; `t[:, i]` for `dim = 1`).
///
/// ```
/// let t = torchfn::tensor([[1i64, 2, 3], [4, 5, 6]])?;
/// assert_eq!(torchfn::select(&t, 1, -1)?.to_vec::<i64>()?, [3, 6]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn select(input: &Tensor, dim: i64, index: i64) -> Result<Tensor> {
    select_impl("select", ("input", input), dim, index)
}

impl Tensor {
    /// The dimensions `start_dim..=end_dim` merged: the method form of
    /// [`flatten`](crate::flatten()).
    #[torch_function]
    pub fn flatten(&self, #[default(0)] start_dim: i64, #[default(-1)] end_dim: i64) -> Result<Tensor> {
        flatten_impl("flatten", ("self", self), start_dim, end_dim)
    }

    /// Dimension `dim` split into `sizes`, one of them -1 to infer it: a view of the same data
    /// (`Tensor.unflatten`, the inverse of [`flatten`](Tensor::flatten)).
    ///
    /// ```
    /// let t = torchfn::zeros([2, 6], None, None)?;
    /// assert_eq!(t.unflatten(1, vec![-1, 2])?.shape()?, [2, 3, 2]);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn unflatten(&self, dim: i64, sizes: Vec<i64>) -> Result<Tensor> {
        unflatten_impl("unflatten", ("self", self), dim, &sizes)
    }

    /// A view without the dimensions of size one: the method form of
    /// [`squeeze`](crate::squeeze()).
    #[torch_function]
    pub fn squeeze(&self) -> Result<Tensor> {
        squeeze_impl("squeeze", ("self", self), None)
    }

    /// A view without the dimensions `dim` of size one: the method form of
    /// [`squeeze_dim`](crate::squeeze_dim()).
    #[torch_function(overload_of = Tensor::SQUEEZE)]
    pub fn squeeze_dim(&self, dim: impl Into<Dims>) -> Result<Tensor> {
        squeeze_impl("squeeze", ("self", self), Some(&dim.into()))
    }

    /// A view with a new dimension of size one: the method form of
    /// [`unsqueeze`](crate::unsqueeze()).
    #[torch_function]
    pub fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        unsqueeze_impl("unsqueeze", ("self", self), dim)
    }

    /// A view with the dimensions reordered (`Tensor.permute(*dims)`: by name, the dimensions
    /// come one by one or as one sequence): the method form of [`permute`](crate::permute()).
    #[torch_function]
    pub fn permute(&self, #[variadic] dims: impl Into<IntList>) -> Result<Tensor> {
        permute_impl("permute", ("self", self), dims.into().as_slice())
    }

    /// A view with two dimensions swapped: the method form of [`transpose`](crate::transpose()).
    #[torch_function]
    pub fn transpose(&self, dim0: i64, dim1: i64) -> Result<Tensor> {
        transpose_impl("transpose", ("self", self), dim0, dim1)
    }

    /// The transpose of a matrix, as a view: the method form of [`t`](crate::t()).
    #[torch_function]
    pub fn t(&self) -> Result<Tensor> {
        t_impl("t", ("self", self))
    }

    /// A view broadcast to `sizes` (`Tensor.expand(*sizes)`; by name, the sizes come one by
    /// one or as one sequence). A dimension of size one, or a new leading dimension, repeats
    /// its elements without copying them (stride 0); `-1` keeps a dimension's size. Another
    /// size that differs from the existing one is an error.
    ///
    /// Writing through an expanded view would write one element many times; PyTorch refuses
    /// most in-place operations on such views.
    ///
    /// ```
    /// let t = torchfn::tensor([[1.0f32], [2.0], [3.0]])?;
    /// let e = t.expand([-1, 4])?;
    /// assert_eq!(e.shape()?, [3, 4]);
    /// assert_eq!(e.sum()?.item()?, torchfn::Scalar::Float(24.0));
    /// assert!(t.expand([2, 4]).is_err()); // 3 rows cannot become 2
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn expand(&self, #[variadic] sizes: impl Into<IntList>) -> Result<Tensor> {
        expand_impl("expand", ("self", self), sizes.into().as_slice())
    }

    /// A view broadcast to `other`'s shape (`Tensor.expand_as`).
    ///
    /// ```
    /// let bias = torchfn::tensor([1.0f32, 2.0])?;
    /// let out = torchfn::zeros([3, 2], None, None)?;
    /// assert_eq!(bias.unsqueeze(0)?.expand_as(&out)?.shape()?, [3, 2]);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn expand_as(&self, other: &Tensor) -> Result<Tensor> {
        let shape: Vec<i64> = other.data("expand_as", "other")?.layout.shape.iter().map(|&n| n as i64).collect();
        expand_impl("expand_as", ("self", self), &shape)
    }

    /// A view broadcast to `size`: the method form of [`broadcast_to`](crate::broadcast_to()).
    #[torch_function]
    pub fn broadcast_to(&self, size: impl Into<IntList>) -> Result<Tensor> {
        expand_impl("broadcast_to", ("self", self), size.into().as_slice())
    }

    /// A view of `length` positions of dimension `dim`: the method form of
    /// [`narrow`](crate::narrow()).
    #[torch_function]
    pub fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Tensor> {
        narrow_impl("narrow", ("self", self), dim, start, length)
    }

    /// A view of one position of dimension `dim`: the method form of
    /// [`select`](crate::select()).
    #[torch_function]
    pub fn select(&self, dim: i64, index: i64) -> Result<Tensor> {
        select_impl("select", ("self", self), dim, index)
    }
}

crate::samples! {
    FLATTEN => [sample([f32s(&[2, 3, 4])]), sample([f32s(&[2, 3, 4])]).kw("start_dim", 1), sample([f32s(&[])])],
    SQUEEZE => [sample([f32s(&[1, 3, 1])]), sample([f32s(&[1, 3, 1])]).kw("dim", 0), sample([f32s(&[1, 3, 1]), Value::Tuple(vec![0.into(), 2.into()])])],
    UNSQUEEZE => [sample([f32s(&[2, 3]), Value::Int(1)]), sample([f32s(&[2, 3]), Value::Int(-1)])],
    PERMUTE => [sample([f32s(&[2, 3, 4]), Value::List(vec![2.into(), 0.into(), 1.into()])])],
    TRANSPOSE => [sample([f32s(&[2, 3, 4]), Value::Int(0), Value::Int(2)])],
    T => [sample([f32s(&[2, 3])]), sample([f32s(&[3])])],
    BROADCAST_TO => [sample([f32s(&[3, 1]), Value::List(vec![2.into(), 3.into(), 4.into()])])],
    NARROW => [sample([f32s(&[2, 3, 4]), Value::Int(2), Value::Int(1), Value::Int(2)])],
    SELECT => [sample([f32s(&[2, 3, 4]), Value::Int(1), Value::Int(-1)])],
    Tensor::FLATTEN => [sample([f32s(&[2, 3, 4])]).kw("end_dim", 1)],
    Tensor::UNFLATTEN => [
        sample([f32s(&[2, 6]), Value::Int(1), Value::List(vec![Value::Int(-1), Value::Int(2)])]),
        sample([f32s(&[4, 3]), Value::Int(0), Value::List(vec![Value::Int(2), Value::Int(2)])]),
    ],
    Tensor::SQUEEZE => [sample([f32s(&[1, 3])]), sample([f32s(&[1, 3]), Value::Int(0)])],
    Tensor::UNSQUEEZE => [sample([f32s(&[3]), Value::Int(0)])],
    Tensor::PERMUTE => [sample([f32s(&[2, 3, 4]), Value::Int(1), Value::Int(2), Value::Int(0)]), sample([f32s(&[2, 3]), Value::Tuple(vec![1.into(), 0.into()])])],
    Tensor::TRANSPOSE => [sample([f32s(&[2, 3]), Value::Int(0), Value::Int(1)])],
    Tensor::T => [sample([f32s(&[2, 3])])],
    Tensor::EXPAND => [sample([f32s(&[3, 1]), Value::Int(3), Value::Int(4)]), sample([f32s(&[3, 1]), Value::Tuple(vec![2.into(), (-1).into(), 4.into()])])],
    Tensor::BROADCAST_TO => [sample([f32s(&[3, 1]), Value::Tuple(vec![3.into(), 2.into()])])],
    Tensor::EXPAND_AS => [sample([f32s(&[3, 1]), f32s(&[2, 3, 4])]), sample([f32s(&[4]), f32s(&[3, 4])])],
    Tensor::NARROW => [sample([i64s(&[4, 2]), Value::Int(0), Value::Int(-3), Value::Int(2)])],
    Tensor::SELECT => [sample([i64s(&[4, 2]), Value::Int(0), Value::Int(3)])],
}
