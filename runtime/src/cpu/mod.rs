//! The CPU backend (layer 3): a few kernel families on ndarray, which see storage and layouts
//! only. Operations (layer 2) check arguments, work out shapes and dtypes, and call these.

mod elementwise;
mod indexing;
mod map;
mod number;
mod random;
mod reduce;
mod window;
mod write;

use ndarray::{ArrayD, ArrayViewD, Axis, Dimension, Ix2, IxDyn, ShapeBuilder, Zip};
use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::tensor::{DType, Dense, Element, Layout, Scalar, Shape, with_dtype};

pub(crate) use elementwise::{Float, Signed, erfc, select};
pub(crate) use indexing::{concat, flip, gather, index_select, roll, triangle};
pub(crate) use map::output;
use map::{Operand, map1, map1_in_place, map2, map2_in_place};
pub(crate) use number::Number;
pub(crate) use random::{Distribution, sample};
pub(crate) use reduce::{fold, reduce, scan, sum_f64};
pub(crate) use window::{Window, conv2d, max_pool2d, with_elements};
pub(crate) use write::assign;

/// Runs `f` on an ndarray view of `dense`, whose dtype must be `T`. Every layout torchfn makes
/// reads correctly, expanded (stride-0) and permuted ones included.
pub(crate) fn read<T: Element, R>(dense: &Dense, f: impl FnOnce(ArrayViewD<'_, T>) -> R) -> R {
    let buffer = dense.storage.read();
    let data = buffer.as_slice::<T>().expect("a dense tensor's dtype is its storage's");
    let layout = &dense.layout;
    // An empty view is given in standard layout: ndarray's `mapv` and `to_owned` assume
    // (in debug builds) that an empty view with other strides could index its slice.
    if layout.numel() == 0 {
        return f(gathered(data, layout).view());
    }
    // A stride-0 (expanded) dimension of two or more elements makes the view overlap, which
    // ndarray 0.16.0 refuses (0.16.1 accepts it for read-only views): such a dimension is viewed
    // with size one, then broadcast back. The dimensions left address distinct elements, as in
    // every layout torchfn makes.
    let expanded = |(&n, &s): (&usize, &usize)| s == 0 && n > 1;
    let collapsed: SmallVec<[usize; 6]> =
        layout.shape.iter().zip(&layout.strides).map(|d| if expanded(d) { 1 } else { *d.0 }).collect();
    let any_expanded = collapsed.as_slice() != &layout.shape[..];
    let start = &data[layout.offset.min(data.len())..];
    match ArrayViewD::from_shape(IxDyn(&collapsed).strides(IxDyn(&layout.strides)), start) {
        Ok(view) if !any_expanded => f(view),
        // Broadcasting a size-one dimension always succeeds unless the shape's element count
        // exceeds `isize::MAX`, which `expand` refuses.
        Ok(view) => f(view.broadcast(IxDyn(&layout.shape)).expect("an expanded shape fits in memory")),
        // Other overlapping strides (refused by ndarray 0.16.0), or an empty tensor whose
        // strides ndarray cannot offset by: the elements are gathered one by one.
        Err(_) => f(gathered(data, layout).view()),
    }
}

/// The elements `layout` addresses in `data`, copied into a standard-layout array.
fn gathered<T: Element>(data: &[T], layout: &Layout) -> ArrayD<T> {
    let shape = IxDyn(&layout.shape);
    if layout.numel() == 0 {
        return ArrayD::from_shape_vec(shape, Vec::new()).expect("an empty tensor's shape fits in memory");
    }
    let elements = ndarray::indices(shape.clone())
        .into_iter()
        .map(|index| {
            let position = index.slice().iter().zip(&layout.strides).fold(layout.offset, |p, (&i, &s)| p + i * s);
            *data.get(position).expect("a layout stays inside its storage")
        })
        .collect();
    ArrayD::from_shape_vec(shape, elements).expect("one element per position")
}

/// An empty vector with room for `n` elements, or an error naming `func` when memory runs out
/// (a huge expanded tensor copied, say): never an abort.
pub(crate) fn alloc<T>(func: &str, n: usize) -> Result<Vec<T>> {
    let mut data = Vec::new();
    data.try_reserve_exact(n).map_err(|_| {
        Error::runtime_error(format!("{func}(): not enough memory: you tried to allocate {n} elements"))
    })?;
    Ok(data)
}

/// A contiguous copy of `dense` in its own dtype, with a fresh storage.
pub(crate) fn copy(func: &str, dense: &Dense) -> Result<Dense> {
    let shape = dense.layout.shape.clone();
    with_dtype!(dense.dtype, T => read(dense, |v: ArrayViewD<'_, T>| {
        let mut data = alloc(func, v.len())?;
        data.extend(v.iter().copied());
        Ok(Dense::from_vec(data, shape))
    }))
}

