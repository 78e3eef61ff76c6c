//! Reductions and scans along dimensions: the reduced dimensions are moved last, so each output
//! element reduces one contiguous lane.

use ndarray::{ArrayD, ArrayViewD, IxDyn};

use crate::tensor::{Dense, Element, Shape};

use super::{from_array, read_as};

/// The elements of `dense` (as `T`) with the `reduced` dimensions (sorted) moved last, the
/// length of one lane of them, and the shape of the other dimensions.
fn lanes<T: Element>(dense: &Dense, reduced: &[usize]) -> (Vec<T>, usize, Vec<usize>) {
    let shape = &dense.layout.shape;
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !reduced.contains(d)).collect();
    let order: Vec<usize> = kept.iter().chain(reduced).copied().collect();
    let lane: usize = reduced.iter().map(|&d| shape[d]).product();
    let data = read_as(dense, |v: ArrayViewD<'_, T>| v.permuted_axes(IxDyn(&order)).iter().copied().collect());
    (data, lane, kept.iter().map(|&d| shape[d]).collect())
}

/// `f` applied to each lane of the `reduced` dimensions; the result keeps them as size one
/// with `keepdim`, and drops them otherwise.
pub(crate) fn reduce<T: Element, A: Element>(
    dense: &Dense,
    reduced: &[usize],
    keepdim: bool,
    f: impl Fn(&[T]) -> A,
) -> Dense {
    let (data, lane, kept) = lanes::<T>(dense, reduced);
    let out: Vec<A> = if lane == 0 {
        (0..kept.iter().product::<usize>()).map(|_| f(&[])).collect()
    } else {
        data.chunks(lane).map(&f).collect()
    };
    let shape: Shape = if keepdim {
        dense.layout.shape.iter().enumerate().map(|(d, &n)| if reduced.contains(&d) { 1 } else { n }).collect()
    } else {
        kept.into_iter().collect()
    };
    Dense::from_vec(out, shape)
}

/// `f` applied along dimension `dim`: each lane is replaced by what `f` writes for it (a
/// cumulative sum, say); the result has the input's shape.
pub(crate) fn scan<T: Element, A: Element>(dense: &Dense, dim: usize, f: impl Fn(&[T], &mut [A])) -> Dense {
    let (data, lane, kept) = lanes::<T>(dense, &[dim]);
    let mut out = vec![A::default(); data.len()];
    if lane > 0 {
        data.chunks(lane).zip(out.chunks_mut(lane)).for_each(|(x, y)| f(x, y));
    }
    // Back from (kept..., dim) to the input's order of dimensions.
    let permuted: Vec<usize> = kept.iter().copied().chain([dense.layout.shape[dim]]).collect();
    let array = ArrayD::from_shape_vec(IxDyn(&permuted), out).expect("the lanes hold every element");
    let ndim = dense.layout.ndim();
    let back: Vec<usize> = (0..ndim)
        .map(|d| {
            if d < dim {
                d
            } else if d == dim {
                ndim - 1
            } else {
                d - 1
            }
        })
        .collect();
    from_array(array.permuted_axes(IxDyn(&back)))
}
