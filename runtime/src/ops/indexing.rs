//! Indexing and rearranging copies: `index_select`, `gather`, `flip`, `roll`, `repeat`,
//! `tril` and `triu`, and indexed writes (`index_put`, and `t[index] = value`). Each returns a
//! tensor with its own storage, or writes into its `self`.

use crate::backend::{Binary, Buffer, Device, Reduce};
use crate::error::{Result, bail};
use crate::ops::device::device_of;
use crate::primitive;
use crate::tensor::{DType, Dense, Dims, Index, IndexItem, Layout, Scalar, Shape, Tensor, normalize_dim};
use crate::testing::{bools, f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

use super::IntList;

/// The integer positions `values` as an index vector on `device`, in its index dtype.
pub(crate) fn positions(device: Device, values: impl ExactSizeIterator<Item = i64>) -> Result<Tensor> {
    let shape = Shape::from([values.len()]);
    let data = match device.index_dtype() {
        DType::Int64 => {
            let mut data = crate::backend::host::alloc("positions", values.len())?;
            data.extend(values);
            Buffer::from_vec(data)
        }
        _ => {
            let mut data = crate::backend::host::alloc("positions", values.len())?;
            data.extend(values.map(|v| v as i32));
            Buffer::from_vec(data)
        }
    };
    primitive::upload(device, data, shape)
}

/// The first index in `index` outside `0..size`, if any (its smallest or largest element),
/// found on `index`'s device.
pub(crate) fn out_of_range(index: &Dense, size: usize) -> Result<Option<i64>> {
    // A batched index's values are checked per example by the kernel its rule runs.
    if crate::func::is_batched(index) {
        return Ok(None);
    }
    let Some((min, max)) = value_range(&Tensor::from_array(index.array.clone()))? else { return Ok(None) };
    let (min, max) = (min.to_i64(), max.to_i64());
    Ok(if min < 0 {
        Some(min)
    } else if usize::try_from(max).is_ok_and(|m| m >= size) {
        Some(max)
    } else {
        None
    })
}

/// The smallest and largest of `x`'s values (NaN winning), for an argument check that reads
/// them (data-dependent), over every example of a batched tensor; `None` when there are none
/// or they are unknown (a fake tensor's).
pub(crate) fn value_range(x: &Tensor) -> Result<Option<(Scalar, Scalar)>> {
    if let Some((batch, _)) = crate::func::top_batch(x)? {
        return value_range(&batch);
    }
    let d = x.data("value_range", "input")?;
    if d.layout.numel() == 0 || crate::fake_tensor::values_unknown(d) {
        return Ok(None);
    }
    let all: Vec<usize> = (0..d.layout.ndim()).collect();
    let extreme = |op| -> Result<Scalar> { primitive::item(&primitive::reduce(x, &all, op, d.dtype)?) };
    Ok(Some((extreme(Reduce::Min)?, extreme(Reduce::Max)?)))
}

/// `x` with dimension `dim` put in the order of `order` (a permutation of its positions, or
/// any selection of them).
fn reordered(x: &Tensor, dim: usize, order: impl ExactSizeIterator<Item = i64>) -> Result<Tensor> {
    primitive::index_select(x, dim, &positions(x.device()?, order)?)
}

fn index_select_impl(func: &str, (name, t): (&str, &Tensor), dim: i64, index: &Tensor) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let idx = index.data(func, "index")?;
    device_of(func, &[(name, x), ("index", idx)])?;
    if idx.layout.ndim() > 1 {
        bail!(Index, "{func}(): Index is supposed to be a vector, but it has {} dimensions", idx.layout.ndim());
    }
    if !matches!(idx.dtype, DType::Int64 | DType::Int32) {
        bail!(Runtime, "{func}(): Expected dtype int32 or int64 for index, but got {}", idx.dtype);
    }
    let ndim = x.layout.ndim();
    let d = normalize_dim(dim, ndim, func)?;
    let size = if ndim == 0 { 1 } else { x.layout.shape[d] };
    if ndim == 0 && idx.layout.numel() != 1 {
        bail!(Runtime, "{func}(): Index to scalar can have only 1 value, got {} value(s)", idx.layout.numel());
    }
    if out_of_range(idx, size)?.is_some() {
        bail!(Index, "{func}(): index out of range in self (dimension {d} has size {size})");
    }
    if ndim == 0 {
        return primitive::copy(t, x.dtype);
    }
    primitive::index_select(t, d, &at_least_1d(index)?)
}

