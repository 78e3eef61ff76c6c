//! Copying kernels that move elements around: concatenation, selection along a dimension,
//! gathering, flipping, rolling and triangles. The operations have checked their arguments;
//! these only fail when memory runs out.

use ndarray::{ArrayD, ArrayViewD, Axis, Dimension, IxDyn, Slice};

use crate::error::{Error, Result};
use crate::tensor::{Dense, Element};

use super::{alloc, from_array, read, read_as};

/// An array of `shape` filled with `T::default()`, allocated without aborting.
fn filled<T: Element>(func: &str, shape: &[usize]) -> Result<ArrayD<T>> {
    let too_big = || {
        Error::runtime_error(format!("{func}(): a tensor of shape {shape:?} has more elements than memory can hold"))
    };
    let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).ok_or_else(too_big)?;
    let mut data = alloc(func, n)?;
    data.resize(n, T::default());
    ArrayD::from_shape_vec(IxDyn(shape), data).map_err(|_| too_big())
}

/// `pieces` (read as `T`) joined along `dim` into a tensor of `shape`; every piece has the
/// result's sizes except along `dim`, whose sizes add up to the result's.
pub(crate) fn concat<T: Element>(func: &str, pieces: &[&Dense], dim: usize, shape: &[usize]) -> Result<Dense> {
    let mut out = filled::<T>(func, shape)?;
    let mut at = 0;
    for piece in pieces {
        let n = piece.layout.shape[dim];
        read_as(piece, |v: ArrayViewD<'_, T>| {
            out.slice_axis_mut(Axis(dim), Slice::from(at..at + n)).assign(&v);
        });
        at += n;
    }
    Ok(from_array(out))
}

/// The positions `positions` (all in range) of dimension `dim` of `dense`, in that order.
pub(crate) fn index_select<T: Element>(func: &str, dense: &Dense, dim: usize, positions: &[usize]) -> Result<Dense> {
    let mut shape = dense.layout.shape.to_vec();
    shape[dim] = positions.len();
    let mut out = filled::<T>(func, &shape)?;
    read(dense, |v: ArrayViewD<'_, T>| {
        for (j, &p) in positions.iter().enumerate() {
            out.index_axis_mut(Axis(dim), j).assign(&v.index_axis(Axis(dim), p));
        }
    });
    Ok(from_array(out))
}

/// `out[i] = dense[i with its dim-th coordinate replaced by index[i]]` for every position `i`
/// of the int64 `index`, whose other sizes are at most `dense`'s (both have the same number of
/// dimensions, at least one). A position out of range is an error naming it.
pub(crate) fn gather<T: Element>(func: &str, dense: &Dense, dim: usize, index: &Dense) -> Result<Dense> {
    let size = dense.layout.shape[dim];
    read(index, |idx: ArrayViewD<'_, i64>| {
        read(dense, |v: ArrayViewD<'_, T>| {
            let mut data = alloc(func, idx.len())?;
            let mut at = vec![0; idx.ndim()];
            for (position, &i) in idx.indexed_iter() {
                let Some(i) = usize::try_from(i).ok().filter(|&i| i < size) else {
                    return Err(Error::runtime_error(format!(
                        "{func}(): index {i} is out of bounds for dimension {dim} with size {size}"
                    )));
                };
                at.copy_from_slice(position.slice());
                at[dim] = i;
                data.push(v[IxDyn(&at)]);
            }
            Ok(Dense::from_vec(data, index.layout.shape.clone()))
        })
    })
}

/// A copy of `dense` with the order of positions reversed along each of `dims`.
pub(crate) fn flip<T: Element>(func: &str, dense: &Dense, dims: &[usize]) -> Result<Dense> {
    read(dense, |mut v: ArrayViewD<'_, T>| {
        for &d in dims {
            v.invert_axis(Axis(d));
        }
        let mut data = alloc(func, v.len())?;
        data.extend(v.iter().copied());
        Ok(Dense::from_vec(data, dense.layout.shape.clone()))
    })
}

