//! Conversions between tensors and [`ndarray`] arrays, without copying where the memory allows.
//!
//! An owned array becomes a tensor without a copy whenever its strides are non-negative (a
//! standard, Fortran-order, transposed or sliced array); only an array with a reversed axis is
//! copied, since tensors have non-negative strides. A tensor converts back into an owned array
//! of the same shape; without a copy when it is the only owner of its data.

use std::sync::Arc;

use ndarray::{Array, ArrayD, ArrayViewD, Dimension, IxDyn, ShapeBuilder};

use super::{Body, Buffer, DType, Dense, Element, Layout, Shape, Storage, Tensor};
use crate::backend::host;
use crate::error::{Error, Result};

crate::overrides::ignored! {
    "Tensor.with_ndarray_view": "reads the data directly, without dispatch",
}

/// An owned array as a tensor of the same shape and dtype, sharing the array's memory.
///
/// The array's vector becomes the tensor's storage, with the array's strides and offset, so
/// nothing is copied, unless an axis has a negative stride (after `slice(s![..;-1])`, say):
/// tensors have non-negative strides, so that array is copied into row-major order.
///
/// ```
/// use torchfn::ndarray::{Array2, array};
/// use torchfn::Tensor;
///
/// let a: Array2<f32> = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
/// let address = a.as_ptr() as usize;
/// let t = Tensor::from(a.reversed_axes()); // a transposed (column-major) array
/// assert_eq!(t.data_ptr()?, address); // no copy
/// assert_eq!(t.shape()?, [3, 2]);
/// assert_eq!(t.to_vec::<f32>()?, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
impl<T: Element, D: Dimension> From<Array<T, D>> for Tensor {
    fn from(array: Array<T, D>) -> Tensor {
        let shape = Shape::from(array.shape());
        // A dimension of at most one element never moves the address, whatever its stride.
        let strides: Option<Vec<usize>> = array
            .shape()
            .iter()
            .zip(array.strides())
            .map(|(&n, &s)| if n <= 1 { Some(s.unsigned_abs()) } else { usize::try_from(s).ok() })
            .collect();
        let dense = match strides {
            Some(strides) => {
                let (data, offset) = array.into_raw_vec_and_offset();
                let layout = match offset {
                    Some(offset) => Layout { shape, strides: strides.into_iter().collect(), offset },
                    // An empty array addresses nothing.
                    None => Layout::contiguous(shape),
                };
                Dense::new(crate::backend::Array {
                    storage: Storage::host(Buffer::from_vec(data)),
                    layout,
                    dtype: T::DTYPE,
                })
            }
            None => Dense::from_vec(array.iter().copied().collect(), shape),
        };
        Tensor::from_dense(dense)
    }
}

/// A copy of the tensor's elements as an owned array of the same shape, in row-major order.
///
/// Fails with a `TypeError` when the tensor's dtype is not `T` (convert it first with
/// [`to`](Tensor::to)) or when it is a duck, and with a `ValueError` when `D` has a fixed
/// number of dimensions that differs from the tensor's.
///
/// ```
/// use torchfn::ndarray::{Array2, ArrayD, array};
///
/// let t = torchfn::tensor([[1i64, 2, 3], [4, 5, 6]])?;
/// let a = Array2::<i64>::try_from(&t)?;
/// assert_eq!(a, array![[1, 2, 3], [4, 5, 6]]);
/// let err = ArrayD::<f32>::try_from(&t).unwrap_err();
/// assert_eq!(err.to_string(), "ArrayD<f32>::try_from(): the tensor holds torch.int64, not torch.float32; \
///                              convert it first with .to(Float32)");
/// # Ok::<(), torchfn::Error>(())
/// ```
impl<T: Element, D: Dimension> TryFrom<&Tensor> for Array<T, D> {
    type Error = Error;

    fn try_from(tensor: &Tensor) -> Result<Self> {
        let func = format!("{}::try_from", array_name::<T, D>());
        let dense = checked::<T, D>(tensor, &func)?;
        copied(dense, &func)
    }
}

/// The tensor's elements as an owned array of the same shape, taking the tensor's memory
/// without a copy when this handle is its only owner (no clones, views or subclass views of
/// it are alive) and its elements fill the memory densely from the start (a fresh tensor, a
/// transposed array converted to a tensor, a Fortran-order `.npy` file); a copy otherwise.
///
/// Fails as the conversion from `&Tensor` does.
///
/// ```
/// use torchfn::ndarray::{Array2, array};
/// use torchfn::Tensor;
///
/// let a: Array2<f64> = array![[1.0, 2.0], [3.0, 4.0]];
/// let address = a.as_ptr() as usize;
/// let back = Array2::<f64>::try_from(Tensor::from(a))?;
/// assert_eq!(back.as_ptr() as usize, address); // the same memory, through and back
/// assert_eq!(back, array![[1.0, 2.0], [3.0, 4.0]]);
/// # Ok::<(), torchfn::Error>(())
/// ```
impl<T: Element, D: Dimension> TryFrom<Tensor> for Array<T, D> {
    type Error = Error;