/// `t` seen as one-dimensional when it has no dimension (a view of its one element).
fn at_least_1d(t: &Tensor) -> Result<Tensor> {
    if t.data("at_least_1d", "input")?.layout.ndim() > 0 {
        return Ok(t.clone());
    }
    primitive::reshape(t, &Shape::from([1]))
}

fn gather_impl(func: &str, (name, t): (&str, &Tensor), dim: i64, index: &Tensor) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let idx = index.data(func, "index")?;
    device_of(func, &[(name, x), ("index", idx)])?;
    if idx.dtype != DType::Int64 && idx.dtype != idx.device().index_dtype() {
        bail!(Runtime, "{func}(): Expected dtype int64 for index, but got {}", idx.dtype);
    }
    let d = normalize_dim(dim, x.layout.ndim(), func)?;
    let (input, indices) = (at_least_1d(t)?, at_least_1d(index)?);
    let (xs, is) = (&input.shape()?, &indices.shape()?);
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
    if let Some(bad) = out_of_range(idx, xs[d])? {
        bail!(Runtime, "{func}(): index {bad} is out of bounds for dimension {d} with size {}", xs[d]);
    }
    let out = primitive::gather(&input, d, &indices)?;
    // The result has the index's shape (zero-dimensional for a zero-dimensional index).
    primitive::reshape(&out, &idx.layout.shape)
}

pub(crate) fn flip_impl(func: &str, (name, t): (&str, &Tensor), dims: &Dims) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let mut dims = dims.resolve(x.layout.ndim(), func)?;
    if x.layout.ndim() == 0 {
        dims.clear();
    }
    if dims.is_empty() {
        return primitive::copy(t, x.dtype);
    }
    // Each reordering makes a new tensor, whatever the layout it reads.
    let mut out = t.clone();
    for d in dims {
        let n = x.layout.shape[d];
        out = reordered(&out, d, (0..n).rev().map(|i| i as i64))?;
    }
    Ok(out)
}

/// The order that rolls `n` positions forward by `shift`, wrapping around.
fn rolled(n: usize, shift: i64) -> impl ExactSizeIterator<Item = i64> {
    let shift = if n == 0 { 0 } else { shift.rem_euclid(n as i64) };
    (0..n).map(move |i| (i as i64 - shift).rem_euclid(n as i64))
}

