//! The CPU backend (layer 3): a few kernel families on ndarray, which see storage and layouts
//! only. Operations (layer 2) check arguments, work out shapes and dtypes, and call these.

mod number;
mod reduce;
mod window;

use ndarray::{ArrayD, ArrayViewD, Axis, Dimension, Ix2, IxDyn, ShapeBuilder, Zip};

use crate::error::{Error, Result};
use crate::tensor::{DType, Dense, Element, Scalar, Shape, with_dtype};

pub(crate) use number::Number;
pub(crate) use reduce::{reduce, scan};
pub(crate) use window::{Window, conv2d, max_pool2d, with_elements};

/// Runs `f` on an ndarray view of `dense`, whose dtype must be `T`.
pub(crate) fn read<T: Element, R>(dense: &Dense, f: impl FnOnce(ArrayViewD<'_, T>) -> R) -> R {
    let buffer = dense.storage.read();
    let data = buffer.as_slice::<T>().expect("a dense tensor's dtype is its storage's");
    let layout = &dense.layout;
    // ndarray wants the strides of even an empty view to stay inside the data; an empty
    // tensor's view reads nothing, so it takes the empty standard layout.
    let view = if layout.numel() == 0 {
        ArrayViewD::from_shape(IxDyn(&layout.shape), &data[..0])
    } else {
        let shape = IxDyn(&layout.shape).strides(IxDyn(&layout.strides));
        ArrayViewD::from_shape(shape, &data[layout.offset.min(data.len())..])
    }
    .expect("a layout stays inside its storage");
    f(view)
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

/// `f` applied to each element (read as `T`), producing `U`.
pub(crate) fn unary<T: Element, U: Element>(dense: &Dense, f: impl Fn(T) -> U) -> Dense {
    read_as(dense, |v: ArrayViewD<'_, T>| from_array(v.mapv(f)))
}

/// The elements of a contiguous `dense` of dtype `T`, without going through ndarray.
fn contiguous_slice<T: Element, R>(dense: &Dense, f: impl FnOnce(&[T]) -> R) -> Option<R> {
    if dense.dtype != T::DTYPE || !dense.layout.is_contiguous() {
        return None;
    }
    let buffer = dense.storage.read();
    let data = buffer.as_slice::<T>()?;
    data.get(dense.layout.offset..dense.layout.offset + dense.layout.numel()).map(f)
}

/// `f` applied to the elements of `a` and `b` (read as `T`), broadcast to `shape`.
pub(crate) fn binary<T: Element, U: Element>(
    a: &Dense,
    b: &Dense,
    shape: &Shape,
    f: impl Fn(T, T) -> U,
) -> Result<Dense> {
    // The common case, equal contiguous operands of the computation's dtype, in one pass.
    if a.layout.shape == *shape && b.layout.shape == *shape {
        let zipped = contiguous_slice(a, |x: &[T]| {
            contiguous_slice(b, |y: &[T]| x.iter().zip(y).map(|(&p, &q)| f(p, q)).collect::<Vec<U>>())
        });
        if let Some(Some(data)) = zipped {
            return Ok(Dense::from_vec(data, shape.clone()));
        }
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
