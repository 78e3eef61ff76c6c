//! Joins and splits: `cat` (also `concat` and `concatenate`), `stack`, `split`, `chunk` and
//! `unbind` (and iterating over a tensor, built on it). Joins copy, promoting their inputs to
//! one dtype; splits return views.

use crate::error::{Error, Result, bail};
use crate::ops::device::device_of;
use crate::tensor::{DType, Dense, Layout, Participant, Scalar, Shape, Tensor, normalize_dim, result_type};
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

use super::SplitSize;
use super::view::{narrowed, selected};

/// The data of each tensor of a join; a Python number among them is a type error, as in
/// PyTorch (`expected Tensor as element 1 in argument 0, but got float`). An empty list is a
/// `RuntimeError` for `stack` and a `ValueError` for `cat` and its aliases, as PyTorch's.
fn operands<'t>(func: &str, tensors: &'t [Tensor]) -> Result<Vec<&'t Dense>> {
    if tensors.is_empty() {
        let message = format!("{func}(): expected a non-empty list of Tensors");
        return Err(if func == "stack" { Error::runtime_error(message) } else { Error::value_error(message) });
    }
    tensors
        .iter()
        .enumerate()
        .map(|(i, t)| match t.data(func, "tensors")? {
            x if x.wrapped_number => Err(Error::type_error(format!(
                "{func}(): expected Tensor as element {i} in argument 'tensors', but got a number"
            ))),
            x => Ok(x),
        })
        .collect()
}

/// The dtype a join produces: PyTorch's promotion over all of its inputs.
fn joined_dtype(tensors: &[&Dense]) -> DType {
    result_type(tensors.iter().map(|x| Participant::Dimensioned(x.dtype)))
}

/// The shared body of `cat`, `concat`, `concatenate` and `stack`: `pieces` joined along `dim`
/// (possibly negative) in `dtype`. One-dimensional empty tensors are skipped, as PyTorch's
/// legacy behaviour does; the others must agree on every size but `dim`'s. When every tensor
/// is skipped, `dim` is not checked either (PyTorch has no tensor to wrap it against).
fn join(func: &str, tensors: &[Tensor], dim: i64, dtype: DType) -> Result<Tensor> {
    let pieces: Vec<&Dense> = tensors.iter().map(|t| t.data(func, "tensors")).collect::<Result<_>>()?;
    if let Some(i) = pieces.iter().position(|x| x.layout.ndim() == 0) {
        bail!(Runtime, "{func}(): zero-dimensional tensor (at position {i}) cannot be concatenated");
    }
    let named: Vec<(&str, &Dense)> = pieces.iter().map(|&x| ("tensors", x)).collect();
    let device = device_of(func, &named)?;
    let kept: Vec<(usize, &Dense)> =
        pieces.iter().copied().enumerate().filter(|(_, x)| x.layout.shape != [0]).collect();
    let Some(&(_, first)) = kept.first() else {
        return crate::primitive::full(&Shape::from([0]), Scalar::Int(0), dtype, device);
    };
    let ndim = first.layout.ndim();
    let dim = normalize_dim(dim, ndim, func)?;
    let mut total: usize = 0;
    for &(i, x) in &kept {
        let shape = &x.layout.shape;
        if shape.len() != ndim {
            bail!(Runtime, "{func}(): Tensors must have same number of dimensions: got {ndim} and {}", shape.len());
        }
        if let Some(d) = (0..ndim).find(|&d| d != dim && shape[d] != first.layout.shape[d]) {
            bail!(
                Runtime,
                "{func}(): Sizes of tensors must match except in dimension {dim}. Expected size {} but got size {} \
                 for tensor number {i} in the list.",
                first.layout.shape[d],
                shape[d]
            );
        }
        total = match total.checked_add(shape[dim]) {
            Some(n) => n,
            None => bail!(Runtime, "{func}(): the result has more elements than memory can hold"),
        };
    }
    let mut shape = first.layout.shape.to_vec();
    shape[dim] = total;
    let joined: Vec<Tensor> = kept.into_iter().map(|(i, _)| tensors[i].clone()).collect();
    crate::primitive::concat(&joined, dim, &Shape::from(shape), dtype)
}

pub(crate) fn cat_impl(func: &str, tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    let data = operands(func, tensors)?;
    join(func, tensors, dim, joined_dtype(&data))
}