fn roll_impl(func: &str, (name, t): (&str, &Tensor), shifts: &[i64], dims: Option<&[i64]>) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let dims = dims.unwrap_or_default();
    if shifts.is_empty() {
        bail!(Runtime, "{func}(): `shifts` required");
    }
    if dims.is_empty() && shifts.len() == 1 {
        // Rolled as one flat sequence, then given its shape back.
        let n = x.layout.numel();
        let flat = primitive::reshape(t, &Shape::from([n]))?;
        let out = reordered(&flat, 0, rolled(n, shifts[0]))?;
        return primitive::reshape(&out, &x.layout.shape);
    }
    if shifts.len() != dims.len() {
        bail!(Runtime, "{func}(): shifts and dimensions must align. shifts: {}, dims:{}", shifts.len(), dims.len());
    }
    let ndim = x.layout.ndim();
    let dims = dims.iter().map(|&d| normalize_dim(d, ndim, func)).collect::<Result<Vec<usize>>>()?;
    if ndim == 0 {
        return primitive::copy(t, x.dtype);
    }
    let mut out = t.clone();
    for (&shift, &d) in shifts.iter().zip(&dims) {
        out = reordered(&out, d, rolled(x.layout.shape[d], shift))?;
    }
    Ok(out)
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
    let size = |i: usize| i.checked_sub(leading).map_or(1, |d| x.layout.shape[d]);
    let shape: Option<Vec<usize>> =
        repeats.iter().enumerate().map(|(i, &r)| (r as usize).checked_mul(size(i))).collect();
    let bytes = shape
        .as_ref()
        .and_then(|s| s.iter().filter(|&&d| d != 0).try_fold(x.dtype.itemsize(), |b, &d| b.checked_mul(d)));
    let (Some(shape), Some(bytes)) = (shape, bytes) else {
        bail!(Runtime, "{func}(): the repeated tensor has more elements than memory can hold");
    };
    if bytes > isize::MAX as usize {
        bail!(Runtime, "{func}(): the repeated tensor has more elements than memory can hold");
    }
    let tiled = primitive::view(t, |l| {
        let (sizes, strides): (Vec<usize>, Vec<usize>) = repeats
            .iter()
            .enumerate()
            .flat_map(|(i, &r)| {
                let (n, s) = i.checked_sub(leading).map_or((1, 0), |d| (l.shape[d], l.strides[d]));
                [(r as usize, 0), (n, s)]
            })
            .unzip();
        Ok(Layout { shape: Shape::from(sizes), strides: strides.into_iter().collect(), offset: l.offset })
    })?;
    let copy = primitive::copy(&tiled, x.dtype)?;
    let shape = Shape::from(shape);
    primitive::unsafe_view(&copy, |l| Ok(Layout { offset: l.offset, ..Layout::contiguous(shape.clone()) }))
}

/// The elements on one side of a diagonal of each matrix (the last two dimensions), zeros
/// elsewhere: those at row `i`, column `j` with `j - i <= diagonal` (`lower`) or
/// `j - i >= diagonal`.
fn triangle_impl(func: &str, (name, t): (&str, &Tensor), diagonal: i64, lower: bool) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let ndim = x.layout.ndim();
    if ndim < 2 {
        bail!(Runtime, "{func}(): input tensor must have at least 2 dimensions, but it has {ndim}");
    }
    let device = x.device();
    let (n, m) = (x.layout.shape[ndim - 2], x.layout.shape[ndim - 1]);
    // Offsets beyond the matrix keep everything or nothing: clamped, they fit in any index dtype.
    let reach = (n + m) as i64;
    let diagonal = Tensor::from_dense(Dense::number(diagonal.clamp(-reach, reach)));
    let rows = primitive::reshape(&positions(device, (0..n).map(|i| i as i64))?, &Shape::from([n, 1]))?;
    let columns = positions(device, (0..m).map(|i| i as i64))?;
    let index = device.index_dtype();
    let offsets = primitive::binary(&columns, &rows, Binary::Sub(Scalar::Int(1)), index, None)?;
    let side = if lower { Binary::Le } else { Binary::Ge };
    let kept = primitive::binary(&offsets, &diagonal, side, index, None)?;
    let zero = Tensor::from_dense(Dense::number(false));
    primitive::select(&kept, t, &zero, x.dtype)
}