    fn try_from(tensor: Tensor) -> Result<Self> {
        let func = format!("{}::try_from", array_name::<T, D>());
        checked::<T, D>(&tensor, &func)?;
        let dense = match Arc::try_unwrap(tensor.body) {
            Ok(Body::Dense(dense)) => dense,
            Ok(Body::Duck(_)) => return Err(internal(&func, "checked() lets no duck through")),
            Err(body) => return copied(Tensor { body, ..tensor }.data(&func, "self")?, &func),
        };
        if !dense.layout.is_dense_from_start() {
            return copied(&dense, &func);
        }
        let layout = dense.layout.clone();
        let Dense { array: crate::backend::Array { storage, dtype, .. }, .. } = dense;
        let data = match storage.try_into_buffer() {
            Ok(buffer) => buffer.into_vec::<T>(),
            Err(storage) => {
                return copied(&Dense::new(crate::backend::Array { storage, layout, dtype }), &func);
            }
        };
        let shape = IxDyn(&layout.shape).strides(IxDyn(&layout.strides));
        data.and_then(|data| ArrayD::from_shape_vec(shape, data).ok())
            .and_then(|array| array.into_dimensionality::<D>().ok())
            .ok_or_else(|| internal(&func, "ndarray refused a dense layout"))
    }
}

impl Tensor {
    /// Runs `f` on an [`ndarray`] view of this tensor's elements, without copying them, and
    /// returns what `f` returns. The view has the tensor's shape and strides.
    ///
    /// Fails with a `TypeError` when the tensor's dtype is not `T` or when it is a duck.
    /// Reads the data directly, without dispatch.
    ///
    /// # Deadlocks
    ///
    /// The tensor's storage is locked for reading while `f` runs: reading any tensor inside
    /// `f` is fine, but an in-place operation on this tensor or on a view of its storage
    /// (`add_`, `copy_`, `fill_`, ...) waits for the lock forever.
    ///
    /// ```
    /// use torchfn::ndarray::{ArrayViewD, Axis};
    ///
    /// let t = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]])?.t()?; // [[1, 3], [2, 4]], not copied
    /// let column_sums = t.with_ndarray_view(|a: ArrayViewD<'_, f32>| {
    ///     assert_eq!(a.strides(), [1, 2]);
    ///     a.sum_axis(Axis(0)).iter().copied().collect::<Vec<f32>>()
    /// })?;
    /// assert_eq!(column_sums, [3.0, 7.0]);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    pub fn with_ndarray_view<T: Element, R>(&self, f: impl FnOnce(ArrayViewD<'_, T>) -> R) -> Result<R> {
        let dense = self.data("with_ndarray_view", "self")?;
        check_dtype::<T>(dense.dtype, "with_ndarray_view")?;
        host::read(&*host::on_host(dense)?, f)
    }
}

/// How error messages name the target array type: `Array<f32, Ix2>`, `ArrayD<i64>`.
fn array_name<T: Element, D: Dimension>() -> String {
    let elem = std::any::type_name::<T>();
    match D::NDIM {
        Some(n) => format!("Array<{elem}, Ix{n}>"),
        None => format!("ArrayD<{elem}>"),
    }
}

/// The data of `tensor`, when it can become an array of `T` with `D`'s dimensions.
fn checked<'t, T: Element, D: Dimension>(tensor: &'t Tensor, func: &str) -> Result<&'t Dense> {
    let dense = tensor.data(func, "self")?;
    check_dtype::<T>(dense.dtype, func)?;
    let ndim = dense.layout.ndim();
    if let Some(expected) = D::NDIM.filter(|&n| n != ndim) {
        return Err(Error::value_error(format!(
            "{func}(): expected a tensor with {expected} dimensions, got one with {ndim} (shape {:?})",
            dense.layout.shape.as_ref()
        )));
    }
    Ok(dense)
}

/// A `TypeError` naming both dtypes unless `dtype` is `T`'s.
fn check_dtype<T: Element>(dtype: DType, func: &str) -> Result<()> {
    if dtype == T::DTYPE {
        return Ok(());
    }
    Err(Error::type_error(format!(
        "{func}(): the tensor holds {dtype}, not {}; convert it first with .to({:?})",
        T::DTYPE,
        T::DTYPE
    )))
}

/// A row-major copy of `dense` (whose dtype is `T` and ndim `D`'s) as an array.
fn copied<T: Element, D: Dimension>(dense: &Dense, func: &str) -> Result<Array<T, D>> {
    let data = host::read(&*host::on_host(dense)?, |v: ArrayViewD<'_, T>| {
        let mut data = host::alloc(func, v.len())?;
        data.extend(v.iter().copied());
        Ok::<_, Error>(data)
    })??;
    ArrayD::from_shape_vec(IxDyn(&dense.layout.shape), data)
        .ok()
        .and_then(|array| array.into_dimensionality::<D>().ok())
        .ok_or_else(|| internal(func, "the copy does not fit its shape"))
}

#[cold]
fn internal(func: &str, what: &str) -> Error {
    Error::runtime_error(format!("{func}(): internal error: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(shape: &[usize], strides: &[usize], offset: usize) -> Layout {
        Layout { shape: Shape::new(shape), strides: strides.iter().copied().collect(), offset }
    }

    #[test]
    fn dense_layouts_are_permutations_of_contiguous_ones() {
        assert!(layout(&[2, 3], &[3, 1], 0).is_dense_from_start());
        assert!(layout(&[3, 2], &[1, 3], 0).is_dense_from_start());
        assert!(layout(&[2, 1, 3], &[1, 99, 2], 0).is_dense_from_start());
        assert!(layout(&[], &[], 0).is_dense_from_start());
        assert!(!layout(&[2, 3], &[3, 1], 1).is_dense_from_start(), "offset");
        assert!(!layout(&[2, 3], &[4, 1], 0).is_dense_from_start(), "gaps");
        assert!(!layout(&[2, 3], &[0, 1], 0).is_dense_from_start(), "expanded");
    }

    #[test]
    fn array_names_say_the_element_and_dimension() {
        assert_eq!(array_name::<f32, ndarray::Ix2>(), "Array<f32, Ix2>");
        assert_eq!(array_name::<bool, ndarray::IxDyn>(), "ArrayD<bool>");
    }
}
