//! Copying kernels that move elements around: concatenation, selection along a dimension
//! and gathering. The operations have checked their arguments (indices are in range); these
//! only fail when memory runs out.

use ndarray::{ArrayD, ArrayViewD, Axis, Dimension, IxDyn, Slice};

use crate::backend::Array;
use crate::error::{Error, Result};
use crate::tensor::{Element, Shape, with_dtype};

use super::{alloc, elements, internal, read, read_as};

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

/// A host array holding a standard-layout ndarray array.
fn finished<T: Element>(out: ArrayD<T>) -> Array {
    let shape = Shape::from(out.shape());
    let (data, _) = out.into_raw_vec_and_offset();
    super::array(data, shape)
}

/// The positions an integer index array holds (the operation checked they are in range).
fn positions(func: &str, index: &Array, size: usize) -> Result<Vec<usize>> {
    let raw = elements::<i64>(func, index)?;
    raw.into_iter()
        .map(|i| usize::try_from(i).ok().filter(|&i| i < size).ok_or_else(|| internal("an index out of range")))
        .collect()
}

/// `pieces` (read as `T`) joined along `dim` into a tensor of `shape`; every piece has the
/// result's sizes except along `dim`, whose sizes add up to the result's.
pub(super) fn concat<T: Element>(pieces: &[&Array], dim: usize, shape: &Shape) -> Result<Array> {
    let mut out = filled::<T>("cat", shape)?;
    let mut at = 0;
    for piece in pieces {
        let n = piece.layout.shape[dim];
        read_as(piece, |v: ArrayViewD<'_, T>| {
            out.slice_axis_mut(Axis(dim), Slice::from(at..at + n)).assign(&v);
        })?;
        at += n;
    }
    Ok(finished(out))
}

/// The positions `index` (all in range) of dimension `dim` of `x`, in that order.
pub(super) fn index_select(x: &Array, dim: usize, index: &Array) -> Result<Array> {
    let positions = positions("index_select", index, x.layout.shape[dim])?;
    let mut shape = x.layout.shape.to_vec();
    shape[dim] = positions.len();
    with_dtype!(x.dtype, T => {
        let mut out = filled::<T>("index_select", &shape)?;
        read(x, |v: ArrayViewD<'_, T>| {
            for (j, &p) in positions.iter().enumerate() {
                out.index_axis_mut(Axis(dim), j).assign(&v.index_axis(Axis(dim), p));
            }
        })?;
        Ok(finished(out))
    })
}

/// `out[i] = x[i with its dim-th coordinate replaced by index[i]]` for every position `i` of
/// `index` (all in range).
pub(super) fn gather(x: &Array, dim: usize, index: &Array) -> Result<Array> {
    let size = x.layout.shape[dim];
    let targets = positions("gather", index, size)?;
    with_dtype!(x.dtype, T => read(x, |v: ArrayViewD<'_, T>| -> Result<Array> {
        let mut data = alloc("gather", targets.len())?;
        let mut at = vec![0; index.layout.ndim()];
        for (position, &i) in ndarray::indices(IxDyn(&index.layout.shape)).into_iter().zip(&targets) {
            at.copy_from_slice(position.slice());
            at[dim] = i;
            data.push(v[IxDyn(&at)]);
        }
        Ok(super::array(data, index.layout.shape.clone()))
    })?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::array;

    fn matrix() -> Array {
        array((1..=6i64).collect::<Vec<_>>(), Shape::from([2, 3]))
    }

    fn values(x: &Array) -> Vec<i64> {
        elements::<i64>("test", x).unwrap()
    }

    #[test]
    fn selection_and_gathering_pick_positions() {
        let index = array(vec![2i64, 0], Shape::from([2]));
        assert_eq!(values(&index_select(&matrix(), 1, &index).unwrap()), [3, 1, 6, 4]);
        let index = array(vec![0i32, 2, 1, 1], Shape::from([2, 2]));
        assert_eq!(values(&gather(&matrix(), 1, &index).unwrap()), [1, 3, 5, 5]);
    }

    #[test]
    fn huge_results_are_errors_not_aborts() {
        assert!(filled::<f32>("cat", &[usize::MAX, 2]).is_err());
        assert!(filled::<f32>("cat", &[1 << 62]).is_err());
    }
}