/// `t[index]` with tensors among the items (PyTorch's advanced indexing): a copy. Bool masks
/// become the integer positions where they are true; the basic items make a view first; the
/// integer tensors broadcast together and pick one element each from the dimensions they
/// index, which become the result's leading dimensions, or stay in place when they are
/// adjacent. Built from a view, `index_select` and reshapes, so it differentiates (repeated
/// positions accumulate).
pub(crate) fn advanced_index(func: &str, t: &Tensor, index: &Index) -> Result<Tensor> {
    let x = t.data(func, "self")?;
    check_masks(func, &x.layout.shape, index.items())?;
    // Bool masks as one integer tensor per dimension they cover.
    let mut items: Vec<IndexItem> = Vec::new();
    for item in index.items() {
        match item {
            IndexItem::Tensor(mask) if mask.dtype()? == DType::Bool => {
                items.extend(true_positions(func, mask, x.device())?.into_iter().map(IndexItem::Tensor));
            }
            other => items.push(other.clone()),
        }
    }
    // The view of the basic items, and where each index tensor's dimension lands in it.
    let consumed = items.iter().filter(|i| !matches!(i, IndexItem::NewAxis | IndexItem::Ellipsis)).count();
    let mut basic = Vec::with_capacity(items.len());
    let (mut picks, mut at) = (Vec::new(), 0usize);
    for item in &items {
        match item {
            IndexItem::Tensor(i) => {
                picks.push((at, i.clone()));
                basic.push(IndexItem::slice(None, None, 1));
                at += 1;
            }
            IndexItem::Int(_) => basic.push(item.clone()),
            IndexItem::Ellipsis => {
                at += x.layout.ndim().saturating_sub(consumed);
                basic.push(item.clone());
            }
            _ => {
                at += 1;
                basic.push(item.clone());
            }
        }
    }
    let index = Index::from(basic);
    let view = primitive::view(t, |l| index.apply(l))?;
    let shape = view.shape()?;
    // The index tensors broadcast, made non-negative and checked against their dimensions.
    let mut common = Shape::from([]);
    for (_, i) in &picks {
        let d = i.data(func, "index")?;
        if !matches!(d.dtype, DType::Int64 | DType::Int32) {
            bail!(Index, "{func}(): tensors used as indices must be long, int or bool tensors, not {}", d.dtype);
        }
        common = crate::tensor::broadcast_shapes(&common, &d.layout.shape, func)?;
    }
    let int = x.device().index_dtype();
    let mut linear: Option<Tensor> = None;
    for (dim, i) in &picks {
        let size = shape[*dim];
        if let Some(bad) = out_of_range_signed(func, i, size)? {
            bail!(Index, "{func}(): index {bad} is out of bounds for dimension {dim} with size {size}");
        }
        let negative = primitive::binary(i, &Tensor::scalar(0i64), Binary::Lt, int, None)?;
        let wrapped = primitive::binary(i, &Tensor::scalar(size as i64), Binary::Add(Scalar::Int(1)), int, None)?;
        let i = primitive::select(&negative, &wrapped, i, int)?;
        linear = Some(match linear {
            None => i,
            Some(l) => {
                let scaled = primitive::binary(&l, &Tensor::scalar(size as i64), Binary::Mul, int, None)?;
                primitive::binary(&scaled, &i, Binary::Add(Scalar::Int(1)), int, None)?
            }
        });
    }
    let Some(linear) = linear else {
        bail!(NotImplemented, "{func}(): indexing by a zero-dimensional bool tensor is not implemented");
    };
    let linear =
        primitive::reshape(&primitive::copy(&expand_to(&linear, &common)?, int)?, &Shape::from([common.numel()]))?;
    // The indexed dimensions first, merged into one, then picked.
    let dims: Vec<usize> = picks.iter().map(|(d, _)| *d).collect();
    let rest: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
    let order: Vec<usize> = dims.iter().chain(&rest).copied().collect();
    let moved = primitive::view(&view, |l| {
        Ok(Layout {
            shape: order.iter().map(|&d| l.shape[d]).collect(),
            strides: order.iter().map(|&d| l.strides[d]).collect(),
            offset: l.offset,
        })
    })?;
    let merged: Shape =
        [dims.iter().map(|&d| shape[d]).product()].into_iter().chain(rest.iter().map(|&d| shape[d])).collect();
    let picked = primitive::index_select(&primitive::reshape(&moved, &merged)?, 0, &linear)?;
    let out_shape: Shape = common.iter().copied().chain(rest.iter().map(|&d| shape[d])).collect();
    let out = primitive::reshape(&picked, &out_shape)?;
    // Adjacent index dimensions stay where they were.
    let adjacent = dims.windows(2).all(|w| w[1] == w[0] + 1);
    if !adjacent || dims[0] == 0 {
        return Ok(out);
    }
    let (b, first) = (common.len(), dims[0]);
    let order: Vec<usize> = (b..b + first).chain(0..b).chain(b + first..out_shape.len()).collect();
    primitive::view(&out, |l| {
        Ok(Layout {
            shape: order.iter().map(|&d| l.shape[d]).collect(),
            strides: order.iter().map(|&d| l.strides[d]).collect(),
            offset: l.offset,
        })
    })
}