fn stack_impl(func: &str, tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    let data = operands(func, tensors)?;
    let shape = &data[0].layout.shape;
    if let Some(i) = data.iter().position(|x| x.layout.shape != *shape) {
        bail!(
            Runtime,
            "{func}(): expects each tensor to be equal size, but got {:?} at entry 0 and {:?} at entry {i}",
            shape.as_ref(),
            data[i].layout.shape.as_ref()
        );
    }
    let ndim = shape.len();
    let at = normalize_dim(dim, ndim + 1, func)?;
    // Each tensor seen with a new dimension of size one at `at`, then joined along it.
    let unsqueezed: Vec<Tensor> = tensors
        .iter()
        .map(|t| {
            crate::primitive::view(t, |l| {
                let mut shape = l.shape.to_vec();
                let mut strides = l.strides.clone();
                shape.insert(at, 1);
                strides.insert(at, 1);
                Ok(Layout { shape: Shape::from(shape), strides, offset: l.offset })
            })
        })
        .collect::<Result<_>>()?;
    join(func, &unsqueezed, at as i64, joined_dtype(&data))
}

fn split_impl(func: &str, (name, t): (&str, &Tensor), how: &SplitSize, dim: i64) -> Result<Vec<Tensor>> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    if ndim == 0 {
        bail!(Runtime, "{func}(): expects at least a 1-dimensional tensor");
    }
    let d = normalize_dim(dim, ndim, func)?;
    let size = x.layout.shape[d];
    // How many pieces, and the size of piece `i`: pieces of `step` positions (the last one
    // possibly smaller), or the sections listed. Nothing is allocated per piece before the count
    // is known to fit in memory.
    let (count, step, sections): (usize, usize, &[i64]) = match how {
        SplitSize::Size(s) if *s < 0 => {
            bail!(Runtime, "{func}(): expects split_size be non-negative, but got split_size={s}")
        }
        SplitSize::Size(0) if size > 0 => {
            bail!(
                Runtime,
                "{func}(): split_size can only be 0 if dimension size is 0, but got dimension size of {size}"
            )
        }
        SplitSize::Size(_) if size == 0 => (1, 0, &[]),
        SplitSize::Size(s) => {
            let s = usize::try_from(*s).unwrap_or(usize::MAX);
            (size.div_ceil(s), s, &[])
        }
        SplitSize::Sections(sections) => {
            if sections.iter().any(|&s| s < 0) {
                bail!(
                    Runtime,
                    "{func}(): split_with_sizes expects split_sizes have only non-negative entries, but got \
                     split_sizes={sections:?}"
                );
            }
            let sum = sections.iter().try_fold(0usize, |n, &s| n.checked_add(usize::try_from(s).ok()?));
            if sum != Some(size) {
                bail!(
                    Runtime,
                    "{func}(): split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size at \
                     dimension {d}), but got split_sizes={sections:?}"
                );
            }
            (sections.len(), 0, sections.as_slice())
        }
    };
    let mut starts = Vec::new();
    crate::backend::host::reserve_exact(&mut starts, count)
        .map_err(|_| Error::runtime_error(format!("{func}(): too many pieces ({count})")))?;
    let mut start = 0;
    for i in 0..count {
        // Sections are non-negative and add up to `size`; fixed steps start below `size`.
        let n = sections.get(i).map_or_else(|| step.min(size - start), |&s| s as usize);
        starts.push((start, n));
        start += n;
    }
    let name = if sections.is_empty() { "SplitBackward0" } else { "SplitWithSizesBackward0" };
    let pieces = crate::primitive::Pieces { dim: d, unbind: false, name };
    crate::primitive::views(t, count, |i, l| Ok(narrowed(l, d, starts[i].0, starts[i].1)), pieces)
}

fn chunk_impl(func: &str, (name, t): (&str, &Tensor), chunks: i64, dim: i64) -> Result<Vec<Tensor>> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    if ndim == 0 {
        bail!(Runtime, "{func}(): expects at least a 1-dimensional tensor");
    }
    if chunks <= 0 {
        bail!(Runtime, "{func}(): expects `chunks` to be greater than 0, got: {chunks}");
    }
    let d = normalize_dim(dim, ndim, func)?;
    let size = x.layout.shape[d];
    let chunks = usize::try_from(chunks).unwrap_or(usize::MAX);
    if size == 0 {
        // As many empty pieces as asked for, as PyTorch gives.
        let mut sections = Vec::new();
        crate::backend::host::reserve_exact(&mut sections, chunks)
            .map_err(|_| Error::runtime_error(format!("{func}(): too many chunks")))?;
        sections.resize(chunks, 0);
        return split_impl(func, (name, t), &SplitSize::Sections(sections), dim);
    }
    let size = i64::try_from(size.div_ceil(chunks)).unwrap_or(i64::MAX);
    split_impl(func, (name, t), &SplitSize::Size(size), dim)
}

