//! Copying kernels that move elements around: concatenation, selection along a dimension,
//! gathering and its reverse, scatter-adding. The operations have checked their arguments
//! (indices are in range); these only fail when memory runs out.

use ndarray::{ArrayD, ArrayViewD, Axis, Dimension, IxDyn, Slice};

use crate::backend::Array;
use crate::error::{Error, Result};
use crate::types::{Element, Shape, with_dtype};

use super::{Number, alloc, elements, internal, read, read_as, threads, with_elements};

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

/// The positions `index` (all in range) of dimension `dim` of `x`, in that order: for each
/// position before `dim`, the chosen blocks of the dimensions after it, copied whole.
pub(super) fn index_select(x: &Array, dim: usize, index: &Array) -> Result<Array> {
    let positions = positions("index_select", index, x.layout.shape[dim])?;
    let shape: Shape =
        x.layout.shape.iter().enumerate().map(|(d, &size)| if d == dim { positions.len() } else { size }).collect();
    let n = shape.checked_numel().ok_or_else(|| internal("an index_select too large"))?;
    let inner: usize = x.layout.shape[dim + 1..].iter().product();
    with_dtype!(x.dtype, T => with_elements(x, |data: &[T]| -> Result<Array> {
        let mut out = alloc("index_select", n)?;
        if n > 0 {
            for block in data.chunks_exact(x.layout.shape[dim] * inner) {
                positions.iter().for_each(|&p| out.extend_from_slice(&block[p * inner..][..inner]));
            }
        }
        Ok(super::array(out, shape))
    })?)
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

/// A new array of `shape` in `src`'s dtype, zero except that `src[i]` is added at `i`'s
/// coordinates with the `dim`-th replaced by `index[i]`, for every position `i` of `index` (all
/// in range; `src` has `index`'s shape). Contributions are added in row-major order of `index`,
/// so those to one element in increasing order along `dim`. Bools add as logical or (`true +
/// true` is `true`, as in PyTorch).
pub(super) fn scatter_add(shape: &Shape, dim: usize, index: &Array, src: &Array) -> Result<Array> {
    with_dtype!(
        src.dtype,
        T => scatter::<T>((shape, dim), index, src, <T as Number>::add),
        bool => scatter::<bool>((shape, dim), index, src, |a, b| a | b),
        reduced => Err(internal("scatter_add computes half precision in float32"))
    )
}

/// [`scatter_add`] with `add` adding two elements.
fn scatter<T: Element>(
    (shape, dim): (&Shape, usize),
    index: &Array,
    src: &Array,
    add: impl Fn(T, T) -> T + Sync,
) -> Result<Array> {
    const FUNC: &str = "scatter_add";
    let is = &index.layout.shape;
    let fits = is.len() == shape.len() && (0..is.len()).all(|d| d == dim || is[d] <= shape[d]);
    if dim >= shape.len() || !fits || src.layout.shape != *is {
        let ss = &src.layout.shape;
        let what = format!("{FUNC} along dimension {dim} into {shape:?} by an index {is:?} and a source {ss:?}");
        return Err(internal(&what));
    }
    let targets = positions(FUNC, index, shape[dim])?;
    let mut out = filled::<T>(FUNC, shape)?;
    read(src, |v: ArrayViewD<'_, T>| -> Result<()> {
        // An index of the result's sizes but along `dim` (max pooling's backward, an embedding's,
        // a gather's): position (o, k, i) of the index, seen as [outer, is[dim], inner], adds
        // into (o, index, i) of the result, seen as [outer, shape[dim], inner]. Each outer block
        // of the result is its own (blocks go to the CPU's threads), and each of its elements
        // sums its terms in increasing k, as the walk below does.
        let (width, row) = (is[dim], shape[dim]);
        let inner: usize = shape[dim + 1..].iter().product();
        let same = (0..is.len()).all(|d| d == dim || is[d] == shape[d]);
        if same
            && width > 0
            && row > 0
            && inner > 0
            && let (Some(values), Some(sums)) = (v.as_slice(), out.as_slice_mut())
        {
            let (from, to) = (width * inner, row * inner);
            let blocks = (threads::GRAIN / from).max(1);
            let tasks =
                sums.chunks_mut(blocks * to).zip(targets.chunks(blocks * from)).zip(values.chunks(blocks * from));
            threads::for_each(tasks, |((sums, targets), values)| {
                let lines = sums.chunks_mut(to).zip(targets.chunks(from)).zip(values.chunks(from));
                for ((sums, targets), values) in lines {
                    for (targets, values) in targets.chunks(inner).zip(values.chunks(inner)) {
                        for (i, (&t, &x)) in targets.iter().zip(values).enumerate() {
                            let at = t * inner + i;
                            sums[at] = add(sums[at], x);
                        }
                    }
                }
            });
            return Ok(());
        }
        let mut at = vec![0; shape.len()];
        for ((position, &i), &x) in ndarray::indices(IxDyn(is)).into_iter().zip(&targets).zip(v.iter()) {
            at.copy_from_slice(position.slice());
            at[dim] = i;
            let sum = out.get_mut(IxDyn(&at)).ok_or_else(|| internal("a scatter target out of range"))?;
            *sum = add(*sum, x);
        }
        Ok(())
    })??;
    Ok(finished(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::host::array;
    use crate::types::{DType, Layout};

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

    /// `x` seen through `shape` and `strides` from its start.
    fn view(x: &Array, shape: &[usize], strides: &[usize]) -> Array {
        x.with_layout(Layout { shape: Shape::from(shape), strides: strides.iter().copied().collect(), offset: 0 })
    }

    /// `scatter_add` into `shape` along `dim` of int64 `src` by int64 `index`, both of
    /// `index_shape`: the result's elements.
    fn scattered(shape: &[usize], dim: usize, (index, src): (&[i64], &[i64]), index_shape: &[usize]) -> Vec<i64> {
        let index = array(index.to_vec(), Shape::from(index_shape));
        let src = array(src.to_vec(), Shape::from(index_shape));
        let out = scatter_add(&Shape::from(shape), dim, &index, &src).unwrap();
        assert_eq!(out.layout, Layout::contiguous(Shape::from(shape)));
        values(&out)
    }

    #[test]
    fn scatter_add_accumulates_repeated_indices() {
        assert_eq!(scattered(&[3], 0, (&[0, 2, 0, 0], &[1, 2, 3, 4]), &[4]), [8, 0, 2]);
        // [[1, 2, 3], [4, 5, 6]] into [3, 3] by rows [[0, 1, 2], [0, 0, 2]]: the reverse of gather.
        let got = scattered(&[3, 3], 0, (&[0, 1, 2, 0, 0, 2], &[1, 2, 3, 4, 5, 6]), &[2, 3]);
        assert_eq!(got, [5, 5, 0, 0, 2, 0, 0, 0, 9]);
        // Along dimension 1, into columns: [[1, 1, 0], [2, 0, 2]].
        let got = scattered(&[2, 3], 1, (&[1, 1, 0, 2, 0, 2], &[1, 2, 3, 4, 5, 6]), &[2, 3]);
        assert_eq!(got, [3, 3, 0, 5, 0, 10]);
    }

    #[test]
    fn scatter_add_along_the_last_dimension_of_many_rows_adds_each_row_into_its_own() {
        // 5000 rows of 5 positions into rows of 7: runs of rows on the CPU's threads.
        let (rows, width, size) = (5000, 5, 7);
        let index: Vec<i64> = (0..rows * width).map(|k| ((k * 3 + k / width) % size) as i64).collect();
        let src: Vec<i64> = (0..rows * width).map(|k| (k % 11) as i64).collect();
        let mut want = vec![0i64; rows * size];
        for (k, (&i, &x)) in index.iter().zip(&src).enumerate() {
            want[k / width * size + i as usize] += x;
        }
        assert_eq!(scattered(&[rows, size], 1, (&index, &src), &[rows, width]), want);
    }

    #[test]
    fn scatter_add_along_a_middle_dimension_adds_within_each_outer_block() {
        // [3, 6, 5] positions into [3, 4, 5] along dimension 1, indices repeating.
        let (outer, width, row, inner) = (3, 6, 4, 5);
        let count = outer * width * inner;
        let index: Vec<i64> = (0..count).map(|k| ((k * 7 + k / inner) % row) as i64).collect();
        let src: Vec<i64> = (0..count).map(|k| (k % 13) as i64 - 6).collect();
        let mut want = vec![0i64; outer * row * inner];
        for (k, (&t, &x)) in index.iter().zip(&src).enumerate() {
            let (o, i) = (k / (width * inner), k % inner);
            want[(o * row + t as usize) * inner + i] += x;
        }
        assert_eq!(scattered(&[outer, row, inner], 1, (&index, &src), &[outer, width, inner]), want);
    }

    #[test]
    fn scatter_add_takes_an_index_smaller_than_the_result() {
        // A [2, 2] index into [3, 4] along 1: row 2 and columns past the index's are zero.
        assert_eq!(
            scattered(&[3, 4], 1, (&[3, 3, 0, 1], &[1, 2, 3, 4]), &[2, 2]),
            [0, 0, 0, 3, 3, 4, 0, 0, 0, 0, 0, 0]
        );
        // Larger than the result along dim itself: [1, 5] into [2, 2] along 0.
        assert_eq!(scattered(&[2, 2], 0, (&[1, 0, 1, 1, 0], &[1, 2, 3, 4, 5]), &[5, 1]), [7, 0, 8, 0]);
    }

    #[test]
    fn scatter_add_of_an_empty_index_is_zeros() {
        assert_eq!(scattered(&[2, 3], 0, (&[], &[]), &[0, 3]), [0; 6]);
        assert_eq!(scattered(&[2, 3], 0, (&[], &[]), &[2, 0]), [0; 6]);
        assert_eq!(scattered(&[0, 3], 1, (&[], &[]), &[0, 3]), [0; 0]);
    }

    #[test]
    fn scatter_add_reads_an_expanded_index() {
        // index_select's backward: the index vector [2, 0, 2] (a [3, 3] gradient selected rows
        // 2, 0, 2 of a [4, 3] input) expanded over the columns, stride 0.
        let grad = array((1..=9i64).collect::<Vec<_>>(), Shape::from([3, 3]));
        let vector = array(vec![2i64, 0, 2], Shape::from([3]));
        let out = scatter_add(&Shape::from([4, 3]), 0, &view(&vector, &[3, 3], &[1, 0]), &grad).unwrap();
        assert_eq!(values(&out), [4, 5, 6, 0, 0, 0, 8, 10, 12, 0, 0, 0]);
        // Along the columns, the vector expanded over the rows, in int32; the source permuted.
        let vector = array(vec![1i32, 1, 0], Shape::from([3]));
        let grad = view(&grad, &[2, 3], &[1, 3]);
        let out = scatter_add(&Shape::from([2, 2]), 1, &view(&vector, &[2, 3], &[0, 1]), &grad).unwrap();
        assert_eq!(values(&out), [7, 5, 8, 7]);
    }

    #[test]
    fn scatter_add_along_each_dimension_of_three() {
        let shape = [3, 4, 5];
        for dim in 0..3 {
            // Smaller than the result along the other dimensions, larger along dim.
            let mut index_shape = [2, 3, 4];
            index_shape[dim] = 7;
            let n: usize = index_shape.iter().product();
            let src: Vec<i64> = (0..n as i64).map(|i| i * 3 - 40).collect();
            let index: Vec<i64> = (0..n as i64).map(|i| (i * 5 + i / 3) % shape[dim] as i64).collect();
            // The definition, with one loop per dimension.
            let mut want = vec![0i64; 60];
            let mut p = 0;
            for a in 0..index_shape[0] {
                for b in 0..index_shape[1] {
                    for c in 0..index_shape[2] {
                        let mut at = [a, b, c];
                        at[dim] = index[p] as usize;
                        want[at[0] * 20 + at[1] * 5 + at[2]] += src[p];
                        p += 1;
                    }
                }
            }
            assert_eq!(scattered(&shape, dim, (&index, &src), &index_shape), want, "along {dim}");
        }
    }

    #[test]
    fn scatter_add_keeps_the_dtype_and_adds_in_order() {
        let index = array(vec![0i64, 1, 0, 0], Shape::from([4]));
        let shape = Shape::from([2]);
        // In increasing order along dim: (0 + 1) + 1e8 rounds to 1e8, less 1e8 is 0 (the
        // reverse order would give 1).
        let src = array(vec![1.0f32, 0.5, 1e8, -1e8], Shape::from([4]));
        let out = scatter_add(&shape, 0, &index, &src).unwrap();
        assert_eq!((out.dtype, elements::<f32>("test", &out).unwrap()), (DType::Float32, vec![0.0, 0.5]));
        let src = array(vec![0.25f64, 0.5, 1.0, 2.0], Shape::from([4]));
        let out = scatter_add(&shape, 0, &index, &src).unwrap();
        assert_eq!((out.dtype, elements::<f64>("test", &out).unwrap()), (DType::Float64, vec![3.25, 0.5]));
        // Integers wrap, as PyTorch's do.
        let src = array(vec![i32::MAX, 7, 1, 2], Shape::from([4]));
        let out = scatter_add(&shape, 0, &index, &src).unwrap();
        assert_eq!((out.dtype, elements::<i32>("test", &out).unwrap()), (DType::Int32, vec![i32::MIN + 2, 7]));
        // Bools add as logical or.
        let src = array(vec![true, false, true, false], Shape::from([4]));
        let out = scatter_add(&Shape::from([3]), 0, &index, &src).unwrap();
        assert_eq!((out.dtype, elements::<bool>("test", &out).unwrap()), (DType::Bool, vec![true, false, false]));
    }

    #[test]
    fn scatter_add_of_bad_arguments_is_an_error() {
        let index = array(vec![0i64, 1, 2, 0], Shape::from([2, 2]));
        let src = array(vec![1i64, 2, 3, 4], Shape::from([2, 2]));
        let shape = Shape::from([3, 2]);
        assert!(scatter_add(&shape, 0, &index, &src).is_ok());
        assert!(scatter_add(&shape, 1, &index, &src).is_err(), "index 2 out of range");
        assert!(scatter_add(&shape, 2, &index, &src).is_err(), "no dimension 2");
        assert!(scatter_add(&Shape::from([3, 1]), 0, &index, &src).is_err(), "index wider than the result");
        assert!(scatter_add(&Shape::from([6]), 0, &index, &src).is_err(), "fewer dimensions");
        let other = array(vec![1i64, 2], Shape::from([2, 1]));
        assert!(scatter_add(&shape, 0, &index, &other).is_err(), "src of another shape");
        let negative = array(vec![-1i64, 0, 0, 0], Shape::from([2, 2]));
        assert!(scatter_add(&shape, 0, &negative, &src).is_err(), "a negative index");
    }

    #[test]
    fn huge_results_are_errors_not_aborts() {
        assert!(filled::<f32>("cat", &[usize::MAX, 2]).is_err());
        assert!(filled::<f32>("cat", &[1 << 62]).is_err());
    }
}