/// PyTorch's rule that a bool mask has the sizes of the dimensions it indexes (a mask of
/// fewer or more positions would pick some of them silently, or be out of range).
fn check_masks(func: &str, shape: &[usize], items: &[IndexItem]) -> Result<()> {
    let mask_of = |item: &IndexItem| match item {
        IndexItem::Tensor(t) => t.dense().filter(|d| d.dtype == DType::Bool).map(|d| d.layout.shape.clone()),
        _ => None,
    };
    let consumed: usize = items
        .iter()
        .map(|item| match item {
            IndexItem::Int(_) | IndexItem::Slice { .. } => 1,
            IndexItem::Tensor(_) => mask_of(item).map_or(1, |m| m.len()),
            IndexItem::NewAxis | IndexItem::Ellipsis => 0,
        })
        .sum();
    let mut dim = 0;
    for item in items {
        match item {
            IndexItem::Int(_) | IndexItem::Slice { .. } => dim += 1,
            IndexItem::Ellipsis => dim += shape.len().saturating_sub(consumed),
            IndexItem::NewAxis => {}
            IndexItem::Tensor(_) => {
                let Some(mask) = mask_of(item) else {
                    dim += 1;
                    continue;
                };
                let indexed = shape.get(dim..).unwrap_or_default();
                // Dimensions beyond the tensor's are "too many indices", reported by the view.
                if let Some(k) = (0..mask.len()).find(|&k| indexed.get(k).is_some_and(|&n| n != mask[k])) {
                    bail!(
                        Index,
                        "{func}(): The shape of the mask {:?} at index {k} does not match the shape of the indexed \
                         tensor {indexed:?} at index {k}",
                        mask.as_ref()
                    );
                }
                dim += mask.len();
            }
        }
    }
    Ok(())
}

/// `t` broadcast to `shape` (a view).
fn expand_to(t: &Tensor, shape: &Shape) -> Result<Tensor> {
    let sizes: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
    super::view::expand_impl("index", ("index", t), &sizes)
}

/// The positions where the bool `mask` is true, one integer vector per dimension of the mask
/// (PyTorch's `mask.nonzero(as_tuple=True)`), on `device`.
fn true_positions(func: &str, mask: &Tensor, device: crate::backend::Device) -> Result<Vec<Tensor>> {
    let m = mask.data(func, "index")?;
    let rows = primitive::nonzero(mask)?;
    let rows = if m.device() == device { rows } else { primitive::transfer(&rows, device, device.index_dtype())? };
    (0..m.layout.shape.len()).map(|d| rows.select(1, d as i64)).collect()
}

/// The first index in the integer tensor `index` outside `-size..size`, if any.
fn out_of_range_signed(func: &str, index: &Tensor, size: usize) -> Result<Option<i64>> {
    let dtype = index.dtype()?;
    let shifted = primitive::binary(index, &Tensor::scalar(size as i64), Binary::Add(Scalar::Int(1)), dtype, None)?;
    Ok(out_of_range(shifted.data(func, "index")?, 2 * size)?.map(|bad| bad - size as i64))
}

/// `value` without the leading dimensions of size one that it has beyond `ndim` (PyTorch drops
/// them before an indexed write: `t[0] = ones(1, 3)` writes a row of `t`), a view.
fn without_leading_ones(func: &str, (name, value): (&str, &Tensor), ndim: usize) -> Result<Tensor> {
    let shape = &value.data(func, name)?.layout.shape;
    let ones = shape.iter().take(shape.len().saturating_sub(ndim)).take_while(|&&n| n == 1).count();
    if ones == 0 {
        return Ok(value.clone());
    }
    primitive::view(value, |l| {
        Ok(Layout {
            shape: l.shape.iter().skip(ones).copied().collect(),
            strides: l.strides.iter().skip(ones).copied().collect(),
            offset: l.offset,
        })
    })
}