/// `view` with its positions along `dim` moved `shift` places forward, wrapping around.
fn rolled<T: Element>(func: &str, view: ArrayViewD<'_, T>, dim: usize, shift: i64) -> Result<ArrayD<T>> {
    let mut out = filled::<T>(func, view.shape())?;
    let n = view.len_of(Axis(dim));
    if n > 0 {
        // `n` fits in i64 (a dimension's size fits in isize), and the remainder is below `n`.
        let s = shift.rem_euclid(n as i64) as usize;
        out.slice_axis_mut(Axis(dim), Slice::from(s..)).assign(&view.slice_axis(Axis(dim), Slice::from(..n - s)));
        out.slice_axis_mut(Axis(dim), Slice::from(..s)).assign(&view.slice_axis(Axis(dim), Slice::from(n - s..)));
    }
    Ok(out)
}

/// A copy of `dense` rolled by `shifts[k]` along `dims[k]`, for each `k` in turn.
pub(crate) fn roll<T: Element>(func: &str, dense: &Dense, shifts: &[i64], dims: &[usize]) -> Result<Dense> {
    let mut out: Option<ArrayD<T>> = None;
    for (&shift, &dim) in shifts.iter().zip(dims) {
        out = Some(match &out {
            Some(array) => rolled(func, array.view(), dim, shift)?,
            None => read(dense, |v: ArrayViewD<'_, T>| rolled(func, v, dim, shift))?,
        });
    }
    match out {
        Some(array) => Ok(from_array(array)),
        None => super::copy(func, dense),
    }
}

/// A copy of `dense` (at least two-dimensional) with the elements off the triangle zeroed: the
/// triangle keeps, in each matrix of the last two dimensions, the element at row `i`, column
/// `j` when `j - i <= diagonal` (`lower`) or `j - i >= diagonal` (upper).
pub(crate) fn triangle<T: Element>(func: &str, dense: &Dense, diagonal: i64, lower: bool) -> Result<Dense> {
    let ndim = dense.layout.ndim();
    read(dense, |v: ArrayViewD<'_, T>| {
        let mut data = alloc(func, v.len())?;
        data.extend(v.indexed_iter().map(|(at, &x)| {
            // Positions fit in isize, so their difference fits in i64.
            let offset = at[ndim - 1] as i64 - at[ndim - 2] as i64;
            let kept = if lower { offset <= diagonal } else { offset >= diagonal };
            if kept { x } else { T::default() }
        }));
        Ok(Dense::from_vec(data, dense.layout.shape.clone()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Shape;

    fn matrix() -> Dense {
        Dense::from_vec((1..=6i64).collect(), Shape::from([2, 3]))
    }

    fn values(d: &Dense) -> Vec<i64> {
        read(d, |v: ArrayViewD<'_, i64>| v.iter().copied().collect())
    }

    #[test]
    fn rolling_moves_positions_forward_and_wraps() {
        assert_eq!(values(&roll::<i64>("roll", &matrix(), &[1], &[1]).unwrap()), [3, 1, 2, 6, 4, 5]);
        assert_eq!(values(&roll::<i64>("roll", &matrix(), &[-1, 1], &[1, 0]).unwrap()), [5, 6, 4, 2, 3, 1]);
    }

    #[test]
    fn triangles_keep_their_side_of_the_diagonal() {
        assert_eq!(values(&triangle::<i64>("tril", &matrix(), 0, true).unwrap()), [1, 0, 0, 4, 5, 0]);
        assert_eq!(values(&triangle::<i64>("triu", &matrix(), 1, false).unwrap()), [0, 2, 3, 0, 0, 6]);
        assert_eq!(values(&triangle::<i64>("triu", &matrix(), i64::MIN, false).unwrap()), [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn gathering_out_of_range_is_an_error() {
        let index = Dense::from_vec(vec![0i64, 3], Shape::from([1, 2]));
        let err = gather::<i64>("gather", &matrix(), 1, &index).unwrap_err();
        assert_eq!(err.to_string(), "gather(): index 3 is out of bounds for dimension 1 with size 3");
    }

    #[test]
    fn huge_results_are_errors_not_aborts() {
        assert!(filled::<f32>("cat", &[usize::MAX, 2]).is_err());
        assert!(filled::<f32>("cat", &[1 << 62]).is_err());
    }
}