fn unbind_impl(func: &str, (name, t): (&str, &Tensor), dim: i64) -> Result<Vec<Tensor>> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    if ndim == 0 {
        bail!(Index, "{func}(): Dimension specified as {dim} but tensor has no dimensions");
    }
    let d = normalize_dim(dim, ndim, func)?;
    let n = x.layout.shape[d];
    let pieces = crate::primitive::Pieces { dim: d, unbind: true, name: "UnbindBackward0" };
    crate::primitive::views(t, n, |i, l| Ok(selected(l, d, i)), pieces)
}

crate::overrides::ignored! {
    "Tensor.__iter__": "iterates over `unbind(0)`, which is dispatched, as PyTorch's `Tensor.__iter__` does",
}

/// The tensors joined along dimension `dim` (`torch.cat`): they must have the same sizes but
/// along `dim`, and the result has their promoted dtype. One-dimensional empty tensors are
/// skipped, as in PyTorch; zero-dimensional ones are an error.
///
/// ```
/// let a = torchfn::tensor([[1i64, 2], [3, 4]])?;
/// let b = torchfn::tensor([[5.0f32, 6.0]])?;
/// let c = torchfn::cat(&[a, b], 0)?;
/// assert_eq!(c.to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn cat(tensors: &[Tensor], #[default(0)] dim: i64) -> Result<Tensor> {
    cat_impl("cat", tensors, dim)
}

/// The tensors joined along `dim`, written into `out` (`torch.cat(tensors, dim=0, *, out)`);
/// returns `out`.
#[torch_function(overload_of = CAT)]
pub fn cat_out(tensors: &[Tensor], #[default(0)] dim: i64, #[keyword_only] out: &Tensor) -> Result<Tensor> {
    let inputs: Vec<&Tensor> = tensors.iter().collect();
    crate::ops::inplace::write_out("cat", out, &inputs, || cat_impl("cat", tensors, dim))
}

/// The tensors joined along dimension `dim`: another name of [`cat`] (`torch.concat`).
#[torch_function(module = "torchfn")]
pub fn concat(tensors: &[Tensor], #[default(0)] dim: i64) -> Result<Tensor> {
    cat_impl("concat", tensors, dim)
}

/// The tensors joined along dimension `axis`: NumPy's name of [`cat`]
/// (`torch.concatenate`).
#[torch_function(module = "torchfn")]
pub fn concatenate(tensors: &[Tensor], #[default(0)] axis: i64) -> Result<Tensor> {
    cat_impl("concatenate", tensors, axis)
}

/// The tensors, all of one shape, joined along a new dimension `dim` in
/// `-(ndim + 1)..=ndim` (`torch.stack`), with their promoted dtype.
///
/// ```
/// let a = torchfn::tensor([1i64, 2])?;
/// let b = torchfn::tensor([3i64, 4])?;
/// let s = torchfn::stack(&[a, b], 1)?;
/// assert_eq!(s.shape()?, [2, 2]);
/// assert_eq!(s.to_vec::<i64>()?, [1, 3, 2, 4]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn stack(tensors: &[Tensor], #[default(0)] dim: i64) -> Result<Tensor> {
    stack_impl("stack", tensors, dim)
}

/// Views of consecutive pieces of dimension `dim` (`torch.split`): pieces of
/// `split_size_or_sections` positions when it is an integer (the last may be smaller), or one
/// piece per entry when it lists sizes, which must add up to the dimension's size.
///
/// ```
/// let t = torchfn::arange(5, None, None)?;
/// let sizes = |pieces: Vec<torchfn::Tensor>| pieces.iter().map(|p| p.shape().unwrap()[0]).collect::<Vec<_>>();
/// assert_eq!(sizes(torchfn::split(&t, 2, 0)?), [2, 2, 1]);
/// assert_eq!(sizes(torchfn::split(&t, [1, 4], 0)?), [1, 4]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn split(
    tensor: &Tensor,
    split_size_or_sections: impl Into<SplitSize>,
    #[default(0)] dim: i64,
) -> Result<Vec<Tensor>> {
    split_impl("split", ("tensor", tensor), &split_size_or_sections.into(), dim)
}

/// Views of `chunks` pieces of dimension `dim` as equal as can be (`torch.chunk`): each of
/// `ceil(size / chunks)` positions but the last, so there may be fewer than `chunks`.
///
/// ```
/// let t = torchfn::arange(5, None, None)?;
/// let pieces = torchfn::chunk(&t, 3, 0)?;
/// assert_eq!(pieces.iter().map(|p| p.shape().unwrap()[0]).collect::<Vec<_>>(), [2, 2, 1]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn chunk(input: &Tensor, chunks: i64, #[default(0)] dim: i64) -> Result<Vec<Tensor>> {
    chunk_impl("chunk", ("input", input), chunks, dim)
}