/// The values an indexed write puts into `target`: a Python number is converted to its dtype;
/// a tensor must have that dtype already (PyTorch's `index_put_` rule), and is moved to its
/// device only when it is a zero-dimensional CPU tensor, which joins any device.
fn put_values(func: &str, (name, values): (&str, &Tensor), target: &Dense) -> Result<Tensor> {
    let v = values.data(func, name)?;
    device_of(func, &[("self", target), (name, v)])?;
    if !v.wrapped_number && v.dtype != target.dtype {
        bail!(
            Runtime,
            "{func}(): Index put requires the source and destination dtypes match, got {} for the destination and {} \
             for the source.",
            target.dtype,
            v.dtype
        );
    }
    if v.wrapped_number || v.device() != target.device() {
        return primitive::transfer(values, target.device(), target.dtype);
    }
    Ok(values.clone())
}

/// `t` with `values` written at the elements `index` selects (as [`Tensor::get`] selects
/// them, with index tensors among the items), or added there with `accumulate`, as a new
/// tensor: PyTorch's `index_put`. `values` broadcast to the indexing result; where positions
/// repeat, the last write wins (or every value is added). Built from primitives (a scatter and
/// a select), so it differentiates in `t` and in `values`.
fn put(
    func: &str,
    (name, t): (&str, &Tensor),
    index: &Index,
    values: (&str, &Tensor),
    accumulate: bool,
) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let values = put_values(func, values, x)?;
    // The flat position in `t` of each element the index selects, in the indexing result's shape.
    let n = x.layout.numel();
    let ids = primitive::reshape(&positions(x.device(), (0..n).map(|i| i as i64))?, &x.layout.shape)?;
    let picked = advanced_index(func, &ids, index)?;
    let target = picked.data(func, "index")?.layout.shape.clone();
    let values = without_leading_ones(func, ("values", &values), target.len())?;
    let shape = values.data(func, "values")?.layout.shape.clone();
    if crate::tensor::broadcast_shapes(&shape, &target, func).ok().as_ref() != Some(&target) {
        bail!(
            Runtime,
            "{func}(): shape mismatch: value tensor of shape {:?} cannot be broadcast to indexing result of shape {:?}",
            shape.as_ref(),
            target.as_ref()
        );
    }
    let (all, selected) = (Shape::from([n]), Shape::from([target.numel()]));
    let mut picked = primitive::reshape(&picked, &selected)?;
    let mut values = primitive::reshape(&expand_to(&values, &target)?, &selected)?;
    let source = primitive::reshape(t, &all)?;
    // On meta or fake tensors the positions are unknown and only the result's shape counts:
    // the writes are placed as an accumulation would place them.
    let shapes_only = crate::fake_tensor::values_unknown(picked.data(func, "index")?);
    let out = if accumulate || shapes_only {
        let added = primitive::scatter_add(&all, 0, &picked, &values)?;
        primitive::binary(&source, &added, Binary::Add(Scalar::Int(1)), x.dtype, None)?
    } else {
        // Where a position repeats, only its last write is kept.
        let at: Vec<i64> = if picked.is_wrapper() {
            // A wrapper's positions are read one by one through its hook (it holds no data).
            (0..picked.data(func, "index")?.layout.numel())
                .map(|j| Ok(primitive::item(&picked.select(0, j as i64)?)?.to_i64()))
                .collect::<Result<_>>()?
        } else {
            crate::backend::host::elements::<i64>(func, &*crate::backend::host::on_host(picked.data(func, "index")?)?)?
        };
        let mut written: Vec<bool> = crate::backend::host::alloc(func, n)?;
        written.resize(n, false);
        let mut kept = Vec::new();
        for (j, &p) in at.iter().enumerate().rev() {
            let Some(slot) = usize::try_from(p).ok().and_then(|p| written.get_mut(p)) else {
                bail!(Runtime, "{func}(): internal error: position {p} outside a tensor of {n} elements");
            };
            if !*slot {
                *slot = true;
                kept.push(j as i64);
            }
        }
        if kept.len() < at.len() {
            let kept = positions(x.device(), kept.into_iter().rev())?;
            picked = primitive::index_select(&picked, 0, &kept)?;
            values = primitive::index_select(&values, 0, &kept)?;
        }
        let placed = primitive::scatter_add(&all, 0, &picked, &values)?;
        let mask = primitive::upload(x.device(), Buffer::from_vec(written), all)?;
        primitive::select(&mask, &placed, &source, x.dtype)?
    };
    primitive::reshape(&out, &x.layout.shape)
}