/// Runs `f` on a view of `dense` as `T`, converting (into a temporary) when its dtype differs.
pub(crate) fn read_as<T: Element, R>(dense: &Dense, f: impl FnOnce(ArrayViewD<'_, T>) -> R) -> R {
    if dense.dtype == T::DTYPE {
        return read(dense, f);
    }
    let converted = with_dtype!(dense.dtype, S => read(dense, |v: ArrayViewD<'_, S>| v.mapv(cast::<S, T>)));
    f(converted.view())
}

/// The element of a one-element tensor as a Python number.
pub(crate) fn read_scalar(dense: &Dense) -> Scalar {
    with_dtype!(dense.dtype, T => read(dense, |v: ArrayViewD<'_, T>| {
        let x = v.iter().next().copied().unwrap_or_default();
        match T::DTYPE {
            DType::Bool => Scalar::Bool(x.to_i64() != 0),
            DType::Int32 | DType::Int64 => Scalar::Int(x.to_i64()),
            DType::Float32 | DType::Float64 => Scalar::Float(x.to_f64()),
        }
    }))
}

/// Converts one element as `tensor.to(dtype)` does: floats truncate toward zero into integers,
/// anything non-zero is `true`.
#[inline(always)]
pub(crate) fn cast<S: Element, T: Element>(x: S) -> T {
    if T::DTYPE.is_floating_point() || T::DTYPE == DType::Bool {
        T::from_f64(x.to_f64())
    } else {
        T::from_i64(x.to_i64())
    }
}

/// A fresh dense tensor holding `array`.
pub(crate) fn from_array<T: Element>(array: ArrayD<T>) -> Dense {
    let shape = Shape::from(array.shape());
    let data = if array.is_standard_layout() {
        let (data, offset) = array.into_raw_vec_and_offset();
        debug_assert_eq!(offset.unwrap_or(0), 0);
        data
    } else {
        array.iter().copied().collect()
    };
    Dense::from_vec(data, shape)
}

/// A contiguous copy of `dense` in `dtype`.
pub(crate) fn convert(dense: &Dense, dtype: DType) -> Dense {
    with_dtype!(dtype, T => read_as(dense, |v: ArrayViewD<'_, T>| from_array(v.to_owned())))
}

fn internal(what: &str) -> Error {
    Error::runtime_error(format!("internal error in a CPU kernel: {what}"))
}

/// `f` applied to each element (read as `T`), producing `U`. Contiguous inputs of dtype `T`
/// take the parallel loop; other layouts and dtypes go through ndarray.
pub(crate) fn unary<T: Element, U: Element>(dense: &Dense, f: impl Fn(T) -> U + Sync) -> Dense {
    let shape = &dense.layout.shape;
    let fast = with_operand(dense, shape, |x: Option<Operand<'_, T>>| match x? {
        Operand::Slice(x) => {
            // A result as large as an existing input; running out of memory here aborts, as
            // the ndarray path below does.
            let mut out = output::<U>("unary", x.len()).ok()?;
            map1(x, &mut out, &f);
            Some(Dense::from_vec(out, shape.clone()))
        }
        Operand::Repeat(v) => Some(Dense::from_vec(vec![f(v)], shape.clone())),
    });
    fast.unwrap_or_else(|| read_as(dense, |v: ArrayViewD<'_, T>| from_array(v.mapv(f))))
}

/// Runs `f` on `dense` as an operand of an elementwise loop over `shape`: one element
/// repeated when it has a single element, its contiguous elements when it has `shape` and
/// dtype `T`, `None` otherwise.
fn with_operand<T: Element, R>(dense: &Dense, shape: &Shape, f: impl FnOnce(Option<Operand<'_, T>>) -> R) -> R {
    // Never waits for the lock: a caller may hold another storage's (see `binary_to`).
    let Some(buffer) = dense.storage.try_read() else { return f(None) };
    let (offset, n) = (dense.layout.offset, dense.layout.numel());
    if n == 1 {
        let value =
            with_dtype!(dense.dtype, S => buffer.as_slice::<S>().and_then(|d| d.get(offset)).map(|&x| cast::<S, T>(x)));
        return f(value.map(Operand::Repeat));
    }
    if dense.dtype != T::DTYPE || dense.layout.shape != *shape || !dense.layout.is_contiguous() {
        return f(None);
    }
    f(buffer.as_slice::<T>().and_then(|data| data.get(offset..offset + n)).map(Operand::Slice))
}

/// The elements `out` covers, locked for writing, when it is a contiguous tensor of dtype `T`
/// and `shape`, and no one else holds its storage's lock; `None` otherwise.
fn writable<'a, T: Element>(out: &'a Dense, shape: &Shape) -> Option<impl std::ops::DerefMut<Target = [T]> + 'a> {
    if out.dtype != T::DTYPE || out.layout.shape != *shape || !out.layout.is_contiguous() {
        return None;
    }
    let range = out.layout.offset..out.layout.offset + out.layout.numel();
    let guard = out.storage.try_write()?;
    parking_lot::RwLockWriteGuard::try_map(guard, |buffer| buffer.as_mut_slice::<T>()?.get_mut(range)).ok()
}

/// True when `a` and `b` are views of one storage.
fn shares(a: &Dense, b: &Dense) -> bool {
    std::sync::Arc::ptr_eq(&a.storage, &b.storage)
}

/// As [`unary`], written into `out` when it can be: `out` contiguous, of dtype `U` and `x`'s
/// shape, and either `x` itself (same storage, layout and dtype, as an in-place operation's
/// `self`) or a storage `x` does not share. Returns `out` when it was written, a new tensor otherwise.
pub(crate) fn unary_to<T: Element, U: Element>(x: &Dense, out: Option<&Dense>, f: impl Fn(T) -> U + Sync) -> Dense {
    let shape = &x.layout.shape;
    let written = out.is_some_and(|out| {
        if shares(x, out) {
            x.layout == out.layout
                && (x.dtype, U::DTYPE) == (T::DTYPE, T::DTYPE)
                && writable::<T>(out, shape).is_some_and(|mut o| {
                    map1_in_place(&mut o, |v| cast::<U, T>(f(v)));
                    true
                })
        } else {
            with_operand(x, shape, |operand: Option<Operand<'_, T>>| match (operand, writable::<U>(out, shape)) {
                (Some(Operand::Slice(x)), Some(mut o)) => {
                    map1(x, &mut o, &f);
                    true
                }
                (Some(Operand::Repeat(v)), Some(mut o)) => {
                    o.fill(f(v));
                    true
                }
                _ => false,
            })
        }
    });
    match out {
        Some(out) if written => out.clone(),
        _ => unary(x, f),
    }
}

/// As [`binary`], written into `out` when it can be: `out` contiguous, of dtype `U` and
/// `shape`, and either `a` itself (same storage, layout and dtype, as an in-place operation's
/// `self`) while `b` is elsewhere, or a storage neither operand shares. Returns `out` when it was
/// written, a new tensor otherwise. Locks are only tried while another is held, so two threads
/// writing into each other's operands fall back instead of deadlocking.
pub(crate) fn binary_to<T: Element, U: Element>(
    a: &Dense,
    b: &Dense,
    shape: &Shape,
    out: Option<&Dense>,
    f: impl Fn(T, T) -> U + Sync,
) -> Result<Dense> {
    let written = out.is_some_and(|out| {
        if shares(b, out) {
            false
        } else if shares(a, out) {
            a.layout == out.layout
                && (a.dtype, U::DTYPE) == (T::DTYPE, T::DTYPE)
                && writable::<T>(out, shape).is_some_and(|mut o| {
                    with_operand(b, shape, |y: Option<Operand<'_, T>>| {
                        y.map(|y| map2_in_place(&mut o, y, |p, q| cast::<U, T>(f(p, q)))).is_some()
                    })
                })
        } else {
            with_operand(a, shape, |x| {
                with_operand(b, shape, |y| match (x, y, writable::<U>(out, shape)) {
                    (Some(x), Some(y), Some(mut o)) => {
                        map2(x, y, &mut o, &f);
                        true
                    }
                    _ => false,
                })
            })
        }
    });
    match out {
        Some(out) if written => Ok(out.clone()),
        _ => binary(a, b, shape, f),
    }
}

/// `f` applied to the elements of `a` and `b` (read as `T`), broadcast to `shape`. Operands of
/// that shape, contiguous and of dtype `T`, or of one element, take the parallel loop; others
/// go through ndarray.
pub(crate) fn binary<T: Element, U: Element>(
    a: &Dense,
    b: &Dense,
    shape: &Shape,
    f: impl Fn(T, T) -> U + Sync,
) -> Result<Dense> {
    let fast = with_operand(a, shape, |x| {
        with_operand(b, shape, |y| -> Option<Result<Dense>> {
            let (x, y) = (x?, y?);
            let n = shape.checked_numel()?;
            Some(output::<U>("binary", n).map(|mut out| {
                map2(x, y, &mut out, &f);
                Dense::from_vec(out, shape.clone())
            }))
        })
    });
    if let Some(result) = fast {
        return result;
    }
    read_as(a, |av: ArrayViewD<'_, T>| {
        read_as(b, |bv: ArrayViewD<'_, T>| {
            let shape = IxDyn(shape);
            let av = av.broadcast(shape.clone()).ok_or_else(|| internal("left operand does not broadcast"))?;
            let bv = bv.broadcast(shape).ok_or_else(|| internal("right operand does not broadcast"))?;
            Ok(from_array(Zip::from(&av).and(&bv).map_collect(|&x, &y| f(x, y))))
        })
    })
}