/// The slices of `input` along dimension `dim`, with that dimension removed, as views
/// (`torch.unbind`): `input.shape()[dim]` tensors. A zero-dimensional tensor is an error.
///
/// ```
/// let t = torchfn::tensor([[1i64, 2, 3], [4, 5, 6]])?;
/// let columns = torchfn::unbind(&t, 1)?;
/// assert_eq!(columns.len(), 3);
/// assert_eq!(columns[2].to_vec::<i64>()?, [3, 6]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn unbind(input: &Tensor, #[default(0)] dim: i64) -> Result<Vec<Tensor>> {
    unbind_impl("unbind", ("input", input), dim)
}

impl Tensor {
    /// The slices along dimension `dim`, as views: the method form of
    /// [`unbind`](crate::unbind()).
    #[torch_function]
    pub fn unbind(&self, #[default(0)] dim: i64) -> Result<Vec<Tensor>> {
        unbind_impl("unbind", ("self", self), dim)
    }

    /// The tensors along the first dimension, in order, as Python's `iter(t)` and `for row in
    /// t` give them: views that write through to this tensor. As PyTorch's `Tensor.__iter__`,
    /// iterating is not dispatched itself but calls [`unbind(0)`](Tensor::unbind), which is:
    /// a subclass instance gives instances of its subclass (through the default hook), a duck
    /// iterates over what its hook answers for `unbind`, and a mode sees `Tensor.unbind`.
    ///
    /// A zero-dimensional tensor is a `TypeError`, as in Python (`iteration over a 0-d
    /// tensor`); that check reads the tensor's shape without dispatch. `&Tensor` has no
    /// `IntoIterator`, since iterating can fail: write `for row in t.iter()? { ... }`.
    ///
    /// ```
    /// let t = torchfn::tensor([[1i64, 2], [3, 4], [5, 6]])?;
    /// let sums: Vec<i64> = t.iter()?.map(|row| row.sum()?.item().map(|s| s.to_i64())).collect::<Result<_, _>>()?;
    /// assert_eq!(sums, [3, 7, 11]);
    /// let scalar = torchfn::tensor(1.0f32)?;
    /// assert_eq!(scalar.iter().unwrap_err().to_string(), "iter(): iteration over a 0-d tensor");
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    pub fn iter(&self) -> Result<std::vec::IntoIter<Tensor>> {
        if self.dense().is_some_and(|d| d.layout.ndim() == 0) {
            return Err(Error::type_error("iter(): iteration over a 0-d tensor"));
        }
        Ok(self.unbind(0)?.into_iter())
    }

    /// Views of consecutive pieces of dimension `dim`: the method form of
    /// [`split`](crate::split()).
    #[torch_function]
    pub fn split(&self, split_size: impl Into<SplitSize>, #[default(0)] dim: i64) -> Result<Vec<Tensor>> {
        split_impl("split", ("self", self), &split_size.into(), dim)
    }

    /// Views of `chunks` pieces of dimension `dim`: the method form of
    /// [`chunk`](crate::chunk()).
    #[torch_function]
    pub fn chunk(&self, chunks: i64, #[default(0)] dim: i64) -> Result<Vec<Tensor>> {
        chunk_impl("chunk", ("self", self), chunks, dim)
    }
}

crate::samples! {
    CAT => [sample([Value::List(vec![f32s(&[2, 3]), f32s(&[1, 3])])]), sample([Value::List(vec![f32s(&[2, 3]), i64s(&[2, 1]), f32s(&[0])])]).kw("dim", 1)],
    CONCAT => [sample([Value::List(vec![f32s(&[2]), f32s(&[3])])])],
    CONCATENATE => [sample([Value::List(vec![f32s(&[2, 1]), f32s(&[2, 2])])]).kw("axis", -1)],
    STACK => [sample([Value::List(vec![f32s(&[2, 3]), f32s(&[2, 3]), f32s(&[2, 3])])]).kw("dim", 1)],
    SPLIT => [sample([f32s(&[5, 2]), Value::Int(2)]), sample([f32s(&[5, 2]), Value::List(vec![1.into(), 4.into()])])],
    CHUNK => [sample([f32s(&[5, 2]), Value::Int(3)]), sample([f32s(&[5, 2]), Value::Int(2)]).kw("dim", 1)],
    Tensor::SPLIT => [sample([f32s(&[5, 2]), Value::Int(2)]).kw("dim", 0)],
    Tensor::CHUNK => [sample([f32s(&[4, 2]), Value::Int(2)])],
    UNBIND => [sample([f32s(&[3, 2])]), sample([i64s(&[2, 3])]).kw("dim", -1)],
    Tensor::UNBIND => [sample([f32s(&[2, 3]), Value::Int(1)])],
}