/// `t[index] = value` (`Tensor.__setitem__`, see [`Tensor::set`]): a copy into the view of a
/// basic index, an `index_put_` for an index with tensors among its items.
pub(crate) fn assign(func: &str, t: &Tensor, index: &Index, value: &Tensor) -> Result<()> {
    t.data(func, "self")?;
    if index.is_advanced() {
        super::inplace::update(func, t, &[value], |source| {
            put(func, ("self", source), index, ("value", value), false)
        })?;
        return Ok(());
    }
    let view = primitive::view(t, |l| index.apply(l))?;
    let (dst, v) = (view.data(func, "self")?, value.data(func, "value")?);
    device_of(func, &[("self", dst), ("value", v)])?;
    let value = without_leading_ones(func, ("value", value), dst.layout.ndim())?;
    let sizes: Vec<i64> = dst.layout.shape.iter().map(|&n| n as i64).collect();
    let expanded = super::view::expand_impl(func, ("value", &value), &sizes)?;
    super::inplace::write_converted(func, &view, &expanded)
}

/// `index_put` on `t`: one index tensor per leading dimension (a bool mask covers as many
/// dimensions as it has).
fn index_put_impl(
    func: &str,
    t: (&str, &Tensor),
    indices: &[Tensor],
    values: &Tensor,
    accumulate: bool,
) -> Result<Tensor> {
    let ndim = t.1.data(func, t.0)?.layout.ndim();
    if indices.is_empty() {
        bail!(Runtime, "{func}(): expected at least one index tensor, got none");
    }
    let mut covered = 0;
    for index in indices {
        let i = index.data(func, "indices")?;
        covered += if i.dtype == DType::Bool { i.layout.ndim() } else { 1 };
    }
    if covered > ndim {
        bail!(Index, "{func}(): too many indices for tensor of dimension {ndim} (got {covered})");
    }
    let index = Index::from(indices.iter().cloned().map(IndexItem::Tensor).collect::<Vec<_>>());
    put(func, t, &index, ("values", values), accumulate)
}

/// `input` with `values` put at the positions `indices` give (`torch.index_put`), as a new
/// tensor: `indices` holds one integer tensor per leading dimension (they broadcast together)
/// or bool masks, as `input[indices]` reads them; `values` has `input`'s dtype (a Python number
/// is converted) and broadcasts to what `input[indices]` would give. Where positions repeat,
/// the last value wins, or with `accumulate` every value is added. Differentiable in `input` and
/// `values`.
///
/// ```
/// let t = torchfn::zeros([2, 3], None, None)?;
/// let (rows, cols) = (torchfn::tensor([0i64, 1, 1])?, torchfn::tensor([2i64, 0, 0])?);
/// let ones = torchfn::ones([3], None, None)?;
/// let put = torchfn::index_put(&t, &[rows.clone(), cols.clone()], &ones, false)?;
/// assert_eq!(put.to_vec::<f32>()?, [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
/// let added = torchfn::index_put(&t, &[rows, cols], &ones, true)?; // (1, 0) twice: 2
/// assert_eq!(added.to_vec::<f32>()?, [0.0, 0.0, 1.0, 2.0, 0.0, 0.0]);
/// assert_eq!(t.to_vec::<f32>()?, [0.0; 6]); // `t` itself is unchanged
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn index_put(
    input: &Tensor,
    indices: &[Tensor],
    values: &Tensor,
    #[default(false)] accumulate: bool,
) -> Result<Tensor> {
    index_put_impl("index_put", ("input", input), indices, values, accumulate)
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

/// The positions of the nonzero (true) elements of `input`, one row of indices per element in
/// order: `[n, input.dim()]` in the device's index dtype (int64; int32 on wgpu)
/// (`torch.nonzero`). The number of rows depends on the values,
/// so shape-only tools (fake tensors) cannot run it.
///
/// ```
/// let t = torchfn::tensor([[0.0f32, 1.0], [2.0, 0.0]])?;
/// assert_eq!(torchfn::nonzero(&t)?.to_vec::<i64>()?, [0, 1, 1, 0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn nonzero(input: &Tensor) -> Result<Tensor> {
    input.data("nonzero", "input")?;
    primitive::nonzero(input)
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
/// let t = torchfn::ones([2, 3], torchfn::DType::Int64, None)?;
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
/// let t = torchfn::ones([2, 3], torchfn::DType::Int64, None)?;
/// assert_eq!(torchfn::triu(&t, 1)?.to_vec::<i64>()?, [0, 1, 1, 0, 0, 1]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn triu(input: &Tensor, #[default(0)] diagonal: i64) -> Result<Tensor> {
    triangle_impl("triu", ("input", input), diagonal, false)
}