/// True when any element of `dense` (read as `T`) satisfies `pred`.
pub(crate) fn any<T: Element>(dense: &Dense, pred: impl Fn(T) -> bool) -> bool {
    read_as(dense, |v: ArrayViewD<'_, T>| v.iter().any(|&x| pred(x)))
}

/// The matrix at batch position `index` of a batched view.
fn matrix<'a, T>(view: ArrayViewD<'a, T>, index: &[usize]) -> Result<ndarray::ArrayView2<'a, T>> {
    let m = index.iter().fold(view, |v, &i| v.index_axis_move(Axis(0), i));
    m.into_dimensionality::<Ix2>().map_err(|_| internal("matmul operand is not a matrix"))
}

/// `a @ b` for `a` of shape `[..batch_a, n, k]` and `b` of shape `[..batch_b, k, m]` (both at
/// least two-dimensional), with the batch dimensions broadcast to `batch`.
pub(crate) fn matmul<T: Number>(a: &Dense, b: &Dense, batch: &Shape) -> Result<Dense> {
    let (n, k) = (a.layout.shape[a.layout.ndim() - 2], a.layout.shape[a.layout.ndim() - 1]);
    let m = b.layout.shape[b.layout.ndim() - 1];
    let full = |rows: usize, cols: usize| IxDyn(&batch.iter().copied().chain([rows, cols]).collect::<Vec<_>>());
    read_as(a, |av: ArrayViewD<'_, T>| {
        read_as(b, |bv: ArrayViewD<'_, T>| {
            let av = av.broadcast(full(n, k)).ok_or_else(|| internal("matmul batch does not broadcast"))?;
            let bv = bv.broadcast(full(k, m)).ok_or_else(|| internal("matmul batch does not broadcast"))?;
            let mut out = ArrayD::<T>::from_elem(full(n, m), T::default());
            for index in ndarray::indices(IxDyn(batch)) {
                let index = index.slice();
                let x = matrix(av.view(), index)?;
                let y = matrix(bv.view(), index)?;
                let mut o = index.iter().fold(out.view_mut(), |v, &i| v.index_axis_move(Axis(0), i));
                let mut o = o.view_mut().into_dimensionality::<Ix2>().map_err(|_| internal("matmul output"))?;
                T::matmul(x, y, &mut o);
            }
            Ok(from_array(out))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_go_straight_into_outputs_that_allow_it() {
        let dense = |v: Vec<f32>| Dense::from_vec(v, Shape::from([3]));
        let (a, b, out) = (dense(vec![1.0, 2.0, 3.0]), dense(vec![10.0; 3]), dense(vec![0.0; 3]));
        let shape = Shape::from([3]);
        let into =
            |x: &Dense, y: &Dense, o: &Dense| binary_to::<f32, f32>(x, y, &shape, Some(o), |p, q| p + q).unwrap();
        assert!(shares(&into(&a, &b, &out), &out), "a separate output");
        assert!(shares(&into(&a, &b, &a), &a), "the first operand, in place");
        assert!(!shares(&into(&a, &b, &b), &b), "the second operand: a new tensor");
        assert!(shares(&unary_to::<f32, f32>(&a, Some(&a), |v| v * 2.0), &a));
        assert!(!shares(&unary_to::<f32, f64>(&a, Some(&a), f64::from), &a), "another dtype");
        let _held = out.storage.read();
        assert!(!shares(&into(&a, &b, &out), &out), "a locked output is not waited for");
    }

    /// `0..n` as int64, viewed through `shape`, `strides` and `offset`.
    fn viewed(n: i64, shape: &[usize], strides: &[usize], offset: usize) -> Dense {
        let base = Dense::from_vec((0..n).collect(), Shape::from([n as usize]));
        let layout = Layout { shape: Shape::new(shape), strides: strides.iter().copied().collect(), offset };
        Dense { layout, ..base }
    }

    fn elements(dense: &Dense) -> Vec<i64> {
        read(dense, |v: ArrayViewD<'_, i64>| v.iter().copied().collect())
    }

    #[test]
    fn expanded_dimensions_repeat_their_elements() {
        // A row [0, 1, 2] repeated twice, a column [1, 2] repeated three times, a scalar as 2 x 2.
        assert_eq!(elements(&viewed(3, &[2, 3], &[0, 1], 0)), [0, 1, 2, 0, 1, 2]);
        assert_eq!(elements(&viewed(3, &[2, 3], &[1, 0], 1)), [1, 1, 1, 2, 2, 2]);
        assert_eq!(elements(&viewed(3, &[2, 2], &[0, 0], 2)), [2, 2, 2, 2]);
        assert_eq!(elements(&viewed(3, &[0, 3], &[0, 1], 0)), [] as [i64; 0]);
    }

    #[test]
    fn permuted_and_overlapping_layouts_read_in_logical_order() {
        assert_eq!(elements(&viewed(6, &[3, 2], &[1, 3], 0)), [0, 3, 1, 4, 2, 5]);
        // Sliding windows of two: rows overlap in storage.
        assert_eq!(elements(&viewed(4, &[3, 2], &[1, 1], 0)), [0, 1, 1, 2, 2, 3]);
    }

    #[test]
    fn the_element_by_element_fallback_reads_any_layout() {
        let data: Vec<i64> = (0..6).collect();
        let layout = |shape: &[usize], strides: &[usize], offset| Layout {
            shape: Shape::new(shape),
            strides: strides.iter().copied().collect(),
            offset,
        };
        let read_back = |l: Layout| gathered(&data, &l).iter().copied().collect::<Vec<_>>();
        assert_eq!(read_back(layout(&[3, 2], &[1, 1], 1)), [1, 2, 2, 3, 3, 4]);
        assert_eq!(read_back(layout(&[2, 3], &[0, 2], 0)), [0, 2, 4, 0, 2, 4]);
        assert_eq!(read_back(layout(&[0, 4], &[4, 1], 6)), [] as [i64; 0]);
    }

    #[test]
    fn copies_of_huge_expanded_views_fail_instead_of_aborting() {
        let huge = viewed(1, &[1 << 40, 1 << 20], &[0, 0], 0);
        let err = copy("contiguous", &huge).unwrap_err();
        assert!(err.to_string().starts_with("contiguous(): not enough memory"), "{err}");
    }
}