impl Tensor {
    /// The positions of the nonzero elements: the method form of [`nonzero`](crate::nonzero()).
    #[torch_function]
    pub fn nonzero(&self) -> Result<Tensor> {
        self.data("nonzero", "self")?;
        primitive::nonzero(self)
    }

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

    /// `self` with `values` put at the positions `indices` give, as a new tensor: the method
    /// form of [`index_put`](crate::index_put()).
    #[torch_function]
    pub fn index_put(&self, indices: &[Tensor], values: &Tensor, #[default(false)] accumulate: bool) -> Result<Tensor> {
        index_put_impl("index_put", ("self", self), indices, values, accumulate)
    }

    /// Puts `values` at the positions `indices` give, in place (`Tensor.index_put_`); returns
    /// `self`. The rules are [`index_put`](crate::index_put())'s; as every in-place operation,
    /// it writes through views and is an error on a leaf that requires grad. Tensor-likes in
    /// `indices` and `values` take part in dispatch (a duck among the indices reaches its hook).
    ///
    /// ```
    /// let t = torchfn::zeros([4], None, None)?;
    /// let at = torchfn::tensor([1i64, 3, 1])?;
    /// t.index_put_(&[at], &torchfn::tensor([5.0f32, 6.0, 7.0])?, false)?;
    /// assert_eq!(t.to_vec::<f32>()?, [0.0, 7.0, 0.0, 6.0]); // position 1: the last write wins
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn index_put_(
        &self,
        indices: &[Tensor],
        values: &Tensor,
        #[default(false)] accumulate: bool,
    ) -> Result<Tensor> {
        super::inplace::update("index_put_", self, &[values], |source| {
            index_put_impl("index_put_", ("self", source), indices, values, accumulate)
        })
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
    NONZERO => [sample([f32s(&[2, 3])]), sample([bools(&[4])]), sample([i64s(&[])])],
    Tensor::NONZERO => [sample([bools(&[2, 2])])],
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
    INDEX_PUT => [sample([f32s(&[3, 2]), Value::Tuple(vec![index(&[2, 0])]), f32s(&[2, 2])]),
        sample([f32s(&[3, 2]), Value::List(vec![index(&[0, 0, 2]), index(&[1, 1, 0])]), f32s(&[3])]).kw("accumulate", true)],
    Tensor::INDEX_PUT => [sample([f32s(&[2, 3]), Value::Tuple(vec![bools(&[2, 3])]), f32s(&[])]),
        sample([i64s(&[3]), Value::Tuple(vec![index(&[1, 1])]), i64s(&[2])]).kw("accumulate", true)],
    Tensor::INDEX_PUT_ => [sample([f32s(&[4]), Value::Tuple(vec![index(&[1, 3, 1])]), f32s(&[3])]),
        sample([f32s(&[2, 2]), Value::Tuple(vec![index(&[0])]), f32s(&[1, 2])]).kw("accumulate", true)],
}
